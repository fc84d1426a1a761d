//! The figures and tables of the HTML report, one function per section,
//! each closed by its "how this was made" footer.

use super::html::{inline_svg, num, open, provenance, Cell, Table};
use super::verdict::{pct, sig};
use super::{
    AgreementSection, BenchSection, DivergenceSection, Fp32Section, LayoutSection, LintSection,
    MigrationSection, QuantizationSection, RegimeSection, SensitivitySection, TensorLayout,
    TuningSection,
};
use crate::svg::{
    escape, render_bars, render_heatmap, render_panels, render_stacked, Bar, BarChart, Chart,
    Heatmap, Series, StackedBars, StackedRow,
};
use std::fmt::Write;

/// Rows of the divergence table shown (the rest stay in the JSON).
const MAX_DIVERGENCE_ROWS: usize = 40;
/// Nodes of the sensitivity chart.
const MAX_SENSITIVE: usize = 15;

fn close(h: &mut String) {
    h.push_str("</section>\n");
}

fn shape(v: &[i64]) -> String {
    format!(
        "[{}]",
        v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
    )
}

/// `1.76x slower` / `2.10x faster` / `same`.
fn describe(r: Option<f64>) -> String {
    match r {
        Some(r) if r < 1.0 => format!("{:.2}x faster", 1.0 / r),
        Some(r) if r > 1.0 => format!("{r:.2}x slower"),
        Some(_) => "same".into(),
        None => "-".into(),
    }
}

pub(super) fn bench(h: &mut String, b: &BenchSection) {
    open(h, "speed", "Speed on this host: FP32 vs INT8");
    let t = &b.timing;
    let mut bars = vec![Bar {
        label: "FP32".into(),
        value: t.fp32.median_ms,
        text: format!("{:.3} ms", t.fp32.median_ms),
        color: Some("#7f7f7f".into()),
    }];
    for p in &t.int8 {
        bars.push(Bar {
            label: format!("INT8 {}", p.profile),
            value: p.latency.median_ms,
            text: format!("{:.3} ms · {}", p.latency.median_ms, describe(p.ratio)),
            color: Some(
                match p.ratio {
                    Some(r) if r < 1.0 => "#2ca02c",
                    Some(r) if r > 1.0 => "#d62728",
                    _ => "#1f77b4",
                }
                .into(),
            ),
        });
    }
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&render_bars(&BarChart {
        title: format!("Median latency per inference ({})", b.isa),
        x_label: "ms (shorter is faster)".into(),
        bars,
    })));
    let _ = writeln!(
        h,
        "<figcaption>ISA: <code>{}</code> on {} ({} logical cores); batch {}, {} warm-up and {} \
         measured rounds, {} thread(s). Timing values vary run to run.</figcaption>",
        escape(&b.isa),
        escape(b.machine.cpu_model.as_deref().unwrap_or(&b.machine.arch)),
        b.machine.logical_cores,
        b.settings.batch,
        b.settings.warmup,
        b.settings.runs,
        b.settings.threads
    );
    let mut tb = Table::new(&["variant", "median ms", "p10 ms", "p90 ms", "vs FP32"]);
    tb.row(vec![
        Cell::text("FP32"),
        Cell::num(format!("{:.3}", t.fp32.median_ms)),
        Cell::num(format!("{:.3}", t.fp32.p10_ms)),
        Cell::num(format!("{:.3}", t.fp32.p90_ms)),
        Cell::text(""),
    ]);
    for p in &t.int8 {
        tb.row(vec![
            Cell::text(&format!("INT8 {}", p.profile)),
            Cell::num(format!("{:.3}", p.latency.median_ms)),
            Cell::num(format!("{:.3}", p.latency.p10_ms)),
            Cell::num(format!("{:.3}", p.latency.p90_ms)),
            Cell::text(&describe(p.ratio)),
        ]);
    }
    tb.render(h);
    provenance(h, &b.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn agreement(h: &mut String, a: &AgreementSection) {
    open(h, "agreement", "Agreement across arithmetic profiles");
    let n = a.samples;
    let (matrix, what) = match &a.top1_agree {
        Some(m) => (m.clone(), "top-1 agreement"),
        None => (a.bit_identical.clone(), "bit-identical outputs"),
    };
    // the diagonal counts over the samples each profile ran twice on
    let of = |i: usize, j: usize| match a.self_agreement.get(i) {
        Some(p) if i == j => p.n,
        _ => n,
    };
    let rate = |k: usize, m: usize| if m == 0 { 1.0 } else { k as f64 / m as f64 };
    let repeated = a.self_agreement.iter().map(|p| p.n).min().unwrap_or(n);
    let lo = matrix
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.iter().enumerate().map(move |(j, &k)| (i, j, k)))
        .map(|(i, j, k)| rate(k, of(i, j)))
        .fold(1.0f64, f64::min);
    let lo = (lo.min(0.99) * 100.0).floor() / 100.0;
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&render_heatmap(&Heatmap {
        title: format!("{what}, samples of {n}"),
        labels: a.profiles.clone(),
        values: matrix
            .iter()
            .enumerate()
            .map(|(i, r)| {
                r.iter()
                    .enumerate()
                    .map(|(j, &k)| Some(rate(k, of(i, j))))
                    .collect()
            })
            .collect(),
        texts: matrix
            .iter()
            .map(|r| r.iter().map(|k| k.to_string()).collect())
            .collect(),
        domain: (lo, 1.0),
        legend: format!("share of {n} samples with {what}"),
    })));
    let _ = writeln!(
        h,
        "<figcaption>Each cell counts the samples (of {n}) on which the row and column profiles \
         give {what}; the diagonal is each profile against its own second run{}. {} samples flip \
         under some pair. Outputs compared: {}.</figcaption>",
        if repeated < n {
            format!(" (of the first {repeated} samples, the ones run twice)")
        } else {
            String::new()
        },
        a.any_flip,
        escape(&a.outputs.join(", "))
    );
    let mut t = Table::new(&["runs", "kind", "top-1 agree", "bit-identical", "min cosine"]);
    let rows = [
        (&a.pairs, "profile pair"),
        (&a.self_agreement, "repeat run"),
        (&a.vs_fp32, "vs FP32"),
        (&a.fp32_controls, "FP32 control"),
    ];
    for (list, kind) in rows {
        for p in list {
            t.row(vec![
                Cell::text(&format!("{} vs {}", p.a, p.b)),
                Cell::text(kind),
                Cell::num(p.top1_agree.map_or("-".into(), |k| format!("{k}/{}", p.n))),
                Cell::num(format!("{}/{}", p.bit_identical, p.n)),
                Cell::num(num(p.cosine_min, 6)),
            ]);
        }
    }
    t.render(h);
    if !a.integer_coverage.is_empty() {
        h.push_str("<h3>Integer coverage per profile</h3>\n");
        let mut c = Table::new(&["profile", "lowering", "groups lowered", "MACs in integers"]);
        for x in &a.integer_coverage {
            c.row(vec![
                Cell::text(&x.profile),
                Cell::text(&x.lowering),
                Cell::num(format!("{}/{}", x.groups_lowered, x.groups_found)),
                Cell::num(x.mac_share.map_or("-".into(), pct)),
            ]);
        }
        c.render(h);
    }
    provenance(h, &a.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn divergence(h: &mut String, d: &DivergenceSection) {
    open(h, "divergence", "First divergence of the worst pair");
    let first = d.first_index();
    let _ = writeln!(
        h,
        "<p>Profile A <code>{}</code> (its values are every layer's operands) against B \
         <code>{}</code> on {} inputs: some layer diverges in isolation on {}; the outputs are \
         bit-identical on {}. First diverging layer: <code>{}</code> ({}), stage: {}.</p>",
        escape(&d.a),
        escape(&d.b),
        d.inputs,
        d.inputs_diverging,
        d.outputs_identical,
        escape(d.first_layer.as_deref().unwrap_or("none")),
        escape(d.first_op.as_deref().unwrap_or("-")),
        escape(
            d.primary_stage
                .as_deref()
                .or(d.stage.as_deref())
                .unwrap_or("-")
        )
    );
    let mut t = Table::new(&[
        "#",
        "layer",
        "op",
        "isolated: inputs",
        "mean share",
        "max diff",
        "end to end: inputs",
        "mean share",
        "max diff",
        "attribution",
    ]);
    let shown: Vec<usize> = (first.unwrap_or(0)..d.layers.len())
        .filter(|&i| {
            let l = &d.layers[i];
            l.isolated_inputs > 0 || l.end_to_end_inputs > 0
        })
        .collect();
    for &i in shown.iter().take(MAX_DIVERGENCE_ROWS) {
        let l = &d.layers[i];
        let unit = if l.unit == "lsb" { " LSB" } else { "" };
        let diff = |x: Option<f64>| x.map_or("not finite".into(), |v| format!("{}{unit}", sig(v)));
        let cells = vec![
            Cell::num(i.to_string()),
            Cell::code(&l.node),
            Cell::text(&l.op),
            Cell::num(l.isolated_inputs.to_string()),
            Cell::num(sig(l.isolated_share)),
            Cell::num(diff(l.isolated_max_diff)),
            Cell::num(l.end_to_end_inputs.to_string()),
            Cell::num(sig(l.end_to_end_share)),
            Cell::num(diff(l.end_to_end_max_diff)),
            Cell::wrap(l.verdict.as_deref().unwrap_or("")),
        ];
        if Some(i) == first {
            t.row_marked(cells);
        } else {
            t.row(cells);
        }
    }
    h.push_str("<figure>\n");
    if shown.is_empty() {
        h.push_str("<p>No layer differs between the two profiles.</p>\n");
    } else {
        t.render(h);
    }
    let _ = writeln!(
        h,
        "<figcaption>Layers that differ, from the first diverging one (highlighted), in execution \
         order; isolated: the layer run under both profiles on A's operands; end to end: each \
         profile runs the whole graph; shares are of the layer's elements, means over the \
         inputs; {} of {} layers shown{}.</figcaption>",
        shown.len().min(MAX_DIVERGENCE_ROWS),
        d.layers.len(),
        if shown.len() > MAX_DIVERGENCE_ROWS {
            "; every layer is in report.json under /sections/divergence/layers"
        } else {
            ""
        }
    );
    provenance(h, &d.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn fp32(h: &mut String, f: &Fp32Section) {
    open(h, "fp32", "FP32 reference");
    h.push_str("<figure>\n");
    let mut t = Table::new(&["output", "dtype", "shape"]);
    for o in &f.outputs {
        t.row(vec![
            Cell::code(&o.name),
            Cell::text(&o.dtype),
            Cell::text(&format!("{:?}", o.shape)),
        ]);
    }
    t.render(h);
    let common: Vec<String> = f
        .top1_classes
        .iter()
        .take(5)
        .map(|c| format!("class {} ({} rows)", c.class, c.rows))
        .collect();
    let _ = writeln!(
        h,
        "<figcaption>{} samples, {} top-1 rows, {} distinct classes{}{}.</figcaption>",
        f.samples,
        f.top1_rows,
        f.top1_classes.len(),
        if common.is_empty() {
            String::new()
        } else {
            format!("; most frequent: {}", escape(&common.join(", ")))
        },
        f.accuracy
            .map_or(String::new(), |a| format!("; top-1 accuracy {}", pct(a)))
    );
    provenance(h, &f.provenance);
    h.push_str("</figure>\n");
    close(h);
}

/// Precisions in a fixed order, others after in name order.
fn precision_keys<'a>(keys: impl Iterator<Item = &'a String>) -> Vec<String> {
    const ORDER: [&str; 4] = ["int8", "int16", "float16", "float32"];
    let mut all: Vec<String> = keys.cloned().collect();
    all.sort_by_key(|k| {
        (
            ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()),
            k.clone(),
        )
    });
    all.dedup();
    all
}

pub(super) fn quantization(h: &mut String, q: &QuantizationSection) {
    open(
        h,
        "precision",
        "Quantization and precision mix per platform",
    );
    let keys = precision_keys(
        q.platforms
            .iter()
            .flat_map(|p| p.precision_mix.mac_share.keys()),
    );
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&render_stacked(&StackedBars {
        title: "Share of multiply-accumulates per precision".into(),
        rows: q
            .platforms
            .iter()
            .map(|p| StackedRow {
                label: p.platform.clone(),
                shares: keys
                    .iter()
                    .map(|k| p.precision_mix.mac_share.get(k).copied().unwrap_or(0.0))
                    .collect(),
            })
            .collect(),
        keys,
    })));
    let mut t = Table::new(&[
        "platform",
        "calibrator",
        "MACs in integers",
        "output",
        "cosine mean",
        "cosine min",
        "SQNR dB",
        "top-1 vs FP32",
        "artifact",
    ]);
    for p in &q.platforms {
        let cal = format!(
            "{} ({})",
            p.calibrator.method,
            if p.calibrator.asymmetric {
                "asym"
            } else {
                "sym"
            }
        );
        let cov = p.integer_coverage.as_ref().map_or("-".into(), |c| {
            format!("{} ({})", c.mac_share.map_or("-".into(), pct), c.profile)
        });
        for (k, o) in p.vs_fp32.iter().enumerate() {
            let first = |s: &str| if k == 0 { s.to_string() } else { String::new() };
            t.row(vec![
                Cell::text(&first(&p.platform)),
                Cell::text(&first(&cal)),
                Cell::num(first(&cov)),
                Cell::code(&o.name),
                Cell::num(num(o.cosine_mean, 6)),
                Cell::num(num(o.cosine_min, 6)),
                Cell::num(num(o.sqnr_db, 2)),
                Cell::num(
                    o.top1
                        .as_ref()
                        .map_or("-".into(), |t| format!("{}/{}", t.agree, t.rows)),
                ),
                Cell::code(&first(&p.artifact)),
            ]);
        }
    }
    t.render(h);
    h.push_str(
        "<figcaption>MAC shares count Conv, ConvTranspose, Gemm and MatMul; integer coverage is \
         measured under each platform's default arithmetic profile.</figcaption>\n",
    );
    provenance(h, &q.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn sensitivity(h: &mut String, s: &SensitivitySection) {
    open(h, "sensitivity", "Sensitivity per node");
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&render_bars(&BarChart {
        title: format!(
            "Most sensitive nodes on {} ({} loss, alone at base precision)",
            s.platform, s.metric
        ),
        x_label: format!("{} loss", s.metric),
        bars: s
            .nodes
            .iter()
            .take(MAX_SENSITIVE)
            .map(|n| Bar {
                label: n.node.clone(),
                value: n.loss,
                text: format!("{} · {} of MACs", sig(n.loss), pct(n.mac_share)),
                color: None,
            })
            .collect(),
    })));
    let _ = writeln!(
        h,
        "<figcaption>{} of {} nodes shown, scored on {} samples; promotion target {}.</figcaption>",
        s.nodes.len().min(MAX_SENSITIVE),
        s.nodes.len(),
        s.samples,
        escape(&s.high)
    );
    provenance(h, &s.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn tuning(h: &mut String, t: &TuningSection) {
    open(h, "tuning", "Tuning trajectory");
    let pts = |f: &dyn Fn(&super::TuneStep) -> Option<f64>| -> Vec<(f64, f64)> {
        t.steps
            .iter()
            .filter_map(|s| f(s).map(|v| (s.step as f64, v)))
            .collect()
    };
    let mut value = Chart::new(&format!("target: {}", t.target), "step", "metric value");
    let vals: Vec<f64> = t.steps.iter().filter_map(|s| s.value).collect();
    if let (Some(lo), Some(hi)) = (
        vals.iter().copied().reduce(f64::min),
        vals.iter().copied().reduce(f64::max),
    ) {
        // the values' own range: a cosine near 1 shows its steps
        let pad = if hi > lo {
            (hi - lo) * 0.1
        } else {
            hi.abs().max(1e-6) * 1e-3
        };
        value.y_range = Some((lo - pad, hi + pad));
    }
    value.series.push(Series::line("value", pts(&|s| s.value)));
    value.series.push(Series::dots(
        "holds",
        pts(&|s| if s.holds { s.value } else { None }),
    ));
    let mut share = Chart::new(
        &format!("share of MACs in {}", t.high),
        "step",
        "share of MACs",
    );
    share.y_range = Some((0.0, 1.0));
    share.series.push(Series::line(
        &format!("{} share", t.high),
        pts(&|s| Some(s.high_share)),
    ));
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&render_panels(&[value, share])));
    let mut tb = Table::new(&["step", "kind", "change", "value", "holds", "share", "kept"]);
    for s in &t.steps {
        let cells = vec![
            Cell::num(s.step.to_string()),
            Cell::text(&s.kind),
            Cell::wrap(&s.change),
            Cell::num(num(s.value, 6)),
            Cell::text(if s.holds { "yes" } else { "no" }),
            Cell::num(pct(s.high_share)),
            Cell::text(if s.kept { "yes" } else { "" }),
        ];
        if s.step == t.final_step {
            tb.row_marked(cells);
        } else {
            tb.row(cells);
        }
    }
    tb.render(h);
    let _ = writeln!(
        h,
        "<figcaption>Tuning for {} on {}: {} (final step {} highlighted).</figcaption>",
        escape(&t.target),
        escape(&t.platform),
        escape(&t.outcome),
        t.final_step
    );
    provenance(h, &t.provenance);
    h.push_str("</figure>\n");
    close(h);
}

fn tensor_rows(t: &mut Table, io: &str, list: &[TensorLayout]) {
    for x in list {
        t.row(vec![
            Cell::text(io),
            Cell::code(&x.name),
            Cell::text(&x.dtype),
            Cell::text(&shape(&x.shape)),
            Cell::text(&x.layout),
            Cell::text(&shape(&x.padded_shape)),
            Cell::text(&shape(&x.stride)),
            Cell::num(x.bytes.to_string()),
        ]);
    }
}

pub(super) fn layouts(h: &mut String, l: &LayoutSection) {
    open(h, "layouts", "Input and output layouts");
    h.push_str("<figure>\n");
    for p in &l.platforms {
        let _ = writeln!(h, "<h3>{}</h3>", escape(&p.platform));
        let mut t = Table::new(&[
            "",
            "tensor",
            "type",
            "shape",
            "layout",
            "padded shape",
            "stride (bytes)",
            "bytes",
        ]);
        tensor_rows(&mut t, "input", &p.inputs);
        tensor_rows(&mut t, "output", &p.outputs);
        t.render(h);
        if !p.assumptions.is_empty() {
            h.push_str("<ul class=\"assume\">");
            for a in &p.assumptions {
                let _ = write!(h, "<li>{}</li>", escape(a));
            }
            h.push_str("</ul>\n");
        }
    }
    provenance(h, &l.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn migration(h: &mut String, m: &MigrationSection) {
    open(h, "migration", "Migration checklist");
    h.push_str("<figure>\n");
    for g in &m.migrations {
        let _ = writeln!(h, "<h3>{} → {}</h3>", escape(&g.from), escape(&g.to));
        let mut t = Table::new(&["severity", "item", "from", "to", "what to do"]);
        for i in &g.items {
            t.row(vec![
                Cell::severity(i.severity),
                Cell::code(&i.item),
                Cell::wrap(&i.from),
                Cell::wrap(&i.to),
                Cell::wrap(&i.note),
            ]);
        }
        if g.items.is_empty() {
            h.push_str("<p>Nothing changes.</p>\n");
        } else {
            t.render(h);
        }
    }
    provenance(h, &m.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn lint(h: &mut String, l: &LintSection) {
    open(h, "lint", "Lint findings");
    h.push_str("<figure>\n");
    for p in &l.platforms {
        let _ = writeln!(
            h,
            "<h3>{}: {} errors, {} warnings, {} infos</h3>",
            escape(&p.platform),
            p.errors,
            p.warnings,
            p.infos
        );
        if p.findings.is_empty() {
            h.push_str("<p>No findings.</p>\n");
            continue;
        }
        // one row per rule (and severity), in the order found; every
        // finding in a folded table below it
        let mut groups: Vec<(&str, super::Severity, Vec<&super::LintRow>)> = vec![];
        for f in &p.findings {
            match groups
                .iter_mut()
                .find(|(r, s, _)| *r == f.rule && *s == f.severity)
            {
                Some(g) => g.2.push(f),
                None => groups.push((&f.rule, f.severity, vec![f])),
            }
        }
        let mut t = Table::new(&["severity", "rule", "findings", "nodes", "first message"]);
        for (rule, severity, rows) in &groups {
            let nodes: Vec<&str> = rows
                .iter()
                .flat_map(|f| f.nodes.iter().map(String::as_str))
                .collect();
            let shown = nodes.iter().take(8).copied().collect::<Vec<_>>().join(", ");
            let more = nodes.len().saturating_sub(8);
            t.row(vec![
                Cell::severity(*severity),
                Cell::code(rule),
                Cell::num(rows.len().to_string()),
                Cell::wrap(&if more > 0 {
                    format!("{shown} and {more} more")
                } else {
                    shown
                }),
                Cell::wrap(&rows[0].message),
            ]);
        }
        t.render(h);
        let _ = writeln!(
            h,
            "<details><summary>All {} findings for {}</summary>",
            p.findings.len(),
            escape(&p.platform)
        );
        let mut t = Table::new(&["severity", "rule", "nodes", "message"]);
        for f in &p.findings {
            t.row(vec![
                Cell::severity(f.severity),
                Cell::code(&f.rule),
                Cell::wrap(&f.nodes.join(", ")),
                Cell::wrap(&f.message),
            ]);
        }
        t.render(h);
        h.push_str("</details>\n");
    }
    provenance(h, &l.provenance);
    h.push_str("</figure>\n");
    close(h);
}

pub(super) fn regime(h: &mut String, r: &RegimeSection) {
    open(h, "regime", "Latency regime");
    let p = &r.plot;
    h.push_str("<figure>\n");
    h.push_str(&inline_svg(&crate::regime_plot::render_plot(p)));
    let mut t = Table::new(&[
        "output bytes",
        "D2H ms",
        "model scaling",
        "measured",
        "class",
    ]);
    for x in &p.points {
        t.row(vec![
            Cell::num(x.bytes.to_string()),
            Cell::num(format!("{:.3}", x.d2h_ms)),
            Cell::num(format!("{:.2}", x.predicted_scaling)),
            Cell::num(num(x.measured_scaling, 2)),
            Cell::text(&x.class),
        ]);
    }
    t.render(h);
    let _ = writeln!(
        h,
        "<figcaption>{} cores, {} ms compute per inference; onset c/N = {:.3} ms, crossover c = \
         {:.3} ms (thresholds {}).</figcaption>",
        p.cores,
        p.compute_ms,
        p.onset_ms,
        p.crossover_ms,
        escape(&p.thresholds_from)
    );
    provenance(h, &r.provenance);
    h.push_str("</figure>\n");
    close(h);
}
