//! Static type and shape information declared in a model.
//!
//! This module only collects what the file states: the types of graph
//! inputs and outputs, `value_info` annotations, and the exact dtype and
//! shape of every initializer (including folded `Constant`s). Op-level
//! shape inference is [`crate::shapes`]. Symbolic dimensions
//! ([`Dim::Param`]) stay symbolic here.

use crate::model::{Dim, Graph, Model, ValueInfo};
use std::collections::BTreeMap;

/// Declared types of the main graph's values, by name: `value_info`, then
/// graph inputs and outputs, then initializers (concrete dtype and shape).
///
/// When a value is declared more than once, the declarations are merged
/// with [`merge`]: a known dtype or dimension wins over an unknown one.
pub fn value_types(model: &Model) -> BTreeMap<String, ValueInfo> {
    graph_value_types(&model.graph)
}

/// Like [`value_types`] for one graph (e.g. a subgraph of `If`/`Loop`),
/// without values of enclosing graphs.
pub fn graph_value_types(graph: &Graph) -> BTreeMap<String, ValueInfo> {
    let mut out: BTreeMap<String, ValueInfo> = BTreeMap::new();
    let declared = graph
        .value_info
        .iter()
        .chain(&graph.inputs)
        .chain(&graph.outputs);
    let constants = graph
        .initializers
        .iter()
        .map(|(name, t)| ValueInfo::known(name, t.dtype(), t.shape()));
    for vi in declared.cloned().chain(constants) {
        match out.get_mut(&vi.name) {
            Some(prev) => *prev = merge(prev, &vi),
            None => {
                out.insert(vi.name.clone(), vi);
            }
        }
    }
    out
}

/// Combines two declarations of the same value, keeping the more specific
/// information: a dtype over none, a shape over none, and per dimension
/// `Known` over `Param` over `Unknown`. On a conflict (different dtypes,
/// ranks or known sizes) `b` wins, since callers pass the more trusted
/// declaration (e.g. an initializer's actual shape) second.
pub fn merge(a: &ValueInfo, b: &ValueInfo) -> ValueInfo {
    let dtype = b.dtype.or(a.dtype);
    let shape = match (&a.shape, &b.shape) {
        (None, s) | (s, None) => s.clone(),
        (Some(x), Some(y)) if x.len() != y.len() => Some(y.clone()),
        (Some(x), Some(y)) => Some(x.iter().zip(y).map(|(p, q)| merge_dim(p, q)).collect()),
    };
    ValueInfo {
        name: b.name.clone(),
        dtype,
        shape,
    }
}

fn merge_dim(a: &Dim, b: &Dim) -> Dim {
    match (a, b) {
        (_, Dim::Known(k)) => Dim::Known(*k),
        (Dim::Known(k), _) => Dim::Known(*k),
        (_, Dim::Param(p)) => Dim::Param(p.clone()),
        (Dim::Param(p), Dim::Unknown) => Dim::Param(p.clone()),
        (Dim::Unknown, Dim::Unknown) => Dim::Unknown,
    }
}

/// The concrete shape of a declaration, when every dimension is known.
pub fn concrete_shape(v: &ValueInfo) -> Option<Vec<usize>> {
    v.shape
        .as_ref()?
        .iter()
        .map(|d| match d {
            Dim::Known(k) => usize::try_from(*k).ok(),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_core::{DType, Tensor};

    fn vi(name: &str, dtype: Option<DType>, dims: Option<Vec<Dim>>) -> ValueInfo {
        ValueInfo {
            name: name.into(),
            dtype,
            shape: dims,
        }
    }

    #[test]
    fn collects_and_merges() {
        let mut g = Graph {
            inputs: vec![vi(
                "x",
                Some(DType::F32),
                Some(vec![Dim::Param("N".into()), Dim::Known(3)]),
            )],
            outputs: vec![vi("y", Some(DType::F32), None)],
            value_info: vec![
                vi("y", None, Some(vec![Dim::Unknown, Dim::Known(4)])),
                vi("x", None, Some(vec![Dim::Unknown, Dim::Unknown])),
            ],
            ..Default::default()
        };
        g.initializers
            .insert("w".into(), Tensor::zeros(DType::I8, vec![4, 3]).unwrap());
        let t = graph_value_types(&g);
        assert_eq!(t.len(), 3);
        assert_eq!(t["x"].shape_string(), "[N,3]");
        assert_eq!(t["x"].dtype, Some(DType::F32));
        assert_eq!(t["y"].shape_string(), "[?,4]");
        assert_eq!(t["y"].dtype, Some(DType::F32));
        assert_eq!(t["w"], ValueInfo::known("w", DType::I8, &[4, 3]));
        assert_eq!(concrete_shape(&t["w"]), Some(vec![4, 3]));
        assert_eq!(concrete_shape(&t["x"]), None);
    }

    #[test]
    fn later_declaration_wins_conflicts() {
        let a = vi("v", Some(DType::F32), Some(vec![Dim::Known(2)]));
        let b = vi(
            "v",
            Some(DType::F16),
            Some(vec![Dim::Known(5), Dim::Known(1)]),
        );
        assert_eq!(merge(&a, &b), b);
        let c = vi("v", None, Some(vec![Dim::Param("n".into())]));
        assert_eq!(merge(&a, &c).shape, Some(vec![Dim::Known(2)]));
        assert_eq!(merge(&c, &a).dtype, Some(DType::F32));
    }
}
