//! The steps of the blocked channel layout a plan chooses for float
//! convolutions ([`crate::layout`]): the Conv on blocked activations
//! ([`qport_kernels::nchwc::conv`]), its max pooling, the global average
//! pooling that reads it, and the two conversions.
//!
//! A blocked value is an `f32` tensor `[N, ceil(C / 16), H, W, 16]`; the
//! real channel count `C` is the producing Conv's (or the converted
//! value's), known to every step that reads it.

use super::pool::{table, Table};
use super::spatial::{ConvAttrs, ShapeMemo, WindowAttrs};
use crate::error::{OpError, OpResult};
use crate::layout::LayoutStep;
use crate::ops::{input, reuse_output, BuildCtx, Op};
use qport_core::{DType, Tensor};
use qport_kernels::activation::Activation;
use qport_kernels::im2col::ConvGeometry;
use qport_kernels::nchwc::{self, blocks, Filters, Layout, BLOCK};

/// Builds the step of `kind` for `ctx`'s node (a Conv with the fused
/// activation `act` and, with `residual`, its input 3 added; or a
/// conversion).
pub(crate) fn build(
    ctx: &BuildCtx,
    kind: LayoutStep,
    act: Activation,
    residual: bool,
) -> OpResult<Box<dyn Op>> {
    match kind {
        LayoutStep::ToBlocked => Ok(Box::new(ToBlocked)),
        LayoutStep::ToPlanar { channels } => Ok(Box::new(ToPlanar { channels })),
        LayoutStep::GlobalAverage { channels } => Ok(Box::new(GlobalAverageBlocked { channels })),
        LayoutStep::MaxPool => {
            let attrs = WindowAttrs::parse(ctx.node)?;
            if attrs.kernel_shape.is_none() {
                return Err(OpError::invalid("attribute kernel_shape is required"));
            }
            Ok(Box::new(MaxPoolBlocked {
                attrs,
                ceil_mode: ctx.node.attr_int("ceil_mode", 0)? != 0,
                memo: ShapeMemo::default(),
            }))
        }
        LayoutStep::Conv { planar_input } => {
            let attrs = ConvAttrs::parse(ctx.node)?;
            let w = ctx
                .const_input(1)
                .filter(|w| w.dtype() == DType::F32 && w.rank() == 4)
                .ok_or_else(|| OpError::invalid("a blocked Conv needs a constant f32 weight"))?;
            let shape = w.shape().to_vec();
            let bias = match ctx.node.inputs.get(2).filter(|s| !s.is_empty()) {
                Some(_) => Some(
                    ctx.const_input(2)
                        .ok_or_else(|| OpError::invalid("a blocked Conv needs a constant bias"))?
                        .as_slice::<f32>()?,
                ),
                None => None,
            };
            let (m, kernel) = (shape[0], [shape[2], shape[3]]);
            let wv = w.as_slice::<f32>()?;
            if bias.is_some_and(|b| b.len() != m) {
                return Err(OpError::invalid(
                    "the bias does not have one value per filter",
                ));
            }
            let filters = if attrs.group == 1 {
                Filters::dense(wv, m, shape[1], kernel, bias)
            } else if attrs.group == m && shape[1] == 1 {
                Filters::depthwise(wv, m, kernel, bias)
            } else {
                return Err(OpError::invalid(format!(
                    "a blocked Conv is ungrouped or depthwise; group is {}",
                    attrs.group
                )));
            };
            Ok(Box::new(ConvBlocked {
                attrs,
                w_shape: shape,
                filters,
                act,
                residual,
                planar_input,
                memo: ShapeMemo::default(),
            }))
        }
    }
}

/// [`Op::eval`] of a one-output step through its [`Op::eval_into`] (the
/// steps here have one implementation, into a reused buffer).
fn eval_one(op: &dyn Op, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
    let mut out = vec![None];
    op.eval_into(inputs, &mut out)?;
    match out.pop().flatten() {
        Some(t) => Ok(vec![t]),
        None => Err(OpError::invalid("the step wrote no output")),
    }
}

/// A Conv on the blocked layout.
struct ConvBlocked {
    attrs: ConvAttrs,
    /// The weight's shape `[M, C / group, KH, KW]`.
    w_shape: Vec<usize>,
    /// The weight and bias, packed: the only copy the plan keeps.
    filters: Filters,
    act: Activation,
    residual: bool,
    planar_input: bool,
    memo: ShapeMemo<Call>,
}

/// What a call derives from its input shape.
struct Call {
    geom: ConvGeometry,
    n: usize,
    y_shape: Vec<usize>,
}

impl ConvBlocked {
    /// The input's `[N, C, H, W]`: its shape when planar, else from the
    /// blocked shape and the filters' channel count.
    fn logical(&self, x: &Tensor) -> OpResult<Vec<usize>> {
        let s = x.shape();
        let c = self.filters.in_channels();
        if self.planar_input {
            return Ok(s.to_vec());
        }
        if s.len() != 5 || s[4] != BLOCK || s[1] != blocks(c) {
            return Err(OpError::invalid(format!(
                "blocked input of shape {s:?} does not hold {c} channels"
            )));
        }
        Ok(vec![s[0], c, s[2], s[3]])
    }

    fn call(&self, x: &Tensor) -> OpResult<std::sync::Arc<Call>> {
        self.memo.get(
            x.shape(),
            &[],
            |_| true,
            || {
                let xs = self.logical(x)?;
                let g = self.attrs.geometry(&xs, &self.w_shape)?;
                if g.spatial.rank() != 2 {
                    return Err(OpError::invalid("a blocked Conv is 2-D"));
                }
                let m = self.filters.out_channels();
                let (oh, ow) = (g.spatial.output[0], g.spatial.output[1]);
                Ok(Call {
                    n: xs[0],
                    y_shape: vec![xs[0], blocks(m), oh, ow, BLOCK],
                    geom: g.spatial,
                })
            },
        )
    }
}

#[cfg(test)]
thread_local! {
    /// Runs of a [`ConvBlocked`] in its residual's buffer on this thread.
    pub(crate) static IN_PLACE_RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

impl Op for ConvBlocked {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        eval_one(self, inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        if x.dtype() != DType::F32 {
            return Err(OpError::invalid(format!(
                "a blocked Conv reads f32, not {:?}",
                x.dtype()
            )));
        }
        let call = self.call(x)?;
        let layout = if self.planar_input {
            Layout::Planar
        } else {
            Layout::Blocked
        };
        if self.residual && inputs.get(3).is_none_or(Option::is_none) {
            // in place: the plan lent the residual's storage as the output
            #[cfg(test)]
            IN_PLACE_RUNS.with(|c| c.set(c.get() + 1));
            let y =
                match outputs.first_mut() {
                    Some(Some(t))
                        if t.dtype() == DType::F32 && t.shape() == call.y_shape.as_slice() =>
                    {
                        t.as_mut_slice::<f32>()?
                    }
                    _ => return Err(OpError::invalid(
                        "a blocked Conv with a residual got neither input 3 nor it in its output",
                    )),
                };
            nchwc::conv_in_place(
                &call.geom,
                call.n,
                x.as_slice::<f32>()?,
                layout,
                &self.filters,
                self.act,
                y,
            );
            return Ok(());
        }
        let residual = match self.residual {
            false => None,
            true => {
                let r = input(inputs, 3)?;
                if r.dtype() != DType::F32 || r.shape() != call.y_shape.as_slice() {
                    return Err(OpError::invalid(format!(
                        "the residual has shape {:?}; the blocked output {:?}",
                        r.shape(),
                        call.y_shape
                    )));
                }
                Some(r.as_slice::<f32>()?)
            }
        };
        let xv = x.as_slice::<f32>()?;
        let y = reuse_output::<f32>(outputs, 0, &call.y_shape)?;
        nchwc::conv(
            &call.geom,
            call.n,
            xv,
            layout,
            &self.filters,
            residual,
            self.act,
            y,
        );
        Ok(())
    }

    fn holds_input(&self, i: usize) -> bool {
        i == 1 || i == 2
    }

    /// The residual (input 3): the sums start from it, so they can start
    /// from the output buffer holding it.
    fn in_place(&self) -> Option<usize> {
        self.residual.then_some(3)
    }
}

/// A shape built on the stack (up to 8 axes, then on the heap): a
/// conversion's output shape costs no allocation per run.
#[derive(Default)]
struct Dims {
    small: [usize; 8],
    len: usize,
    more: Vec<usize>,
}

impl Dims {
    fn push(&mut self, d: usize) {
        if self.len < self.small.len() && self.more.is_empty() {
            self.small[self.len] = d;
            self.len += 1;
        } else {
            if self.more.is_empty() {
                self.more.extend_from_slice(&self.small[..self.len]);
            }
            self.more.push(d);
        }
    }

    fn get(&self) -> &[usize] {
        if self.more.is_empty() {
            &self.small[..self.len]
        } else {
            &self.more
        }
    }
}

/// `[N, C, D...]` to blocked `[N, ceil(C / 16), D..., 16]`.
struct ToBlocked;

impl Op for ToBlocked {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        eval_one(self, inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        let s = x.shape();
        if x.dtype() != DType::F32 || s.len() < 3 {
            return Err(OpError::invalid(format!(
                "converts an f32 [N, C, D...] tensor, not {:?} {s:?}",
                x.dtype()
            )));
        }
        let (n, c, plane) = (s[0], s[1], s[2..].iter().product::<usize>());
        let mut shape = Dims::default();
        shape.push(n);
        shape.push(blocks(c));
        s[2..].iter().for_each(|&d| shape.push(d));
        shape.push(BLOCK);
        let xv = x.as_slice::<f32>()?;
        let y = reuse_output::<f32>(outputs, 0, shape.get())?;
        nchwc::to_blocked(xv, n, c, plane, y);
        Ok(())
    }
}

/// Blocked `[N, ceil(C / 16), D..., 16]` to `[N, C, D...]`.
struct ToPlanar {
    channels: usize,
}

impl Op for ToPlanar {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        eval_one(self, inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        let c = self.channels;
        let (s, plane) = blocked_input(x, c, "converts")?;
        let n = s[0];
        let mut shape = Dims::default();
        shape.push(n);
        shape.push(c);
        s[2..s.len() - 1].iter().for_each(|&d| shape.push(d));
        let xv = x.as_slice::<f32>()?;
        let y = reuse_output::<f32>(outputs, 0, shape.get())?;
        nchwc::to_planar(xv, n, c, plane, y);
        Ok(())
    }
}

/// The shape of `x`, a blocked `f32` tensor `[N, ceil(c / 16), D..., 16]`
/// of `c` channels, and its pixels per plane; else an error that starts
/// with `what` (what the step does with it).
fn blocked_input<'a>(x: &'a Tensor, c: usize, what: &str) -> OpResult<(&'a [usize], usize)> {
    let s = x.shape();
    if x.dtype() != DType::F32 || s.len() < 4 || s[1] != blocks(c) || s[s.len() - 1] != BLOCK {
        return Err(OpError::invalid(format!(
            "{what} a blocked f32 tensor of {c} channels, not {:?} {s:?}",
            x.dtype()
        )));
    }
    Ok((s, s[2..s.len() - 1].iter().product()))
}

/// A GlobalAveragePool over a blocked input, written planar `[N, C, 1,
/// ...]`: the planar operator's means, bit for bit
/// ([`qport_kernels::nchwc::global_average`]).
struct GlobalAverageBlocked {
    channels: usize,
}

impl Op for GlobalAverageBlocked {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        eval_one(self, inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        let c = self.channels;
        let (s, plane) = blocked_input(x, c, "a blocked GlobalAveragePool reads")?;
        if plane == 0 {
            return Err(OpError::invalid(format!(
                "input 0 (X) has shape {s:?} with an empty spatial extent"
            )));
        }
        let mut shape = Dims::default();
        shape.push(s[0]);
        shape.push(c);
        s[2..s.len() - 1].iter().for_each(|_| shape.push(1));
        let xv = x.as_slice::<f32>()?;
        let y = reuse_output::<f32>(outputs, 0, shape.get())?;
        nchwc::global_average(xv, s[0], c, plane, y);
        Ok(())
    }
}

/// A MaxPool (no indices) over a blocked input, written blocked: the
/// windows of the planar operator, the same maxima
/// ([`qport_kernels::nchwc::max_pool`]).
struct MaxPoolBlocked {
    attrs: WindowAttrs,
    ceil_mode: bool,
    memo: ShapeMemo<PoolCall>,
}

/// The windows of one plane and the blocked output shape.
struct PoolCall {
    table: Table,
    y_shape: Vec<usize>,
}

impl Op for MaxPoolBlocked {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        eval_one(self, inputs)
    }

    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        let s = x.shape();
        if x.dtype() != DType::F32 || s.len() < 4 || s[s.len() - 1] != BLOCK {
            return Err(OpError::invalid(format!(
                "a blocked MaxPool reads a blocked f32 tensor, not {:?} {s:?}",
                x.dtype()
            )));
        }
        let call = self.memo.get(
            s,
            &[],
            |_| true,
            || {
                let spatial = &s[2..s.len() - 1];
                let kernel = self.attrs.kernel(spatial.len())?.unwrap_or_default();
                let wins = self.attrs.windows(spatial, &kernel, self.ceil_mode)?;
                let mut y_shape = s[..2].to_vec();
                y_shape.extend(wins.iter().map(|w| w.out));
                y_shape.push(BLOCK);
                qport_core::shape::checked_numel(&y_shape)?;
                Ok(PoolCall {
                    table: table(spatial, &wins)?,
                    y_shape,
                })
            },
        )?;
        let planes = s[0] * s[1];
        let in_plane = s[2..s.len() - 1].iter().product::<usize>();
        let xv = x.as_slice::<f32>()?;
        let y = reuse_output::<f32>(outputs, 0, &call.y_shape)?;
        nchwc::max_pool(
            xv,
            planes,
            in_plane,
            &call.table.starts,
            &call.table.offsets,
            y,
        );
        Ok(())
    }
}
