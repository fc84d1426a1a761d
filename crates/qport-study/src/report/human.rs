//! The plain-text summary of a study report for a terminal: the verdict,
//! then one line per present section.

use super::verdict::pct;
use super::{Severity, StudyReport};
use std::fmt::Write;

/// A short plain-text summary of `r`: the verdict's sentences, then one
/// line per section present.
pub fn render_human(r: &StudyReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "qport study of {} ({} samples of {})",
        r.inputs.model.path, r.inputs.data.samples, r.inputs.data.path
    );
    s.push_str("verdict:\n");
    for c in &r.verdict.claims {
        let _ = writeln!(s, "  {}", c.text);
    }
    for c in &r.verdict.timing.claims {
        let _ = writeln!(s, "  {} (timing)", c.text);
    }
    if r.verdict.claims.is_empty() && r.verdict.timing.claims.is_empty() {
        s.push_str("  (no findings)\n");
    }
    let x = &r.sections;
    if let Some(f) = &x.fp32 {
        let _ = writeln!(
            s,
            "fp32:        {} outputs, {} samples, {} distinct top-1 classes",
            f.outputs.len(),
            f.samples,
            f.top1_classes.len()
        );
    }
    if let Some(q) = &x.quantization {
        let each: Vec<String> = q
            .platforms
            .iter()
            .map(|p| {
                let cov = p
                    .integer_coverage
                    .as_ref()
                    .and_then(|c| c.mac_share)
                    .map_or("-".into(), pct);
                format!("{} {} ({} integer)", p.platform, p.calibrator.method, cov)
            })
            .collect();
        let _ = writeln!(s, "quantize:    {}", each.join("; "));
    }
    if let Some(a) = &x.agreement {
        let _ = writeln!(
            s,
            "agree:       {} profiles, {} pairs, {} samples flip under some pair",
            a.profiles.len(),
            a.pairs.len(),
            a.any_flip
        );
    }
    if let Some(d) = &x.divergence {
        let _ = writeln!(
            s,
            "diverge:     {} vs {}: first layer {}",
            d.a,
            d.b,
            d.first_layer.as_deref().unwrap_or("none")
        );
    }
    if let Some(b) = &x.bench {
        let _ = writeln!(
            s,
            "bench:       {}, FP32 {:.3} ms, {} INT8 profiles",
            b.isa,
            b.timing.fp32.median_ms,
            b.timing.int8.len()
        );
    }
    if let Some(l) = &x.layouts {
        let each: Vec<String> = l
            .platforms
            .iter()
            .map(|p| {
                format!(
                    "{} {} in / {} out",
                    p.platform,
                    p.inputs.len(),
                    p.outputs.len()
                )
            })
            .collect();
        let _ = writeln!(s, "layout:      {}", each.join("; "));
    }
    if let Some(m) = &x.migration {
        let each: Vec<String> = m
            .migrations
            .iter()
            .map(|g| {
                format!(
                    "{}->{} {} errors {} warnings",
                    g.from,
                    g.to,
                    g.count(Severity::Error),
                    g.count(Severity::Warning)
                )
            })
            .collect();
        let _ = writeln!(s, "migrate:     {}", each.join("; "));
    }
    if let Some(l) = &x.lint {
        let each: Vec<String> = l
            .platforms
            .iter()
            .map(|p| format!("{} {}E {}W {}I", p.platform, p.errors, p.warnings, p.infos))
            .collect();
        let _ = writeln!(s, "lint:        {}", each.join("; "));
    }
    if let Some(n) = &x.sensitivity {
        let _ = writeln!(
            s,
            "sensitivity: {} nodes ranked by {}, first {}",
            n.nodes.len(),
            n.metric,
            n.nodes.first().map_or("-", |n| n.node.as_str())
        );
    }
    if let Some(t) = &x.tuning {
        let _ = writeln!(
            s,
            "tune:        {} on {}: {} after {} steps",
            t.target,
            t.platform,
            t.outcome,
            t.steps.len()
        );
    }
    if let Some(g) = &x.regime {
        let _ = writeln!(
            s,
            "regime:      {} points, {} cores, compute {} ms",
            g.plot.points.len(),
            g.plot.cores,
            g.plot.compute_ms
        );
    }
    s
}
