//! ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
//! ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare.
//!
//! `axes` is an attribute before opset 13 (ReduceSum) or 18 (the others)
//! and an optional int64 input from then on. Float sums accumulate in
//! `f64`; integer sums and products wrap like the input type. Reducing an
//! empty set gives the operation's identity (0, 1, the type's lowest or
//! highest value, or -inf for the log reductions).

use super::{grouped, match_num, RNum};
use crate::error::{OpError, OpResult};
use crate::ops::elementwise::real::lane_sum;
use crate::ops::{input, opt_input, BuildCtx, Op, Registry};
use qport_core::shape::normalize_axis;
use qport_core::{DType, Tensor};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

impl Kind {
    fn accepts(self, dt: DType) -> bool {
        match self {
            Kind::Max | Kind::Min => dt != DType::Str,
            _ => dt != DType::Str && dt != DType::Bool,
        }
    }
}

fn isum<T: RNum>(g: &[T], f: impl Fn(i128) -> i128) -> T {
    T::from_i(g.iter().fold(0i128, |a, &v| a.wrapping_add(f(v.to_i()))))
}

fn fsum<T: RNum>(g: &[T], f: impl Fn(f64) -> f64) -> f64 {
    lane_sum(g, |v| f(v.to_f()))
}

/// Reduces one group.
fn reduce_group<T: RNum>(k: Kind, g: &[T]) -> T {
    match k {
        // NaN propagates.
        Kind::Max => g
            .iter()
            .fold(T::LOW, |m, &v| if m.is_nan() || v <= m { m } else { v }),
        Kind::Min => g
            .iter()
            .fold(T::HIGH, |m, &v| if m.is_nan() || v >= m { m } else { v }),
        Kind::Sum if T::IS_INT => isum(g, |v| v),
        Kind::Sum => T::from_f(fsum(g, |v| v)),
        Kind::SumSquare if T::IS_INT => isum(g, |v| v.wrapping_mul(v)),
        Kind::SumSquare => T::from_f(fsum(g, |v| v * v)),
        Kind::L1 if T::IS_INT => isum(g, |v| v.wrapping_abs()),
        Kind::L1 => T::from_f(fsum(g, f64::abs)),
        Kind::Prod if T::IS_INT => {
            T::from_i(g.iter().fold(1i128, |a, &v| a.wrapping_mul(v.to_i())))
        }
        Kind::Prod => T::from_f(g.iter().map(|&v| v.to_f()).product()),
        Kind::Mean => T::from_f(fsum(g, |v| v) / g.len() as f64),
        Kind::L2 => T::from_f(fsum(g, |v| v * v).sqrt()),
        Kind::LogSum => T::from_f(fsum(g, |v| v).ln()),
        Kind::LogSumExp => {
            let m = g.iter().map(|v| v.to_f()).fold(f64::NEG_INFINITY, f64::max);
            if m.is_infinite() {
                // Empty, all -inf, or some +inf: the sum is dominated by m.
                return T::from_f(if g.iter().any(|v| v.is_nan()) {
                    f64::NAN
                } else {
                    m
                });
            }
            T::from_f(m + fsum(g, |v| (v - m).exp()).ln())
        }
    }
}

fn reduce_typed<T: RNum>(
    k: Kind,
    x: &[T],
    shape: &[usize],
    mask: &[bool],
    out_shape: Vec<usize>,
) -> OpResult<Tensor> {
    let (g, glen) = grouped(x, shape, mask);
    // Checked: with an empty reduced axis the output can be far larger
    // than the (empty) input.
    let n_out = qport_core::shape::checked_numel(&out_shape)?;
    let out: Vec<T> = if glen == 0 {
        vec![reduce_group::<T>(k, &[]); n_out]
    } else {
        g.chunks_exact(glen).map(|c| reduce_group(k, c)).collect()
    };
    Ok(Tensor::from_vec(out_shape, out)?)
}

/// Where a reduction's axes come from.
#[derive(Debug, Clone)]
enum Axes {
    Attr(Option<Vec<i64>>),
    Input,
}

struct Reduce {
    kind: Kind,
    axes: Axes,
    keepdims: bool,
    noop_with_empty_axes: bool,
}

impl Reduce {
    fn axes(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<i64>> {
        Ok(match &self.axes {
            Axes::Attr(a) => a.clone().unwrap_or_default(),
            Axes::Input => match opt_input(inputs, 1) {
                None => vec![],
                Some(t) if t.dtype() == DType::I64 || t.dtype() == DType::I32 => {
                    if t.rank() > 1 {
                        return Err(OpError::invalid(format!(
                            "input 1 (axes) must be 1-D, got shape {:?}",
                            t.shape()
                        )));
                    }
                    t.to_i64_vec()?
                }
                Some(t) => {
                    return Err(OpError::invalid(format!(
                        "input 1 (axes) must be int64, got {}",
                        t.dtype()
                    )))
                }
            },
        })
    }
}

impl Op for Reduce {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let dt = x.dtype();
        if !self.kind.accepts(dt) {
            return Err(OpError::dtype("input", dt));
        }
        let axes = self.axes(inputs)?;
        let shape = x.shape();
        let r = shape.len();
        if axes.is_empty() && self.noop_with_empty_axes {
            return Ok(vec![x.clone()]);
        }
        let mut mask = vec![axes.is_empty(); r];
        for &a in &axes {
            let i = normalize_axis(a, r).ok_or_else(|| {
                OpError::invalid(format!("axis {a} is out of range for input of rank {r}"))
            })?;
            if mask[i] {
                return Err(OpError::invalid(format!(
                    "axis {a} is repeated in axes {axes:?}"
                )));
            }
            mask[i] = true;
        }
        let out_shape: Vec<usize> = shape
            .iter()
            .zip(&mask)
            .filter_map(|(&d, &m)| match (m, self.keepdims) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect();
        let k = self.kind;
        let out = match_num!(x.data(), v => reduce_typed(k, v, shape, &mask, out_shape)?;
            return Err(OpError::dtype("input", dt)));
        Ok(vec![out])
    }
}

fn build(ctx: &BuildCtx, kind: Kind, axes_input_since: i64) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    let attr = n.attr_ints("axes")?;
    let axes = if ctx.opset < axes_input_since || attr.is_some() {
        Axes::Attr(attr)
    } else {
        Axes::Input
    };
    Ok(Box::new(Reduce {
        kind,
        axes,
        keepdims: n.attr_int("keepdims", 1)? != 0,
        noop_with_empty_axes: n.attr_int("noop_with_empty_axes", 0)? != 0,
    }))
}

/// Registers the Reduce* operators.
pub(crate) fn register(r: &mut Registry) {
    r.register("ReduceSum", |c| build(c, Kind::Sum, 13));
    r.register("ReduceMean", |c| build(c, Kind::Mean, 18));
    r.register("ReduceMax", |c| build(c, Kind::Max, 18));
    r.register("ReduceMin", |c| build(c, Kind::Min, 18));
    r.register("ReduceProd", |c| build(c, Kind::Prod, 18));
    r.register("ReduceL1", |c| build(c, Kind::L1, 18));
    r.register("ReduceL2", |c| build(c, Kind::L2, 18));
    r.register("ReduceLogSum", |c| build(c, Kind::LogSum, 18));
    r.register("ReduceLogSumExp", |c| build(c, Kind::LogSumExp, 18));
    r.register("ReduceSumSquare", |c| build(c, Kind::SumSquare, 18));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: Kind, x: &Tensor, axes: Option<Vec<i64>>, keepdims: bool, noop: bool) -> Tensor {
        let op = Reduce {
            kind,
            axes: Axes::Attr(axes),
            keepdims,
            noop_with_empty_axes: noop,
        };
        op.eval(&[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn axes_keepdims_and_noop() {
        let x = Tensor::from_vec(vec![2, 3], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let y = run(Kind::Sum, &x, Some(vec![0]), false, false);
        assert_eq!(y.shape(), &[3]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[5.0, 7.0, 9.0]);
        let y = run(Kind::Mean, &x, None, true, false);
        assert_eq!(y.shape(), &[1, 1]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[3.5]);
        let y = run(Kind::Max, &x, None, true, true);
        assert_eq!(y, x);
        let y = run(Kind::LogSumExp, &x, Some(vec![-1]), true, false);
        assert!((y.as_slice::<f32>().unwrap()[0] - 3.407_606).abs() < 1e-5);
    }

    #[test]
    fn empty_sets_give_identities_and_ints_wrap() {
        let x = Tensor::zeros(DType::F32, vec![2, 0, 4]).unwrap();
        assert_eq!(
            run(Kind::Sum, &x, Some(vec![1]), true, false)
                .as_slice::<f32>()
                .unwrap(),
            &[0.0; 8]
        );
        assert_eq!(
            run(Kind::Prod, &x, Some(vec![1]), false, false)
                .as_slice::<f32>()
                .unwrap(),
            &[1.0; 8]
        );
        let y = run(Kind::LogSumExp, &x, Some(vec![1]), false, false);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[f32::NEG_INFINITY; 8]);
        let y = run(Kind::Sum, &x, Some(vec![0]), false, false);
        assert_eq!(y.shape(), &[0, 4]);
        let x = Tensor::from_vec(vec![2], vec![i8::MAX, 1]).unwrap();
        assert_eq!(
            run(Kind::Sum, &x, None, false, false)
                .as_slice::<i8>()
                .unwrap(),
            &[i8::MIN]
        );
    }
}
