//! The report of a whole study (`qport_study::report::StudyReport`), built
//! once per test binary from real study results: the NHWC classifier
//! family's FP32 model (every node renamed to end in [`MARK`], so escaping
//! is exercised everywhere a node is named) quantized for j6m and j6p the
//! way `qport quantize` does it, then the agreement study across
//! [`PROFILES`] on the j6m artifact, the localization of the worst pair, a
//! short host benchmark, layouts and the migration checklist, lint,
//! sensitivity, a tuning search and a regime analysis of the study's sweep.
//! The inputs are the family's seeded parity inputs
//! (`parity/nhwc-classifier.qdq-u8s8.ort-default/`). Shared by
//! `study_report.rs` (the JSON and HTML) and `browser.rs` (the page in
//! Chromium).

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
use qport_tests::{fixture, parity};
use std::sync::OnceLock;

const FAMILY: &str = "nhwc-classifier";
const PLATFORMS: [&str; 2] = ["j6m", "j6p"];
/// The arithmetic profiles the agreement study runs.
pub const PROFILES: [&str; 4] = ["exact", "f32-rne", "avx2-u8s8", "gemmlowp"];
/// What every node name ends in.
pub const MARK: &str = "<&>";

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

/// The report of a whole study, built once per test binary.
pub fn built() -> &'static StudyReport {
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
            repeat: None,
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
