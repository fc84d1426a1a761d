//! Sliding-window attributes shared by convolutions and pools (FP32
//! `Conv`, `ConvTranspose` and the pools, `ConvInteger`, `QLinearConv`,
//! `QLinearAveragePool`): kernel shape, strides, dilations, pads,
//! `auto_pad` and `group`, the output size and padding they give along each
//! axis, and the resolved geometry of one convolution call ([`ConvGeom`]),
//! which hands the kernels their im2col and depthwise geometries.

use crate::error::{OpError, OpResult};
use qport_core::shape::checked_numel;
use qport_kernels::idepthwise::PlaneGeom;
use qport_kernels::im2col::{im2col, ConvGeometry};
use qport_onnx::Node;

/// The largest kernel size, stride, dilation or pad accepted (2^24). Far
/// beyond any real network, it keeps every window computation within 64-bit
/// arithmetic for tensors of up to [`qport_core::shape::MAX_ELEMENTS`].
pub(crate) const MAX_PARAM: i64 = 1 << 24;

pub(crate) use qport_onnx::shapes::window::AutoPad;

/// The raw window attributes of a node, validated per axis later when the
/// number of spatial axes is known.
#[derive(Clone, Debug)]
pub(crate) struct WindowAttrs {
    pub auto_pad: AutoPad,
    pub kernel_shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
}

impl WindowAttrs {
    /// The stride, when every dilation is 1 and every axis has the same
    /// stride (absent strides and dilations are 1s).
    pub fn uniform_stride(&self) -> Option<usize> {
        let ones = |v: &Option<Vec<i64>>| v.as_ref().is_none_or(|v| v.iter().all(|&s| s == 1));
        let first = self
            .strides
            .as_ref()
            .and_then(|v| v.first().copied())
            .unwrap_or(1);
        let same = self
            .strides
            .as_ref()
            .is_none_or(|v| v.iter().all(|&s| s == first));
        (ones(&self.dilations) && same)
            .then(|| usize::try_from(first).ok())
            .flatten()
    }

    /// Reads `auto_pad`, `kernel_shape`, `strides`, `dilations` and `pads`.
    pub fn parse(node: &Node) -> OpResult<Self> {
        let auto_pad =
            AutoPad::parse(&node.attr_string("auto_pad", "NOTSET")?).map_err(OpError::invalid)?;
        Ok(WindowAttrs {
            auto_pad,
            kernel_shape: node.attr_ints("kernel_shape")?,
            strides: node.attr_ints("strides")?,
            dilations: node.attr_ints("dilations")?,
            pads: node.attr_ints("pads")?,
        })
    }

    /// The attributes without `dilations` (every dilation 1), for
    /// operators that have no such attribute.
    pub fn undilated(mut self) -> Self {
        self.dilations = None;
        self
    }

    /// `kernel_shape` for `rank` spatial axes (each at least 1), if given.
    pub fn kernel(&self, rank: usize) -> OpResult<Option<Vec<usize>>> {
        self.kernel_shape
            .as_ref()
            .map(|k| positive(k, rank, "kernel_shape"))
            .transpose()
    }

    /// The kernel's spatial shape for data shape `x` `[N, C, D1..]` and
    /// weight shape `w` `[*, *, K1..]` (a convolution's or a transposed
    /// convolution's), after checking the ranks, that the kernel is not
    /// empty and that it matches `kernel_shape`.
    pub fn conv_kernel(&self, x: &[usize], w: &[usize]) -> OpResult<Vec<usize>> {
        if x.len() < 3 {
            return Err(OpError::invalid(format!(
                "input X has shape {x:?}; expected [N, C, D1, ...] with at least one spatial axis"
            )));
        }
        if w.len() != x.len() {
            return Err(OpError::invalid(format!(
                "input W has rank {} (shape {w:?}), expected rank {} like X",
                w.len(),
                x.len()
            )));
        }
        let kernel = w[2..].to_vec();
        if let Some(k) = self.kernel(x.len() - 2)? {
            if k != kernel {
                return Err(OpError::invalid(format!(
                    "attribute kernel_shape {k:?} does not match W's spatial shape {kernel:?}"
                )));
            }
        }
        if kernel.contains(&0) {
            return Err(OpError::invalid(format!(
                "input W has an empty kernel (shape {w:?})"
            )));
        }
        Ok(kernel)
    }

    /// `strides` for `rank` spatial axes (default 1).
    pub fn strides(&self, rank: usize) -> OpResult<Vec<usize>> {
        match &self.strides {
            Some(s) => positive(s, rank, "strides"),
            None => Ok(vec![1; rank]),
        }
    }

    /// `dilations` for `rank` spatial axes (default 1).
    pub fn dilations(&self, rank: usize) -> OpResult<Vec<usize>> {
        match &self.dilations {
            Some(s) => positive(s, rank, "dilations"),
            None => Ok(vec![1; rank]),
        }
    }

    /// Explicit `pads` as (begin, end) per axis (default 0). Ignored by the
    /// caller when `auto_pad` is not NOTSET.
    pub fn pads(&self, rank: usize) -> OpResult<Vec<(usize, usize)>> {
        match &self.pads {
            None => Ok(vec![(0, 0); rank]),
            Some(p) => {
                if p.len() != 2 * rank {
                    return Err(OpError::invalid(format!(
                        "attribute pads has {} values, expected {} (begin and end for {rank} spatial axes)",
                        p.len(),
                        2 * rank
                    )));
                }
                if let Some(v) = p.iter().find(|&&v| !(0..=MAX_PARAM).contains(&v)) {
                    return Err(OpError::invalid(format!(
                        "attribute pads holds {v}, expected values in 0..={MAX_PARAM}"
                    )));
                }
                Ok((0..rank)
                    .map(|i| (p[i] as usize, p[rank + i] as usize))
                    .collect())
            }
        }
    }

    /// The output size and padding of every spatial axis for a convolution
    /// or pool over `input` with `kernel` (see [`window`]).
    pub fn windows(
        &self,
        input: &[usize],
        kernel: &[usize],
        ceil_mode: bool,
    ) -> OpResult<Vec<Window>> {
        let r = input.len();
        let strides = self.strides(r)?;
        let dilations = self.dilations(r)?;
        let pads = self.pads(r)?;
        (0..r)
            .map(|a| {
                extent(
                    input[a],
                    kernel[a],
                    strides[a],
                    dilations[a],
                    pads[a],
                    self.auto_pad,
                    ceil_mode,
                )
                .map_err(|e| OpError::invalid(format!("spatial axis {a}: {e}")))
            })
            .collect()
    }
}

fn positive(v: &[i64], rank: usize, what: &str) -> OpResult<Vec<usize>> {
    if v.len() != rank {
        return Err(OpError::invalid(format!(
            "attribute {what} has {} values, expected {rank} (one per spatial axis)",
            v.len()
        )));
    }
    v.iter()
        .map(|&x| {
            if (1..=MAX_PARAM).contains(&x) {
                Ok(x as usize)
            } else {
                Err(OpError::invalid(format!(
                    "attribute {what} holds {x}, expected values in 1..={MAX_PARAM}"
                )))
            }
        })
        .collect()
}

/// One spatial axis of a sliding window (output size, padding, kernel,
/// stride, dilation): the rule static shape inference uses too.
pub(crate) use qport_onnx::shapes::window::Extent as Window;

/// The output size and padding of one axis (onnxruntime's rules).
pub(crate) use qport_onnx::shapes::window::extent;

/// The attributes of a convolution: its window and `group`.
#[derive(Clone, Debug)]
pub(crate) struct ConvAttrs {
    /// `auto_pad`, `kernel_shape`, `strides`, `dilations`, `pads`.
    pub window: WindowAttrs,
    /// `group` (at least 1).
    pub group: usize,
}

impl ConvAttrs {
    /// Reads the window attributes and `group` (default 1).
    pub fn parse(node: &Node) -> OpResult<Self> {
        let group = node.attr_int("group", 1)?;
        if !(1..=1 << 32).contains(&group) {
            return Err(OpError::invalid(format!(
                "attribute group is {group}, expected at least 1"
            )));
        }
        Ok(ConvAttrs {
            window: WindowAttrs::parse(node)?,
            group: group as usize,
        })
    }

    /// Resolves the geometry for input shape `x` `[N, C, D1..]` and weight
    /// shape `w` `[M, C/group, K1..]`, validating ranks, channels, `group`,
    /// `kernel_shape` and every window.
    pub fn geometry(&self, x: &[usize], w: &[usize]) -> OpResult<ConvGeom> {
        let kernel = self.window.conv_kernel(x, w)?;
        let (group, c_in, c_out) = (self.group, x[1], w[0]);
        if w[1].checked_mul(group) != Some(c_in) {
            return Err(OpError::invalid(format!(
                "X has {c_in} channels but W has shape {w:?} with group {group}; expected W[1] * group == C"
            )));
        }
        if c_out % group != 0 {
            return Err(OpError::invalid(format!(
                "W has {c_out} output channels, not divisible by group {group}"
            )));
        }
        let input = x[2..].to_vec();
        let r = input.len();
        let (strides, dilations, pads) = (
            self.window.strides(r)?,
            self.window.dilations(r)?,
            self.window.pads(r)?,
        );
        let (mut output, mut pads_begin) = (Vec::with_capacity(r), Vec::with_capacity(r));
        for a in 0..r {
            let w = extent(
                input[a],
                kernel[a],
                strides[a],
                dilations[a],
                pads[a],
                self.window.auto_pad,
                false,
            )
            .map_err(|e| OpError::invalid(format!("spatial axis {a}: {e}")))?;
            output.push(w.out);
            pads_begin.push(w.pad_begin as isize);
        }
        let g = ConvGeom {
            batch: x[0],
            c_in,
            c_out,
            group,
            spatial: ConvGeometry {
                image: input,
                kernel,
                output,
                strides,
                dilations,
                pads_begin,
            },
        };
        checked_numel(&g.y_shape())?;
        Ok(g)
    }
}

/// The resolved geometry of one convolution call: the channel counts
/// around the kernels' spatial [`ConvGeometry`] (whose `pads_begin` are
/// never negative here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConvGeom {
    /// Images (`N`).
    pub batch: usize,
    /// Input channels (`C`).
    pub c_in: usize,
    /// Output channels (`M`).
    pub c_out: usize,
    /// Channel groups.
    pub group: usize,
    /// The spatial geometry the kernels' im2col, direct and depthwise
    /// convolutions take.
    pub spatial: ConvGeometry,
}

impl ConvGeom {
    /// The output shape `[N, M, O1..]`.
    pub fn y_shape(&self) -> Vec<usize> {
        let mut s = vec![self.batch, self.c_out];
        s.extend(&self.spatial.output);
        s
    }

    /// The 2-D plane geometry of the integer depthwise kernels (callers
    /// check that the convolution is 2-D).
    pub fn plane(&self) -> PlaneGeom {
        let sp = &self.spatial;
        let two = |v: &[usize]| [v[0], v[1]];
        PlaneGeom {
            input: two(&sp.image),
            kernel: two(&sp.kernel),
            strides: two(&sp.strides),
            dilations: two(&sp.dilations),
            pad_begin: [sp.pads_begin[0] as usize, sp.pads_begin[1] as usize],
            output: two(&sp.output),
        }
    }

    /// A 1x1, stride-1, unpadded convolution: the input is its own im2col
    /// matrix.
    pub fn pointwise(&self) -> bool {
        let sp = &self.spatial;
        sp.kernel.iter().all(|&k| k == 1)
            && sp.strides.iter().all(|&s| s == 1)
            && sp.pads_begin.iter().all(|&p| p == 0)
            && sp.image == sp.output
    }

    /// One input channel per group.
    pub fn depthwise(&self) -> bool {
        self.group > 1 && self.c_in / self.group == 1
    }

    /// A 2-D depthwise convolution with one output channel per group: the
    /// case of the integer depthwise kernels ([`Self::plane`]).
    pub fn depthwise_plane(&self) -> bool {
        self.depthwise() && self.c_out / self.group == 1 && self.spatial.rank() == 2
    }

    /// The `[kdim, os]` right-hand matrix of group `gi` of one image `xn`
    /// (`[C, in..]`): the group's input itself for a pointwise convolution,
    /// else its im2col (padded with `pad`) written into `col`, which holds
    /// at least `kdim * os` elements then.
    pub fn group_columns<'a, T: Copy>(
        &self,
        xn: &'a [T],
        gi: usize,
        pad: T,
        col: &'a mut [T],
    ) -> &'a [T] {
        let ConvSizes {
            is, os, cg, kdim, ..
        } = self.sizes();
        let xs = &xn[gi * cg * is..(gi + 1) * cg * is];
        if self.pointwise() {
            return xs;
        }
        let col = &mut col[..kdim * os];
        im2col(&self.spatial, cg, xs, pad, col);
        col
    }

    /// The sizes a per-group GEMM formulation works with.
    pub fn sizes(&self) -> ConvSizes {
        let ks = self.spatial.kernel_size();
        let cg = self.c_in / self.group;
        ConvSizes {
            is: self.spatial.image_size(),
            os: self.spatial.output_size(),
            ks,
            cg,
            mg: self.c_out / self.group,
            kdim: cg * ks,
        }
    }
}

/// The sizes of one convolution as `W_g [mg, kdim] x col [kdim, os]` per
/// image and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConvSizes {
    /// Elements of one input plane.
    pub is: usize,
    /// Elements of one output plane.
    pub os: usize,
    /// Kernel taps.
    pub ks: usize,
    /// Input channels per group.
    pub cg: usize,
    /// Output channels per group.
    pub mg: usize,
    /// The reduction length, `cg · ks`.
    pub kdim: usize,
}

/// The last value an operator derived from its input shapes (a resolved
/// geometry, its output shape, its row blocks), kept for the next call:
/// steady-state runs, which see the same shapes every time, reuse it
/// without recomputing or allocating. Shared by every thread and session
/// running the operator (a read lock and a reference count on a hit).
pub(crate) struct ShapeMemo<V> {
    last: std::sync::RwLock<Option<Memo<V>>>,
}

/// The two shapes a [`ShapeMemo`] value was made for, and the value.
type Memo<V> = (Vec<usize>, Vec<usize>, std::sync::Arc<V>);

impl<V> Default for ShapeMemo<V> {
    fn default() -> Self {
        ShapeMemo {
            last: std::sync::RwLock::new(None),
        }
    }
}

impl<V> ShapeMemo<V> {
    /// The value for shapes `a` and `b`: the kept one when it was made for
    /// these shapes and `fresh` accepts it, else `make()`'s (kept in its
    /// place).
    pub fn get(
        &self,
        a: &[usize],
        b: &[usize],
        fresh: impl Fn(&V) -> bool,
        make: impl FnOnce() -> OpResult<V>,
    ) -> OpResult<std::sync::Arc<V>> {
        {
            let last = self.last.read().unwrap_or_else(|e| e.into_inner());
            if let Some((la, lb, v)) = &*last {
                if la == a && lb == b && fresh(v) {
                    return Ok(v.clone());
                }
            }
        }
        let v = std::sync::Arc::new(make()?);
        *self.last.write().unwrap_or_else(|e| e.into_inner()) =
            Some((a.to_vec(), b.to_vec(), v.clone()));
        Ok(v)
    }
}

/// Output rows per block when a convolution runs in blocks of rows of its
/// first output axis ([`qport_kernels::im2col::ConvGeometry::output_rows`]):
/// as many as `budget` bytes hold at `bytes_per_col` bytes per output
/// position (`cols_per_row` positions a row), at least enough rows for
/// `min_cols` positions, between 1 and `rows`. With several intra-op
/// threads ([`qport_kernels::par::threads`]) and at least as many blocks,
/// the blocks are made a little smaller so that their number is a multiple
/// of the threads, which then take equal shares of whole blocks; with
/// fewer blocks than the threads (one included), one block per thread
/// (each of at least `min_cols` positions) or else one block. Every
/// block size gives the same results; tests shrink the blocks with
/// [`with_row_block`].
///
/// (Splitting the output's rows rather than its channels keeps each
/// thread on the same image rows from layer to layer: on a 2-vCPU guest
/// whose cores passed cache lines to each other at 8 GB/s, a 14 x 14
/// layer that fits one block took 0.31 ms on two threads with its GEMM's
/// rows split, 0.24 ms in two row blocks, 0.28 ms on one thread.)
pub(crate) fn row_block(
    rows: usize,
    cols_per_row: usize,
    bytes_per_col: usize,
    budget: usize,
    min_cols: usize,
) -> usize {
    #[cfg(test)]
    if let Some(r) = TEST_ROW_BLOCK.with(|c| c.get()) {
        return r.clamp(1, rows.max(1));
    }
    let t = qport_kernels::par::threads();
    row_block_on(t, rows, cols_per_row, bytes_per_col, budget, min_cols)
}

/// [`row_block`] for `t` intra-op threads.
fn row_block_on(
    t: usize,
    rows: usize,
    cols_per_row: usize,
    bytes_per_col: usize,
    budget: usize,
    min_cols: usize,
) -> usize {
    let fit = budget / (bytes_per_col * cols_per_row).max(1);
    let rb = fit
        .max(min_cols.div_ceil(cols_per_row.max(1)))
        .clamp(1, rows.max(1));
    let n = rows.div_ceil(rb);
    if t > 1 && n >= t {
        rows.div_ceil(n.div_ceil(t) * t)
    } else if t > 1 {
        // fewer blocks than threads (which would leave threads idle):
        // one block per thread where each still has `min_cols` positions,
        // else the whole output in one block (whose im2col, packing and
        // GEMM split between the threads themselves)
        let per = rows.div_ceil(t);
        if per * cols_per_row >= min_cols {
            per
        } else {
            rows
        }
    } else {
        rb
    }
}

/// The blocks of `rb` output rows of `geo` (each one's first row and
/// geometry) and their bounds in output positions: block `i` covers
/// positions `bounds[i]..bounds[i + 1]` of every output channel (the
/// `bounds` of [`qport_kernels::par::split_columns`]). No blocks for an
/// empty output.
pub(crate) fn row_blocks(geo: &ConvGeometry, rb: usize) -> RowBlocks {
    let mut blocks = vec![];
    let mut bounds = vec![];
    let rows = geo.output.first().copied().unwrap_or(0);
    if rows > 0 && rb > 0 && geo.output_size() > 0 {
        let rest = geo.output_size() / rows;
        let mut r0 = 0;
        while r0 < rows {
            let r1 = rows.min(r0 + rb);
            blocks.push((r0, geo.output_rows(r0, r1)));
            bounds.push(r0 * rest);
            r0 = r1;
        }
        bounds.push(rows * rest);
    }
    (blocks, bounds)
}

/// What [`row_blocks`] returns: each block's first row and geometry, and
/// the blocks' bounds in output positions.
pub(crate) type RowBlocks = (Vec<(usize, ConvGeometry)>, Vec<usize>);

#[cfg(test)]
thread_local! {
    static TEST_ROW_BLOCK: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with [`row_block`] answering `rows` on this thread.
#[cfg(test)]
pub(crate) fn with_row_block<R>(rows: usize, f: impl FnOnce() -> R) -> R {
    let old = TEST_ROW_BLOCK.with(|c| c.replace(Some(rows)));
    let r = f();
    TEST_ROW_BLOCK.with(|c| c.set(old));
    r
}

#[cfg(test)]
mod row_block_tests {
    use super::row_block_on;

    /// One thread: as many rows as the budget holds (at least `min_cols`
    /// positions). Several: a multiple of the threads of blocks when
    /// there are at least as many, else one block per thread where each
    /// keeps `min_cols` positions (a layer that fits one block too), else
    /// the whole output.
    #[test]
    fn blocks_follow_the_budget_and_the_threads() {
        // 56 rows of 56 positions, 1152 bytes a position, 768 KiB: 12 rows
        assert_eq!(row_block_on(1, 56, 56, 1152, 768 << 10, 64), 12);
        // 5 blocks on 2 threads: 6 blocks of 10 rows
        assert_eq!(row_block_on(2, 56, 56, 1152, 768 << 10, 64), 10);
        // a 14 x 14 layer that fits one block: 7 rows a thread
        assert_eq!(row_block_on(1, 14, 14, 3328, 768 << 10, 64), 14);
        assert_eq!(row_block_on(2, 14, 14, 3328, 768 << 10, 64), 7);
        // a 7 x 7 one: 4 rows (28 positions) a thread is too few
        assert_eq!(row_block_on(2, 7, 7, 3328, 768 << 10, 64), 7);
        // 3 blocks on 4 threads: one block per thread (14 rows of 56)
        assert_eq!(row_block_on(4, 56, 56, 700, 768 << 10, 64), 14);
    }
}
