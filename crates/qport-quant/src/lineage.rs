//! Is a quantized artifact a quantization of a given float model?
//!
//! Quantizers change a graph in ways that keep its meaning: they insert
//! QuantizeLinear/DequantizeLinear pairs (QDQ form) or replace operators
//! with `QLinear*`/`QGemm`/`*Integer` ones (QOperator form), fold
//! activations into the quantization ranges (onnxruntime drops Relu and
//! Clip), fold BatchNormalization, and may write a MatMul with a bias as a
//! Gemm. What they do not change is the interface and the weighted layers.
//! [`check_lineage`] therefore compares:
//!
//! - the graph inputs (names, element types, shapes where both declare a
//!   size) and the graph outputs (names in order, ranks and sizes);
//! - the GEMM-class layers ([`gemm_layers`]): Conv, ConvTranspose and the
//!   dense ones (MatMul/Gemm), each with the shape of its constant weight
//!   (followed through DequantizeLinear to the stored integers; a Gemm's
//!   `transB` undone, so a MatMul written as a Gemm matches), as multisets.
//!
//! ```
//! use qport_core::{DType, Tensor};
//! use qport_onnx::graph::ModelBuilder;
//! let float = ModelBuilder::new(13)
//!     .input("x", DType::F32, &[1, 4])
//!     .initializer("w", Tensor::zeros(DType::F32, vec![4, 2]).unwrap())
//!     .op("MatMul", ["x", "w"], ["y"])
//!     .output("y", DType::F32, &[1, 2])
//!     .build();
//! let l = qport_quant::lineage::check_lineage(&float, &float).unwrap();
//! assert_eq!(l.layers, 1);
//! ```

use qport_onnx::{Dim, GraphIndex, Model, Node, ValueInfo};
use std::collections::BTreeMap;

/// A GEMM-class layer: its class and the shape of its constant weight
/// (`None` when both operands are activations, as in attention).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Layer {
    /// `Conv`, `ConvTranspose` or `MatMul/Gemm`.
    pub class: &'static str,
    /// The weight's shape (`[K, N]` for the dense class).
    pub weight: Option<Vec<usize>>,
}

impl std::fmt::Display for Layer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.weight {
            Some(w) => write!(f, "{} {w:?}", self.class),
            None => write!(f, "{} of two activations", self.class),
        }
    }
}

/// What matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// GEMM-class layers found in both, with the same weight shapes.
    pub layers: usize,
}

/// How the artifact differs from the float model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineageError {
    /// The graph inputs differ.
    #[error("its inputs differ from the model's: {0}")]
    Inputs(String),
    /// The graph outputs differ.
    #[error("its outputs differ from the model's: {0}")]
    Outputs(String),
    /// The weighted layers differ.
    #[error("its layers differ from the model's: {0}")]
    Layers(String),
}

/// The layer class of `n` and the input holding its weight: the float
/// operators and their QOperator forms (default domain or `com.microsoft`).
fn class_of(n: &Node) -> Option<(&'static str, usize)> {
    Some(match n.op_type.as_str() {
        "Conv" | "ConvInteger" | "FusedConv" => ("Conv", 1),
        "QLinearConv" => ("Conv", 3),
        "ConvTranspose" => ("ConvTranspose", 1),
        "MatMul" | "MatMulInteger" | "Gemm" => ("MatMul/Gemm", 1),
        "QLinearMatMul" | "QGemm" => ("MatMul/Gemm", 3),
        _ => return None,
    })
}

/// The constant behind `value`: an initializer, or one reached through
/// DequantizeLinear, Cast or Identity (how QDQ and float16 artifacts store
/// weights).
fn constant_shape(model: &Model, index: &GraphIndex, value: &str) -> Option<Vec<usize>> {
    let g = &model.graph;
    let mut v = value;
    for _ in 0..4 {
        if let Some(t) = g.initializers.get(v) {
            return Some(t.shape().to_vec());
        }
        let n = &g.nodes[index.producer(v)?];
        if !matches!(n.op_type.as_str(), "DequantizeLinear" | "Cast" | "Identity") {
            return None;
        }
        v = n.input(0)?;
    }
    None
}

/// The GEMM-class layers of `model` (float, QDQ or QOperator form), in
/// node order.
pub fn gemm_layers(model: &Model) -> Vec<Layer> {
    let index = GraphIndex::new(&model.graph);
    model
        .graph
        .nodes
        .iter()
        .filter_map(|n| {
            let (class, wi) = class_of(n)?;
            let mut weight = n.input(wi).and_then(|w| constant_shape(model, &index, w));
            let trans_b = n.attr_int("transB", 0).unwrap_or(0) != 0;
            if let (true, Some(w)) = (trans_b && n.op_type.ends_with("Gemm"), weight.as_mut()) {
                w.reverse();
            }
            Some(Layer { class, weight })
        })
        .collect()
}

fn feeds(model: &Model) -> Vec<&ValueInfo> {
    let g = &model.graph;
    g.inputs
        .iter()
        .filter(|v| !g.initializers.contains_key(&v.name))
        .collect()
}

/// Rank and every size both declare agree.
fn shapes_agree(a: &ValueInfo, b: &ValueInfo) -> bool {
    match (&a.shape, &b.shape) {
        (Some(x), Some(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|(p, q)| match (p, q) {
                    (Dim::Known(p), Dim::Known(q)) => p == q,
                    _ => true,
                })
        }
        _ => true,
    }
}

fn describe(vs: &[&ValueInfo]) -> String {
    let v: Vec<String> = vs
        .iter()
        .map(|v| format!("{} {}", v.name, v.shape_string()))
        .collect();
    format!("[{}]", v.join(", "))
}

/// Checks that `quantized` is a quantization of `float`; see the
/// [module docs](self). The error says the first difference found.
pub fn check_lineage(float: &Model, quantized: &Model) -> Result<Lineage, LineageError> {
    let (fi, qi) = (feeds(float), feeds(quantized));
    let mut names_f: Vec<&str> = fi.iter().map(|v| v.name.as_str()).collect();
    let mut names_q: Vec<&str> = qi.iter().map(|v| v.name.as_str()).collect();
    names_f.sort_unstable();
    names_q.sort_unstable();
    if names_f != names_q {
        return Err(LineageError::Inputs(format!(
            "the model has {}, the artifact {}",
            describe(&fi),
            describe(&qi)
        )));
    }
    for f in &fi {
        let q = qi.iter().find(|q| q.name == f.name).expect("same names");
        if f.dtype != q.dtype || !shapes_agree(f, q) {
            return Err(LineageError::Inputs(format!(
                "input `{}` is {} {} in the model, {} {} in the artifact",
                f.name,
                f.dtype.map_or("?".into(), |d| d.to_string()),
                f.shape_string(),
                q.dtype.map_or("?".into(), |d| d.to_string()),
                q.shape_string()
            )));
        }
    }
    let (fo, qo) = (&float.graph.outputs, &quantized.graph.outputs);
    let same_outputs = fo.len() == qo.len()
        && fo
            .iter()
            .zip(qo)
            .all(|(a, b)| a.name == b.name && shapes_agree(a, b));
    if !same_outputs {
        let refs = |v: &[ValueInfo]| describe(&v.iter().collect::<Vec<_>>());
        return Err(LineageError::Outputs(format!(
            "the model has {}, the artifact {}",
            refs(fo),
            refs(qo)
        )));
    }
    let count = |layers: Vec<Layer>| {
        let mut m: BTreeMap<Layer, usize> = BTreeMap::new();
        for l in layers {
            *m.entry(l).or_default() += 1;
        }
        m
    };
    let (lf, lq) = (gemm_layers(float), gemm_layers(quantized));
    let n = lf.len();
    let (cf, cq) = (count(lf), count(lq));
    if cf != cq {
        let diff: Vec<String> = cf
            .keys()
            .chain(cq.keys())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .filter_map(|l| {
                let (a, b) = (
                    cf.get(l).copied().unwrap_or(0),
                    cq.get(l).copied().unwrap_or(0),
                );
                (a != b).then(|| format!("{l}: {a} in the model, {b} in the artifact"))
            })
            .take(3)
            .collect();
        return Err(LineageError::Layers(format!(
            "{} GEMM-class layers in the model, {} in the artifact; {}",
            n,
            cq.values().sum::<usize>(),
            diff.join("; ")
        )));
    }
    Ok(Lineage { layers: n })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_core::{DType, Tensor};
    use qport_onnx::graph::ModelBuilder;
    use qport_onnx::Attribute;

    fn float(k: usize) -> Model {
        ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 4])
            .initializer("w", Tensor::zeros(DType::F32, vec![4, k]).unwrap())
            .op("MatMul", ["x", "w"], ["y"])
            .op("Relu", ["y"], ["z"])
            .output("z", DType::F32, &[1, k])
            .build()
    }

    /// `float(k)` in QDQ form, the MatMul written as a Gemm with `transB`
    /// and the Relu folded away.
    fn qdq(k: usize) -> Model {
        let n = |op: &str, i: &[&str], o: &str| Node::new(format!("{op}_{o}"), op, i, [o]);
        ModelBuilder::new(13)
            .input("x", DType::F32, &[1, 4])
            .initializer("wq", Tensor::zeros(DType::I8, vec![k, 4]).unwrap())
            .initializer("s", Tensor::scalar(0.1f32))
            .node(n("QuantizeLinear", &["x", "s"], "xq"))
            .node(n("DequantizeLinear", &["xq", "s"], "xd"))
            .node(n("DequantizeLinear", &["wq", "s"], "wd"))
            .node(n("Gemm", &["xd", "wd"], "z").with_attr("transB", Attribute::Int(1)))
            .output("z", DType::F32, &[1, k])
            .build()
    }

    #[test]
    fn a_quantization_matches_and_an_unrelated_model_does_not() {
        assert_eq!(check_lineage(&float(3), &qdq(3)).unwrap().layers, 1);
        assert_eq!(
            gemm_layers(&qdq(3)),
            [Layer {
                class: "MatMul/Gemm",
                weight: Some(vec![4, 3])
            }]
        );
        let e = check_lineage(&float(3), &qdq(5)).unwrap_err();
        assert!(matches!(e, LineageError::Outputs(_)), "{e}");
        let mut other = qdq(3);
        other.graph.initializers.insert(
            "wq".into(),
            Tensor::zeros(DType::I8, vec![3, 2, 2]).unwrap(),
        );
        let e = check_lineage(&float(3), &other).unwrap_err().to_string();
        assert!(
            e.contains("MatMul/Gemm [4, 3]: 1 in the model, 0 in the artifact"),
            "{e}"
        );
        let mut renamed = qdq(3);
        renamed.graph.inputs[0].name = "images".into();
        let e = check_lineage(&float(3), &renamed).unwrap_err().to_string();
        assert!(e.contains("x [1,4]") && e.contains("images [1,4]"), "{e}");
    }
}
