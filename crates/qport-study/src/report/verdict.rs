//! The verdict of a study report: one sentence per finding, derived from
//! the sections, each with the JSON pointers into `report.json` of the
//! values it states (the claim-to-artifact map).

use super::{Claim, Evidence, Sections, Verdict, VerdictTiming};
use crate::report::Severity;

/// `x` (a share) as a percentage with one decimal; a share that rounds to
/// 0% or 100% without being it reads `<0.1%` or `>99.9%`.
pub(crate) fn pct(x: f64) -> String {
    if x > 0.0 && x < 0.0005 {
        "<0.1%".into()
    } else if x < 1.0 && x > 0.9995 {
        ">99.9%".into()
    } else {
        format!("{:.1}%", 100.0 * x)
    }
}

/// `x` with four significant digits (scientific below 0.001).
pub(crate) fn sig(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if x.abs() < 1e-3 {
        format!("{x:.3e}")
    } else {
        format!("{x:.4}")
    }
}

/// `lo–hi` or `lo` when equal.
fn range(lo: usize, hi: usize) -> String {
    if lo == hi {
        lo.to_string()
    } else {
        format!("{lo}–{hi}")
    }
}

fn claim(id: impl Into<String>, text: String, evidence: Vec<Evidence>) -> Claim {
    Claim {
        id: id.into(),
        text,
        evidence,
    }
}

fn ev(pointer: String) -> Evidence {
    Evidence::report(pointer)
}

impl Verdict {
    /// The claims the sections support, in section order; speed claims
    /// (from the benchmark) go under `timing`.
    pub fn derive(s: &Sections) -> Verdict {
        let mut claims = vec![];
        agreement(s, &mut claims);
        divergence(s, &mut claims);
        quantization(s, &mut claims);
        deployment(s, &mut claims);
        tuning(s, &mut claims);
        Verdict {
            claims,
            timing: VerdictTiming { claims: speed(s) },
        }
    }
}

fn agreement(s: &Sections, out: &mut Vec<Claim>) {
    let Some(a) = &s.agreement else { return };
    let base = "/sections/agreement";
    // the value a pair is judged by: top-1 when measured, else bit identity
    let top1 = a.top1_agree.is_some();
    let (key, what) = if top1 {
        ("top1_agree", "top-1 agreement")
    } else {
        ("bit_identical", "bit-identical outputs")
    };
    let value = |p: &super::PairCount| {
        if top1 {
            p.top1_agree.unwrap_or(0)
        } else {
            p.bit_identical
        }
    };
    if !a.pairs.is_empty() {
        let lo = (0..a.pairs.len()).min_by_key(|&i| (value(&a.pairs[i]), i));
        let hi = (0..a.pairs.len()).max_by_key(|&i| (value(&a.pairs[i]), usize::MAX - i));
        if let (Some(lo), Some(hi)) = (lo, hi) {
            let mut evidence = vec![ev(format!("{base}/pairs/{lo}/{key}"))];
            if hi != lo {
                evidence.push(ev(format!("{base}/pairs/{hi}/{key}")));
            }
            out.push(claim(
                "agreement",
                format!(
                    "INT8 {what} across {} profiles: {}/{} samples per pair.",
                    a.profiles.len(),
                    range(value(&a.pairs[lo]), value(&a.pairs[hi])),
                    a.samples
                ),
                evidence,
            ));
        }
    }
    if !a.self_agreement.is_empty() {
        let lo = a.self_agreement.iter().map(|p| p.bit_identical).min();
        let lo = lo.unwrap_or(0);
        let twice = a.self_agreement.iter().map(|p| p.n).min().unwrap_or(0);
        out.push(claim(
            "self-agreement",
            if twice < a.samples {
                format!(
                    "Every profile reproduces its own run bit for bit on {lo}/{twice} samples \
                     (the first {twice} of {}, each run twice).",
                    a.samples
                )
            } else {
                format!("Every profile reproduces its own run bit for bit on {lo}/{twice} samples.")
            },
            (0..a.self_agreement.len())
                .flat_map(|i| {
                    [
                        ev(format!("{base}/self_agreement/{i}/bit_identical")),
                        ev(format!("{base}/self_agreement/{i}/n")),
                    ]
                })
                .collect(),
        ));
    }
    if !a.fp32_controls.is_empty() {
        let vals: Vec<usize> = a.fp32_controls.iter().map(value).collect();
        let (lo, hi) = (
            vals.iter().copied().min().unwrap_or(0),
            vals.iter().copied().max().unwrap_or(0),
        );
        out.push(claim(
            "fp32-controls",
            format!(
                "FP32 controls (kernel path, thread count): {what} {}/{} samples.",
                range(lo, hi),
                a.samples
            ),
            (0..vals.len())
                .map(|i| ev(format!("{base}/fp32_controls/{i}/{key}")))
                .collect(),
        ));
    }
}

fn divergence(s: &Sections, out: &mut Vec<Claim>) {
    let Some(d) = &s.divergence else { return };
    let base = "/sections/divergence";
    let text = match (&d.first_layer, d.first_index()) {
        (Some(layer), Some(i)) => {
            let op = d.first_op.as_deref().unwrap_or("?");
            let stage = match (&d.primary_stage, &d.stage) {
                (Some(p), _) => format!(" in the {p} stage"),
                (None, Some(v)) => format!(" ({v})"),
                (None, None) => String::new(),
            };
            let mut e = vec![
                ev(format!("{base}/first_layer")),
                ev(format!("{base}/layers/{i}")),
                ev(format!("{base}/inputs_diverging")),
            ];
            if d.primary_stage.is_some() {
                e.push(ev(format!("{base}/primary_stage")));
            }
            (
                format!(
                    "{} and {} first diverge at layer {layer} ({op}){stage}, on {}/{} inputs.",
                    d.a, d.b, d.inputs_diverging, d.inputs
                ),
                e,
            )
        }
        _ => (
            format!(
                "{} and {} compute the same integers in every layer: {} of {} inputs diverge.",
                d.a, d.b, d.inputs_diverging, d.inputs
            ),
            vec![
                ev(format!("{base}/inputs_diverging")),
                ev(format!("{base}/inputs")),
            ],
        ),
    };
    out.push(claim("divergence", text.0, text.1));
}

fn quantization(s: &Sections, out: &mut Vec<Claim>) {
    let Some(q) = &s.quantization else { return };
    for (i, p) in q.platforms.iter().enumerate() {
        let base = format!("/sections/quantization/platforms/{i}");
        let mut parts = vec![format!(
            "{} calibration ({})",
            p.calibrator.method,
            if p.calibrator.asymmetric {
                "asymmetric"
            } else {
                "symmetric"
            }
        )];
        let mut evidence = vec![ev(format!("{base}/calibrator/method"))];
        if let Some(share) = p.integer_coverage.as_ref().and_then(|c| c.mac_share) {
            parts.push(format!("{} of MACs in integers", pct(share)));
            evidence.push(ev(format!("{base}/integer_coverage/mac_share")));
        }
        let cos = (0..p.vs_fp32.len())
            .filter_map(|k| p.vs_fp32[k].cosine_mean.map(|c| (c, k)))
            .min_by(|x, y| x.0.total_cmp(&y.0));
        if let Some((c, k)) = cos {
            parts.push(format!("output cosine vs FP32 {c:.6}"));
            evidence.push(ev(format!("{base}/vs_fp32/{k}/cosine_mean")));
        }
        let (agree, rows) = p
            .vs_fp32
            .iter()
            .filter_map(|o| o.top1.as_ref())
            .fold((0, 0), |(a, r), t| (a + t.agree, r + t.rows));
        if rows > 0 {
            parts.push(format!("top-1 as FP32 on {agree}/{rows} rows"));
            for (k, o) in p.vs_fp32.iter().enumerate() {
                if o.top1.is_some() {
                    evidence.push(ev(format!("{base}/vs_fp32/{k}/top1")));
                }
            }
        }
        out.push(claim(
            format!("quantization:{}", p.platform),
            format!("On {}: {}.", p.platform, parts.join(", ")),
            evidence,
        ));
    }
}

fn deployment(s: &Sections, out: &mut Vec<Claim>) {
    if let Some(l) = &s.lint {
        for (i, p) in l.platforms.iter().enumerate() {
            let base = format!("/sections/lint/platforms/{i}");
            out.push(claim(
                format!("lint:{}", p.platform),
                format!(
                    "Lint for {}: {} errors, {} warnings, {} infos.",
                    p.platform, p.errors, p.warnings, p.infos
                ),
                vec![
                    ev(format!("{base}/errors")),
                    ev(format!("{base}/warnings")),
                    ev(format!("{base}/infos")),
                ],
            ));
        }
    }
    if let Some(m) = &s.migration {
        for (i, g) in m.migrations.iter().enumerate() {
            let base = format!("/sections/migration/migrations/{i}");
            out.push(claim(
                format!("migration:{}:{}", g.from, g.to),
                format!(
                    "Migrating from {} to {}: {} errors and {} warnings to act on ({} items).",
                    g.from,
                    g.to,
                    g.count(Severity::Error),
                    g.count(Severity::Warning),
                    g.items.len()
                ),
                vec![ev(format!("{base}/items"))],
            ));
        }
    }
    if let Some(r) = &s.regime {
        let p = &r.plot;
        let text = match (p.onset_bytes, p.crossover_bytes) {
            (Some(o), Some(c)) => format!(
                "With {} cores and {} ms of compute, output transfer starts limiting throughput at {:.0} bytes and dominates from {:.0} bytes.",
                p.cores, p.compute_ms, o, c
            ),
            _ => format!(
                "With {} cores and {} ms of compute, the sweep does not reach both regime thresholds.",
                p.cores, p.compute_ms
            ),
        };
        out.push(claim(
            "regime",
            text,
            vec![
                ev("/sections/regime/plot/onset_bytes".into()),
                ev("/sections/regime/plot/crossover_bytes".into()),
            ],
        ));
    }
}

fn tuning(s: &Sections, out: &mut Vec<Claim>) {
    if let Some(n) = s
        .sensitivity
        .as_ref()
        .and_then(|x| x.nodes.first().map(|n| (x, n)))
    {
        let (sec, node) = n;
        out.push(claim(
            "sensitivity",
            format!(
                "Most sensitive node on {}: {} ({}, {} loss {}, {} of MACs).",
                sec.platform,
                node.node,
                node.op_type,
                sec.metric,
                sig(node.loss),
                pct(node.mac_share)
            ),
            vec![ev("/sections/sensitivity/nodes/0".into())],
        ));
    }
    if let Some(t) = &s.tuning {
        if let Some(step) = t.steps.get(t.final_step) {
            out.push(claim(
                "tuning",
                format!(
                    "Tuning for {} on {}: {}; the final configuration has {} of MACs in {}.",
                    t.target,
                    t.platform,
                    t.outcome,
                    pct(step.high_share),
                    t.high
                ),
                vec![
                    ev("/sections/tuning/outcome".into()),
                    ev(format!(
                        "/sections/tuning/steps/{}/high_share",
                        t.final_step
                    )),
                ],
            ));
        }
    }
}

fn speed(s: &Sections) -> Vec<Claim> {
    let Some(b) = &s.bench else { return vec![] };
    let base = "/sections/bench/timing";
    let rated: Vec<(usize, f64)> = b
        .timing
        .int8
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.ratio.map(|r| (i, r)))
        .collect();
    let fastest = rated.iter().min_by(|x, y| x.1.total_cmp(&y.1));
    let slowest = rated.iter().max_by(|x, y| x.1.total_cmp(&y.1));
    let (Some(&(f, fr)), Some(&(w, wr))) = (fastest, slowest) else {
        return vec![];
    };
    let describe = |r: f64| {
        if r < 1.0 {
            format!("{:.2}x faster", 1.0 / r)
        } else if r > 1.0 {
            format!("{r:.2}x slower")
        } else {
            "as fast".into()
        }
    };
    let name = |i: usize| &b.timing.int8[i].profile;
    let text = if f == w {
        format!(
            "On this host ({}), INT8 under {} is {} than FP32 (median latency).",
            b.isa,
            name(f),
            describe(fr)
        )
    } else {
        format!(
            "On this host ({}), INT8 runs from {} ({}) to {} ({}) than FP32 (median latency).",
            b.isa,
            describe(fr),
            name(f),
            describe(wr),
            name(w)
        )
    };
    let mut evidence = vec![ev(format!("{base}/fp32/median_ms"))];
    evidence.push(ev(format!("{base}/int8/{f}/ratio")));
    if w != f {
        evidence.push(ev(format!("{base}/int8/{w}/ratio")));
    }
    vec![claim("speed", text, evidence)]
}
