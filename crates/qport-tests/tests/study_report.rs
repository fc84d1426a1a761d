//! The study report (`qport.study/1`, `qport_study::report`) built from
//! real study results: the NHWC classifier family's FP32 model (every node
//! renamed to end in `<&>`, so escaping is exercised everywhere a node is
//! named) quantized for j6m and j6p the way `qport quantize` does it, then
//! the agreement study across four profiles on the j6m artifact, the
//! localization of the worst pair, a short host benchmark, layouts and the
//! migration checklist, lint, sensitivity, a tuning search and a regime
//! analysis of the study's sweep. The inputs are the family's seeded
//! parity inputs (`parity/nhwc-classifier.qdq-u8s8.ort-default/`).
//!
//! Checked: the JSON validates against `docs/schemas/study-report.schema.json`
//! and corrupted copies do not; serde round-trips it exactly;
//! `strip_timing` removes exactly the `timing` keys; the HTML is
//! self-contained, sizes every chart, shows the verdict and exactly the
//! sections present, and escapes every name; the verdict's pointers
//! resolve to the values its sentences state.

use qport_core::arith::ArithProfile;
use qport_core::compare::OutputChoice;
use qport_core::report::FileJson;
use qport_engine::{IntegerPlan, Plan};
use qport_onnx::Model;
use qport_quant::measure::Scorer;
use qport_quant::ptq::{self, Sample};
use qport_quant::sensitivity::{self, Granularity, SensitivityOptions};
use qport_quant::tune::{self, Target, TuneOptions};
use qport_quant::{resolve, template, QuantError};
use qport_study::agree::{AgreeOptions, AgreeStudy};
use qport_study::bench::{self, BenchOptions, Variant};
use qport_study::coverage::CoverageJson;
use qport_study::diverge::{summarize, Localizer};
use qport_study::report::{
    self, AgreementSection, BenchSection, DataRef, DivergenceSection, Fp32Section, Header, Inputs,
    LayoutSection, LintSection, Migration, MigrationSection, PlatformLayout, PlatformLint,
    PlatformQuant, Provenance, QuantizationSection, RegimeSection, Sections, Seed,
    SensitivitySection, StageTime, StudyReport, TuningSection,
};
use qport_tests::{fixture, parity, repo_root, schema};
use serde_json::Value;
use std::sync::OnceLock;

const FAMILY: &str = "nhwc-classifier";
const PLATFORMS: [&str; 2] = ["j6m", "j6p"];
const PROFILES: [&str; 4] = ["exact", "f32-rne", "avx2-u8s8", "gemmlowp"];
/// What every node name ends in.
const MARK: &str = "<&>";

fn samples() -> Vec<Sample> {
    parity::samples(&fixture(&format!("parity/{FAMILY}.qdq-u8s8.ort-default")))
        .into_iter()
        .enumerate()
        .map(|(index, s)| Sample {
            index,
            origin: format!("{FAMILY} parity #{index}"),
            inputs: s.inputs,
        })
        .collect()
}

fn ok(v: &[Sample]) -> impl Iterator<Item = Result<Sample, QuantError>> + '_ {
    v.iter().cloned().map(Ok)
}

fn cmd(words: &str) -> Vec<String> {
    words.split(' ').map(String::from).collect()
}

/// The report of a whole study, built once.
fn built() -> &'static StudyReport {
    static R: OnceLock<StudyReport> = OnceLock::new();
    R.get_or_init(build)
}

fn build() -> StudyReport {
    let path = fixture(&format!("models/families/{FAMILY}.onnx"));
    let bytes = std::fs::read(&path).unwrap();
    let mut raw = qport_onnx::load::load(&path).unwrap();
    for n in &mut raw.graph.nodes {
        n.name = format!("{}{MARK}", n.name);
    }
    let fp32 = ptq::prepare(&raw);
    let all = samples();
    assert!(all.len() >= 16, "{} parity samples", all.len());
    let (calib, eval) = (&all[..8], &all[8..14]);
    let reg = qport_platform::Registry::builtin();
    let platforms: Vec<&qport_platform::Platform> =
        PLATFORMS.iter().map(|p| reg.get(p).unwrap()).collect();
    let profiles: Vec<ArithProfile> = PROFILES
        .iter()
        .map(|n| ArithProfile::preset(n).unwrap())
        .collect();

    let mut header = Header::new(cmd(
        "qport study nhwc-classifier.onnx --data parity --platforms j6m,j6p --profiles exact,f32-rne,avx2-u8s8,gemmlowp --out study",
    ));
    header.git_commit = Some("0123456789abcdef0123456789abcdef01234567".into());
    let inputs = Inputs {
        model: FileJson {
            path: path.display().to_string(),
            size_bytes: bytes.len() as u64,
            sha256: report::sha256_hex(&bytes),
        },
        data: DataRef {
            path: format!("parity/{FAMILY}.qdq-u8s8.ort-default"),
            samples: eval.len(),
            sha256: report::samples_sha256(eval),
        },
        eval: None,
        seeds: vec![Seed {
            name: "bench inputs".into(),
            value: bench::SEED,
        }],
    };
    let prov = |words: &str| Provenance::new(&header, &inputs, cmd(words));
    let mut stages = vec![];
    let mut stage = |name: &str, t: std::time::Instant| {
        stages.push(StageTime {
            stage: name.into(),
            seconds: t.elapsed().as_secs_f64(),
        })
    };

    // quantize for each platform, evaluate, measure coverage
    let t = std::time::Instant::now();
    let fp32_plan = Plan::new(&fp32).unwrap();
    let mut artifacts: Vec<Model> = vec![];
    let mut quant = vec![];
    let mut scorer_parts = vec![];
    for p in &platforms {
        let base = template::template(p, template::Template::Default);
        let mut r = resolve::resolve(&fp32, p, &base, None).unwrap();
        let c = ptq::calibrate(&fp32, &r, ok(calib), &Default::default(), &mut |_| {}).unwrap();
        qport_quant::fp16::float16_guard(&fp32, &mut r, &c, p, &Default::default());
        let q = ptq::quantize(&fp32, &r, &c, None).unwrap();
        let mix = ptq::precision_mix(&fp32, &q.resolved, &c.values);
        let qplan = Plan::new(&q.exported.model).unwrap();
        let ev = ptq::evaluate(
            &fp32_plan,
            &qplan,
            &q.exported.model,
            &OutputChoice::default(),
            ok(eval),
            &mut |_| {},
        )
        .unwrap();
        let profile = ArithProfile::preset(&p.default_arith_profile).unwrap();
        let iplan = IntegerPlan::new(&q.exported.model, &profile).unwrap();
        let cov = CoverageJson::measure(&iplan, eval[0].inputs.clone()).unwrap();
        let file = format!("{}/model.qdq.onnx", p.name);
        quant.push(PlatformQuant::new(
            &p.name,
            &q,
            &mix,
            &ev,
            Some(&cov),
            &file,
        ));
        artifacts.push(q.exported.model.clone());
        scorer_parts.push((c, q.resolved.clone()));
    }
    stage("quantize", t);
    let quantization = QuantizationSection {
        provenance: prov("qport quantize nhwc-classifier.onnx --platform j6m|j6p")
            .with_platforms(&platforms)
            .with_artifacts(&["j6m/model.qdq.onnx", "j6p/model.qdq.onnx"]),
        platforms: quant,
    };

    // agreement across profiles on the j6m artifact, FP32 from it too
    let t = std::time::Instant::now();
    let study = AgreeStudy::new(
        &artifacts[0],
        &fp32,
        &profiles,
        AgreeOptions {
            threads: 2,
            chunk: 4,
        },
    )
    .unwrap();
    let agreement = study
        .run(eval.iter().cloned().map(Ok), &mut |_| {})
        .unwrap();
    stage("agree", t);
    let agree_prov = prov("qport agree j6m/model.qdq.onnx --data parity --profiles all")
        .with_profiles(&profiles)
        .with_platforms(&platforms[..1])
        .with_artifacts(&["j6m/model.qdq.onnx"]);
    let fp32_section = Fp32Section::new(prov("qport run nhwc-classifier.onnx"), &agreement);
    let agreement_section = AgreementSection::new(agree_prov, &agreement);

    // the worst pair, localized on three inputs
    let t = std::time::Instant::now();
    let worst = &agreement_section.pairs[agreement_section.worst_pair().unwrap()];
    let (pa, pb) = (
        ArithProfile::preset(&worst.a).unwrap(),
        ArithProfile::preset(&worst.b).unwrap(),
    );
    let mut loc = Localizer::new(&artifacts[0], &pa, &pb).unwrap();
    let results: Vec<_> = eval[..3]
        .iter()
        .map(|s| loc.localize(s.inputs.clone()).unwrap())
        .collect();
    let summary = summarize(&results);
    stage("diverge", t);
    let divergence = DivergenceSection::new(
        prov(&format!(
            "qport diverge j6m/model.qdq.onnx --data parity --profiles {},{}",
            worst.a, worst.b
        ))
        .with_profiles(&[pa.clone(), pb.clone()]),
        &summary,
    );

    // a short benchmark: FP32 and each profile's integer plan
    let t = std::time::Instant::now();
    let plans: Vec<IntegerPlan> = profiles
        .iter()
        .map(|p| IntegerPlan::new(&artifacts[0], p).unwrap())
        .collect();
    let feed = vec![eval[0].inputs.clone()];
    let mut variants = vec![Variant {
        name: "fp32".into(),
        plan: &fp32_plan,
        inputs: feed.clone(),
    }];
    for (p, plan) in profiles.iter().zip(&plans) {
        variants.push(Variant {
            name: p.name.clone(),
            plan: plan.plan(),
            inputs: feed.clone(),
        });
    }
    let opts = BenchOptions {
        batch: 1,
        warmup: 1,
        runs: 3,
        threads: 1,
        ..BenchOptions::default()
    };
    let lat = bench::measure(&variants, &opts, &mut |_| {}).unwrap();
    stage("bench", t);
    let bench_section = BenchSection::new(
        prov("qport bench nhwc-classifier.onnx --int8 j6m/model.qdq.onnx --profiles all")
            .with_profiles(&profiles),
        &bench::isa::Machine::detect(),
        &opts,
        &lat[0],
        &lat[1..],
    );

    // layouts, migration, lint
    let lopts = qport_platform::LayoutOptions::default();
    let layouts: Vec<_> = platforms
        .iter()
        .zip(&artifacts)
        .map(|(p, m)| qport_platform::model_layout(&m.graph, p, &lopts).unwrap())
        .collect();
    let mut changes = qport_platform::migrate_platform(platforms[0], platforms[1]);
    changes.extend(qport_platform::migrate_layout(&layouts[0], &layouts[1]));
    let lints: Vec<_> = platforms
        .iter()
        .zip(&artifacts)
        .map(|(p, m)| qport_study::lint::lint(m, p).unwrap())
        .collect();
    let deploy_prov = |w: &str| {
        prov(w)
            .with_platforms(&platforms)
            .with_artifacts(&["j6m/model.qdq.onnx", "j6p/model.qdq.onnx"])
    };

    // sensitivity and a tuning search on j6m
    let t = std::time::Instant::now();
    let (c, resolved) = &scorer_parts[0];
    let scorer = Scorer::new(
        &fp32,
        c,
        resolved.clone(),
        eval.to_vec(),
        &OutputChoice::default(),
        2,
    )
    .unwrap();
    let high = tune::high_precision(platforms[0]).unwrap();
    let sens = sensitivity::analyze(
        &scorer,
        &SensitivityOptions {
            metric: qport_quant::measure::Metric::Cosine,
            granularity: Granularity::Node,
            high,
            layers: false,
        },
        &mut |_, _| {},
    )
    .unwrap();
    let tuned = tune::tune(
        &scorer,
        &TuneOptions {
            target: Target::parse("cosine>=0.99999", false).unwrap(),
            budget: None,
            high,
            rank_samples: 2,
        },
        &mut |_| {},
        &mut |_, _| {},
    )
    .unwrap();
    stage("tune", t);

    // the regime of the study's measured sweep
    let sweep: Vec<qport_platform::regime::SweepPoint> = [
        (3_920, 0.141, 2.98),
        (256_368, 0.776, 1.99),
        (511_952, 1.367, 1.59),
        (1_000_384, 2.429, 1.21),
        (1_999_984, 8.892, 1.00),
    ]
    .into_iter()
    .map(|(b, d, s)| qport_platform::regime::SweepPoint {
        scaling: Some(s),
        ..qport_platform::regime::SweepPoint::new(b, d)
    })
    .collect();
    let regime = qport_platform::regime::Regime::new(2.7, 3).unwrap();
    let analysis = qport_platform::regime::analyze_sweep(&regime, &sweep, 0.05).unwrap();

    let sections = Sections {
        fp32: Some(fp32_section),
        quantization: Some(quantization),
        agreement: Some(agreement_section),
        divergence: Some(divergence),
        bench: Some(bench_section),
        layouts: Some(LayoutSection {
            provenance: deploy_prov("qport layout MODEL --platform j6m|j6p"),
            platforms: layouts.iter().map(PlatformLayout::from).collect(),
        }),
        migration: Some(MigrationSection {
            provenance: deploy_prov("qport migrate --from j6m --to j6p --model j6m/model.qdq.onnx"),
            migrations: vec![Migration::new("j6m", "j6p", &changes)],
        }),
        lint: Some(LintSection {
            provenance: deploy_prov("qport lint MODEL --platform j6m|j6p"),
            platforms: lints.iter().map(PlatformLint::from).collect(),
        }),
        sensitivity: Some(SensitivitySection::new(
            prov("qport sensitivity nhwc-classifier.onnx --platform j6m")
                .with_platforms(&platforms[..1]),
            "j6m",
            &sens,
        )),
        tuning: Some(TuningSection::new(
            prov("qport tune nhwc-classifier.onnx --platform j6m --target cosine>=0.99999")
                .with_platforms(&platforms[..1]),
            "j6m",
            &tuned,
        )),
        regime: Some(RegimeSection {
            provenance: prov("qport regime --compute-ms 2.7 --cores 3 --sweep sweep.csv")
                .with_artifacts(&["regime.svg"]),
            plot: (&analysis).into(),
        }),
    };
    header.timing.stages = stages;
    header.timing.total_s = header.timing.stages.iter().map(|s| s.seconds).sum();
    StudyReport::new(header, inputs, sections)
}

fn schema_doc() -> Value {
    let p = repo_root().join("docs/schemas/study-report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn json(r: &StudyReport) -> Value {
    serde_json::to_value(r).unwrap()
}

/// Section key → its `<section id>` in the HTML (docs/study-report.md).
const SECTION_IDS: [(&str, &str); 11] = [
    ("fp32", "fp32"),
    ("quantization", "precision"),
    ("agreement", "agreement"),
    ("divergence", "divergence"),
    ("bench", "speed"),
    ("layouts", "layouts"),
    ("migration", "migration"),
    ("lint", "lint"),
    ("sensitivity", "sensitivity"),
    ("tuning", "tuning"),
    ("regime", "regime"),
];

#[test]
fn the_report_of_a_real_study_validates_against_the_schema() {
    let r = built();
    let v = json(r);
    // kept for a look: target/tmp/study-report/report.{json,html}
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("study-report");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(r).unwrap(),
    )
    .unwrap();
    std::fs::write(dir.join("report.html"), report::render_html(r)).unwrap();
    schema::validate(&schema_doc(), &v).unwrap_or_else(|e| panic!("{e:#?}"));
    // every section ran, with real content
    for (key, _) in SECTION_IDS {
        assert!(v["sections"].get(key).is_some(), "{key}");
    }
    let a = r.sections.agreement.as_ref().unwrap();
    assert_eq!(a.profiles, PROFILES);
    assert_eq!(a.samples, 6);
    for p in &a.self_agreement {
        assert_eq!(p.bit_identical, 6, "{} repeats itself", p.a);
    }
    let q = r.sections.quantization.as_ref().unwrap();
    for p in &q.platforms {
        let share: f64 = p.precision_mix.mac_share.values().sum();
        assert!((share - 1.0).abs() < 1e-12, "{}: {share}", p.platform);
        assert!(p.vs_fp32[0].cosine_mean.unwrap() > 0.9, "{}", p.platform);
    }
    let l = r.sections.layouts.as_ref().unwrap();
    assert_eq!(l.platforms[0].inputs[0].shape, [1, 128, 128, 3]);
}

/// A change that breaks a report.
type Corrupt = fn(&mut Value);

#[test]
fn corrupted_reports_fail_validation() {
    let s = schema_doc();
    let good = json(built());
    let cases: [(&str, Corrupt, &str); 5] = [
        (
            "missing command",
            |v| {
                v["header"].as_object_mut().unwrap().remove("command");
            },
            "/header: missing required property `command`",
        ),
        (
            "samples as a string",
            |v| v["inputs"]["data"]["samples"] = Value::from("6"),
            "/inputs/data/samples: expected integer, found string",
        ),
        (
            "an unknown section",
            |v| v["sections"]["extra"] = Value::from(1),
            "/sections: property `extra` is not allowed",
        ),
        (
            "a wrong schema id",
            |v| v["schema"] = Value::from("qport.study/2"),
            "is not one of",
        ),
        (
            "a negative count",
            |v| v["sections"]["agreement"]["samples"] = Value::from(-1),
            "/sections/agreement/samples: -1 is below the minimum 0",
        ),
    ];
    for (what, corrupt, want) in cases {
        let mut v = good.clone();
        corrupt(&mut v);
        let errs = schema::validate(&s, &v).expect_err(what);
        assert!(errs.iter().any(|e| e.contains(want)), "{what}: {errs:#?}");
    }
    // and the report does not read back with a missing field either
    let mut v = good.clone();
    v["verdict"].as_object_mut().unwrap().remove("claims");
    assert!(serde_json::from_value::<StudyReport>(v).is_err());
}

#[test]
fn serde_round_trip_is_identical() {
    let r = built();
    let text = serde_json::to_string_pretty(r).unwrap();
    let back: StudyReport = serde_json::from_str(&text).unwrap();
    assert_eq!(&back, r);
    assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text);
}

/// Pointers of every key named `timing`, found independently of
/// `strip_timing`.
fn timing_keys(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let here = format!("{at}/{k}");
                if k == "timing" {
                    out.push(here.clone());
                }
                timing_keys(x, here, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                timing_keys(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn strip_timing_removes_exactly_the_timing_keys() {
    let r = built();
    let v = json(r);
    let mut keys = vec![];
    timing_keys(&v, String::new(), &mut keys);
    keys.sort();
    assert_eq!(
        keys,
        [
            "/header/timing",
            "/sections/bench/timing",
            "/verdict/timing"
        ]
    );
    // the stripped document is the original less exactly those keys
    let mut want = v.clone();
    for k in &keys {
        let (parent, key) = k.rsplit_once('/').unwrap();
        want.pointer_mut(parent)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove(key);
    }
    let mut stripped = v.clone();
    report::strip_timing(&mut stripped);
    assert_eq!(stripped, want);

    // a rerun with other times strips to the same document
    let mut rerun = r.clone();
    rerun.header.timing.total_s += 1.5;
    rerun.header.timing.stages[0].seconds *= 2.0;
    let b = rerun.sections.bench.as_mut().unwrap();
    b.timing.fp32.median_ms *= 3.0;
    rerun.verdict = report::Verdict::derive(&rerun.sections);
    let mut other = json(&rerun);
    assert_ne!(other, v);
    report::strip_timing(&mut other);
    assert_eq!(other, stripped);
}

/// `(width, height, viewBox)` of every `<svg` tag.
fn svg_sizes(html: &str) -> Vec<(f64, f64, Option<String>)> {
    html.match_indices("<svg")
        .map(|(i, _)| {
            let tag = &html[i..i + html[i..].find('>').unwrap()];
            let attr = |name: &str| {
                let key = format!(" {name}=\"");
                tag.find(&key).map(|k| {
                    let rest = &tag[k + key.len()..];
                    rest[..rest.find('"').unwrap()].to_string()
                })
            };
            let num = |n: &str| attr(n).and_then(|x| x.parse().ok()).unwrap_or(0.0);
            (num("width"), num("height"), attr("viewBox"))
        })
        .collect()
}

#[test]
fn the_html_is_self_contained_and_shows_every_present_section() {
    let r = built();
    let html = report::render_html(r);
    for bad in [
        "http://", "https://", "<script", "<link", "src=", "url(", "@import",
    ] {
        assert!(!html.contains(bad), "the page references {bad}");
    }
    let sizes = svg_sizes(&html);
    // speed, heatmap, precision mix, sensitivity, tuning, regime
    assert_eq!(sizes.len(), 6, "{sizes:?}");
    for (w, h, vb) in &sizes {
        assert!(*w > 0.0 && *h > 0.0, "an SVG of {w} x {h}");
        assert_eq!(vb.as_deref(), Some(format!("0 0 {w} {h}").as_str()));
    }
    assert!(html.contains(".chart svg { display: block; max-width: 100%; height: auto; }"));
    assert!(html.contains("@media print"));
    // the verdict first, then the sections in the documented order, then the map
    let mut at = html.find("<section id=\"verdict\">").unwrap();
    for (_, id) in [
        ("bench", "speed"),
        ("agreement", "agreement"),
        ("divergence", "divergence"),
        ("fp32", "fp32"),
        ("quantization", "precision"),
        ("sensitivity", "sensitivity"),
        ("tuning", "tuning"),
        ("layouts", "layouts"),
        ("migration", "migration"),
        ("lint", "lint"),
        ("regime", "regime"),
        ("map", "claims"),
    ] {
        let i = html
            .find(&format!("<section id=\"{id}\">"))
            .unwrap_or_else(|| panic!("no section {id}"));
        assert!(i > at, "{id} out of order");
        at = i;
    }
    let escape = qport_study::svg::escape;
    let verdict = &html[html.find("<section id=\"verdict\">").unwrap()..];
    let verdict = &verdict[..verdict.find("</section>").unwrap()];
    for c in r.verdict.all_claims() {
        assert!(verdict.contains(&escape(&c.text)), "{}", c.text);
    }
    // every figure has its footer: one per section
    assert_eq!(
        html.matches("<footer class=\"how\"><strong>How this was made:</strong>")
            .count(),
        SECTION_IDS.len()
    );
    let commit = r.header.git_commit.as_deref().unwrap();
    assert_eq!(html.matches(commit).count(), 1 + SECTION_IDS.len());
    // the claim map names every pointer
    let map = &html[html.find("<section id=\"claims\">").unwrap()..];
    for e in r.verdict.all_claims().flat_map(|c| &c.evidence) {
        assert!(
            map.contains(&format!("<code>{}</code>", escape(&e.pointer))),
            "{}",
            e.pointer
        );
    }
    assert!(!map.contains("(missing)"));
    assert_eq!(html, report::render_html(r), "rendering is deterministic");
}

#[test]
fn node_names_are_escaped_everywhere() {
    let r = built();
    let html = report::render_html(r);
    assert!(!html.contains(MARK), "a raw `{MARK}` in the page");
    // names with the mark reach the page: divergence table, sensitivity, lint
    let escaped = qport_study::svg::escape(MARK);
    let d = r.sections.divergence.as_ref().unwrap();
    let node = &d.layers[d.first_index().unwrap_or(0)].node;
    assert!(node.contains(MARK), "{node}");
    assert!(html.contains(&qport_study::svg::escape(node)));
    assert!(html.matches(&escaped).count() > 10);
    let text = report::render_human(r);
    assert!(text.contains(MARK), "the terminal summary is plain text");
}

#[test]
fn absent_sections_are_left_out() {
    let mut r = built().clone();
    r.sections.lint = None;
    r.sections.tuning = None;
    r.sections.regime = None;
    r.sections.bench = None;
    r.verdict = report::Verdict::derive(&r.sections);
    let v = json(&r);
    schema::validate(&schema_doc(), &v).unwrap_or_else(|e| panic!("{e:#?}"));
    let html = report::render_html(&r);
    for (key, id) in SECTION_IDS {
        let present = v["sections"].get(key).is_some();
        assert_eq!(
            html.contains(&format!("<section id=\"{id}\">")),
            present,
            "{key}"
        );
    }
    assert!(
        r.verdict.timing.claims.is_empty(),
        "no speed claim without a bench"
    );
    assert!(!r
        .verdict
        .claims
        .iter()
        .any(|c| c.id.starts_with("lint:") || c.id == "tuning"));
    // heatmap, precision mix, sensitivity
    assert_eq!(svg_sizes(&html).len(), 3);
    let text = report::render_human(&r);
    assert!(!text.contains("lint:") && !text.contains("bench:"));
    assert!(text.contains("agree:") && text.contains("layout:"));
}

#[test]
fn every_claim_points_at_the_values_it_states() {
    let r = built();
    assert_eq!(r.dangling_evidence(), vec![]);
    let v = json(r);
    let ids: Vec<&str> = r.verdict.all_claims().map(|c| c.id.as_str()).collect();
    for want in [
        "agreement",
        "self-agreement",
        "fp32-controls",
        "divergence",
        "quantization:j6m",
        "quantization:j6p",
        "lint:j6m",
        "lint:j6p",
        "migration:j6m:j6p",
        "regime",
        "sensitivity",
        "tuning",
        "speed",
    ] {
        assert!(ids.contains(&want), "{want} in {ids:?}");
    }
    // counts and names the sentences state are the values they point at
    for c in r.verdict.all_claims() {
        for e in &c.evidence {
            let x = v.pointer(&e.pointer).unwrap();
            let stated = match x {
                Value::Number(n) if n.is_u64() => Some(n.to_string()),
                Value::String(s) => Some(s.clone()),
                _ => None,
            };
            if let Some(s) = stated {
                assert!(
                    c.text.contains(&s),
                    "`{}` does not state {s} ({})",
                    c.text,
                    e.pointer
                );
            }
        }
    }
    // the agreement claim gives the smallest and largest pair counts
    let a = r.sections.agreement.as_ref().unwrap();
    let counts: Vec<usize> = a.pairs.iter().map(|p| p.top1_agree.unwrap()).collect();
    let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    let c = r
        .verdict
        .claims
        .iter()
        .find(|c| c.id == "agreement")
        .unwrap();
    let span = if lo == hi {
        format!("{lo}/6")
    } else {
        format!("{lo}–{hi}/6")
    };
    assert!(c.text.contains(&span), "{}", c.text);
}
