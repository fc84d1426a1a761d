//! Pad: constant, reflect, edge and wrap modes; pads as an attribute before
//! opset 11 and as an input after, with the `axes` input from opset 18.

use super::{check_shape, fill_map_indices, gather_or_fill, int_list, norm_axes, FILL};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::Tensor;

pub(super) fn register(r: &mut Registry) {
    r.register("Pad", build_pad);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

/// Source coordinate along one axis (or [`FILL`]) for output coordinate `o`.
fn source(mode: Mode, j: i64, d: i64) -> i64 {
    match mode {
        Mode::Constant => {
            if (0..d).contains(&j) {
                j
            } else {
                FILL
            }
        }
        Mode::Edge => j.clamp(0, d - 1),
        Mode::Wrap => j.rem_euclid(d),
        Mode::Reflect => {
            if d == 1 {
                0
            } else {
                let p = 2 * (d - 1);
                let m = j.rem_euclid(p);
                if m >= d {
                    p - m
                } else {
                    m
                }
            }
        }
    }
}

/// Output shape and flat source index (negative: fill) of each output element.
fn pad_plan(shape: &[usize], pads: &[(i64, i64)], mode: Mode) -> OpResult<(Vec<usize>, Vec<i64>)> {
    let st = qport_core::shape::strides(shape);
    let mut out_shape = Vec::with_capacity(shape.len());
    let mut contrib: Vec<Vec<i64>> = Vec::with_capacity(shape.len());
    for (a, (&d, &(b, e))) in shape.iter().zip(pads).enumerate() {
        let d = d as i64;
        let o = d
            .checked_add(b)
            .and_then(|v| v.checked_add(e))
            .filter(|&v| v >= 0)
            .ok_or_else(|| {
                OpError::invalid(format!(
                    "pads ({b}, {e}) on axis {a} of size {d} give a negative or overflowing size"
                ))
            })?;
        if o > 0 && d == 0 && mode != Mode::Constant {
            return Err(OpError::invalid(format!(
                "cannot pad the empty axis {a} in {mode:?} mode"
            )));
        }
        out_shape.push(usize::try_from(o).map_err(|_| OpError::invalid("pads too large"))?);
        check_shape(&out_shape)?;
        contrib.push(
            (0..o)
                .map(|i| {
                    let s = source(mode, i - b, d);
                    if s == FILL {
                        FILL
                    } else {
                        s * st[a] as i64
                    }
                })
                .collect(),
        );
    }
    check_shape(&out_shape)?;
    let idx = fill_map_indices(&out_shape, &contrib);
    Ok((out_shape, idx))
}

/// Pads `x` by `pads` (`[begin..., end...]` over `axes`), filling with `value`
/// (a one-element tensor, cast to `x`'s dtype) in constant mode.
fn pad(
    x: &Tensor,
    pads: &[i64],
    axes: Option<&[i64]>,
    mode: Mode,
    value: &Tensor,
) -> OpResult<Tensor> {
    let r = x.rank();
    let axes = match axes {
        Some(a) => norm_axes(a, r, "axis")?,
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() {
        return Err(OpError::invalid(format!(
            "pads has {} entries, expected {} (2 per padded axis)",
            pads.len(),
            2 * axes.len()
        )));
    }
    let mut per_axis = vec![(0i64, 0i64); r];
    for (k, &a) in axes.iter().enumerate() {
        per_axis[a] = (pads[k], pads[axes.len() + k]);
    }
    let (shape, idx) = pad_plan(x.shape(), &per_axis, mode)?;
    gather_or_fill(x, shape, &idx, value)
}

fn build_pad(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let mode = match ctx.node.attr_string("mode", "constant")?.as_str() {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "edge" => Mode::Edge,
        "wrap" => Mode::Wrap,
        m => return Err(OpError::invalid(format!("unknown mode '{m}'"))),
    };
    if ctx.opset < 11 {
        let name = if ctx.opset < 2 { "paddings" } else { "pads" };
        let pads = ctx
            .node
            .attr_ints(name)?
            .ok_or_else(|| OpError::invalid(format!("attribute '{name}' is required")))?;
        let value = Tensor::scalar(ctx.node.attr_float("value", 0.0)?);
        return Ok(fn_op(move |inputs| {
            Ok(vec![pad(input(inputs, 0)?, &pads, None, mode, &value)?])
        }));
    }
    let zero = Tensor::scalar(0.0f32);
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let pads = int_list(input(inputs, 1)?, "input 1 (pads)")?;
        let value = match opt_input(inputs, 2) {
            Some(v) if !v.is_empty() => {
                if v.len() != 1 {
                    return Err(OpError::invalid(format!(
                        "constant_value must be a scalar, got shape {:?}",
                        v.shape()
                    )));
                }
                v
            }
            _ => &zero,
        };
        let axes = opt_input(inputs, 3)
            .map(|t| int_list(t, "input 3 (axes)"))
            .transpose()?;
        Ok(vec![pad(x, &pads, axes.as_deref(), mode, value)?])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(mode: Mode, pads: &[i64]) -> Vec<i32> {
        let x = Tensor::from_vec(vec![3], vec![1, 2, 3i32]).unwrap();
        pad(&x, pads, None, mode, &Tensor::scalar(9.0f32))
            .unwrap()
            .into_vec::<i32>()
            .unwrap()
    }

    #[test]
    fn modes() {
        assert_eq!(run(Mode::Constant, &[2, 1]), vec![9, 9, 1, 2, 3, 9]);
        assert_eq!(run(Mode::Edge, &[2, 1]), vec![1, 1, 1, 2, 3, 3]);
        assert_eq!(run(Mode::Wrap, &[2, 1]), vec![2, 3, 1, 2, 3, 1]);
        assert_eq!(run(Mode::Reflect, &[2, 1]), vec![3, 2, 1, 2, 3, 2]);
        assert_eq!(run(Mode::Reflect, &[5, 0]), vec![2, 1, 2, 3, 2, 1, 2, 3]);
        assert_eq!(run(Mode::Constant, &[-1, -1]), vec![2]);
        let x = Tensor::from_vec(vec![3], vec![1, 2, 3i32]).unwrap();
        assert!(pad(&x, &[-5, 0], None, Mode::Constant, &Tensor::scalar(0.0f32)).is_err());
        assert!(pad(&x, &[1], None, Mode::Constant, &Tensor::scalar(0.0f32)).is_err());
        assert!(pad(&x, &[1 << 40, 0], None, Mode::Edge, &Tensor::scalar(0.0f32)).is_err());
    }
}
