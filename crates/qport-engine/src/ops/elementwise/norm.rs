//! LayerNormalization (opset 17): normalises over the dimensions from
//! `axis` on, with optional Mean and InvStdDev outputs. Statistics are
//! accumulated in `f64` (two passes).

use super::real::{lane_sum, Real};
use crate::error::{OpError, OpResult};
use crate::ops::{input, opt_input, BuildCtx, Op, Registry};
use qport_core::shape::{broadcast_index_map, broadcast_shapes, normalize_axis};
use qport_core::{DType, Element, Tensor};

struct LayerNorm {
    axis: i64,
    epsilon: f64,
}

/// `p` (shape `ps`) expanded to the normalised shape `ns`, or `None` when it
/// already has that many elements in order.
fn expand<T: Copy>(p: &[T], ps: &[usize], ns: &[usize], what: &str) -> OpResult<Option<Vec<T>>> {
    let n: usize = ns.iter().product();
    if p.len() == n && broadcast_shapes(ns, ps).ok().as_deref() == Some(ns) {
        return Ok(None);
    }
    match broadcast_shapes(ns, ps) {
        Ok(s) if s == ns => Ok(Some(
            broadcast_index_map(ps, ns)
                .into_iter()
                .map(|i| p[i])
                .collect(),
        )),
        _ => Err(OpError::invalid(format!(
            "{what} of shape {ps:?} does not broadcast to the normalized shape {ns:?}"
        ))),
    }
}

impl LayerNorm {
    fn typed<T: Real + Element>(
        &self,
        x: &Tensor,
        scale: &Tensor,
        bias: Option<&Tensor>,
    ) -> OpResult<Vec<Tensor>> {
        let shape = x.shape();
        let ax = normalize_axis(self.axis, shape.len()).ok_or_else(|| {
            OpError::invalid(format!(
                "attribute axis={} is out of range for X of rank {}",
                self.axis,
                shape.len()
            ))
        })?;
        let ns = &shape[ax..];
        let cols: usize = ns.iter().product();
        let rows: usize = shape[..ax].iter().product();
        let xv = x.as_slice::<T>()?;
        let check = |t: &Tensor, what: &str| -> OpResult<()> {
            if t.dtype() != x.dtype() {
                return Err(OpError::invalid(format!(
                    "{what} has dtype {}, expected {} like X",
                    t.dtype(),
                    x.dtype()
                )));
            }
            Ok(())
        };
        check(scale, "input 1 (Scale)")?;
        let sv = scale.as_slice::<T>()?;
        let sx = expand(sv, scale.shape(), ns, "input 1 (Scale)")?;
        let sv = sx.as_deref().unwrap_or(sv);
        let bv = match bias {
            Some(b) => {
                check(b, "input 2 (B)")?;
                let bv = b.as_slice::<T>()?;
                Some(match expand(bv, b.shape(), ns, "input 2 (B)")? {
                    Some(v) => v,
                    None => bv.to_vec(),
                })
            }
            None => None,
        };
        let mut stat_shape = shape[..ax].to_vec();
        stat_shape.resize(shape.len(), 1);
        // Checked: with an empty normalized shape there are more statistics
        // than input elements.
        qport_core::shape::checked_numel(&stat_shape)?;
        let mut y = vec![T::ZERO; xv.len()];
        let mut means = Vec::with_capacity(rows);
        let mut invs = Vec::with_capacity(rows);
        if cols > 0 {
            for (xr, yr) in xv.chunks_exact(cols).zip(y.chunks_exact_mut(cols)) {
                let mean = lane_sum(xr, T::to_f64) / cols as f64;
                let var = lane_sum(xr, |v| {
                    let d = v.to_f64() - mean;
                    d * d
                }) / cols as f64;
                let inv = 1.0 / (var + self.epsilon).sqrt();
                let (m, k) = (T::c(mean), T::c(inv));
                match &bv {
                    Some(b) => {
                        for (((yi, &xi), &s), &bb) in yr.iter_mut().zip(xr).zip(sv).zip(b) {
                            *yi = (xi - m) * k * s + bb;
                        }
                    }
                    None => {
                        for ((yi, &xi), &s) in yr.iter_mut().zip(xr).zip(sv) {
                            *yi = (xi - m) * k * s;
                        }
                    }
                }
                means.push(mean);
                invs.push(inv);
            }
        }
        let stat = |v: Vec<f64>| -> OpResult<Tensor> {
            let t = Tensor::from_vec(stat_shape.clone(), v)?;
            // Mean and InvStdDev are float32 unless X is float64.
            Ok(if x.dtype() == DType::F64 {
                t
            } else {
                t.cast(DType::F32)?
            })
        };
        if rows > 0 && cols == 0 {
            means.resize(rows, f64::NAN);
            invs.resize(rows, f64::NAN);
        }
        Ok(vec![
            Tensor::from_vec(shape.to_vec(), y)?,
            stat(means)?,
            stat(invs)?,
        ])
    }
}

impl Op for LayerNorm {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let bias = opt_input(inputs, 2);
        match x.dtype() {
            DType::F32 => self.typed::<f32>(x, scale, bias),
            DType::F64 => self.typed::<f64>(x, scale, bias),
            DType::F16 | DType::BF16 => {
                let f = |t: &Tensor| t.cast(DType::F32);
                let b = bias.map(f).transpose()?;
                let mut out = self.typed::<f32>(&f(x)?, &f(scale)?, b.as_ref())?;
                out[0] = out[0].cast(x.dtype())?;
                Ok(out)
            }
            dt => Err(OpError::dtype("input X", dt)),
        }
    }
}

fn build(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(LayerNorm {
        axis: ctx.node.attr_int("axis", -1)?,
        epsilon: ctx.node.attr_float("epsilon", 1e-5)? as f64,
    }))
}

/// Registers LayerNormalization.
pub(crate) fn register(r: &mut Registry) {
    r.register("LayerNormalization", build);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_trailing_dims_with_broadcast_scale() {
        let op = LayerNorm {
            axis: 1,
            epsilon: 0.0,
        };
        let x = Tensor::from_vec(vec![2, 2], vec![1.0f32, 3.0, -2.0, 2.0]).unwrap();
        let s = Tensor::from_vec(vec![1], vec![2.0f32]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0.0f32, 1.0]).unwrap();
        let out = op.eval(&[Some(&x), Some(&s), Some(&b)]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[-2.0, 3.0, -2.0, 3.0]);
        assert_eq!(out[1].shape(), &[2, 1]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0, 0.0]);
        assert_eq!(out[2].as_slice::<f32>().unwrap(), &[1.0, 0.5]);
        let bad = Tensor::from_vec(vec![3], vec![1.0f32; 3]).unwrap();
        assert!(op.eval(&[Some(&x), Some(&bad)]).is_err());
    }
}
