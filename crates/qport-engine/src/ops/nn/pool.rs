//! MaxPool, AveragePool, LpPool and GlobalAveragePool / GlobalMaxPool /
//! GlobalLpPool over channel-first tensors with any number of spatial axes.
//!
//! A pool first lists, for every output position, the flat offsets of the
//! input elements its window covers (padding excluded) and how many window
//! taps lie within the padded input; the same table serves every (N, C)
//! plane.

use super::spatial::{ShapeMemo, Window, WindowAttrs};
use super::{ncd, read_real, real_tensor, with_real, Real};
use crate::error::{OpError, OpResult};
use crate::ops::reduce::match_num;
use crate::ops::{eval_fallback, input, reuse_output, BuildCtx, Op, Registry};
use qport_core::shape::{checked_numel, strides};
use qport_core::{bf16, f16, DType, Element, Tensor, TensorData};
use qport_kernels::int8::elementwise::split_pairs;

pub(crate) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("MaxPool", build_max),
            ("AveragePool", build_avg),
            ("LpPool", build_lp),
        ],
    );
    r.register_all(crate::lower::QPORT_DOMAIN, &[("AveragePool", build_avg)]);
    r.register("GlobalAveragePool", |_| {
        Ok(Box::new(Global(GlobalKind::Avg)))
    });
    r.register("GlobalMaxPool", |_| Ok(Box::new(Global(GlobalKind::Max))));
    r.register("GlobalLpPool", |ctx| {
        let p = ctx.node.attr_int("p", 2)?;
        Ok(Box::new(Global(GlobalKind::Lp(p as f64))))
    });
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Max,
    Avg { count_include_pad: bool },
    Lp { p: f64 },
}

struct Pool {
    kind: Kind,
    attrs: WindowAttrs,
    ceil_mode: bool,
    column_major: bool,
    want_indices: bool,
    /// `ai.qport:AveragePool`'s `nchwc_block` (0 for ONNX's): a float
    /// average over 4-D input whose channels are a multiple of it sums each
    /// window row by row, as onnxruntime's NCHWc pooling kernel does.
    nchwc_block: usize,
    /// What the last call's input shape gave ([`PoolCall`]).
    memo: ShapeMemo<PoolCall>,
}

/// What a pool derives from its input shape, kept for the next call with
/// the same shape.
struct PoolCall {
    /// `[N, C, out...]`.
    out_shape: Vec<usize>,
    /// `N · C`.
    planes: usize,
    /// The windows of one plane.
    table: Table,
    /// The input width when MLAS sums a float average's windows by
    /// columns ([`mlas_columns`]; not for `nchwc_block` pools).
    columns: Option<usize>,
    /// Two spatial axes without dilation: the windows as row and column
    /// ranges ([`max_rows_cols_into`]).
    rows_cols: Option<RowsCols>,
}

/// The windows of a 2-D pool without dilation, row by row: output row
/// `oy` covers input rows `rows[oy]` (the part inside the input; empty
/// where the window lies in the padding); along a row, output column `ox`
/// covers columns `ox·stride .. ox·stride + kernel` of the row padded with
/// `pad_begin` columns in front, `width` columns in all.
struct RowsCols {
    /// Input height and width.
    input: [usize; 2],
    rows: Vec<std::ops::Range<usize>>,
    /// Output columns.
    out: usize,
    stride: usize,
    kernel: usize,
    pad_begin: usize,
    /// The padded row: at least `pad_begin + input[1]` and
    /// `(out − 1)·stride + kernel`.
    width: usize,
    /// Every window covers at least one input element (none lies wholly
    /// in the padding).
    full: bool,
}

/// Widest padded row [`max_rows_cols_into`] takes (its rows are on the
/// stack).
const ROWS_COLS_WIDTH: usize = 4096;

impl RowsCols {
    /// `None` unless there are two spatial axes, no dilation, padded rows
    /// of at most [`ROWS_COLS_WIDTH`] and a column stride of at most 64.
    fn new(spatial: &[usize], wins: &[Window]) -> Option<RowsCols> {
        if spatial.len() != 2 || wins.iter().any(|w| w.dilation != 1) {
            return None;
        }
        let (wy, wx) = (&wins[0], &wins[1]);
        let width =
            (wx.pad_begin + spatial[1]).max(wx.out.saturating_sub(1) * wx.stride + wx.kernel);
        // (the phases take `stride − 1` elements past the row)
        if width > ROWS_COLS_WIDTH || wx.stride > 64 {
            return None;
        }
        let rows: Vec<std::ops::Range<usize>> = (0..wy.out)
            .map(|o| {
                let start = (o * wy.stride) as isize - wy.pad_begin as isize;
                let n = spatial[0] as isize;
                let lo = start.clamp(0, n) as usize;
                let hi = (start + wy.kernel as isize).clamp(0, n) as usize;
                lo..hi.max(lo)
            })
            .collect();
        let cols_full = (0..wx.out).all(|o| {
            let (lo, hi) = (o * wx.stride, o * wx.stride + wx.kernel);
            hi > wx.pad_begin && lo < wx.pad_begin + spatial[1]
        });
        let full = cols_full && rows.iter().all(|r| !r.is_empty());
        Some(RowsCols {
            input: [spatial[0], spatial[1]],
            rows,
            full,
            out: wx.out,
            stride: wx.stride,
            kernel: wx.kernel,
            pad_begin: wx.pad_begin,
            width,
        })
    }
}

fn build(ctx: &BuildCtx, kind: Kind) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    let attrs = WindowAttrs::parse(n)?;
    if attrs.kernel_shape.is_none() {
        return Err(OpError::invalid("attribute kernel_shape is required"));
    }
    Ok(Box::new(Pool {
        kind,
        attrs,
        ceil_mode: n.attr_int("ceil_mode", 0)? != 0,
        column_major: n.attr_int("storage_order", 0)? != 0,
        want_indices: n.outputs.get(1).is_some_and(|o| !o.is_empty()),
        nchwc_block: n.attr_int("nchwc_block", 0)?.max(0) as usize,
        memo: ShapeMemo::default(),
    }))
}

fn build_max(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    build(ctx, Kind::Max)
}

fn build_avg(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let cip = ctx.node.attr_int("count_include_pad", 0)? != 0;
    build(
        ctx,
        Kind::Avg {
            count_include_pad: cip,
        },
    )
}

fn build_lp(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let p = ctx.node.attr_int("p", 2)?;
    if p < 1 {
        return Err(OpError::invalid(format!(
            "attribute p is {p}, expected >= 1"
        )));
    }
    build(ctx, Kind::Lp { p: p as f64 })
}

/// For every output position: the input offsets its window reads (within
/// one plane, in row-major window order) and the number of taps inside the
/// padded input.
pub(crate) struct Table {
    /// Output position `o` reads `offsets[starts[o]..starts[o + 1]]`.
    pub starts: Vec<usize>,
    /// Row-major offsets within one input plane.
    pub offsets: Vec<usize>,
    /// Per output position, the taps inside the padded input.
    pub padded: Vec<usize>,
}

/// The [`Table`] of windows `wins` over a plane of spatial shape `input`.
pub(crate) fn table(input: &[usize], wins: &[Window]) -> OpResult<Table> {
    let r = input.len();
    // per axis, per output index: valid input coordinates and padded count
    let mut axes: Vec<Vec<(Vec<usize>, usize)>> = Vec::with_capacity(r);
    for (a, w) in wins.iter().enumerate() {
        let (pb, pe) = (w.pad_begin as isize, w.pad_end as isize);
        let n_in = input[a] as isize;
        let per = (0..w.out)
            .map(|o| {
                let start = (o * w.stride) as isize - pb;
                let mut valid = vec![];
                let mut padded = 0;
                for j in 0..w.kernel {
                    let p = start + (j * w.dilation) as isize;
                    if (0..n_in).contains(&p) {
                        valid.push(p as usize);
                    }
                    if (-pb..n_in + pe).contains(&p) {
                        padded += 1;
                    }
                }
                (valid, padded)
            })
            .collect();
        axes.push(per);
    }
    let out: Vec<usize> = wins.iter().map(|w| w.out).collect();
    let osz = checked_numel(&out)?;
    let ksz: usize = wins.iter().map(|w| w.kernel).product();
    checked_numel(&[osz, ksz])?;
    let st = strides(input);
    let mut t = Table {
        starts: Vec::with_capacity(osz + 1),
        offsets: vec![],
        padded: Vec::with_capacity(osz),
    };
    t.starts.push(0);
    if osz == 0 {
        return Ok(t);
    }
    let mut o = vec![0usize; r];
    loop {
        // cartesian product of the per-axis valid coordinates
        let lists: Vec<&Vec<usize>> = (0..r).map(|a| &axes[a][o[a]].0).collect();
        t.padded.push((0..r).map(|a| axes[a][o[a]].1).product());
        if lists.iter().all(|l| !l.is_empty()) {
            let mut j = vec![0usize; r];
            loop {
                t.offsets
                    .push((0..r).map(|a| lists[a][j[a]] * st[a]).sum::<usize>());
                if !advance(&mut j, |a| lists[a].len()) {
                    break;
                }
            }
        }
        t.starts.push(t.offsets.len());
        if !advance(&mut o, |a| out[a]) {
            break;
        }
    }
    Ok(t)
}

/// Increments a row-major multi-index; false after the last one.
fn advance(idx: &mut [usize], dim: impl Fn(usize) -> usize) -> bool {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < dim(a) {
            return true;
        }
        idx[a] = 0;
    }
    false
}

/// Converts a row-major offset within `dims` to the column-major one.
fn column_major(mut off: usize, dims: &[usize]) -> usize {
    let mut out = 0;
    let mut stride = 1;
    let mut coords = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        coords[a] = off % dims[a];
        off /= dims[a];
    }
    for (a, &c) in coords.iter().enumerate() {
        out += c * stride;
        stride *= dims[a];
    }
    out
}

impl Pool {
    /// The output shape, windows and summation order for input shape `xs`:
    /// the previous call's when the shape is the same.
    fn call(&self, xs: &[usize]) -> OpResult<std::sync::Arc<PoolCall>> {
        if xs.len() < 3 {
            return Err(OpError::invalid(format!(
                "input 0 (X) has shape {xs:?}; expected [N, C, D1, ...] with at least one spatial axis"
            )));
        }
        self.memo.get(
            xs,
            &[],
            |_| true,
            || {
                let spatial = &xs[2..];
                let kernel = self.attrs.kernel(spatial.len())?.unwrap_or_default();
                let wins = self.attrs.windows(spatial, &kernel, self.ceil_mode)?;
                let mut out_shape = xs[..2].to_vec();
                out_shape.extend(wins.iter().map(|w| w.out));
                checked_numel(&out_shape)?;
                let nchwc =
                    self.nchwc_block > 0 && xs.len() == 4 && xs[1].is_multiple_of(self.nchwc_block);
                Ok(PoolCall {
                    out_shape,
                    planes: xs[0] * xs[1],
                    table: table(spatial, &wins)?,
                    columns: mlas_columns(spatial, &wins).filter(|_| !nchwc),
                    rows_cols: RowsCols::new(spatial, &wins),
                })
            },
        )
    }
}

impl Op for Pool {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let xs = x.shape();
        let call = self.call(xs)?;
        let (t, planes) = (&call.table, call.planes);
        let out_shape = call.out_shape.clone();
        let spatial = &xs[2..];
        match self.kind {
            Kind::Max if !self.want_indices && matches!(x.dtype(), DType::U8 | DType::I8) => {
                // quantized activations: the maxima alone (no index
                // bookkeeping; integer max is order-free)
                let y = match x.data() {
                    TensorData::U8(v) => TensorData::U8(max_only(v, t, planes)),
                    TensorData::I8(v) => TensorData::I8(max_only(v, t, planes)),
                    _ => unreachable!("matched above"),
                };
                Ok(vec![Tensor::new(out_shape, y)?])
            }
            Kind::Max if !self.want_indices && x.dtype() == DType::F32 => {
                let v = x
                    .as_slice::<f32>()
                    .map_err(|_| OpError::dtype("X", x.dtype()))?;
                let mut y = vec![f32::MIN; planes * t.padded.len()];
                max_f32_into(v, &call, &mut y);
                Ok(vec![Tensor::new(out_shape, TensorData::F32(y))?])
            }
            Kind::Max => {
                let (y, idx) = max_dispatch(x, t, planes)?;
                let mut outs = vec![Tensor::new(out_shape.clone(), y)?];
                if self.want_indices {
                    let isz: usize = spatial.iter().product();
                    let idx = if self.column_major {
                        idx.into_iter()
                            .map(|i| {
                                let i = i as usize;
                                let (p, off) = (i / isz.max(1), i % isz.max(1));
                                (p * isz + column_major(off, spatial)) as i64
                            })
                            .collect()
                    } else {
                        idx
                    };
                    outs.push(Tensor::from_vec(out_shape, idx)?);
                }
                Ok(outs)
            }
            Kind::Avg { count_include_pad } if x.dtype() == DType::F32 => {
                let v = x
                    .as_slice::<f32>()
                    .map_err(|_| OpError::dtype("X", x.dtype()))?;
                let mut y = vec![0.0; planes * t.padded.len()];
                avg_into(v, t, planes, count_include_pad, call.columns, &mut y);
                Ok(vec![Tensor::new(out_shape, TensorData::F32(y))?])
            }
            Kind::Avg { count_include_pad } => with_real!(x.dtype(), "input 0 (X)", T => {
                let xv = read_real::<T>(x, "input 0 (X)")?;
                let mut y = vec![T::default(); planes * t.padded.len()];
                avg_into::<T>(&xv, t, planes, count_include_pad, None, &mut y);
                Ok(vec![real_tensor(out_shape, y, x.dtype())?])
            }),
            Kind::Lp { p } => with_real!(x.dtype(), "input 0 (X)", T => {
                let xv = read_real::<T>(x, "input 0 (X)")?;
                let y = lp::<T>(&xv, t, planes, p);
                Ok(vec![real_tensor(out_shape, y, x.dtype())?])
            }),
        }
    }

    /// MaxPool without indices over `u8`, `i8` and `f32`, and the `f32`
    /// AveragePool, write into the storage of their previous output (with
    /// the previous call's input shape, nothing is allocated); other cases
    /// through [`Op::eval`].
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        if self.want_indices {
            return eval_fallback(self, inputs, outputs);
        }
        let call = self.call(x.shape())?;
        let (t, planes, shape) = (&call.table, call.planes, &call.out_shape[..]);
        let rc = call.rows_cols.as_ref();
        match (self.kind, x.data()) {
            (Kind::Max, TensorData::U8(v)) => {
                let y = reuse_output::<u8>(outputs, 0, shape)?;
                match rc {
                    Some(rc) => max_rows_cols_into(v, rc, planes, y),
                    None => max_only_into(v, t, planes, y),
                }
            }
            (Kind::Max, TensorData::I8(v)) => {
                let y = reuse_output::<i8>(outputs, 0, shape)?;
                match rc {
                    Some(rc) => max_rows_cols_into(v, rc, planes, y),
                    None => max_only_into(v, t, planes, y),
                }
            }
            (Kind::Max, TensorData::F32(v)) => {
                max_f32_into(v, &call, reuse_output::<f32>(outputs, 0, shape)?)
            }
            (Kind::Avg { count_include_pad }, TensorData::F32(v)) => {
                let y = reuse_output::<f32>(outputs, 0, shape)?;
                avg_into(v, t, planes, count_include_pad, call.columns, y)
            }
            _ => return eval_fallback(self, inputs, outputs),
        }
        Ok(())
    }
}

/// Element types MaxPool accepts, with the value an empty window gives.
trait MaxElem: Copy + PartialOrd + Element {
    const LOWEST: Self;
}
macro_rules! max_elem {
    ($($t:ty => $v:expr),*) => {$(impl MaxElem for $t { const LOWEST: Self = $v; })*};
}
max_elem!(f32 => f32::MIN, f64 => f64::MIN, f16 => f16::MIN, bf16 => bf16::MIN,
    i8 => i8::MIN, u8 => u8::MIN, i16 => i16::MIN, u16 => u16::MIN,
    i32 => i32::MIN, u32 => u32::MIN, i64 => i64::MIN, u64 => u64::MIN);

fn max_dispatch(x: &Tensor, t: &Table, planes: usize) -> OpResult<(TensorData, Vec<i64>)> {
    fn run<T: MaxElem>(v: &[T], t: &Table, planes: usize) -> (TensorData, Vec<i64>) {
        let (y, i) = max::<T>(v, t, planes);
        (T::wrap(y), i)
    }
    Ok(match_num!(numeric x.data(), v => run(v, t, planes);
        return Err(OpError::dtype("input 0 (X)", x.dtype()))))
}

/// Window maxima of a totally ordered integer type (an empty window gives
/// the type's minimum, as [`max`] does).
fn max_only<T: MaxElem + Ord>(x: &[T], t: &Table, planes: usize) -> Vec<T> {
    let mut y = vec![T::LOWEST; planes * t.padded.len()];
    max_only_into(x, t, planes, &mut y);
    y
}

/// [`max_only`] into `y` (`planes` times the table's outputs).
fn max_only_into<T: MaxElem + Ord>(x: &[T], t: &Table, planes: usize, y: &mut [T]) {
    window_maxima_into(x, t, planes, y, |plane, offs| {
        offs.iter().fold(T::LOWEST, |b, &off| b.max(plane[off]))
    })
}

/// [`max_only_into`] for 2-D windows without dilation, per output row in
/// vectors: the element-wise maximum of the input rows the row's windows
/// cover, written into a row padded with the type's lowest value (the
/// identity of the maximum, so padding taps change nothing and a window
/// wholly in the padding gives it, as [`max_only_into`] does); that row
/// split into its `stride` column phases; then per kernel column the
/// maximum with the phase it reads, shifted. Maxima of a total order do
/// not depend on the order they are taken in: the same values as
/// [`max_only_into`].
fn max_rows_cols_into<T: MaxElem + Ord + qport_kernels::igemm::QInt>(
    x: &[T],
    rc: &RowsCols,
    planes: usize,
    y: &mut [T],
) {
    use qport_kernels::int8::elementwise::{max_assign, window_max};
    // (row by row on the kernels' vectors)
    let fold = |acc: &mut [T], src: &[T]| max_assign(acc, src);
    rows_cols_into(x, rc, planes, y, T::LOWEST, (fold, window_max))
}

/// Float window maxima into `y`: each window's first tap, then every
/// later tap that compares greater ([`max_values_into`]); by rows and
/// columns in vectors ([`rows_cols_into`]) where that gives the same bits.
fn max_f32_into(x: &[f32], call: &PoolCall, y: &mut [f32]) {
    match &call.rows_cols {
        Some(rc) if rc.full && totally_ordered(x) => rows_cols_into(
            x,
            rc,
            call.planes,
            y,
            f32::NEG_INFINITY,
            (fold_max_f32, no_kernel),
        ),
        _ => max_values_into(x, &call.table, call.planes, y),
    }
}

/// No row kernel for [`rows_cols_into`] (its own column loop runs).
fn no_kernel<T>(_: &[T], _: (usize, usize), _: &mut [T]) -> bool {
    false
}

/// `acc[i]` replaced by `src[i]` where that compares greater (the fold of
/// [`max_f32_into`]'s rows and columns).
fn fold_max_f32(acc: &mut [f32], src: &[f32]) {
    for (a, &b) in acc.iter_mut().zip(src) {
        if b > *a {
            *a = b;
        }
    }
}

/// Whether `x` holds neither a NaN nor a negative zero: then `>` is a
/// total order on its values in which equal values have equal bits, and
/// the maximum of a window does not depend on the order its taps are
/// taken in (as [`max_values_into`] takes them, first tap first).
fn totally_ordered(x: &[f32]) -> bool {
    // (branch-free over blocks, so that the scan vectorizes)
    x.chunks(1024).all(|c| {
        !c.iter().fold(false, |bad, v| {
            bad | v.is_nan() | (v.to_bits() == 0x8000_0000)
        })
    })
}

/// The body of [`max_rows_cols_into`] for any maximum with identity
/// `lowest`, which `fold(acc, src)` takes element by element into `acc`
/// (over the shorter of the two). `row(prow, (kernel, stride), out)`
/// may compute an output row's window maxima from its padded row of
/// maxima at once (returning `true`, as
/// [`qport_kernels::int8::elementwise::window_max`]); where it returns
/// `false` the row's column phases and `fold` do. For `f32` it is called only on [`totally_ordered`] input and
/// windows that each cover an input element ([`RowsCols::full`]), with
/// `lowest` −∞: then every window's maximum is one of its taps, the value
/// [`max_values_into`] gives.
fn rows_cols_into<T: Copy + Send + Sync + 'static>(
    x: &[T],
    rc: &RowsCols,
    planes: usize,
    y: &mut [T],
    lowest: T,
    (fold, row): (
        impl Fn(&mut [T], &[T]) + Sync,
        impl Fn(&[T], (usize, usize), &mut [T]) -> bool + Sync,
    ),
) {
    let [h, w] = rc.input;
    let (isz, ow, s) = (h * w, rc.out, rc.stride);
    let osz = rc.rows.len() * ow;
    debug_assert_eq!(x.len(), planes * isz);
    let pq = rc.width.div_ceil(s);
    let work = (x.len() + y.len()) * qport_kernels::par::STREAM_COST;
    qport_kernels::par::split_mut(y, osz.max(1), work, |start, block| {
        let mut prow = [lowest; ROWS_COLS_WIDTH];
        let mut phases = [lowest; ROWS_COLS_WIDTH + 64];
        let (prow, phases) = (&mut prow[..rc.width], &mut phases[..s * pq]);
        for (i, yp) in block.chunks_mut(osz.max(1)).enumerate() {
            let p = start / osz.max(1) + i;
            let plane = &x[p * isz..(p + 1) * isz];
            for (rows, yr) in rc.rows.iter().zip(yp.chunks_mut(ow.max(1))) {
                let mid = &mut prow[rc.pad_begin..rc.pad_begin + w];
                mid.fill(lowest);
                for iy in rows.clone() {
                    fold(mid, &plane[iy * w..(iy + 1) * w]);
                }
                if row(prow, (rc.kernel, s), yr) {
                    continue;
                }
                // phase b, element i: padded column i·s + b
                let ph: &[T] = if s == 1 {
                    prow
                } else if s == 2 {
                    // (the common stride, by pairs: a byte shuffle for the
                    // 8-bit types, where a variable step is element by
                    // element)
                    let (even, odd) = phases.split_at_mut(pq);
                    if prow.len() % 2 == 1 {
                        even[pq - 1] = prow[prow.len() - 1];
                    }
                    split_pairs(prow, even, odd);
                    phases
                } else {
                    for (b, dst) in phases.chunks_mut(pq).enumerate() {
                        // (a phase past a row narrower than the stride is
                        // never read: it keeps the lowest value)
                        let from = prow.get(b..).unwrap_or(&[]);
                        for (d, &v) in dst.iter_mut().zip(from.iter().step_by(s)) {
                            *d = v;
                        }
                    }
                    phases
                };
                yr.fill(lowest);
                for j in 0..rc.kernel {
                    // output ox reads padded column ox·s + j
                    fold(yr, &ph[(j % s) * pq + j / s..][..ow]);
                }
            }
        }
    });
}

/// The maxima of [`max`] without the indices, as a new vector (see
/// [`max_values_into`]).
#[cfg(test)]
fn max_values<T: MaxElem>(x: &[T], t: &Table, planes: usize) -> Vec<T> {
    let mut y = vec![T::LOWEST; planes * t.padded.len()];
    max_values_into(x, t, planes, &mut y);
    y
}

/// The maxima of [`max`] without the indices, into `y` (`planes` times the
/// table's outputs): each window's first tap, then every later tap that
/// compares greater (so NaN behaves exactly as in [`max`]).
fn max_values_into<T: MaxElem>(x: &[T], t: &Table, planes: usize, y: &mut [T]) {
    window_maxima_into(x, t, planes, y, |plane, offs| match offs.split_first() {
        None => T::LOWEST,
        Some((&first, rest)) => rest.iter().fold(plane[first], |b, &off| {
            let v = plane[off];
            if v > b {
                v
            } else {
                b
            }
        }),
    })
}

/// `reduce(plane, window offsets)` for every window of every plane into
/// `y`, the planes split over the intra-op threads (each window reduced as
/// on one thread).
fn window_maxima_into<T: MaxElem>(
    x: &[T],
    t: &Table,
    planes: usize,
    y: &mut [T],
    reduce: impl Fn(&[T], &[usize]) -> T + Sync,
) {
    let osz = t.padded.len();
    let isz = x.len().checked_div(planes).unwrap_or(0);
    let work = planes * t.offsets.len() * qport_kernels::par::STREAM_COST;
    qport_kernels::par::split_mut(y, osz.max(1), work, |start, block| {
        for (i, yp) in block.chunks_mut(osz.max(1)).enumerate() {
            let p = start / osz.max(1) + i;
            let plane = &x[p * isz..(p + 1) * isz];
            for (o, yo) in yp.iter_mut().enumerate() {
                *yo = reduce(plane, &t.offsets[t.starts[o]..t.starts[o + 1]]);
            }
        }
    });
}

/// Window maxima and the flat input index of each (the first maximum).
fn max<T: MaxElem>(x: &[T], t: &Table, planes: usize) -> (Vec<T>, Vec<i64>) {
    let osz = t.padded.len();
    let isz = x.len().checked_div(planes).unwrap_or(0);
    let mut y = Vec::with_capacity(planes * osz);
    let mut idx = Vec::with_capacity(planes * osz);
    for p in 0..planes {
        let base = p * isz;
        let plane = &x[base..base + isz];
        for o in 0..osz {
            let offs = &t.offsets[t.starts[o]..t.starts[o + 1]];
            let mut best = T::LOWEST;
            let mut at: i64 = -1;
            for &off in offs {
                let v = plane[off];
                if at < 0 || v > best {
                    best = v;
                    at = (base + off) as i64;
                }
            }
            y.push(best);
            idx.push(at);
        }
    }
    (y, idx)
}

/// The input width when onnxruntime's float `AveragePool` (MLAS's
/// vectorized 2-D / 3-D pooling kernel) sums each window column by column:
/// 2 or 3 spatial axes, a last-axis stride of at most 2, every kernel
/// extent at most 32, no dilation, the padded width within its reduction
/// buffer, and not a global pool (MLAS sums those another way).
fn mlas_columns(spatial: &[usize], wins: &[Window]) -> Option<usize> {
    let r = spatial.len();
    if !(2..=3).contains(&r) {
        return None;
    }
    let last = wins.last()?;
    let global = wins
        .iter()
        .zip(spatial)
        .all(|(w, &n)| w.kernel == n && w.stride == 1 && w.pad_begin == 0 && w.pad_end == 0);
    let small = wins.iter().all(|w| w.kernel <= 32 && w.dilation == 1);
    let fits = last.pad_begin + last.pad_end + spatial[r - 1] <= 2048 - 3;
    (!global && small && last.stride <= 2 && fits).then_some(spatial[r - 1])
}

/// Average pooling into `y` (`planes` times the table's outputs): each
/// window summed in the table's row-major order, or, given the input width
/// (`columns`), in MLAS's vectorized order: each column (one position
/// along the last axis) summed over the other axes in order, then the
/// column sums added left to right. The table lists a window's offsets
/// row-major, so its columns are the leading run of offsets on one row.
/// The planes are split over the intra-op threads (each window summed as
/// on one thread).
fn avg_into<T: Real>(
    x: &[T],
    t: &Table,
    planes: usize,
    count_include_pad: bool,
    columns: Option<usize>,
    y: &mut [T],
) {
    let osz = t.padded.len();
    let isz = x.len().checked_div(planes).unwrap_or(0);
    let work = planes * t.offsets.len() * qport_kernels::par::STREAM_COST;
    qport_kernels::par::split_mut(y, osz.max(1), work, |start, block| {
        for (i, yp) in block.chunks_mut(osz.max(1)).enumerate() {
            let p = start / osz.max(1) + i;
            let plane = &x[p * isz..(p + 1) * isz];
            for (o, yo) in yp.iter_mut().enumerate() {
                let offs = &t.offsets[t.starts[o]..t.starts[o + 1]];
                let cols = match columns {
                    Some(w) => offs
                        .iter()
                        .take_while(|&&off| off / w == offs[0] / w)
                        .count()
                        .max(1),
                    None => offs.len().max(1),
                };
                let mut s = T::ZERO;
                for c in 0..cols.min(offs.len()) {
                    let mut col = T::ZERO;
                    for &off in offs[c..].iter().step_by(cols) {
                        col += plane[off];
                    }
                    s += col;
                }
                let n = if count_include_pad {
                    t.padded[o]
                } else {
                    offs.len()
                };
                *yo = s / T::from_f64(n as f64);
            }
        }
    });
}

fn lp<T: Real>(x: &[T], t: &Table, planes: usize, p: f64) -> Vec<T> {
    let osz = t.padded.len();
    let isz = x.len().checked_div(planes).unwrap_or(0);
    let pe = T::from_f64(p);
    let inv = T::from_f64(1.0 / p);
    let mut y = Vec::with_capacity(planes * osz);
    for pl in 0..planes {
        let plane = &x[pl * isz..(pl + 1) * isz];
        for o in 0..osz {
            let mut s = T::ZERO;
            for &off in &t.offsets[t.starts[o]..t.starts[o + 1]] {
                s += plane[off].abs().powf(pe);
            }
            y.push(s.powf(inv));
        }
    }
    y
}

#[derive(Clone, Copy)]
enum GlobalKind {
    Avg,
    Max,
    Lp(f64),
}

struct Global(GlobalKind);

impl Op for Global {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let (n, c, isz) = ncd(x)?;
        let (xs, planes) = (x.shape(), n * c);
        let mut out_shape = xs[..2].to_vec();
        out_shape.extend(std::iter::repeat_n(1, xs.len() - 2));
        if isz == 0 && planes > 0 {
            return Err(OpError::invalid(format!(
                "input 0 (X) has shape {xs:?} with an empty spatial extent"
            )));
        }
        with_real!(x.dtype(), "input 0 (X)", T => {
            let xv = read_real::<T>(x, "input 0 (X)")?;
            let y: Vec<T> = xv
                .chunks_exact(isz.max(1))
                .take(planes)
                .map(|c| match self.0 {
                    GlobalKind::Avg => {
                        let s: f64 = c.iter().map(|v| v.to_f64()).sum();
                        T::from_f64(s / isz as f64)
                    }
                    GlobalKind::Max => c
                        .iter()
                        .copied()
                        .fold(c[0], |m, v| if v > m { v } else { m }),
                    GlobalKind::Lp(p) => {
                        let s: f64 = c.iter().map(|v| v.to_f64().abs().powf(p)).sum();
                        T::from_f64(s.powf(1.0 / p))
                    }
                })
                .collect();
            Ok(vec![real_tensor(out_shape, y, x.dtype())?])
        })
    }

    /// `f32` averages into the reused output, the planes split over the
    /// intra-op threads (each plane summed as [`Op::eval`] sums it); other
    /// cases through [`Op::eval`].
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        let x = input(inputs, 0)?;
        let xs = x.shape();
        let (Ok(xv), GlobalKind::Avg, 3..=8) = (x.as_slice::<f32>(), self.0, xs.len()) else {
            return crate::ops::eval_fallback(self, inputs, outputs);
        };
        let (n, c, isz) = ncd(x)?;
        if isz == 0 {
            return crate::ops::eval_fallback(self, inputs, outputs);
        }
        let mut shape = [1usize; 8];
        shape[..2].copy_from_slice(&xs[..2]);
        let y = crate::ops::reuse_output::<f32>(outputs, 0, &shape[..xs.len()])?;
        qport_kernels::par::split_mut(y, 1, n * c * isz, |p0, y| {
            for (p, yv) in (p0..).zip(y) {
                let s: f64 = xv[p * isz..][..isz].iter().map(|v| *v as f64).sum();
                *yv = (s / isz as f64) as f32;
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::spatial::{extent, AutoPad};
    use super::*;

    #[test]
    fn table_counts_padding_and_dilation() {
        // 1-D: 4 inputs, kernel 2, dilation 2, pad 1 each side
        let w = extent(4, 2, 1, 2, (1, 1), AutoPad::NotSet, false).unwrap();
        assert_eq!(w.out, 4);
        let t = table(&[4], &[w]).unwrap();
        // windows start at -1, 0, 1, 2 and read p, p + 2
        assert_eq!(t.starts, vec![0, 1, 3, 5, 6]);
        assert_eq!(t.offsets, vec![1, 0, 2, 1, 3, 2]);
        assert_eq!(t.padded, vec![2, 2, 2, 2]);
    }

    /// The row-then-column maxima equal the windows' maxima over 2-D
    /// pools with padding (windows wholly in it included), strides,
    /// `ceil_mode` and `SAME` padding, for u8 and i8 on every dispatch
    /// row.
    #[test]
    fn rows_then_columns_equal_the_window_maxima() {
        use proptest::prelude::*;
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
        let strat = (
            (
                1usize..12,
                1usize..40,
                1usize..5,
                1usize..5,
                1usize..4,
                1usize..4,
            ),
            (
                0usize..4,
                0usize..4,
                0usize..4,
                0usize..4,
                any::<bool>(),
                0usize..3,
            ),
            proptest::collection::vec(any::<u8>(), 3 * 12 * 40),
        );
        runner
            .run(
                &strat,
                |((h, w, kh, kw, sh, sw), (pt, pb, pl, pr, ceil, ap), xs)| {
                    let ap = [AutoPad::NotSet, AutoPad::SameUpper, AutoPad::SameLower][ap];
                    let (Ok(wy), Ok(wx)) = (
                        extent(h, kh, sh, 1, (pt.min(kh - 1), pb.min(kh - 1)), ap, ceil),
                        extent(w, kw, sw, 1, (pl.min(kw - 1), pr.min(kw - 1)), ap, ceil),
                    ) else {
                        return Ok(());
                    };
                    let ws = [wy, wx];
                    let t = table(&[h, w], &ws).unwrap();
                    let rc = RowsCols::new(&[h, w], &ws).unwrap();
                    let x = &xs[..3 * h * w];
                    let n = 3 * wy.out * wx.out;
                    // (on every dispatch row: the window kernel on the
                    // AVX-512 ones, the column phases elsewhere)
                    for isa in qport_kernels::dispatch::supported_isas() {
                        let (mut want, mut got) = (vec![7u8; n], vec![9u8; n]);
                        max_only_into(x, &t, 3, &mut want);
                        qport_kernels::with_isa(isa, || max_rows_cols_into(x, &rc, 3, &mut got));
                        prop_assert_eq!(&got, &want, "{:?}", isa);
                        let xi: Vec<i8> = x.iter().map(|&v| v as i8).collect();
                        let (mut want, mut got) = (vec![7i8; n], vec![9i8; n]);
                        max_only_into(&xi, &t, 3, &mut want);
                        qport_kernels::with_isa(isa, || max_rows_cols_into(&xi, &rc, 3, &mut got));
                        prop_assert_eq!(&got, &want, "{:?}", isa);
                    }
                    // f32 (with infinities) where every window covers the
                    // input: the same bits as the first-tap-first maxima
                    let xf: Vec<f32> = x
                        .iter()
                        .map(|&v| match v {
                            0 => f32::NEG_INFINITY,
                            255 => f32::INFINITY,
                            v => (v as f32 - 128.0) * 0.37,
                        })
                        .collect();
                    prop_assert!(totally_ordered(&xf));
                    if rc.full {
                        let (mut want, mut got) = (vec![7.0f32; n], vec![9.0f32; n]);
                        max_values_into(&xf, &t, 3, &mut want);
                        rows_cols_into(
                            &xf,
                            &rc,
                            3,
                            &mut got,
                            f32::NEG_INFINITY,
                            (fold_max_f32, no_kernel),
                        );
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        prop_assert_eq!(bits(&got), bits(&want));
                    } else {
                        // a window wholly in the padding
                        let empty = (0..t.padded.len()).any(|o| t.starts[o] == t.starts[o + 1]);
                        prop_assert!(empty);
                    }
                    Ok(())
                },
            )
            .unwrap();
        // a row narrower than the stride (phases past the row's end)
        let ws = [
            extent(2, 1, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
            extent(1, 1, 3, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
        ];
        let (t, rc) = (
            table(&[2, 1], &ws).unwrap(),
            RowsCols::new(&[2, 1], &ws).unwrap(),
        );
        let (mut want, mut got) = ([0u8; 2], [1u8; 2]);
        max_only_into(&[5u8, 9], &t, 1, &mut want);
        max_rows_cols_into(&[5u8, 9], &rc, 1, &mut got);
        assert_eq!((got, want), ([5, 9], [5, 9]));
        // windows of nothing but -inf (and padding) give -inf
        let pad1 = extent(2, 2, 1, 1, (1, 1), AutoPad::NotSet, false).unwrap();
        let (t, rc) = (
            table(&[2, 2], &[pad1, pad1]).unwrap(),
            RowsCols::new(&[2, 2], &[pad1, pad1]).unwrap(),
        );
        assert!(rc.full);
        let call = PoolCall {
            out_shape: vec![1, 1, 3, 3],
            planes: 1,
            table: t,
            columns: None,
            rows_cols: Some(rc),
        };
        let mut got = [0.0f32; 9];
        max_f32_into(&[f32::NEG_INFINITY; 4], &call, &mut got);
        assert_eq!(got, [f32::NEG_INFINITY; 9]);
        // a NaN or a negative zero takes the table, first tap first: the
        // NaN at the corner is the maximum of the windows it opens
        let mut got = [0.0f32; 9];
        max_f32_into(&[f32::NAN, 1.0, 2.0, -0.0], &call, &mut got);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut want = [0.0f32; 9];
        max_values_into(&[f32::NAN, 1.0, 2.0, -0.0], &call.table, 1, &mut want);
        assert_eq!(bits(&got), bits(&want));
        assert!(got[0].is_nan() && got[8].to_bits() == (-0.0f32).to_bits());
        // a NaN or a negative zero keeps the float table (the order of the
        // taps decides which of 0 and -0 or whether a NaN is kept)
        assert!(!totally_ordered(&[1.0, f32::NAN, 2.0]));
        assert!(!totally_ordered(&[0.0, -0.0]));
        assert!(totally_ordered(&[0.0, f32::NEG_INFINITY, 3.0]));
        // dilation, or a row wider than the stack buffer, keep the table
        let d = extent(9, 2, 1, 2, (0, 0), AutoPad::NotSet, false).unwrap();
        assert!(RowsCols::new(&[9, 9], &[d, d]).is_none());
        let wide = extent(ROWS_COLS_WIDTH + 1, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap();
        let one = extent(2, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap();
        assert!(RowsCols::new(&[2, ROWS_COLS_WIDTH + 1], &[one, wide]).is_none());
        let far = extent(200, 2, 65, 1, (0, 0), AutoPad::NotSet, false).unwrap();
        assert!(RowsCols::new(&[2, 200], &[one, far]).is_none());
    }

    /// A 2x2 window over `[[1e8, 1, 0], [-1e8, 1, 0]]`: row by row, f32
    /// loses the first 1 (`1e8 + 1 = 1e8`) and gets 1 / 4; MLAS's column
    /// sums (`1e8 - 1e8`, `1 + 1`) keep both and give 2 / 4. Where MLAS
    /// takes its other kernels (one spatial axis, a global window, stride
    /// 3), the row-major sum stays.
    #[test]
    fn float_average_sums_columns_as_mlas_does() {
        let x = [1e8f32, 1.0, 0.0, -1e8, 1.0, 0.0];
        let ws = [
            extent(2, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
            extent(3, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
        ];
        let t = table(&[2, 3], &ws).unwrap();
        assert_eq!(mlas_columns(&[2, 3], &ws), Some(3));
        assert_eq!(avg(&x, &t, 1, false, Some(3)), vec![0.5, 0.5]);
        assert_eq!(avg(&x, &t, 1, false, None), vec![0.25, 0.5]);
        let global = [
            extent(2, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
            extent(3, 3, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
        ];
        assert_eq!(mlas_columns(&[2, 3], &global), None);
        let one = [extent(3, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap()];
        assert_eq!(mlas_columns(&[3], &one), None);
        let wide = [
            extent(2, 2, 1, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
            extent(9, 2, 3, 1, (0, 0), AutoPad::NotSet, false).unwrap(),
        ];
        assert_eq!(mlas_columns(&[2, 9], &wide), None);
    }

    #[test]
    fn integer_maxima_equal_the_indexed_loop() {
        // 2-D 3x3 stride 2 pad 1 windows (ResNet's stem pool) and a window
        // entirely in the padding, u8 and i8 planes
        let ws = [
            extent(9, 3, 2, 1, (1, 1), AutoPad::NotSet, false).unwrap(),
            extent(7, 3, 2, 1, (1, 1), AutoPad::NotSet, false).unwrap(),
        ];
        let t = table(&[9, 7], &ws).unwrap();
        let xu: Vec<u8> = (0..3 * 63).map(|i| ((i * 97 + 13) % 256) as u8).collect();
        assert_eq!(max_only(&xu, &t, 3), max(&xu, &t, 3).0);
        let xi: Vec<i8> = xu.iter().map(|&v| v as i8).collect();
        assert_eq!(max_only(&xi, &t, 3), max(&xi, &t, 3).0);
        let xf: Vec<f32> = xu
            .iter()
            .enumerate()
            .map(|(i, &v)| match i % 17 {
                0 => f32::NAN,
                5 => f32::NEG_INFINITY,
                _ => f32::from(v) - 128.0,
            })
            .collect();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(max_values(&xf, &t, 3)), bits(max(&xf, &t, 3).0));
        let w = extent(2, 2, 1, 1, (3, 3), AutoPad::NotSet, false).unwrap();
        let t = table(&[2], &[w]).unwrap();
        assert_eq!(max_only(&[5u8, 9], &t, 1), max(&[5u8, 9], &t, 1).0);
    }

    /// [`avg_into`] into a new vector.
    fn avg(x: &[f32], t: &Table, planes: usize, cip: bool, cols: Option<usize>) -> Vec<f32> {
        let mut y = vec![0.0; planes * t.padded.len()];
        avg_into(x, t, planes, cip, cols, &mut y);
        y
    }

    /// MaxPool and AveragePool written into their previous output give
    /// `eval`'s values, in the same storage when the shape repeats, and
    /// follow a change of shape.
    #[test]
    fn eval_into_matches_eval_and_reuses_the_output() {
        use qport_onnx::Attribute;
        let inits = Default::default();
        type Build = fn(&BuildCtx) -> OpResult<Box<dyn Op>>;
        let builds: [(&str, Build); 2] = [("MaxPool", build_max), ("AveragePool", build_avg)];
        for (op_type, build) in builds {
            let node = qport_onnx::Node::new("n", op_type, Vec::<String>::new(), ["y".to_string()])
                .with_attrs(vec![
                    ("kernel_shape", Attribute::Ints(vec![3, 3])),
                    ("strides", Attribute::Ints(vec![2, 2])),
                    ("pads", Attribute::Ints(vec![1, 1, 1, 1])),
                ]);
            let op = build(&BuildCtx::new(&node, 13, &inits)).unwrap();
            let mut out = [None];
            let mut last: Option<([usize; 4], *const f32)> = None;
            for shape in [[1, 3, 9, 7], [1, 3, 9, 7], [2, 2, 5, 6], [2, 2, 5, 6]] {
                let n: usize = shape.iter().product();
                let v: Vec<i32> = (0..n).map(|i| ((i * 37 + 11) % 101) as i32 - 50).collect();
                let fv: Vec<f32> = v.iter().map(|&e| e as f32).collect();
                let f = Tensor::from_vec(shape.to_vec(), fv).unwrap();
                let want = op.eval(&[Some(&f)]).unwrap();
                op.eval_into(&[Some(&f)], &mut out).unwrap();
                assert_eq!(out[0].as_ref(), Some(&want[0]), "{op_type} {shape:?}");
                let ptr = out[0].as_ref().unwrap().as_slice::<f32>().unwrap().as_ptr();
                if let Some((s, p)) = last {
                    if s == shape {
                        assert_eq!(ptr, p, "{op_type} {shape:?}: a new buffer");
                    }
                }
                last = Some((shape, ptr));
                if op_type == "MaxPool" {
                    let uv: Vec<u8> = v.iter().map(|&e| (e + 60) as u8).collect();
                    let iv: Vec<i8> = v.iter().map(|&e| e as i8).collect();
                    let u = Tensor::from_vec(shape.to_vec(), uv).unwrap();
                    let i = Tensor::from_vec(shape.to_vec(), iv).unwrap();
                    for x in [u, i] {
                        let want = op.eval(&[Some(&x)]).unwrap();
                        let mut o = [None];
                        op.eval_into(&[Some(&x)], &mut o).unwrap();
                        assert_eq!(
                            o[0].as_ref(),
                            Some(&want[0]),
                            "{op_type} {shape:?} {:?}",
                            x.dtype()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn column_major_offsets() {
        // [2, 3]: row-major offset 4 is (1, 1) -> column-major 1 + 1*2 = 3
        assert_eq!(column_major(4, &[2, 3]), 3);
        assert_eq!(column_major(2, &[2, 3]), 4);
    }
}
