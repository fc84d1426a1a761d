//! `qport info MODEL`: what a model is, without running it.
//!
//! Never builds a plan, so it works on models whose ops qport cannot run and
//! names those ops.
//!
//! # JSON schema (`--format json`), `"schema": "qport.info/1"`
//!
//! ```text
//! {
//!   "schema": "qport.info/1",
//!   "qport_version": "0.1.0",
//!   "file": { "path": str, "size_bytes": int, "sha256": str },
//!   "ir_version": int,
//!   "opset_imports": [ { "domain": str, "version": int } ],   // "" = default ONNX domain
//!   "producer": { "name": str, "version": str },
//!   "graph_name": str,
//!   "inputs":  [ Value ],     // graph inputs that are not initializers
//!   "outputs": [ Value ],
//!   "node_count": int,
//!   "op_histogram": [ { "op": str, "count": int } ],  // by count desc, then op name
//!   "parameters": { "tensors": int, "count": int, "bytes": int },
//!   "unsupported_ops": [ { "op": str, "count": int } ],  // empty when all are supported
//!   "unsupported_node_count": int
//! }
//! Value = { "name": str,
//!           "dtype": str | null,                 // "float32", "int64", ... null if undeclared
//!           "shape": [ int | str | null ] | null // str = symbolic dim, null = unknown dim;
//!         }                                      // shape null = rank unknown
//! ```
//!
//! Ops outside the default domain are written `domain:Op`. Parameters are
//! the initializers (including folded `Constant` nodes): `count` is the sum
//! of their element counts, `bytes` the sum of element count times element
//! size. Fields are only ever added within a schema version.

use crate::model_file::{self, FileFacts};
use crate::output::{fmt_bytes, fmt_count, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::Result;
use qport_onnx::{Dim, Model, ValueInfo};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Examples shown by `qport info --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport info model.onnx
  qport info model.onnx --format json | jq '.inputs'

Lists everything even when some ops are not supported by qport's engine
(\"2 nodes use unsupported ops: Foo (1), Bar (1)\"). Exit code 2 when the
file is missing or not a valid ONNX model.";

/// Arguments of `qport info`.
#[derive(Debug, clap::Args)]
pub struct InfoArgs {
    /// The ONNX model file.
    pub model: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// `qport.info/1`: the JSON document of `qport info --format json`.
#[derive(Debug, Serialize)]
pub struct InfoJson {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    pub header: Header,
    /// The model file.
    pub file: FileJson,
    /// ONNX IR version.
    pub ir_version: i64,
    /// Opset imports.
    pub opset_imports: Vec<OpsetJson>,
    /// Producer of the file.
    pub producer: ProducerJson,
    /// Name of the main graph.
    pub graph_name: String,
    /// Graph inputs a caller feeds.
    pub inputs: Vec<ValueJson>,
    /// Graph outputs.
    pub outputs: Vec<ValueJson>,
    /// Number of nodes after loading (Constant nodes are folded away).
    pub node_count: usize,
    /// Nodes per op type, most frequent first.
    pub op_histogram: Vec<OpCountJson>,
    /// Initializer totals.
    pub parameters: ParamsJson,
    /// Op types qport's engine does not implement, most frequent first.
    pub unsupported_ops: Vec<OpCountJson>,
    /// Nodes using those op types.
    pub unsupported_node_count: usize,
}

/// One opset import.
#[derive(Debug, Serialize)]
pub struct OpsetJson {
    /// Domain (`""` is the default ONNX domain).
    pub domain: String,
    /// Opset version.
    pub version: i64,
}

/// Producer name and version.
#[derive(Debug, Serialize)]
pub struct ProducerJson {
    /// Producer name.
    pub name: String,
    /// Producer version.
    pub version: String,
}

/// A graph input or output.
#[derive(Debug, Serialize)]
pub struct ValueJson {
    /// Value name.
    pub name: String,
    /// Element type name, `null` if undeclared.
    pub dtype: Option<String>,
    /// Dimensions: integer, symbolic name, or `null` for unknown; `null`
    /// when the rank is unknown.
    pub shape: Option<Vec<Value>>,
}

impl From<&ValueInfo> for ValueJson {
    fn from(v: &ValueInfo) -> ValueJson {
        ValueJson {
            name: v.name.clone(),
            dtype: v.dtype.map(|d| d.name().to_string()),
            shape: v.shape.as_ref().map(|dims| {
                dims.iter()
                    .map(|d| match d {
                        Dim::Known(n) => Value::from(*n),
                        Dim::Param(p) => Value::from(p.clone()),
                        Dim::Unknown => Value::Null,
                    })
                    .collect()
            }),
        }
    }
}

/// An op type and a node count.
#[derive(Debug, Serialize)]
pub struct OpCountJson {
    /// Op type (`domain:Op` outside the default domain).
    pub op: String,
    /// Number of nodes.
    pub count: usize,
}

/// Initializer totals.
#[derive(Debug, Serialize)]
pub struct ParamsJson {
    /// Number of initializer tensors.
    pub tensors: usize,
    /// Sum of their element counts.
    pub count: u64,
    /// Sum of element count times element size.
    pub bytes: u64,
}

/// Sorts by count descending, then name.
fn by_count(map: BTreeMap<String, usize>) -> Vec<OpCountJson> {
    let mut v: Vec<OpCountJson> = map
        .into_iter()
        .map(|(op, count)| OpCountJson { op, count })
        .collect();
    v.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.op.cmp(&b.op)));
    v
}

/// Builds the info document for a loaded model.
pub fn describe(model: &Model, facts: &FileFacts) -> InfoJson {
    let g = &model.graph;
    let mut hist: BTreeMap<String, usize> = BTreeMap::new();
    for n in &g.nodes {
        *hist.entry(n.qualified_op()).or_default() += 1;
    }
    let unsupported: BTreeMap<String, usize> =
        qport_engine::unsupported_ops(model).into_iter().collect();
    let unsupported_node_count = unsupported.values().sum();
    let parameters = ParamsJson {
        tensors: g.initializers.len(),
        count: g.initializers.values().map(|t| t.len() as u64).sum(),
        bytes: g
            .initializers
            .values()
            .map(|t| t.len() as u64 * t.dtype().size_of() as u64)
            .sum(),
    };
    InfoJson {
        header: Header::new("qport.info/1"),
        file: facts.into(),
        ir_version: model.ir_version,
        opset_imports: model
            .opset_imports
            .iter()
            .map(|(d, v)| OpsetJson {
                domain: d.clone(),
                version: *v,
            })
            .collect(),
        producer: ProducerJson {
            name: model.producer_name.clone(),
            version: model.producer_version.clone(),
        },
        graph_name: g.name.clone(),
        inputs: g.inputs.iter().map(ValueJson::from).collect(),
        outputs: g.outputs.iter().map(ValueJson::from).collect(),
        node_count: g.nodes.len(),
        op_histogram: by_count(hist),
        parameters,
        unsupported_ops: by_count(unsupported),
        unsupported_node_count,
    }
}

/// The "N nodes use unsupported ops: A (n), B (m)" sentence, or `None`.
pub fn unsupported_sentence(ops: &[OpCountJson], nodes: usize) -> Option<String> {
    if ops.is_empty() {
        return None;
    }
    let list: Vec<String> = ops
        .iter()
        .map(|o| format!("{} ({})", o.op, o.count))
        .collect();
    Some(format!(
        "{nodes} node{} use{} unsupported ops: {}",
        if nodes == 1 { "" } else { "s" },
        if nodes == 1 { "s" } else { "" },
        list.join(", ")
    ))
}

fn shape_text(v: &ValueJson) -> String {
    match &v.shape {
        None => "[?..]".into(),
        Some(d) => format!(
            "[{}]",
            d.iter()
                .map(|x| match x {
                    Value::Null => "?".to_string(),
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

impl Render for InfoJson {
    fn human(&self, ui: &Ui) -> String {
        render_human(self, ui)
    }
}

fn render_human(info: &InfoJson, ui: &Ui) -> String {
    let mut s = String::new();
    let kv = |s: &mut String, k: &str, v: String| {
        s.push_str(&format!(
            "{}  {v}\n",
            ui.paint(&format!("{k:<10}"), Style::Bold)
        ));
    };
    kv(&mut s, "model", info.file.path.clone());
    kv(&mut s, "size", fmt_bytes(info.file.size_bytes));
    kv(&mut s, "sha256", info.file.sha256.clone());
    let opsets: Vec<String> = info
        .opset_imports
        .iter()
        .map(|o| {
            let d = if o.domain.is_empty() {
                "ai.onnx"
            } else {
                &o.domain
            };
            format!("{d} {}", o.version)
        })
        .collect();
    kv(&mut s, "ir", format!("version {}", info.ir_version));
    kv(&mut s, "opsets", opsets.join(", "));
    let producer = format!("{} {}", info.producer.name, info.producer.version);
    kv(
        &mut s,
        "producer",
        if producer.trim().is_empty() {
            "(not recorded)".into()
        } else {
            producer.trim().to_string()
        },
    );
    if !info.graph_name.is_empty() {
        kv(&mut s, "graph", info.graph_name.clone());
    }
    kv(&mut s, "nodes", fmt_count(info.node_count as u64));
    kv(
        &mut s,
        "parameters",
        format!(
            "{} in {} tensors, {}",
            fmt_count(info.parameters.count),
            info.parameters.tensors,
            fmt_bytes(info.parameters.bytes)
        ),
    );
    for (title, values) in [("inputs", &info.inputs), ("outputs", &info.outputs)] {
        s.push('\n');
        let mut t = Table::new(&[title, "dtype", "shape"], "lll");
        for v in values.iter() {
            t.row(vec![
                v.name.clone(),
                v.dtype.clone().unwrap_or_else(|| "?".into()),
                shape_text(v),
            ]);
        }
        s.push_str(&t.render(ui, ""));
    }
    s.push('\n');
    let unsupported: std::collections::HashSet<&str> =
        info.unsupported_ops.iter().map(|o| o.op.as_str()).collect();
    let mut t = Table::new(&["op", "nodes"], "lr");
    for o in &info.op_histogram {
        let style = if unsupported.contains(o.op.as_str()) {
            Style::Bad
        } else {
            Style::Plain
        };
        t.styled_row(vec![
            (o.op.clone(), style),
            (o.count.to_string(), Style::Plain),
        ]);
    }
    s.push_str(&t.render(ui, ""));
    s.push('\n');
    match unsupported_sentence(&info.unsupported_ops, info.unsupported_node_count) {
        Some(line) => s.push_str(&format!("{}\n", ui.paint(&line, Style::Bad))),
        None => s.push_str(&format!(
            "{}\n",
            ui.paint("all ops are supported by qport's engine", Style::Good)
        )),
    }
    s
}

/// Runs `qport info`.
pub fn run(args: &InfoArgs, ui: &Ui) -> Result<ExitStatus> {
    let loaded = model_file::load(&args.model)?;
    let info = describe(&loaded.model, &loaded.facts);
    emit(&info, args.format, ui)?;
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_sentence_grammar() {
        let ops = vec![
            OpCountJson {
                op: "Foo".into(),
                count: 1,
            },
            OpCountJson {
                op: "Bar".into(),
                count: 1,
            },
        ];
        assert_eq!(
            unsupported_sentence(&ops, 2).unwrap(),
            "2 nodes use unsupported ops: Foo (1), Bar (1)"
        );
        assert_eq!(
            unsupported_sentence(&ops[..1], 1).unwrap(),
            "1 node uses unsupported ops: Foo (1)"
        );
        assert!(unsupported_sentence(&[], 0).is_none());
    }

    #[test]
    fn histogram_sorted_by_count_then_name() {
        let m: BTreeMap<String, usize> = [
            ("B".to_string(), 2),
            ("A".to_string(), 2),
            ("C".to_string(), 5),
        ]
        .into();
        let v: Vec<String> = by_count(m).into_iter().map(|o| o.op).collect();
        assert_eq!(v, ["C", "A", "B"]);
    }
}
