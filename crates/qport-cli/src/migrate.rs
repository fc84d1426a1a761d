//! `qport migrate --from A --to B`: the checklist of everything that changes
//! when a deployment moves between platforms (quantization template, tail
//! output type, image alignment, memory unit, L2M cap, cores, IPs), with the
//! model's per-tensor stride and `alignedByteSize` before and after, the
//! user's deployment settings re-checked on the target, and the user's
//! quant_config validated for the target.
//!
//! The checklist is a report, so the exit code is 0 even when it holds
//! error items; 2 for bad input.
//!
//! # JSON schema (`--format json`), `"schema": "qport.migrate/1"`
//!
//! ```text
//! {
//!   "schema": "qport.migrate/1",
//!   "qport_version": str,
//!   "from": str, "to": str,
//!   "model": File | null, "config": File | null, "overrides": File | null,
//!   "options": { "input_type": str, "input_source": str,
//!                "input_no_padding": bool, "output_no_padding": bool } | null,
//!   "changes": [ { "item": str, "severity": "error" | "warning" | "info",
//!                  "from": str, "to": str, "note": str, "source": str } ],
//!   "tensors": [ { "name": str, "io": "input" | "output", "changed": bool,
//!                  "from": Tensor | null, "to": Tensor | null } ],
//!   "assumptions": [ str ],
//!   "summary": { "errors": int, "warnings": int, "infos": int, "passed": bool }
//! }
//! File = { "path": str, "size_bytes": int, "sha256": str }
//! ```
//! `Tensor` is the descriptor of `qport.layout/1`.

use crate::args::{DeployFlags, LayoutFlags, OverridesArg};
use crate::model_file;
use crate::output::{self, Format, Style, Table, Ui};
use crate::platform_report::{
    dims, join_blocks, render_assumptions, render_findings, severity_name, summarize, summary_text,
    tensor_type, OptionsJson, SummaryJson, TensorJson,
};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_platform::{
    migrate_deploy, migrate_layout, migrate_platform, Change, ModelLayout, Platform, Severity,
    TensorDescriptor,
};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Examples shown by `qport migrate --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport migrate --from j6m --to j6p --model model.onnx
  qport migrate --from j6m --to j6p --model yolo.onnx --input-shape images=1,3,640,640
  qport migrate --from j6p --to s6p --max-l2m-size 24MiB --runtime-l2m 24 --ips bpu,dsp
  qport migrate --from j6e --to j6h --model model.onnx --input-type nv12 --format json

Severity: error = deployment code or settings break if left unchanged
(output types, per-tensor strides and byte sizes, settings over a new cap,
IPs no longer allowed); warning = re-evaluate (template, alignment rules);
info = new capability. With --model the per-tensor table shows stride and
alignedByteSize before -> after (layout flags as in `qport layout`); the
deployment flags (as in `qport deploy-check`) are re-checked on the target;
--config validates a quant_config.json for the target. The checklist is a
report: exit code 0, or 2 for bad input.";

/// Arguments of `qport migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Platform deployed today.
    #[arg(long, value_name = "PLATFORM")]
    pub from: String,
    /// Platform to move to.
    #[arg(long, value_name = "PLATFORM")]
    pub to: String,
    /// ONNX model: adds per-tensor stride and alignedByteSize before -> after.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// quant_config.json to validate for the target platform.
    #[arg(long, value_name = "quant_config.json")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub layout: LayoutFlags,
    #[command(flatten)]
    pub deploy: DeployFlags,
    #[command(flatten)]
    pub overrides: OverridesArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Validates the quant_config at `path` for `platform`: one problem a line
/// (precisions the platform does not run, bad keys), empty when it fits.
fn validate_config(path: &Path, platform: &Platform) -> Result<Vec<String>> {
    let cfg = qport_quant::config::QuantConfig::from_file(path)
        .with_context(|| format!("cannot load quant config '{}'", path.display()))?;
    Ok(qport_quant::resolve::validate_for_platform(&cfg, platform))
}

#[derive(Debug, Serialize)]
struct ChangeJson {
    item: String,
    severity: &'static str,
    from: String,
    to: String,
    note: String,
    source: String,
}

impl From<&Change> for ChangeJson {
    fn from(c: &Change) -> Self {
        ChangeJson {
            item: c.item.clone(),
            severity: severity_name(c.severity),
            from: c.from.clone(),
            to: c.to.clone(),
            note: c.note.clone(),
            source: c.source.to_string(),
        }
    }
}

/// One tensor before and after.
struct TensorPair<'a> {
    name: String,
    io: &'static str,
    from: Option<&'a TensorDescriptor>,
    to: Option<&'a TensorDescriptor>,
}

impl TensorPair<'_> {
    fn changed(&self) -> bool {
        match (self.from, self.to) {
            (Some(a), Some(b)) => {
                (a.kind, &a.stride, &a.aligned_shape, a.aligned_byte_size)
                    != (b.kind, &b.stride, &b.aligned_shape, b.aligned_byte_size)
            }
            _ => true,
        }
    }
}

fn pairs<'a>(a: &'a ModelLayout, b: &'a ModelLayout) -> Vec<TensorPair<'a>> {
    let mut out = vec![];
    for (io, la, lb) in [
        ("input", &a.inputs, &b.inputs),
        ("output", &a.outputs, &b.outputs),
    ] {
        for d in la {
            out.push(TensorPair {
                name: d.name.clone(),
                io,
                from: Some(d),
                to: lb.iter().find(|e| e.name == d.name),
            });
        }
        for e in lb.iter().filter(|e| !la.iter().any(|d| d.name == e.name)) {
            out.push(TensorPair {
                name: e.name.clone(),
                io,
                from: None,
                to: Some(e),
            });
        }
    }
    out
}

#[derive(Debug, Serialize)]
struct TensorPairJson {
    name: String,
    io: &'static str,
    changed: bool,
    from: Option<TensorJson>,
    to: Option<TensorJson>,
}

#[derive(Serialize)]
struct MigrateJson<'a> {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    header: Header,
    from: String,
    to: String,
    model: Option<FileJson>,
    config: Option<FileJson>,
    overrides: Option<FileJson>,
    options: Option<OptionsJson>,
    changes: Vec<ChangeJson>,
    tensors: Vec<TensorPairJson>,
    assumptions: Vec<String>,
    summary: SummaryJson,
    /// Both platforms' titles, for the human form.
    #[serde(skip)]
    titles: [String; 2],
    /// The changes as found, for the human form.
    #[serde(skip)]
    change_list: &'a [Change],
    /// The tensors before and after, for the human form.
    #[serde(skip)]
    tensor_pairs: &'a [TensorPair<'a>],
}

impl Render for MigrateJson<'_> {
    fn human(&self, ui: &Ui) -> String {
        let mut head = format!(
            "{}  {} -> {}\n",
            ui.paint("migrate", Style::Bold),
            self.titles[0],
            self.titles[1]
        );
        if let Some(m) = &self.model {
            head.push_str(&format!(
                "{}  {}\n",
                ui.paint("model  ", Style::Bold),
                m.path
            ));
        }
        let mut rows: Vec<_> = self
            .change_list
            .iter()
            .filter(|c| c.item != "config")
            .map(|c| {
                (
                    c.severity,
                    c.item.clone(),
                    if c.item.starts_with("deploy:") || c.item == "config" {
                        c.note.clone()
                    } else {
                        format!("{}: {}", arrow(c.from.clone(), c.to.clone()), c.note)
                    },
                    c.source.to_string(),
                )
            })
            .collect();
        rows.extend(
            group_config(self.change_list.iter().filter(|c| c.item == "config"))
                .into_iter()
                .map(|g| (Severity::Error, "config".to_string(), g.text(), g.source)),
        );
        let blocks = [
            head,
            if rows.is_empty() {
                "no differences\n".to_string()
            } else {
                render_findings(&rows, "item", ui)
            },
            if self.tensor_pairs.is_empty() {
                String::new()
            } else {
                render_tensors(self.tensor_pairs, ui)
            },
            render_assumptions(&self.assumptions, ui),
            format!("checklist: {}\n", summary_text(&self.summary)),
        ];
        join_blocks(&blocks)
    }
}

fn arrow(a: String, b: String) -> String {
    if a == b {
        a
    } else {
        format!("{a} -> {b}")
    }
}

fn render_tensors(pairs: &[TensorPair], ui: &Ui) -> String {
    let mut t = Table::new(
        &[
            "io",
            "name",
            "type",
            "stride (bytes)",
            "alignedByteSize",
            "change",
        ],
        "llllrl",
    );
    let get = |d: Option<&TensorDescriptor>, f: &dyn Fn(&TensorDescriptor) -> String| {
        d.map_or("absent".to_string(), f)
    };
    for p in pairs {
        let ty = arrow(get(p.from, &tensor_type), get(p.to, &tensor_type));
        let st = arrow(
            get(p.from, &|d| dims(&d.stride)),
            get(p.to, &|d| dims(&d.stride)),
        );
        let by = arrow(
            get(p.from, &|d| d.aligned_byte_size.to_string()),
            get(p.to, &|d| d.aligned_byte_size.to_string()),
        );
        let (mark, style) = if p.changed() {
            ("changed", Style::Bad)
        } else {
            ("same", Style::Dim)
        };
        t.styled_row(vec![
            (
                if p.io == "input" { "in" } else { "out" }.into(),
                Style::Dim,
            ),
            (p.name.clone(), Style::Bold),
            (ty, Style::Plain),
            (st, Style::Plain),
            (by, Style::Plain),
            (mark.into(), style),
        ]);
    }
    t.render(ui, "")
}

fn title(p: &Platform) -> String {
    match &p.march {
        Some(m) => format!("{} ({m})", p.name),
        None => p.name.clone(),
    }
}

/// Config problems that differ only in the node (or op, or tensor) they
/// name: `node_config.*.qtype: float16 is not available on j6m ...` once,
/// with the count and the first few names. The JSON lists every entry.
#[derive(Debug, PartialEq)]
struct ConfigGroup {
    /// `node_config.*.qtype`, or the key as written when it names no entry.
    pattern: String,
    /// What is wrong, after the key.
    problem: String,
    names: Vec<String>,
    source: String,
}

/// Names shown per group in the human output.
const GROUP_NAMES_SHOWN: usize = 3;

impl ConfigGroup {
    fn text(&self) -> String {
        let n = self.names.len();
        if n <= 1 {
            let key = self
                .pattern
                .replacen('*', self.names.first().map_or("*", |s| s), 1);
            return format!("{key}: {}", self.problem);
        }
        let shown: Vec<&str> = self
            .names
            .iter()
            .take(GROUP_NAMES_SHOWN)
            .map(String::as_str)
            .collect();
        format!(
            "{}: {} ({} entries: {}{}; each listed with --format json)",
            self.pattern,
            self.problem,
            output::fmt_count(n as u64),
            shown.join(", "),
            if n > GROUP_NAMES_SHOWN { ", ..." } else { "" }
        )
    }
}

/// Splits `node_config.NAME.field: problem` into (`node_config.*.field`,
/// NAME, problem); keys without a named entry (`model_config....`) keep
/// their text and have no name.
fn split_config_problem(note: &str) -> (String, Option<String>, String) {
    let (key, problem) = note.split_once(": ").unwrap_or((note, ""));
    for level in ["node_config.", "op_config.", "tensor_config."] {
        if let Some(rest) = key.strip_prefix(level) {
            let (name, field) = match rest.rsplit_once('.') {
                Some((n, f))
                    if ["qtype", "InputType0", "InputType1", "OutputType", "ON"].contains(&f) =>
                {
                    (n, format!(".{f}"))
                }
                _ => (rest, String::new()),
            };
            return (
                format!("{level}*{field}"),
                Some(name.to_string()),
                problem.to_string(),
            );
        }
    }
    (key.to_string(), None, problem.to_string())
}

fn group_config<'a>(changes: impl Iterator<Item = &'a Change>) -> Vec<ConfigGroup> {
    let mut groups: Vec<ConfigGroup> = vec![];
    for c in changes {
        let (pattern, name, problem) = split_config_problem(&c.note);
        let found = groups
            .iter_mut()
            .find(|g| g.pattern == pattern && g.problem == problem && name.is_some());
        match (found, name) {
            (Some(g), Some(n)) => g.names.push(n),
            (_, name) => groups.push(ConfigGroup {
                pattern,
                problem,
                names: name.into_iter().collect(),
                source: c.source.to_string(),
            }),
        }
    }
    groups
}

/// Runs `qport migrate`.
pub fn run(args: &MigrateArgs, ui: &Ui) -> Result<ExitStatus> {
    let reg = args.overrides.load()?;
    let (a, b) = (reg.get(&args.from)?, reg.get(&args.to)?);
    let req = args.deploy.request()?;
    let mut changes = migrate_platform(a, b);
    let mut layouts = None;
    let mut model = None;
    if let Some(path) = &args.model {
        let loaded = model_file::load(path)?;
        let p = path.display().to_string();
        let la = args.layout.compute(&loaded.model, a, &p)?;
        let lb = args.layout.compute(&loaded.model, b, &p)?;
        changes.extend(migrate_layout(&la, &lb));
        layouts = Some((la, lb));
        model = Some(FileJson::from(&loaded.facts));
    }
    if args.deploy.given() {
        changes.extend(migrate_deploy(b, &req)?);
    }
    let mut config = None;
    if let Some(path) = &args.config {
        let facts = model_file::file_facts(path)?;
        for problem in validate_config(path, b)? {
            changes.push(Change {
                item: "config".into(),
                severity: Severity::Error,
                from: path.display().to_string(),
                to: b.name.clone(),
                note: problem,
                source: "OE manual, quant_config (the precisions each platform runs)",
            });
        }
        config = Some(FileJson::from(&facts));
    }
    let tensor_pairs = layouts.as_ref().map_or(vec![], |(la, lb)| pairs(la, lb));
    let mut assumptions: Vec<String> = vec![];
    if let Some((la, lb)) = &layouts {
        for n in la.assumptions.iter().chain(&lb.assumptions) {
            if !assumptions.contains(n) {
                assumptions.push(n.clone());
            }
        }
    }
    let summary = summarize(changes.iter().map(|c| c.severity));
    let doc = MigrateJson {
        header: Header::new("qport.migrate/1"),
        from: a.name.clone(),
        to: b.name.clone(),
        model,
        config,
        overrides: reg.overrides_json(),
        options: if layouts.is_some() {
            Some(args.layout.json()?)
        } else {
            None
        },
        changes: changes.iter().map(Into::into).collect(),
        tensors: tensor_pairs
            .iter()
            .map(|p| TensorPairJson {
                name: p.name.clone(),
                io: p.io,
                changed: p.changed(),
                from: p.from.map(Into::into),
                to: p.to.map(Into::into),
            })
            .collect(),
        assumptions,
        summary,
        titles: [title(a), title(b)],
        change_list: &changes,
        tensor_pairs: &tensor_pairs,
    };
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_problems_group_by_rule() {
        let change = |note: &str| Change {
            item: "config".into(),
            severity: Severity::Error,
            from: "c.json".into(),
            to: "j6m".into(),
            note: note.into(),
            source: "src",
        };
        let cs = [
            change("node_config./a/Conv.qtype: float16 is not available on j6m"),
            change("node_config./b.x/Conv.qtype: float16 is not available on j6m"),
            change("op_config.Softmax.qtype: float16 is not available on j6m"),
            change("node_config./c/Conv.qtype: float16 is not available on j6m"),
            change("node_config./d/Conv.qtype: float16 is not available on j6m"),
            change("model_config.all_node_type: float16 is not available on j6m"),
        ];
        let g = group_config(cs.iter());
        assert_eq!(g.len(), 3, "{g:?}");
        assert_eq!(g[0].pattern, "node_config.*.qtype");
        assert_eq!(g[0].names, ["/a/Conv", "/b.x/Conv", "/c/Conv", "/d/Conv"]);
        assert_eq!(
            g[0].text(),
            "node_config.*.qtype: float16 is not available on j6m (4 entries: /a/Conv, \
             /b.x/Conv, /c/Conv, ...; each listed with --format json)"
        );
        assert_eq!(
            g[1].text(),
            "op_config.Softmax.qtype: float16 is not available on j6m"
        );
        assert_eq!(
            g[2].text(),
            "model_config.all_node_type: float16 is not available on j6m"
        );
    }
    use qport_platform::{Registry, TensorType};

    fn layout(p: &str) -> ModelLayout {
        let r = Registry::builtin();
        let p = r.get(p).unwrap();
        let d = |n: &str| TensorDescriptor::featuremap(n, TensorType::F32, &[3], p, false).unwrap();
        ModelLayout {
            platform: p.name.clone(),
            inputs: vec![d("x")],
            outputs: vec![d("y")],
            assumptions: vec![],
        }
    }

    #[test]
    fn pairs_match_by_name_and_flag_changes() {
        let (a, b) = (layout("j6m"), layout("j6p"));
        let p = pairs(&a, &b);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|x| x.changed()), "64 B -> 256 B unit");
        let (a, b) = (layout("j6h"), layout("j6p"));
        assert!(pairs(&a, &b).iter().all(|x| !x.changed()));
        let mut c = layout("j6p");
        c.outputs[0].name = "z".into();
        let p = pairs(&b, &c);
        assert_eq!(p.len(), 3);
        assert!(p[1].to.is_none() && p[2].from.is_none());
    }

    #[test]
    fn arrow_collapses_equal_values() {
        assert_eq!(arrow("a".into(), "a".into()), "a");
        assert_eq!(arrow("a".into(), "b".into()), "a -> b");
    }
}
