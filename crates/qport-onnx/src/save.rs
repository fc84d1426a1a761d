//! Writing the IR back to ONNX.
//!
//! [`model_to_proto`] is the inverse of [`crate::load::model_from_proto`]:
//! opset imports, IR version, producer, metadata, value_info, graph inputs
//! and outputs are kept; initializers (including folded `Constant`s) are
//! written with `raw_data` (strings with `string_data`). For IR version 4 and
//! later initializers are not listed as graph inputs; for older IR versions
//! they must be, so the main graph lists them and subgraphs get them back as
//! `Constant` nodes. Empty graph names are written as `graph` because the
//! ONNX checker requires one.
//!
//! [`save`] writes atomically: a temporary file in the same directory, then
//! a rename, so a half-written model never appears at the destination.

use crate::error::{OnnxError, Result};
use crate::model::{Attribute, Dim, Graph, Model, Node, ValueInfo};
use crate::proto::attribute_proto::AttributeType;
use crate::proto::{self, type_proto};
use crate::tensor::tensor_to_proto;
use prost::Message;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The largest message protobuf can represent (2 GiB).
const PROTOBUF_LIMIT: usize = (1 << 31) - 1;

/// Serializes `model` to ONNX protobuf bytes.
///
/// Models over 2 GiB cannot be stored in one protobuf message; [`save`]
/// refuses them, this function does not check.
pub fn to_bytes(model: &Model) -> Vec<u8> {
    model_to_proto(model).encode_to_vec()
}

/// Writes `model` to `path` atomically (see the module docs). Refuses
/// models whose encoding exceeds the 2 GiB protobuf limit.
pub fn save(model: &Model, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let proto = model_to_proto(model);
    let len = proto.encoded_len();
    if len > PROTOBUF_LIMIT {
        return Err(OnnxError::Malformed(format!(
            "{}: the model encodes to {len} bytes, over the 2 GiB protobuf limit \
             (external data is not supported when writing)",
            path.display()
        )));
    }
    write_atomic(path, &proto.encode_to_vec())
}

/// Writes `bytes` to a temporary file next to `path`, syncs it and renames
/// it over `path`. The temporary file is removed on failure.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let io = |source: std::io::Error| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file_name = path.file_name().ok_or_else(|| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file path",
        ))
    })?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}

fn opt(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Converts the IR to a `ModelProto` (see the module docs).
pub fn model_to_proto(model: &Model) -> proto::ModelProto {
    let legacy = model.ir_version < 4;
    let mut graph = graph_to_proto(&model.graph, legacy, true);
    if legacy {
        // Before IR 4 every initializer must also be a graph input.
        for (name, t) in &model.graph.initializers {
            graph.input.push(value_info_to_proto(&ValueInfo::known(
                name,
                t.dtype(),
                t.shape(),
            )));
        }
    }
    proto::ModelProto {
        ir_version: Some(model.ir_version),
        opset_import: model
            .opset_imports
            .iter()
            .map(|(d, v)| proto::OperatorSetIdProto {
                domain: Some(d.clone()),
                version: Some(*v),
            })
            .collect(),
        producer_name: opt(&model.producer_name),
        producer_version: opt(&model.producer_version),
        domain: opt(&model.domain),
        model_version: (model.model_version != 0).then_some(model.model_version),
        doc_string: opt(&model.doc_string),
        graph: Some(graph),
        metadata_props: model
            .metadata
            .iter()
            .map(|(k, v)| proto::StringStringEntryProto {
                key: Some(k.clone()),
                value: Some(v.clone()),
            })
            .collect(),
        ..Default::default()
    }
}

/// Converts one graph. `legacy` (IR < 4) turns subgraph initializers into
/// `Constant` nodes; `main` says whether this is the model's graph.
fn graph_to_proto(g: &Graph, legacy: bool, main: bool) -> proto::GraphProto {
    let mut nodes = Vec::with_capacity(g.nodes.len() + g.initializers.len());
    let mut initializer = Vec::new();
    if legacy && !main {
        for (name, t) in &g.initializers {
            let mut attrs = std::collections::BTreeMap::new();
            attrs.insert("value".to_string(), Attribute::Tensor(t.clone()));
            nodes.push(node_to_proto(
                &Node {
                    name: format!("{name}_constant"),
                    op_type: "Constant".into(),
                    domain: String::new(),
                    inputs: vec![],
                    outputs: vec![name.clone()],
                    attributes: attrs,
                    doc_string: String::new(),
                },
                legacy,
            ));
        }
    } else {
        initializer = g
            .initializers
            .iter()
            .map(|(n, t)| tensor_to_proto(n, t))
            .collect();
    }
    nodes.extend(g.nodes.iter().map(|n| node_to_proto(n, legacy)));
    proto::GraphProto {
        node: nodes,
        name: Some(if g.name.is_empty() {
            "graph".into()
        } else {
            g.name.clone()
        }),
        initializer,
        doc_string: opt(&g.doc_string),
        input: g.inputs.iter().map(value_info_to_proto).collect(),
        output: g.outputs.iter().map(value_info_to_proto).collect(),
        value_info: g.value_info.iter().map(value_info_to_proto).collect(),
        ..Default::default()
    }
}

fn node_to_proto(n: &Node, legacy: bool) -> proto::NodeProto {
    proto::NodeProto {
        input: n.inputs.clone(),
        output: n.outputs.clone(),
        name: opt(&n.name),
        op_type: Some(n.op_type.clone()),
        domain: opt(&n.domain),
        attribute: n
            .attributes
            .iter()
            .map(|(name, a)| attribute_to_proto(name, a, legacy))
            .collect(),
        doc_string: opt(&n.doc_string),
        ..Default::default()
    }
}

fn attribute_to_proto(name: &str, a: &Attribute, legacy: bool) -> proto::AttributeProto {
    let mut p = proto::AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    let ty = match a {
        Attribute::Float(f) => {
            p.f = Some(*f);
            AttributeType::Float
        }
        Attribute::Int(i) => {
            p.i = Some(*i);
            AttributeType::Int
        }
        Attribute::String(s) => {
            p.s = Some(s.clone());
            AttributeType::String
        }
        Attribute::Tensor(t) => {
            p.t = Some(tensor_to_proto("", t));
            AttributeType::Tensor
        }
        Attribute::Graph(g) => {
            p.g = Some(graph_to_proto(g, legacy, false));
            AttributeType::Graph
        }
        Attribute::Floats(v) => {
            p.floats = v.clone();
            AttributeType::Floats
        }
        Attribute::Ints(v) => {
            p.ints = v.clone();
            AttributeType::Ints
        }
        Attribute::Strings(v) => {
            p.strings = v.clone();
            AttributeType::Strings
        }
        Attribute::Tensors(v) => {
            p.tensors = v.iter().map(|t| tensor_to_proto("", t)).collect();
            AttributeType::Tensors
        }
        Attribute::Graphs(v) => {
            p.graphs = v.iter().map(|g| graph_to_proto(g, legacy, false)).collect();
            AttributeType::Graphs
        }
    };
    p.r#type = Some(ty as i32);
    p
}

/// Converts a [`ValueInfo`]: a tensor type when the dtype is known (with
/// the shape when declared), no type otherwise.
pub fn value_info_to_proto(v: &ValueInfo) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{dimension, Dimension};
    let ty = v.dtype.map(|dt| proto::TypeProto {
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(dt.onnx_code()),
            shape: v.shape.as_ref().map(|dims| proto::TensorShapeProto {
                dim: dims
                    .iter()
                    .map(|d| Dimension {
                        value: match d {
                            Dim::Known(k) => Some(dimension::Value::DimValue(*k as i64)),
                            Dim::Param(p) => Some(dimension::Value::DimParam(p.clone())),
                            Dim::Unknown => None,
                        },
                        denotation: None,
                    })
                    .collect(),
            }),
        })),
        denotation: None,
    });
    proto::ValueInfoProto {
        name: Some(v.name.clone()),
        r#type: ty,
        ..Default::default()
    }
}
