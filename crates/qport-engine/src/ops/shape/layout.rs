//! Layout operators: Flatten, Reshape, Transpose, Squeeze, Unsqueeze,
//! Expand, Tile, DepthToSpace and SpaceToDepth.

use super::{axis_map_indices, check_shape, dim, gather_into, int_list, norm_axes, transpose};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::Tensor;

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("Flatten", build_flatten),
            ("Reshape", build_reshape),
            ("Transpose", build_transpose),
            ("Squeeze", build_squeeze),
            ("Unsqueeze", build_unsqueeze),
            ("Expand", build_expand),
            ("Tile", build_tile),
            ("DepthToSpace", build_depth_to_space),
            ("SpaceToDepth", build_space_to_depth),
        ],
    );
}

fn reshaped(t: &Tensor, shape: Vec<usize>) -> OpResult<Tensor> {
    Ok(Tensor::new(shape, t.data().clone())?)
}

fn build_flatten(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(Box::new(Flatten {
        axis: ctx.node.attr_int("axis", 1)?,
    }))
}

/// Flatten: `[d0 … d(axis-1), d(axis) …]` to `[outer, inner]`.
struct Flatten {
    axis: i64,
}

impl Flatten {
    /// `[outer, inner]` for `x`.
    fn shape(&self, x: &Tensor) -> OpResult<[usize; 2]> {
        let (axis, r) = (self.axis, x.rank());
        let a = if axis < 0 { axis + r as i64 } else { axis };
        if !(0..=r as i64).contains(&a) {
            return Err(OpError::invalid(format!(
                "axis {axis} is out of range for rank {r} (expected [-{r}, {r}])"
            )));
        }
        let a = a as usize;
        Ok([
            x.shape()[..a].iter().product(),
            x.shape()[a..].iter().product(),
        ])
    }
}

impl Op for Flatten {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        Ok(vec![reshaped(x, self.shape(x)?.to_vec())?])
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        copy_into(x, &self.shape(x)?, outputs)
    }
}

/// Output 0 made a copy of `x`'s elements with `shape`, in the storage it
/// held ([`crate::ops::reuse_output`]).
pub(crate) fn copy_into(
    x: &Tensor,
    shape: &[usize],
    outputs: &mut [Option<Tensor>],
) -> OpResult<()> {
    fn copy<T: qport_core::Element>(
        v: &[T],
        shape: &[usize],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let y = crate::ops::reuse_output::<T>(outputs, 0, shape)?;
        if y.len() != v.len() {
            return Err(OpError::invalid(format!(
                "cannot give {} elements the shape {shape:?}",
                v.len()
            )));
        }
        y.clone_from_slice(v);
        Ok(())
    }
    qport_core::match_data!(x.data(), v => copy(v.as_slice(), shape, outputs))
}

/// Resolves a Reshape target against the input shape (0 copies a dimension
/// unless `allowzero`, one -1 is inferred).
pub(crate) fn reshape_target(
    in_shape: &[usize],
    target: &[i64],
    allowzero: bool,
) -> OpResult<Vec<usize>> {
    let numel: usize = in_shape.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 => {
                if infer.is_some() {
                    return Err(OpError::invalid(format!(
                        "shape {target:?} has more than one -1"
                    )));
                }
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => {
                let v = *in_shape.get(i).ok_or_else(|| {
                    OpError::invalid(format!(
                        "shape {target:?}: 0 at position {i} copies a dimension the input (shape {in_shape:?}) does not have"
                    ))
                })?;
                out.push(v);
            }
            d if d < 0 => {
                return Err(OpError::invalid(format!(
                    "shape {target:?} has invalid dimension {d}"
                )))
            }
            d => out.push(dim(d, "shape value")?),
        }
    }
    if let Some(i) = infer {
        if allowzero && target.contains(&0) {
            return Err(OpError::invalid(format!(
                "shape {target:?} has both 0 and -1 with allowzero=1"
            )));
        }
        let known = out
            .iter()
            .try_fold(1u128, |a, &d| a.checked_mul(d as u128))
            .unwrap_or(0);
        if (numel as u128).checked_rem(known) != Some(0) {
            return Err(OpError::invalid(format!(
                "cannot reshape {in_shape:?} ({numel} elements) to {target:?}"
            )));
        }
        out[i] = (numel as u128 / known) as usize;
    }
    let n = out
        .iter()
        .try_fold(1u128, |a, &d| a.checked_mul(d as u128))
        .unwrap_or(u128::MAX);
    if n != numel as u128 {
        return Err(OpError::invalid(format!(
            "cannot reshape {in_shape:?} ({numel} elements) to {target:?}"
        )));
    }
    Ok(out)
}

fn build_reshape(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let allowzero = ctx.node.attr_int("allowzero", 0)? != 0;
    if ctx.opset < 5 {
        let shape = ctx
            .node
            .attr_ints("shape")?
            .ok_or_else(|| OpError::invalid("attribute 'shape' is required before opset 5"))?;
        return Ok(fn_op(move |inputs| {
            let x = input(inputs, 0)?;
            let s = reshape_target(x.shape(), &shape, false)?;
            Ok(vec![reshaped(x, s)?])
        }));
    }
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let target = int_list(input(inputs, 1)?, "input 1 (shape)")?;
        let s = reshape_target(x.shape(), &target, allowzero)?;
        Ok(vec![reshaped(x, s)?])
    }))
}

fn build_transpose(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let perm = ctx.node.attr_ints("perm")?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let r = x.rank();
        let p: Vec<usize> = match &perm {
            None => (0..r).rev().collect(),
            Some(p) => {
                if p.len() != r {
                    return Err(OpError::invalid(format!(
                        "perm {p:?} has {} entries for an input of rank {r}",
                        p.len()
                    )));
                }
                norm_axes(p, r, "perm entry")?
            }
        };
        Ok(vec![transpose(x, &p)?])
    }))
}

fn axes_input_or_attr(ctx: &BuildCtx) -> OpResult<AxesSrc> {
    if ctx.opset < 13 {
        Ok(AxesSrc::Attr(ctx.node.attr_ints("axes")?))
    } else {
        Ok(AxesSrc::Input(1))
    }
}

enum AxesSrc {
    Attr(Option<Vec<i64>>),
    Input(usize),
}

impl AxesSrc {
    fn get(&self, inputs: &[Option<&Tensor>]) -> OpResult<Option<Vec<i64>>> {
        match self {
            AxesSrc::Attr(a) => Ok(a.clone()),
            AxesSrc::Input(i) => opt_input(inputs, *i)
                .map(|t| int_list(t, "input 1 (axes)"))
                .transpose(),
        }
    }
}

fn build_squeeze(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let src = axes_input_or_attr(ctx)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let shape = x.shape();
        // An empty axes list squeezes every size-1 axis, as onnxruntime does.
        let axes = match src.get(inputs)?.filter(|a| !a.is_empty()) {
            Some(a) => {
                let a = norm_axes(&a, x.rank(), "axis")?;
                for &ax in &a {
                    if shape[ax] != 1 {
                        return Err(OpError::invalid(format!(
                            "cannot squeeze axis {ax} of shape {shape:?}: its size is not 1"
                        )));
                    }
                }
                a
            }
            None => (0..x.rank()).filter(|&i| shape[i] == 1).collect(),
        };
        let out: Vec<usize> = (0..x.rank())
            .filter(|i| !axes.contains(i))
            .map(|i| shape[i])
            .collect();
        Ok(vec![reshaped(x, out)?])
    }))
}

fn build_unsqueeze(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let src = axes_input_or_attr(ctx)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let axes = src
            .get(inputs)?
            .ok_or_else(|| OpError::invalid("axes are required"))?;
        let r = x.rank() + axes.len();
        let axes = norm_axes(&axes, r, "axis")?;
        let mut rest = x.shape().iter();
        let out: Vec<usize> = (0..r)
            .map(|i| {
                if axes.contains(&i) {
                    1
                } else {
                    *rest.next().unwrap_or(&1)
                }
            })
            .collect();
        Ok(vec![reshaped(x, out)?])
    }))
}

/// Expands `x` to the bidirectional broadcast of its shape and `shape`.
fn expand(x: &Tensor, shape: &[i64]) -> OpResult<Tensor> {
    let target: Vec<usize> = shape
        .iter()
        .map(|&v| dim(v, "shape value"))
        .collect::<OpResult<_>>()?;
    let out = qport_core::shape::broadcast_shapes(x.shape(), &target).map_err(|_| {
        OpError::invalid(format!(
            "input shape {:?} cannot be expanded to {shape:?}",
            x.shape()
        ))
    })?;
    check_shape(&out)?;
    if out == x.shape() {
        return Ok(x.clone());
    }
    let idx = qport_core::shape::broadcast_index_map(x.shape(), &out);
    gather_into(x, out, &idx)
}

fn build_expand(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        let s = int_list(input(inputs, 1)?, "input 1 (shape)")?;
        Ok(vec![expand(x, &s)?])
    }))
}

fn build_tile(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        let reps = int_list(input(inputs, 1)?, "input 1 (repeats)")?;
        if reps.len() != x.rank() {
            return Err(OpError::invalid(format!(
                "repeats has {} entries for an input of rank {}",
                reps.len(),
                x.rank()
            )));
        }
        let st = qport_core::shape::strides(x.shape());
        let mut out = Vec::with_capacity(x.rank());
        for (i, &r) in reps.iter().enumerate() {
            let r = dim(r, "repeats value")?;
            out.push(x.shape()[i].checked_mul(r).ok_or_else(|| {
                OpError::invalid(format!("repeats {reps:?} overflow the output size"))
            })?);
        }
        check_shape(&out)?;
        let contrib: Vec<Vec<usize>> = (0..x.rank())
            .map(|a| (0..out[a]).map(|i| (i % x.shape()[a]) * st[a]).collect())
            .collect();
        let idx = axis_map_indices(&out, &contrib);
        Ok(vec![gather_into(x, out, &idx)?])
    }))
}

fn rank4(x: &Tensor) -> OpResult<[usize; 4]> {
    match *x.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(OpError::invalid(format!(
            "input must have rank 4, got shape {:?}",
            x.shape()
        ))),
    }
}

fn blocksize(ctx: &BuildCtx) -> OpResult<usize> {
    let b = ctx.node.req_int("blocksize")?;
    if b < 1 {
        return Err(OpError::invalid(format!("blocksize must be >= 1, got {b}")));
    }
    Ok(b as usize)
}

fn crd_mode(ctx: &BuildCtx) -> OpResult<bool> {
    match ctx.node.attr_string("mode", "DCR")?.as_str() {
        "DCR" => Ok(false),
        "CRD" => Ok(true),
        m => Err(OpError::invalid(format!("mode '{m}' is not DCR or CRD"))),
    }
}

/// The 6-D view of the `[N, C, H, W]` input, its permutation and the
/// output shape of a block rearrangement, for blocksize `b` and CRD mode.
type BlockPlan = OpResult<(Vec<usize>, [usize; 6], Vec<usize>)>;

/// DepthToSpace and SpaceToDepth: the input viewed as `plan` says,
/// transposed, and reshaped to the output shape.
fn build_block_rearrange(
    ctx: &BuildCtx,
    plan: fn([usize; 4], usize, bool) -> BlockPlan,
) -> OpResult<Box<dyn Op>> {
    let b = blocksize(ctx)?;
    let crd = crd_mode(ctx)?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let (tmp, perm, out) = plan(rank4(x)?, b, crd)?;
        let t = transpose(&reshaped(x, tmp)?, &perm)?;
        Ok(vec![t.reshape(out)?])
    }))
}

fn build_depth_to_space(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    build_block_rearrange(ctx, |[n, c, h, w], b, crd| {
        let bb = b
            .checked_mul(b)
            .filter(|&bb| c == 0 || bb <= c)
            .unwrap_or(0);
        if bb == 0 || c % bb != 0 {
            return Err(OpError::invalid(format!(
                "channels {c} are not divisible by blocksize^2 = {}",
                b.saturating_mul(b)
            )));
        }
        let cc = c / bb;
        let (hb, wb) = h
            .checked_mul(b)
            .zip(w.checked_mul(b))
            .ok_or_else(|| OpError::invalid("output size overflows"))?;
        let (tmp, perm) = if crd {
            (vec![n, cc, b, b, h, w], [0, 1, 4, 2, 5, 3])
        } else {
            (vec![n, b, b, cc, h, w], [0, 3, 4, 1, 5, 2])
        };
        Ok((tmp, perm, vec![n, cc, hb, wb]))
    })
}

fn build_space_to_depth(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    build_block_rearrange(ctx, |[n, c, h, w], b, crd| {
        let cbb = c
            .checked_mul(b)
            .and_then(|v| v.checked_mul(b))
            .ok_or_else(|| OpError::invalid("output size overflows"))?;
        if h % b != 0 || w % b != 0 {
            return Err(OpError::invalid(format!(
                "spatial size {h}x{w} is not divisible by blocksize {b}"
            )));
        }
        let tmp = vec![n, c, h / b, b, w / b, b];
        let perm = if crd {
            [0, 1, 3, 5, 2, 4]
        } else {
            [0, 3, 5, 1, 2, 4]
        };
        Ok((tmp, perm, vec![n, cbb, h / b, w / b]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reshape_zero_and_infer() {
        assert_eq!(
            reshape_target(&[2, 3, 4], &[0, -1], false).unwrap(),
            vec![2, 12]
        );
        assert_eq!(
            reshape_target(&[0, 3, 4], &[3, 4, 0], true).unwrap(),
            vec![3, 4, 0]
        );
        assert!(reshape_target(&[2, 3], &[-1, -1], false).is_err());
        assert!(reshape_target(&[2, 3], &[4, -1], false).is_err());
        assert!(reshape_target(&[2, 3], &[0, 0, 0], false).is_err());
        assert!(reshape_target(&[2, 3], &[-2, 3], false).is_err());
        assert!(reshape_target(&[2, 3], &[i64::MAX, i64::MAX], false).is_err());
    }

    use crate::ops::shape::test_op;
    use qport_onnx::Attribute;

    fn ints(v: &[i64]) -> Tensor {
        Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap()
    }

    #[test]
    fn unsqueeze_unsorted_and_squeeze_checks() {
        let x = Tensor::zeros(qport_core::DType::F32, vec![3, 4, 5]).unwrap();
        let op = test_op("Unsqueeze", 13, 1, vec![]).unwrap();
        let y = op.eval(&[Some(&x), Some(&ints(&[5, 4, 2]))]).unwrap();
        assert_eq!(y[0].shape(), &[3, 4, 1, 5, 1, 1]);
        assert!(op.eval(&[Some(&x), Some(&ints(&[1, 1]))]).is_err());
        let op = test_op("Squeeze", 11, 1, vec![("axes", Attribute::Ints(vec![0]))]).unwrap();
        assert!(op.eval(&[Some(&x)]).is_err());
    }

    #[test]
    fn absurd_sizes_are_errors_not_panics() {
        let x = Tensor::zeros(qport_core::DType::F32, vec![1, 4, 2, 2]).unwrap();
        let big = i64::MAX / 2;
        for op_type in ["DepthToSpace", "SpaceToDepth"] {
            let op = test_op(op_type, 13, 1, vec![("blocksize", Attribute::Int(big))]).unwrap();
            assert!(op.eval(&[Some(&x)]).is_err(), "{op_type}");
        }
        let op = test_op("Tile", 13, 1, vec![]).unwrap();
        assert!(op
            .eval(&[Some(&x), Some(&ints(&[big, big, 1, 1]))])
            .is_err());
        assert!(op.eval(&[Some(&x), Some(&ints(&[1, -1, 1, 1]))]).is_err());
        let op = test_op("Reshape", 14, 1, vec![]).unwrap();
        assert!(op
            .eval(&[Some(&x), Some(&ints(&[big, big, 0, -1]))])
            .is_err());
    }

    #[test]
    fn expand_rejects_bad_shapes() {
        let a = Tensor::from_vec(vec![3, 1], vec![1.0f32, 2.0, 3.0]).unwrap();
        assert_eq!(expand(&a, &[2, 1, 2]).unwrap().shape(), &[2, 3, 2]);
        assert!(expand(&a, &[2, 2]).is_err());
        assert!(expand(&a, &[-1]).is_err());
        assert!(expand(&a, &[1 << 40, 1 << 40]).is_err());
    }
}
