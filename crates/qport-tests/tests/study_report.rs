//! The study report (`qport.study/1`, `qport_study::report`) built from
//! real study results (in `support/study.rs`, shared with `browser.rs`):
//! the NHWC classifier family's FP32 model (every node renamed to end in
//! `<&>`, so escaping is exercised everywhere a node is named) quantized
//! for j6m and j6p the way `qport quantize` does it, then the agreement
//! study across four profiles on the j6m artifact, the localization of the
//! worst pair, a short host benchmark, layouts and the migration
//! checklist, lint, sensitivity, a tuning search and a regime analysis of
//! the study's sweep. The inputs are the family's seeded parity inputs
//! (`parity/nhwc-classifier.qdq-u8s8.ort-default/`).
//!
//! Checked: the JSON validates against `docs/schemas/study-report.schema.json`
//! and corrupted copies do not; serde round-trips it exactly;
//! `strip_timing` removes exactly the `timing` keys; the HTML is
//! self-contained, sizes every chart, shows the verdict and exactly the
//! sections present, and escapes every name; the verdict's pointers
//! resolve to the values its sentences state.

use qport_study::report::{self, StudyReport};
use qport_tests::schema;
use serde_json::Value;

#[path = "support/study.rs"]
mod study;
use study::{built, MARK, PROFILES};

fn schema_doc() -> Value {
    schema::study_report()
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
