//! The HTML rendering of a study report: one self-contained page (inline
//! CSS and SVG, no script, no external reference), readable on a laptop
//! screen (a centred column; wide tables scroll on their own) and
//! printable. Sections appear in a fixed order, each only when present,
//! with a "how this was made" footer from its [`Provenance`]; the page
//! ends with the claim-to-artifact map.

use super::figures;
use super::{Provenance, StudyReport, REPORT_FILE};
use crate::svg::escape;
use std::fmt::Write;

const CSS: &str = r#"
:root { color-scheme: light; }
body { margin: 0; color: #1b1b1b; background: #fff;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 1.6em; margin: .4em 0 .2em; overflow-wrap: anywhere; }
h2 { font-size: 1.25em; margin: 1.8em 0 .5em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin: 1.2em 0 .4em; }
p.meta { color: #555; margin: 0 0 1em; overflow-wrap: anywhere; }
.verdict { font-size: 1.05em; background: #f4f8fb; border-left: 4px solid #1f77b4;
  padding: .6em 1em; margin: .5em 0; }
.verdict .timing { color: #555; }
figure { margin: 1em 0 1.5em; padding: 0; }
figcaption { font-size: .9em; color: #333; margin: .3em 0; }
.chart svg { display: block; max-width: 100%; height: auto; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: .88em; margin: .3em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top;
  white-space: nowrap; }
th { background: #f6f6f6; white-space: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.wrap { white-space: normal; min-width: 14em; max-width: 40em; overflow-wrap: anywhere; }
td.brk { white-space: normal; min-width: 10em; overflow-wrap: anywhere; }
tr.first td { background: #fff3d6; }
.how { font-size: .78em; color: #555; margin-top: .5em; border-top: 1px dotted #ccc;
  padding-top: .3em; overflow-wrap: anywhere; }
.how code { font-size: 1em; }
.sev-error { color: #b00020; font-weight: 600; }
.sev-warning { color: #8a5a00; }
.sev-info { color: #555; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .95em; }
ul.assume { font-size: .85em; color: #444; }
@media print {
  main { max-width: none; padding: 0; }
  .scroll { overflow: visible; }
  th, td { white-space: normal; overflow-wrap: anywhere; }
  figure, table, .verdict { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
}
"#;

/// Renders `r` as one self-contained HTML page.
pub fn render_html(r: &StudyReport) -> String {
    let mut h = String::new();
    let model = &r.inputs.model.path;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>qport study: {}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<main>\n",
        escape(model)
    );
    let _ = writeln!(h, "<h1>qport study: {}</h1>", escape(model));
    let commit = r.header.git_commit.as_deref().unwrap_or("commit unknown");
    let _ = writeln!(
        h,
        "<p class=\"meta\">qport {} ({}) · model sha256 <code>{}</code> · data {} ({} samples)</p>",
        escape(&r.header.qport_version),
        escape(commit),
        escape(&r.inputs.model.sha256),
        escape(&r.inputs.data.path),
        r.inputs.data.samples
    );
    verdict(&mut h, r);
    let s = &r.sections;
    if let Some(b) = &s.bench {
        figures::bench(&mut h, b);
    }
    if let Some(a) = &s.agreement {
        figures::agreement(&mut h, a);
    }
    if let Some(d) = &s.divergence {
        figures::divergence(&mut h, d);
    }
    if let Some(f) = &s.fp32 {
        figures::fp32(&mut h, f);
    }
    if let Some(q) = &s.quantization {
        figures::quantization(&mut h, q);
    }
    if let Some(x) = &s.sensitivity {
        figures::sensitivity(&mut h, x);
    }
    if let Some(t) = &s.tuning {
        figures::tuning(&mut h, t);
    }
    if let Some(l) = &s.layouts {
        figures::layouts(&mut h, l);
    }
    if let Some(m) = &s.migration {
        figures::migration(&mut h, m);
    }
    if let Some(l) = &s.lint {
        figures::lint(&mut h, l);
    }
    if let Some(g) = &s.regime {
        figures::regime(&mut h, g);
    }
    claim_map(&mut h, r);
    h.push_str("</main>\n</body>\n</html>\n");
    h
}

fn verdict(h: &mut String, r: &StudyReport) {
    h.push_str("<section id=\"verdict\">\n<h2>Verdict</h2>\n<p class=\"verdict\">");
    let texts: Vec<String> = r.verdict.claims.iter().map(|c| escape(&c.text)).collect();
    if texts.is_empty() && r.verdict.timing.claims.is_empty() {
        h.push_str("No stage of this study produced a finding.");
    }
    h.push_str(&texts.join(" "));
    for c in &r.verdict.timing.claims {
        let _ = write!(
            h,
            " <span class=\"timing\">{} (timing: varies run to run)</span>",
            escape(&c.text)
        );
    }
    h.push_str("</p>\n</section>\n");
}

/// The claim-to-artifact map: every claim with the file and JSON pointer
/// of each value it rests on, and the value itself when it is in the
/// report.
fn claim_map(h: &mut String, r: &StudyReport) {
    let doc = serde_json::to_value(r).unwrap_or_default();
    h.push_str("<section id=\"claims\">\n<h2>Claim-to-artifact map</h2>\n");
    h.push_str(
        "<p>Each sentence of the verdict, with the file (relative to this report's folder) and \
         the JSON pointer of every value it rests on.</p>\n",
    );
    let mut t = Table::new(&["#", "claim", "file", "JSON pointer", "value"]);
    for (i, c) in r.verdict.all_claims().enumerate() {
        for (k, e) in c.evidence.iter().enumerate() {
            let value = if e.file == REPORT_FILE {
                doc.pointer(&e.pointer)
                    .map(|v| {
                        let s = v.to_string();
                        crate::svg::fit(&s, 80).0
                    })
                    .unwrap_or_else(|| "(missing)".into())
            } else {
                String::new()
            };
            let (n, text) = if k == 0 {
                ((i + 1).to_string(), c.text.as_str())
            } else {
                (String::new(), "")
            };
            t.row(vec![
                Cell::num(n),
                Cell::wrap(text),
                Cell::code(&e.file),
                Cell::code(&e.pointer),
                Cell::code_wrap(&value),
            ]);
        }
        if c.evidence.is_empty() {
            t.row(vec![
                Cell::num((i + 1).to_string()),
                Cell::wrap(&c.text),
                Cell::text(""),
                Cell::text(""),
                Cell::text(""),
            ]);
        }
    }
    t.render(h);
    h.push_str("</section>\n");
}

/// The "how this was made" footer of a figure or table.
pub(super) fn provenance(h: &mut String, p: &Provenance) {
    let join = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let defs = |d: &[super::Definition]| {
        join(
            d.iter()
                .map(|d| format!("{} <code>{}</code>", escape(&d.name), escape(&d.sha256)))
                .collect(),
        )
    };
    let _ = writeln!(
        h,
        "<footer class=\"how\"><strong>How this was made:</strong> <code>{}</code>; qport {} ({}); \
         model sha256 <code>{}</code>; data sha256 <code>{}</code>; profiles: {}; platforms: {}; \
         seeds: {}; artifacts: {}.</footer>",
        escape(&p.command.join(" ")),
        escape(&p.qport_version),
        escape(p.git_commit.as_deref().unwrap_or("commit unknown")),
        escape(&p.model_sha256),
        escape(&p.data_sha256),
        defs(&p.profiles),
        defs(&p.platforms),
        join(
            p.seeds
                .iter()
                .map(|s| format!("{} {}", escape(&s.name), s.value))
                .collect()
        ),
        join(
            p.artifacts
                .iter()
                .map(|a| format!("<code>{}</code>", escape(a)))
                .collect()
        ),
    );
}

/// An SVG document as an inline element of the page (HTML needs no
/// namespace declaration).
pub(super) fn inline_svg(svg: &str) -> String {
    format!(
        "<div class=\"chart\">{}</div>\n",
        svg.replacen(r#" xmlns="http://www.w3.org/2000/svg""#, "", 1)
    )
}

/// One table cell.
pub(super) struct Cell {
    html: String,
    class: &'static str,
}

impl Cell {
    /// Escaped text.
    pub(super) fn text(s: &str) -> Cell {
        Cell {
            html: escape(s),
            class: "",
        }
    }
    /// Escaped text that may wrap.
    pub(super) fn wrap(s: &str) -> Cell {
        Cell {
            html: escape(s),
            class: "wrap",
        }
    }
    /// A right-aligned number (already formatted).
    pub(super) fn num(s: impl Into<String>) -> Cell {
        Cell {
            html: escape(&s.into()),
            class: "num",
        }
    }
    /// Escaped text in `<code>`.
    pub(super) fn code(s: &str) -> Cell {
        Cell {
            html: format!("<code>{}</code>", escape(s)),
            class: "",
        }
    }
    /// Escaped text in `<code>` that may break anywhere (JSON values,
    /// which have no spaces).
    pub(super) fn code_wrap(s: &str) -> Cell {
        Cell {
            html: format!("<code>{}</code>", escape(s)),
            class: "brk",
        }
    }
    /// A severity, coloured.
    pub(super) fn severity(s: super::Severity) -> Cell {
        Cell {
            html: format!("<span class=\"sev-{0}\">{0}</span>", s.name()),
            class: "",
        }
    }
}

/// A table in a horizontally scrolling box.
pub(super) struct Table {
    head: Vec<String>,
    rows: Vec<(Vec<Cell>, bool)>,
}

impl Table {
    /// A table with these column headings.
    pub(super) fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| escape(s)).collect(),
            rows: vec![],
        }
    }
    /// Adds a row.
    pub(super) fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push((cells, false));
    }
    /// Adds a highlighted row.
    pub(super) fn row_marked(&mut self, cells: Vec<Cell>) {
        self.rows.push((cells, true));
    }
    /// Writes the table.
    pub(super) fn render(&self, h: &mut String) {
        h.push_str("<div class=\"scroll\"><table>\n<thead><tr>");
        for c in &self.head {
            let _ = write!(h, "<th>{c}</th>");
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for (cells, marked) in &self.rows {
            h.push_str(if *marked {
                "<tr class=\"first\">"
            } else {
                "<tr>"
            });
            for c in cells {
                if c.class.is_empty() {
                    let _ = write!(h, "<td>{}</td>", c.html);
                } else {
                    let _ = write!(h, "<td class=\"{}\">{}</td>", c.class, c.html);
                }
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody></table></div>\n");
    }
}

/// `x` with `d` decimals, `-` for none.
pub(super) fn num(x: Option<f64>, d: usize) -> String {
    x.map_or("-".into(), |v| format!("{v:.d$}"))
}

/// Opens a section: `<section id><h2>`.
pub(super) fn open(h: &mut String, id: &str, title: &str) {
    let _ = writeln!(h, "<section id=\"{id}\">\n<h2>{}</h2>", escape(title));
}
