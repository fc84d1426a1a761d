//! 2-D `f32` convolution over activations in a blocked channel layout
//! ("NCHWc", as onnxruntime's x86 NCHWc transformer lays them out):
//! `[N, ceil(C / 16), H, W, 16]`, sixteen channels of one pixel adjacent,
//! the channels past `C` in the last block padding.
//!
//! In that layout a convolution needs neither a column matrix nor a packed
//! copy of its input: the weights, packed once ([`Filters`]), are the
//! vector operand (sixteen output channels of one tap and one input
//! channel), and each input value is broadcast straight from the image.
//! A tile of up to four blocks of output channels by six output pixels
//! (AVX-512; one block by six on AVX2, whose block is two vectors) keeps
//! its sums in registers over every input channel and tap (starting from
//! the residual, where there is one), then adds the bias, applies the
//! activation and stores each output once. The residual may be the output
//! buffer itself ([`conv_in_place`]): a residual network's convolution
//! then accumulates into the buffer of the value it adds, as
//! onnxruntime's Sum fusion does. Depthwise filters ([`Filters::depthwise`]) run on the same
//! layout, one vector of channels by eight pixels. A network keeps its
//! activations blocked from one convolution to the next and converts at
//! the ends of the chain ([`to_blocked`], [`to_planar`]); a chain's first
//! convolution may also read planar `[N, C, H, W]` input directly
//! ([`Layout::Planar`], for a 3-channel stem).
//!
//! Every output is the same sequence of operations on every dispatch row,
//! so the AVX-512, AVX2 and portable bodies give the same bits (tested)
//! and so does any thread count: starting from the residual (or zero), for
//! each block of input channels, kernel row, kernel column and channel of
//! the block in that order, one fused multiply-add of input and weight
//! (taps outside the image skipped); then `+ bias`, the activation. That
//! order is not onnxruntime's im2col order, so a network on these
//! kernels computes other bits than on [`crate::pgemm`] (within the FP32
//! parity bound against onnxruntime).
//!
//! ```
//! use qport_kernels::activation::Activation;
//! use qport_kernels::im2col::ConvGeometry;
//! use qport_kernels::nchwc::{conv, to_blocked, to_planar, blocked_len, Filters, Layout};
//! // one 3x3 filter over a 2-channel 4x4 image, padding 1: sums of 3x3 windows
//! let (c, m) = (2, 1);
//! let x: Vec<f32> = (0..c * 16).map(|i| (i % 16) as f32).collect();
//! let w = vec![1.0f32; m * c * 9];
//! let f = Filters::dense(&w, m, c, [3, 3], None);
//! let g = ConvGeometry::new_2d([4, 4], [3, 3], [4, 4], [1, 1], [1, 1], [1, 1]);
//! let mut xb = vec![0.0; blocked_len(1, c, 16)];
//! to_blocked(&x, 1, c, 16, &mut xb);
//! let mut yb = vec![0.0; blocked_len(1, m, 16)];
//! conv(&g, 1, &xb, Layout::Blocked, &f, None, Activation::Identity, &mut yb);
//! let mut y = vec![0.0; m * 16];
//! to_planar(&yb, 1, m, 16, &mut y);
//! // the corner (0, 0) sums pixels 0, 1, 4, 5 of both channels
//! assert_eq!(y[0], 2.0 * (0.0 + 1.0 + 4.0 + 5.0));
//! ```

use crate::activation::Activation;
use crate::dispatch::{level, Level};
use crate::im2col::ConvGeometry;

/// Channels per block of the layout.
pub const BLOCK: usize = 16;

/// Elements of one tap's dense weights for one pair of blocks: sixteen
/// output channels per input channel, of sixteen input channels, or of
/// `c` when the input has fewer (a stem: its taps then lie side by side,
/// where padded to sixteen they would fall into few L1 sets and evict
/// each other).
pub(crate) fn tap_len(c: usize) -> usize {
    BLOCK * c.min(BLOCK)
}

/// Blocks of [`BLOCK`] channels holding `c` channels.
pub fn blocks(c: usize) -> usize {
    c.div_ceil(BLOCK)
}

/// Elements of a blocked tensor of `n` images of `c` channels with `plane`
/// pixels each.
pub fn blocked_len(n: usize, c: usize, plane: usize) -> usize {
    n * blocks(c) * plane * BLOCK
}

/// Whether this thread's dispatch row runs [`conv`] on SIMD bodies (AVX2
/// or AVX-512): where it does not (the portable row, aarch64), a network
/// is faster on the planar kernels.
pub fn preferred() -> bool {
    level() != Level::Generic
}

/// How a convolution's input is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `[N, C, H, W]`: for a chain's first convolution with few input
    /// channels (each broadcast reads one plane).
    Planar,
    /// `[N, ceil(C / 16), H, W, 16]`.
    Blocked,
}

/// The weights and bias of a 2-D convolution packed for [`conv`], once
/// per model.
///
/// Dense filters (`group` 1) are stored `[M/16][C/16][KH][KW][16 in][16
/// out]` (`[M/16][1][KH][KW][C][16]` for fewer than 16 input channels), depthwise ones (`group` = `C` = `M`) `[C/16][KH][KW][16]`, both
/// zero in the padding channels; the bias is padded to whole blocks.
#[derive(Clone, Debug)]
pub struct Filters {
    m: usize,
    c: usize,
    kernel: [usize; 2],
    depthwise: bool,
    data: Aligned,
    bias: Vec<f32>,
}

/// Floats whose first lies on a cache line ([`crate::aligned`]): every
/// 16-float weight vector of [`Filters`] is then one line, never split
/// across two.
#[derive(Debug)]
struct Aligned {
    buf: Vec<f32>,
    /// Floats before the boundary in `buf`.
    off: usize,
    len: usize,
}

impl Aligned {
    /// `len` zeros.
    fn zeroed(len: usize) -> Aligned {
        let buf = vec![0.0f32; len + crate::aligned::slack::<f32>()];
        let off = crate::aligned::line_offset(&buf);
        Aligned { buf, off, len }
    }

    fn as_slice(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

impl Clone for Aligned {
    /// A new buffer, aligned on its own.
    fn clone(&self) -> Aligned {
        let mut a = Aligned::zeroed(self.len);
        a.as_mut_slice().copy_from_slice(self.as_slice());
        a
    }
}

impl Filters {
    /// Packs the weights `w` (`[M, C, KH, KW]`, row-major) and `bias`
    /// (`[M]`, zero when `None`) of an ungrouped convolution.
    ///
    /// # Panics
    /// Panics when `w` does not hold `M * C * KH * KW` values or `bias` `M`.
    pub fn dense(
        w: &[f32],
        m: usize,
        c: usize,
        kernel: [usize; 2],
        bias: Option<&[f32]>,
    ) -> Filters {
        let [kh, kw] = kernel;
        let ks = kh * kw;
        assert_eq!(w.len(), m * c * ks, "nchwc::Filters::dense: weight size");
        let (mb, cb) = (blocks(m), blocks(c));
        let tap = tap_len(c);
        let mut packed = Aligned::zeroed(mb * cb * ks * tap);
        let data = packed.as_mut_slice();
        for o in 0..m {
            for i in 0..c {
                for t in 0..ks {
                    let at = (((o / BLOCK) * cb + i / BLOCK) * ks + t) * tap
                        + (i % BLOCK) * BLOCK
                        + o % BLOCK;
                    data[at] = w[(o * c + i) * ks + t];
                }
            }
        }
        Filters {
            m,
            c,
            kernel,
            depthwise: false,
            data: packed,
            bias: padded_bias(bias, m),
        }
    }

    /// Packs the weights `w` (`[C, 1, KH, KW]`) and `bias` (`[C]`) of a
    /// depthwise convolution (`group` = `C`, one output channel per group).
    ///
    /// # Panics
    /// Panics when `w` does not hold `C * KH * KW` values or `bias` `C`.
    pub fn depthwise(w: &[f32], c: usize, kernel: [usize; 2], bias: Option<&[f32]>) -> Filters {
        let ks = kernel[0] * kernel[1];
        assert_eq!(w.len(), c * ks, "nchwc::Filters::depthwise: weight size");
        let mut packed = Aligned::zeroed(blocks(c) * ks * BLOCK);
        let data = packed.as_mut_slice();
        for ch in 0..c {
            for t in 0..ks {
                data[((ch / BLOCK) * ks + t) * BLOCK + ch % BLOCK] = w[ch * ks + t];
            }
        }
        Filters {
            m: c,
            c,
            kernel,
            depthwise: true,
            data: packed,
            bias: padded_bias(bias, c),
        }
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        self.m
    }

    /// Input channels.
    pub fn in_channels(&self) -> usize {
        self.c
    }

    /// `[KH, KW]`.
    pub fn kernel(&self) -> [usize; 2] {
        self.kernel
    }

    /// Whether these are depthwise filters.
    pub fn is_depthwise(&self) -> bool {
        self.depthwise
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        (self.data.buf.len() + self.bias.len()) * 4
    }
}

fn padded_bias(bias: Option<&[f32]>, m: usize) -> Vec<f32> {
    let mut b = vec![0.0f32; blocks(m) * BLOCK];
    if let Some(src) = bias {
        assert_eq!(src.len(), m, "nchwc::Filters: bias size");
        b[..m].copy_from_slice(src);
    }
    b
}

/// Converts `x` (`[N, C, plane]`) to the blocked layout in `out`
/// ([`blocked_len`] elements), the padding channels zero.
///
/// # Panics
/// Panics when the lengths do not match.
pub fn to_blocked(x: &[f32], n: usize, c: usize, plane: usize, out: &mut [f32]) {
    assert_eq!(x.len(), n * c * plane, "nchwc::to_blocked: input size");
    assert_eq!(
        out.len(),
        blocked_len(n, c, plane),
        "nchwc::to_blocked: output size"
    );
    to_blocked_at(level(), x, n, c, plane, out)
}

/// [`to_blocked`] at `lvl` (the CPU must support it): on AVX-512 and AVX2
/// a block of a vector's width of pixels and channels transposed in
/// registers at a time; the same values on every level.
pub(crate) fn to_blocked_at(
    lvl: Level,
    x: &[f32],
    n: usize,
    c: usize,
    plane: usize,
    out: &mut [f32],
) {
    let cb = blocks(c);
    for img in 0..n {
        for b in 0..cb {
            let dst = &mut out[(img * cb + b) * plane * BLOCK..][..plane * BLOCK];
            let real = (c - b * BLOCK).min(BLOCK);
            let src = &x[(img * c + b * BLOCK) * plane..][..real * plane];
            match lvl {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the caller chose a level this CPU supports;
                // `src` holds `real` rows of `plane`, `dst` `plane` pixels
                // of a block.
                Level::Avx512 => unsafe {
                    crate::arch::x86_64::nchwc::to_blocked_avx512(src, plane, real, dst)
                },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Level::Avx2 => unsafe {
                    crate::arch::x86_64::nchwc::to_blocked_avx2(src, plane, real, dst)
                },
                _ => {
                    if real < BLOCK {
                        dst.fill(0.0);
                    }
                    // a few pixels at a time, every channel of the block:
                    // the sixteen source rows are read in step, each
                    // output line written whole
                    const P: usize = 8;
                    let mut p0 = 0;
                    while p0 < plane {
                        let p1 = (p0 + P).min(plane);
                        for ci in 0..real {
                            let row = &src[ci * plane..];
                            for p in p0..p1 {
                                dst[p * BLOCK + ci] = row[p];
                            }
                        }
                        p0 = p1;
                    }
                }
            }
        }
    }
}

/// Converts blocked `x` back to `[N, C, plane]` in `out`, dropping the
/// padding channels.
///
/// # Panics
/// Panics when the lengths do not match.
pub fn to_planar(x: &[f32], n: usize, c: usize, plane: usize, out: &mut [f32]) {
    assert_eq!(
        x.len(),
        blocked_len(n, c, plane),
        "nchwc::to_planar: input size"
    );
    assert_eq!(out.len(), n * c * plane, "nchwc::to_planar: output size");
    to_planar_at(level(), x, n, c, plane, out)
}

/// [`to_planar`] at `lvl` (the CPU must support it), as
/// [`to_blocked_at`].
pub(crate) fn to_planar_at(
    lvl: Level,
    x: &[f32],
    n: usize,
    c: usize,
    plane: usize,
    out: &mut [f32],
) {
    let cb = blocks(c);
    for img in 0..n {
        for b in 0..cb {
            let src = &x[(img * cb + b) * plane * BLOCK..][..plane * BLOCK];
            let real = (c - b * BLOCK).min(BLOCK);
            let dst = &mut out[(img * c + b * BLOCK) * plane..][..real * plane];
            match lvl {
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the caller chose a level this CPU supports;
                // `src` holds `plane` pixels of a block, `dst` `real` rows
                // of `plane`.
                Level::Avx512 => unsafe {
                    crate::arch::x86_64::nchwc::to_planar_avx512(src, plane, real, dst)
                },
                #[cfg(target_arch = "x86_64")]
                // SAFETY: as above.
                Level::Avx2 => unsafe {
                    crate::arch::x86_64::nchwc::to_planar_avx2(src, plane, real, dst)
                },
                _ => {
                    const P: usize = 8;
                    let mut p0 = 0;
                    while p0 < plane {
                        let p1 = (p0 + P).min(plane);
                        for ci in 0..real {
                            let row = &mut dst[ci * plane..];
                            for p in p0..p1 {
                                row[p] = src[p * BLOCK + ci];
                            }
                        }
                        p0 = p1;
                    }
                }
            }
        }
    }
}

/// Each channel's mean over its plane, from blocked input to planar
/// output: `x` holds `n` images of `c` channels blocked (`plane` pixels
/// each), `out` the `n * c` means (a `GlobalAveragePool`'s `[N, C, 1,
/// 1]`). Each mean is the planar operator's: the channel's values
/// widened to `f64` and summed in pixel order from `-0.0` (as
/// `Iterator::sum` does), divided by `plane` in `f64`, rounded to `f32`;
/// the same bits on every dispatch row (a block of channels per vector).
/// Splits the images over the intra-op threads.
///
/// # Panics
/// Panics when a length does not match or `plane` is 0.
///
/// ```
/// use qport_kernels::nchwc::{blocked_len, global_average, to_blocked};
/// let x: Vec<f32> = (0..3 * 4).map(|i| i as f32).collect(); // 3 channels of 4
/// let mut b = vec![0.0; blocked_len(1, 3, 4)];
/// to_blocked(&x, 1, 3, 4, &mut b);
/// let mut y = [0.0f32; 3];
/// global_average(&b, 1, 3, 4, &mut y);
/// assert_eq!(y, [1.5, 5.5, 9.5]);
/// ```
pub fn global_average(x: &[f32], n: usize, c: usize, plane: usize, out: &mut [f32]) {
    assert!(plane > 0, "nchwc::global_average: an empty plane");
    assert_eq!(
        x.len(),
        blocked_len(n, c, plane),
        "nchwc::global_average: input size"
    );
    assert_eq!(out.len(), n * c, "nchwc::global_average: output size");
    if c == 0 {
        return;
    }
    let lvl = level();
    let image = blocked_len(1, c, plane);
    let work = x.len() * crate::par::STREAM_COST;
    crate::par::split_mut(out, c, work, |start, part| {
        let x = &x[start / c * image..][..part.len() / c * image];
        global_average_at(lvl, x, c, plane, part)
    });
}

/// The images of [`global_average`] whose means are `out` (whole images,
/// the first at the start of `x`), at `lvl` (the CPU must support it): the
/// portable loop, or the same loop compiled with AVX2 or AVX-512.
pub(crate) fn global_average_at(lvl: Level, x: &[f32], c: usize, plane: usize, out: &mut [f32]) {
    match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller chose a level this CPU supports.
        Level::Avx512 => unsafe {
            crate::arch::x86_64::nchwc::global_average_avx512(x, c, plane, out)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe { crate::arch::x86_64::nchwc::global_average_avx2(x, c, plane, out) },
        _ => global_average_loop(x, c, plane, out),
    }
}

/// The loop of [`global_average_at`] (inlined into each compiled copy):
/// a block's sixteen sums side by side, each in pixel order.
#[inline(always)]
pub(crate) fn global_average_loop(x: &[f32], c: usize, plane: usize, out: &mut [f32]) {
    let cb = blocks(c);
    let div = plane as f64;
    for (img, y) in out.chunks_mut(c).enumerate() {
        for b in 0..cb {
            let src = &x[(img * cb + b) * plane * BLOCK..][..plane * BLOCK];
            let (pixels, _) = src.as_chunks::<BLOCK>();
            let mut acc = [-0.0f64; BLOCK];
            for px in pixels {
                for (a, &v) in acc.iter_mut().zip(px) {
                    *a += f64::from(v);
                }
            }
            let real = (c - b * BLOCK).min(BLOCK);
            for (yv, a) in y[b * BLOCK..][..real].iter_mut().zip(&acc) {
                *yv = (*a / div) as f32;
            }
        }
    }
}

/// Window maxima over blocked planes: `planes` planes of `in_plane`
/// pixels (sixteen channels each) in `x`, `out` holding `planes` planes of
/// `starts.len() - 1` outputs. Output `o` of a plane is the maximum of the
/// pixels `offsets[starts[o]..starts[o + 1]]` (row-major in the plane)
/// taken in that order as the planar operator takes them, per channel:
/// the first tap, then each later tap that compares greater; `f32::MIN`
/// for a window with no tap. Splits the planes over the intra-op threads.
///
/// # Panics
/// Panics when a length does not match or an offset lies outside the
/// plane.
pub fn max_pool(
    x: &[f32],
    planes: usize,
    in_plane: usize,
    starts: &[usize],
    offsets: &[usize],
    out: &mut [f32],
) {
    let outs = starts.len().saturating_sub(1);
    assert_eq!(
        x.len(),
        planes * in_plane * BLOCK,
        "nchwc::max_pool: input size"
    );
    assert_eq!(
        out.len(),
        planes * outs * BLOCK,
        "nchwc::max_pool: output size"
    );
    assert!(
        offsets.iter().all(|&o| o < in_plane),
        "nchwc::max_pool: offset outside the plane"
    );
    let work = planes * offsets.len() * BLOCK * crate::par::STREAM_COST / BLOCK;
    let lvl = level();
    crate::par::split_mut(out, outs * BLOCK, work, |start, block| {
        let p0 = start / (outs * BLOCK).max(1);
        let x = &x[p0 * in_plane * BLOCK..];
        max_pool_at(lvl, x, in_plane, starts, offsets, block)
    });
}

/// The planes of [`max_pool`] whose outputs are `out` (whole planes, the
/// first at the start of `x`), at `lvl` (the CPU must support it): the
/// portable loop, or the same loop compiled with AVX2 or AVX-512 (the same
/// comparisons in the same order, so the same bits, a block per vector).
pub(crate) fn max_pool_at(
    lvl: Level,
    x: &[f32],
    in_plane: usize,
    starts: &[usize],
    offsets: &[usize],
    out: &mut [f32],
) {
    match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller chose a level this CPU supports.
        Level::Avx512 => unsafe {
            crate::arch::x86_64::nchwc::max_pool_avx512(x, in_plane, starts, offsets, out)
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe {
            crate::arch::x86_64::nchwc::max_pool_avx2(x, in_plane, starts, offsets, out)
        },
        _ => max_pool_loop(x, in_plane, starts, offsets, out),
    }
}

/// Outputs ahead of the one being computed whose taps [`max_pool_loop`]
/// prefetches. ResNet-50's stem pooling reads a 3.2 MB map that does not
/// fit the L2: with every tap of the output 32 ahead requested, it took
/// 0.10–0.11 ms instead of 0.15–0.19 on the Zen 5 host (16 ahead:
/// 0.12; 64: 0.10–0.11; only each window row's last tap: 0.14–0.18).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const PD: usize = 32;

/// The loop of [`max_pool_at`] (inlined into each compiled copy), the
/// taps of the output [`PD`] ahead prefetched on x86-64.
#[inline(always)]
pub(crate) fn max_pool_loop(
    x: &[f32],
    in_plane: usize,
    starts: &[usize],
    offsets: &[usize],
    out: &mut [f32],
) {
    let outs = starts.len().saturating_sub(1);
    for (p, yp) in out.chunks_mut((outs * BLOCK).max(1)).enumerate() {
        // (pixels as whole blocks: one bounds check per tap, and the
        // block's maxima in registers)
        let (pixels, _) = x[p * in_plane * BLOCK..][..in_plane * BLOCK].as_chunks::<BLOCK>();
        let (ys, _) = yp.as_chunks_mut::<BLOCK>();
        for (o, y) in ys.iter_mut().enumerate() {
            let taps = &offsets[starts[o]..starts[o + 1]];
            #[cfg(target_arch = "x86_64")]
            if o + PD < outs {
                for &t in &offsets[starts[o + PD]..starts[o + PD + 1]] {
                    // SAFETY: a prefetch reads nothing and cannot fault
                    // (and `t` is inside the plane: asserted).
                    unsafe {
                        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                            pixels.as_ptr().wrapping_add(t).cast(),
                        )
                    };
                }
            }
            let mut acc = [f32::MIN; BLOCK];
            if let Some((&first, rest)) = taps.split_first() {
                acc = pixels[first];
                for &t in rest {
                    let v = &pixels[t];
                    for (a, &b) in acc.iter_mut().zip(v) {
                        *a = if b > *a { b } else { *a };
                    }
                }
            }
            *y = acc;
        }
    }
}

/// `out = act((residual + conv(input, filters)) + bias)` over `n` images
/// (the sums start from the residual, see the [module docs](self)):
/// `input` in `layout` with `filters.in_channels()` channels, `residual`
/// (if any) and `out` blocked with `filters.out_channels()` channels.
/// `g` is the 2-D geometry (any kernel, stride, dilation and padding
/// before; the output size sets the padding after). Splits the work over
/// the intra-op threads ([`crate::par`]); see the [module docs](self) for
/// the order of operations.
///
/// # Panics
/// Panics when the geometry is not 2-D, its kernel differs from the
/// filters', a slice length does not match, or depthwise filters get
/// [`Layout::Planar`] input.
#[allow(clippy::too_many_arguments)]
pub fn conv(
    g: &ConvGeometry,
    n: usize,
    input: &[f32],
    layout: Layout,
    filters: &Filters,
    residual: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let residual = residual.map_or(Residual::None, Residual::Apart);
    conv_at(level(), g, n, input, layout, filters, residual, act, out)
}

/// [`conv`] with the residual in `out` itself: `out = act((out +
/// conv(input, filters)) + bias)`, each output's sums starting from its
/// own residual before anything is written there (the same values as
/// [`conv`] with a copy of `out` as the residual, bit for bit). A residual network's convolution then
/// accumulates into the buffer of the value it adds, which dies there,
/// instead of reading one buffer and filling another (onnxruntime's Sum
/// fusion does the same).
///
/// # Panics
/// As [`conv`].
pub fn conv_in_place(
    g: &ConvGeometry,
    n: usize,
    input: &[f32],
    layout: Layout,
    filters: &Filters,
    act: Activation,
    out: &mut [f32],
) {
    conv_at(
        level(),
        g,
        n,
        input,
        layout,
        filters,
        Residual::InOut,
        act,
        out,
    )
}

/// What [`conv_at`] adds to each output before the activation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Residual<'a> {
    /// Nothing.
    None,
    /// A blocked tensor of the output's size.
    Apart(&'a [f32]),
    /// The output's own contents on entry.
    InOut,
}

/// [`conv`] at SIMD level `lvl` (the CPU must support it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_at(
    lvl: Level,
    g: &ConvGeometry,
    n: usize,
    input: &[f32],
    layout: Layout,
    filters: &Filters,
    residual: Residual<'_>,
    act: Activation,
    out: &mut [f32],
) {
    assert_eq!(g.rank(), 2, "nchwc::conv: a 2-D geometry");
    assert_eq!(
        [g.kernel[0], g.kernel[1]],
        filters.kernel,
        "nchwc::conv: kernel shape"
    );
    assert!(
        !(filters.depthwise && layout == Layout::Planar),
        "nchwc::conv: depthwise filters read blocked input"
    );
    let (c, m) = (filters.c, filters.m);
    let (plane, oplane) = (g.image_size(), g.output_size());
    let in_len = match layout {
        Layout::Planar => c * plane,
        Layout::Blocked => blocked_len(1, c, plane),
    };
    let out_len = blocked_len(1, m, oplane);
    assert_eq!(input.len(), n * in_len, "nchwc::conv: input size");
    assert_eq!(out.len(), n * out_len, "nchwc::conv: output size");
    if let Residual::Apart(r) = residual {
        assert_eq!(r.len(), n * out_len, "nchwc::conv: residual size");
    }
    if n == 0 || out_len == 0 {
        return;
    }
    // filter blocks per group: up to 4 (AVX-512) in groups of equal size
    // (within one), so that the threads' shares of the items, which run
    // group by group, hold equal work
    let nf = match lvl {
        Level::Avx512 => {
            let mb = blocks(m);
            mb.div_ceil(mb.div_ceil(4).max(1)).max(1)
        }
        _ => 1,
    };
    let groups = if filters.depthwise {
        blocks(m)
    } else {
        blocks(m).div_ceil(nf)
    };
    // multiply-adds of one image
    let work = m * if filters.depthwise { 1 } else { c } * g.kernel_size() * oplane;
    let shape = Shape::new(g, c, layout, crate::par::parts_for(work), groups);
    let ptr = crate::par::SendPtr(out.as_mut_ptr());
    let ptr = &ptr;
    for img in 0..n {
        let a = Args {
            s: &shape,
            x: &input[img * in_len..][..in_len],
            f: filters,
            residual: match residual {
                Residual::Apart(r) => Residual::Apart(&r[img * out_len..][..out_len]),
                other => other,
            },
            act,
            nf,
        };
        let items = groups * shape.segs;
        crate::par::split(items, 1, work, |i0, i1| {
            // SAFETY: the items of `split` are disjoint, and each writes
            // only its own group's outputs of its own segment, inside
            // image `img`'s part of `out`, which stays borrowed until the
            // split returns.
            let o = unsafe { ptr.get().add(img * out_len) };
            run_items(lvl, &a, o, i0..i1)
        });
    }
}

/// The checked geometry of one call, per image.
pub(crate) struct Shape {
    pub(crate) c: usize,
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) dh: usize,
    pub(crate) dw: usize,
    pub(crate) pt: isize,
    pub(crate) pl: isize,
    /// Strides of the input between channel blocks, rows, pixels and
    /// channels of one block.
    pub(crate) xs: [usize; 4],
    /// Output rows of a band (the work unit with a group of filter
    /// blocks), or output columns of a segment of a 1 x 1 unstrided,
    /// unpadded convolution seen as one row.
    pub(crate) band: usize,
    /// Bands (or segments) per image.
    pub(crate) segs: usize,
    /// Whether the convolution is seen as one row (`h` = `oh` = 1).
    pub(crate) flat: bool,
    /// Output rows whose taps all lie inside the image: `top..bottom`.
    pub(crate) top: usize,
    pub(crate) bottom: usize,
    /// Output columns whose taps all lie inside the image: `lo..hi`.
    pub(crate) lo: usize,
    pub(crate) hi: usize,
}

/// Pixels per segment of a 1 x 1 convolution seen as one row, at most.
/// Each batch of input channels runs over a whole segment before the next
/// (the x86 bodies size a batch's weights to stay in L1 meanwhile), so a segment as long as the image reads every weight once per
/// call, as onnxruntime's pointwise kernel does; the bound keeps a
/// segment's partial sums between batches (64 bytes per pixel and filter
/// block, 512 KiB for four blocks) within L2. Measured on ResNet-50 (one
/// thread): the image in one segment ran its 1 x 1 layers at 14 x 14 and
/// 28 x 28 about 3 % faster than segments of 96 pixels, and those at
/// 56 x 56 as fast.
const FLAT_SEG: usize = 2048;

/// Segments of a 1 x 1 convolution seen as one row of `ow` pixels, split
/// between `parts` threads by `groups` filter groups: the fewest within
/// [`FLAT_SEG`] whose number of work items (`groups` × segments) the
/// threads share evenly, each segment a whole number of 6-pixel tiles
/// where that leaves one to every segment. Returns `(pixels per segment,
/// segments)`.
fn flat_segments(ow: usize, parts: usize, groups: usize) -> (usize, usize) {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let parts = parts.max(1);
    let even = parts / gcd(groups.max(1), parts);
    let segs = ow.div_ceil(FLAT_SEG).max(1).div_ceil(even) * even;
    let len = ow.div_ceil(segs).max(1);
    let tiled = len.div_ceil(6) * 6;
    let len = if segs > 1 && tiled <= FLAT_SEG && tiled * (segs - 1) < ow {
        tiled
    } else {
        len
    };
    (len, ow.div_ceil(len).max(1))
}

/// Output pixels per band of rows, at least (one row at least).
const BAND_PIXELS: usize = 96;

/// The outputs `lo..hi` (of `out`) along an axis of `size` whose kernel
/// of `k` taps (stride `s`, dilation `d`, padding `p` before) lies inside
/// the image.
fn inside(size: usize, k: usize, s: usize, d: usize, p: isize, out: usize) -> (usize, usize) {
    // o * s >= p and o * s + (k - 1) * d - p <= size - 1
    let lo = if p <= 0 { 0 } else { (p as usize).div_ceil(s) };
    let last = size as isize - 1 + p - ((k as isize - 1) * d as isize);
    let hi = if last < 0 { 0 } else { last as usize / s + 1 };
    let lo = lo.min(out);
    (lo, hi.min(out).max(lo))
}

impl Shape {
    /// The shape of a call whose work splits between `parts` threads by
    /// `groups` filter groups (for the segments of a 1 x 1 convolution).
    fn new(g: &ConvGeometry, c: usize, layout: Layout, parts: usize, groups: usize) -> Shape {
        let (mut h, mut w) = (g.image[0], g.image[1]);
        let (mut oh, mut ow) = (g.output[0], g.output[1]);
        let (kh, kw) = (g.kernel[0], g.kernel[1]);
        let (sh, sw) = (g.strides[0].max(1), g.strides[1].max(1));
        let (dh, dw) = (g.dilations[0].max(1), g.dilations[1].max(1));
        let (pt, pl) = (g.pads_begin[0], g.pads_begin[1]);
        // a pointwise, unstrided, unpadded convolution over the whole
        // image is one long row
        let flat =
            kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w;
        if flat {
            (w, ow) = (h * w, oh * ow);
            (h, oh) = (1, 1);
        }
        let plane = h * w;
        let xs = match layout {
            Layout::Blocked => [plane * BLOCK, w * BLOCK, BLOCK, 1],
            Layout::Planar => [plane * BLOCK, w, 1, plane],
        };
        let (band, segs) = if flat {
            flat_segments(ow, parts, groups)
        } else {
            let band = BAND_PIXELS.div_ceil(ow.max(1)).clamp(1, oh.max(1));
            (band, oh.div_ceil(band))
        };
        let (lo, hi) = inside(w, kw, sw, dw, pl, ow);
        let (top, bottom) = inside(h, kh, sh, dh, pt, oh);
        Shape {
            c,
            h,
            w,
            oh,
            ow,
            kh,
            kw,
            sh,
            sw,
            dh,
            dw,
            pt,
            pl,
            xs,
            band,
            segs,
            flat,
            top,
            bottom,
            lo,
            hi,
        }
    }

    /// Kernel rows inside the image for output row `oy`.
    #[inline(always)]
    pub(crate) fn rows(&self, oy: usize) -> (usize, usize) {
        span(oy, self.sh, self.dh, self.pt, self.h, self.kh)
    }

    /// Kernel columns inside the image for output column `ox`.
    #[inline(always)]
    pub(crate) fn cols(&self, ox: usize) -> (usize, usize) {
        span(ox, self.sw, self.dw, self.pl, self.w, self.kw)
    }

    /// Output rows and columns of band (or segment) `s`: `(oy0, oy1, x0,
    /// x1)`.
    #[inline(always)]
    pub(crate) fn segment(&self, s: usize) -> (usize, usize, usize, usize) {
        if self.flat {
            (0, 1, s * self.band, ((s + 1) * self.band).min(self.ow))
        } else {
            (
                s * self.band,
                ((s + 1) * self.band).min(self.oh),
                0,
                self.ow,
            )
        }
    }
}

/// Taps `k0..k1` of a kernel of `k` taps (dilation `d`) inside `0..size`
/// for output `o` at stride `s`, padding `p` before.
#[inline(always)]
fn span(o: usize, s: usize, d: usize, p: isize, size: usize, k: usize) -> (usize, usize) {
    let base = (o * s) as isize - p;
    let k0 = if base >= 0 {
        0
    } else {
        ((-base) as usize).div_ceil(d)
    };
    let k1 = if base > size as isize - 1 {
        0
    } else {
        ((size as isize - 1 - base) as usize / d + 1).min(k)
    };
    (k0.min(k), k1.max(k0.min(k)))
}

/// The operands of one image of one call, as every body takes them.
pub(crate) struct Args<'a> {
    pub(crate) s: &'a Shape,
    pub(crate) x: &'a [f32],
    pub(crate) f: &'a Filters,
    pub(crate) residual: Residual<'a>,
    pub(crate) act: Activation,
    /// Filter blocks per group (dense filters).
    pub(crate) nf: usize,
}

impl Args<'_> {
    /// Blocks of input channels.
    pub(crate) fn cb(&self) -> usize {
        blocks(self.s.c)
    }

    /// Packed weights of the filters.
    pub(crate) fn weights(&self) -> &[f32] {
        self.f.data.as_slice()
    }

    /// Padded bias.
    pub(crate) fn bias(&self) -> &[f32] {
        &self.f.bias
    }

    /// Output blocks.
    pub(crate) fn mb(&self) -> usize {
        blocks(self.f.m)
    }
}

/// Runs work items `items` (group-major: group `i / segs`, segment `i %
/// segs`) at level `lvl`, writing through `out` (one image's output).
fn run_items(lvl: Level, a: &Args, out: *mut f32, items: std::ops::Range<usize>) {
    match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller chose a level this CPU supports; the slices
        // were checked against the geometry, and `out` holds the image's
        // blocked output.
        Level::Avx512 => unsafe { crate::arch::x86_64::nchwc::avx512(a, out, items) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe { crate::arch::x86_64::nchwc::avx2(a, out, items) },
        // SAFETY: as above.
        _ => unsafe { reference(a, out, items) },
    }
}

/// The portable body: every output in the order of the module docs.
///
/// # Safety
/// `out` must hold the image's blocked output and `a` be checked.
unsafe fn reference(a: &Args, out: *mut f32, items: std::ops::Range<usize>) {
    let s = a.s;
    let (w, bias) = (a.weights(), a.bias());
    let (cb, mb) = (a.cb(), a.mb());
    let ks = s.kh * s.kw;
    let oplane = s.oh * s.ow;
    for item in items {
        let (grp, sg) = (item / s.segs, item % s.segs);
        let (oy0, oy1, x0, x1) = s.segment(sg);
        let fbs = if a.f.depthwise {
            grp..grp + 1
        } else {
            grp * a.nf..((grp + 1) * a.nf).min(mb)
        };
        for (fb, oy) in fbs.flat_map(|fb| (oy0..oy1).map(move |oy| (fb, oy))) {
            let (ky0, ky1) = s.rows(oy);
            for ox in x0..x1 {
                let (kx0, kx1) = s.cols(ox);
                let o = (fb * oplane + oy * s.ow + ox) * BLOCK;
                // the sums start from the residual (as the SIMD tiles do)
                let mut acc = [0.0f32; BLOCK];
                for (i, v) in acc.iter_mut().enumerate() {
                    *v = match a.residual {
                        Residual::Apart(r) => r[o + i],
                        // SAFETY: `o + i` is inside the image's output;
                        // this item alone writes it, after this read.
                        Residual::InOut => unsafe { *out.add(o + i) },
                        Residual::None => 0.0,
                    };
                }
                if a.f.depthwise {
                    for ky in ky0..ky1 {
                        let iy = (oy * s.sh + ky * s.dh) as isize - s.pt;
                        for kx in kx0..kx1 {
                            let ix = (ox * s.sw + kx * s.dw) as isize - s.pl;
                            let xo = fb * s.xs[0] + iy as usize * s.xs[1] + ix as usize * s.xs[2];
                            let wo = (fb * ks + ky * s.kw + kx) * BLOCK;
                            for (o, v) in acc.iter_mut().enumerate() {
                                *v = a.x[xo + o].mul_add(w[wo + o], *v);
                            }
                        }
                    }
                } else {
                    for b in 0..cb {
                        let real = (s.c - b * BLOCK).min(BLOCK);
                        for ky in ky0..ky1 {
                            let iy = (oy * s.sh + ky * s.dh) as isize - s.pt;
                            for kx in kx0..kx1 {
                                let ix = (ox * s.sw + kx * s.dw) as isize - s.pl;
                                let xo =
                                    b * s.xs[0] + iy as usize * s.xs[1] + ix as usize * s.xs[2];
                                let wo = ((fb * cb + b) * ks + ky * s.kw + kx) * tap_len(s.c);
                                for ci in 0..real {
                                    let xv = a.x[xo + ci * s.xs[3]];
                                    let wr = &w[wo + ci * BLOCK..][..BLOCK];
                                    for (v, &wv) in acc.iter_mut().zip(wr) {
                                        *v = xv.mul_add(wv, *v);
                                    }
                                }
                            }
                        }
                    }
                }
                for (i, v) in acc.iter().enumerate() {
                    let y = v + bias[fb * BLOCK + i];
                    // SAFETY: `o + i` is inside the image's output (the
                    // caller's contract); items write disjoint outputs.
                    unsafe { *out.add(o + i) = a.act.apply(y) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;

    /// A small deterministic generator (xorshift).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
        fn vec(&mut self, n: usize) -> Vec<f32> {
            (0..n).map(|_| self.next()).collect()
        }
    }

    #[derive(Clone, Copy, Debug)]
    struct Case {
        c: usize,
        m: usize,
        hw: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        d: [usize; 2],
        /// Padding before and after per axis.
        p: [isize; 4],
        depthwise: bool,
        planar: bool,
        residual: bool,
        act: Activation,
    }

    impl Case {
        fn geometry(&self) -> ConvGeometry {
            let out = |i: usize| {
                let span = (self.k[i] - 1) * self.d[i] + 1;
                let padded = self.hw[i] as isize + self.p[i] + self.p[i + 2];
                ((padded - span as isize) / self.s[i] as isize + 1).max(0) as usize
            };
            ConvGeometry::new_2d(
                self.hw,
                self.k,
                [out(0), out(1)],
                self.s,
                self.d,
                [self.p[0], self.p[1]],
            )
        }
    }

    /// The convolution in `f64` from the definition, planar `[M, OH, OW]`.
    fn naive(cs: &Case, g: &ConvGeometry, x: &[f32], w: &[f32], b: &[f32], r: &[f32]) -> Vec<f64> {
        let (c, m) = (cs.c, cs.m);
        let [h, wd] = cs.hw;
        let (oh, ow) = (g.output[0], g.output[1]);
        let cin = if cs.depthwise { 1 } else { c };
        let mut y = vec![0.0f64; m * oh * ow];
        for o in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut acc = b[o] as f64;
                    for i in 0..cin {
                        let ch = if cs.depthwise { o } else { i };
                        for ky in 0..cs.k[0] {
                            for kx in 0..cs.k[1] {
                                let iy = (oy * cs.s[0] + ky * cs.d[0]) as isize - cs.p[0];
                                let ix = (ox * cs.s[1] + kx * cs.d[1]) as isize - cs.p[1];
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[(ch * h + iy as usize) * wd + ix as usize] as f64;
                                let wv = w[((o * cin + i) * cs.k[0] + ky) * cs.k[1] + kx] as f64;
                                acc += xv * wv;
                            }
                        }
                    }
                    let at = (o * oh + oy) * ow + ox;
                    if cs.residual {
                        acc += r[at] as f64;
                    }
                    y[at] = cs.act.apply_f64(acc);
                }
            }
        }
        y
    }

    fn same_bits(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    /// Runs `cs` at `lvl` on `threads` threads: planar output.
    fn run(cs: &Case, lvl: Level, threads: usize, seed: u64) -> (Vec<f32>, Vec<f64>) {
        let mut rng = Rng(seed);
        let g = cs.geometry();
        let (plane, oplane) = (g.image_size(), g.output_size());
        let cin = if cs.depthwise { 1 } else { cs.c };
        let x = rng.vec(cs.c * plane);
        let w = rng.vec(cs.m * cin * cs.k[0] * cs.k[1]);
        let b = rng.vec(cs.m);
        let r = rng.vec(cs.m * oplane);
        let f = if cs.depthwise {
            Filters::depthwise(&w, cs.c, cs.k, Some(&b))
        } else {
            Filters::dense(&w, cs.m, cs.c, cs.k, Some(&b))
        };
        let (xin, layout) = if cs.planar {
            (x.clone(), Layout::Planar)
        } else {
            let mut xb = vec![0.0; blocked_len(1, cs.c, plane)];
            to_blocked(&x, 1, cs.c, plane, &mut xb);
            (xb, Layout::Blocked)
        };
        let mut rb = vec![0.0; blocked_len(1, cs.m, oplane)];
        to_blocked(&r, 1, cs.m, oplane, &mut rb);
        let mut yb = vec![f32::NAN; blocked_len(1, cs.m, oplane)];
        crate::par::set_threads(threads);
        let run = |res: Residual<'_>, out: &mut [f32]| {
            conv_at(lvl, &g, 1, &xin, layout, &f, res, cs.act, out)
        };
        match cs.residual {
            true => run(Residual::Apart(&rb[..]), &mut yb),
            false => run(Residual::None, &mut yb),
        }
        if cs.residual {
            // in place: the residual in the output buffer gives the same
            // bits
            let mut yi = rb.clone();
            run(Residual::InOut, &mut yi);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&yi), bits(&yb), "in place, {lvl:?}");
        }
        crate::par::set_threads(1);
        let mut y = vec![0.0; cs.m * oplane];
        to_planar(&yb, 1, cs.m, oplane, &mut y);
        (y, naive(cs, &g, &x, &w, &b, &r))
    }

    fn cases() -> Vec<Case> {
        let mut v = vec![];
        let acts = [
            Activation::Identity,
            Activation::Relu,
            Activation::Clip { lo: 0.0, hi: 6.0 },
            Activation::HardSwish,
            Activation::LeakyRelu(0.1),
        ];
        let mut i = 0;
        let mut next = |v: &mut Vec<Case>, c: Case| {
            let act = acts[i % acts.len()];
            i += 1;
            v.push(Case { act, ..c });
        };
        let base = Case {
            c: 16,
            m: 16,
            hw: [9, 11],
            k: [3, 3],
            s: [1, 1],
            d: [1, 1],
            p: [1, 1, 1, 1],
            depthwise: false,
            planar: false,
            residual: false,
            act: Activation::Identity,
        };
        for (c, m) in [(16, 16), (3, 32), (24, 40), (40, 72), (64, 80), (8, 8)] {
            for k in [[1, 1], [3, 3], [5, 5], [7, 7], [1, 3]] {
                for s in [[1, 1], [2, 2], [1, 2]] {
                    let p = if k[0] == 1 && s[0] == 1 && k[1] == 1 {
                        [0, 0, 0, 0]
                    } else {
                        [k[0] as isize / 2, k[1] as isize / 2, 0, k[1] as isize / 2]
                    };
                    for planar in [false, true] {
                        next(
                            &mut v,
                            Case {
                                c,
                                m,
                                k,
                                s,
                                p,
                                planar,
                                residual: (c + k[0] + s[1]) % 2 == 0,
                                hw: if c > 32 { [7, 9] } else { [13, 17] },
                                ..base
                            },
                        );
                    }
                }
            }
        }
        for c in [16, 24, 40, 96] {
            for k in [[3, 3], [5, 5]] {
                for s in [[1, 1], [2, 2]] {
                    for residual in [false, true] {
                        next(
                            &mut v,
                            Case {
                                c,
                                m: c,
                                k,
                                s,
                                p: [k[0] as isize / 2, 0, k[0] as isize / 2, 1],
                                depthwise: true,
                                residual,
                                hw: [14, 15],
                                ..base
                            },
                        );
                    }
                }
            }
        }
        // dilation, cropping (negative padding), a kernel wider than the
        // image, a 1 x 1 whole-image convolution longer than a segment
        for cs in [
            Case {
                d: [2, 3],
                p: [2, 3, 2, 3],
                ..base
            },
            Case {
                p: [-1, 0, -1, 1],
                ..base
            },
            Case {
                k: [3, 7],
                hw: [3, 4],
                p: [1, 3, 1, 3],
                ..base
            },
            Case {
                k: [1, 1],
                p: [0, 0, 0, 0],
                hw: [48, 45],
                c: 300,
                m: 70,
                residual: true,
                ..base
            },
            Case {
                k: [3, 3],
                p: [2, 2, 0, 0],
                depthwise: true,
                ..base
            },
            // input channels in several batches of blocks, pointwise
            Case {
                k: [1, 1],
                p: [0, 0, 0, 0],
                hw: [5, 7],
                c: 300,
                m: 40,
                ..base
            },
            Case {
                k: [1, 1],
                s: [2, 2],
                p: [0, 0, 0, 0],
                hw: [5, 7],
                c: 600,
                m: 20,
                residual: true,
                ..base
            },
        ] {
            next(&mut v, cs);
        }
        v
    }

    /// The portable body computes the convolution (against `f64`), and
    /// every SIMD level and thread count gives its bits.
    #[test]
    fn every_level_and_thread_count_gives_the_reference_bits() {
        let _g = crate::test_lock();
        let levels = [Level::Generic, Level::Avx2, Level::Avx512];
        for (i, cs) in cases().iter().enumerate() {
            let seed = 0x9e37_79b9_7f4a_7c15 ^ i as u64;
            let (want, exact) = run(cs, Level::Generic, 1, seed);
            for (y, e) in want.iter().zip(&exact) {
                let tol = 1e-5 * (1.0 + e.abs()) * (cs.c * cs.k[0] * cs.k[1]) as f64;
                assert!((*y as f64 - e).abs() <= tol, "{cs:?}: {y} against {e}");
            }
            for lvl in levels.into_iter().filter(|l| supported(*l)) {
                let (got, _) = run(cs, lvl, 1, seed);
                assert!(same_bits(&got, &want), "{cs:?} at {lvl:?}");
            }
        }
    }

    /// A 1 x 1 convolution's segments cover its pixels without an empty
    /// one, within [`FLAT_SEG`]; as few as that allows on one thread; and
    /// on more, as many work items as the threads share evenly.
    #[test]
    fn flat_segments_cover_the_row_and_share_evenly() {
        for ow in (1..300).chain((300..9000).step_by(37)) {
            for parts in 1..=4 {
                for groups in 1..=9 {
                    let (len, segs) = flat_segments(ow, parts, groups);
                    let at = format!("ow {ow}, parts {parts}, groups {groups}: {len} x {segs}");
                    assert!((1..=FLAT_SEG).contains(&len), "{at}");
                    assert_eq!(segs, ow.div_ceil(len), "{at}");
                    assert!(len * (segs - 1) < ow, "{at}: an empty segment");
                    if parts == 1 {
                        assert_eq!(segs, ow.div_ceil(FLAT_SEG), "{at}");
                    } else if ow >= 64 {
                        assert_eq!((groups * segs) % parts, 0, "{at}");
                    }
                }
            }
        }
        assert_eq!(flat_segments(196, 1, 4), (196, 1));
        assert_eq!(flat_segments(3136, 1, 1), (1572, 2));
        assert_eq!(flat_segments(784, 2, 1), (396, 2));
    }

    /// Shapes large enough to split over the intra-op threads give the
    /// bits of one thread on every level (and the split did run).
    #[test]
    fn intra_op_threads_give_the_bits_of_one() {
        let _g = crate::test_lock();
        let base = Case {
            c: 64,
            m: 72,
            hw: [28, 28],
            k: [3, 3],
            s: [1, 1],
            d: [1, 1],
            p: [1, 1, 1, 1],
            depthwise: false,
            planar: false,
            residual: true,
            act: Activation::Relu,
        };
        let flat = Case {
            k: [1, 1],
            p: [0; 4],
            ..base
        };
        let dw = Case {
            c: 256,
            m: 256,
            depthwise: true,
            s: [2, 2],
            ..base
        };
        // longer than a segment, in several batches of input blocks
        let flat_long = Case {
            c: 300,
            hw: [48, 45],
            ..flat
        };
        for cs in [base, flat, flat_long, dw] {
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let (one, _) = run(&cs, lvl, 1, 5);
                let before = crate::par::parallel_splits();
                let (two, _) = run(&cs, lvl, 2, 5);
                assert!(
                    crate::par::parallel_splits() > before,
                    "{cs:?} did not split"
                );
                assert!(same_bits(&one, &two), "{cs:?} at {lvl:?}");
            }
        }
    }

    /// Each channel's window maximum is the planar fold: the first tap,
    /// then every later tap that compares greater (so a NaN first tap
    /// stays, a later one is skipped); an empty window gives `f32::MIN`.
    #[test]
    fn max_pool_folds_the_taps_in_order() {
        let mut rng = Rng(11);
        let (planes, in_plane) = (3, 6);
        let mut x = rng.vec(planes * in_plane * BLOCK);
        x[5] = f32::NAN; // plane 0, pixel 0, channel 5
        x[BLOCK + 6] = f32::NAN; // plane 0, pixel 1, channel 6
        let starts = [0, 3, 5, 5, 6];
        let offsets = [0, 1, 4, 2, 3, 5];
        let mut y = vec![0.0; planes * 4 * BLOCK];
        max_pool(&x, planes, in_plane, &starts, &offsets, &mut y);
        for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
            if supported(lvl) {
                let mut at = vec![0.0; y.len()];
                max_pool_at(lvl, &x, in_plane, &starts, &offsets, &mut at);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&at), bits(&y), "{lvl:?}");
            }
        }
        for p in 0..planes {
            for o in 0..4 {
                for ch in 0..BLOCK {
                    let taps = &offsets[starts[o]..starts[o + 1]];
                    let v = |t: usize| x[(p * in_plane + t) * BLOCK + ch];
                    let want = match taps.split_first() {
                        None => f32::MIN,
                        Some((&f, rest)) => rest
                            .iter()
                            .fold(v(f), |b, &t| if v(t) > b { v(t) } else { b }),
                    };
                    let got = y[(p * 4 + o) * BLOCK + ch];
                    assert_eq!(got.to_bits(), want.to_bits(), "plane {p} out {o} ch {ch}");
                }
            }
        }
        assert!(y[5].is_nan() && !y[6].is_nan());
    }

    /// Each mean is the planar operator's `f64` sum in pixel order from
    /// `-0.0` (an all-negative-zero channel stays `-0.0`), on every level,
    /// for channels that fill the last block or not, over several images
    /// (split over two threads or not).
    #[test]
    fn global_average_is_the_planar_mean() {
        let _g = crate::test_lock();
        let mut rng = Rng(5);
        for (n, c, plane) in [(1, 16, 49), (2, 40, 7), (3, 5, 1), (2, 1280, 9)] {
            let mut x = rng.vec(n * c * plane);
            // channel 1 of image 0: negative zeros; channel 2: values
            // whose f32 sum would round differently
            x[plane..2 * plane].fill(-0.0);
            for (i, v) in x[2 * plane..3 * plane].iter_mut().enumerate() {
                *v = if i % 2 == 0 { 1e8 } else { 1.0 + i as f32 };
            }
            let want: Vec<f32> = x
                .chunks(plane)
                .map(|ch| (ch.iter().map(|&v| f64::from(v)).sum::<f64>() / plane as f64) as f32)
                .collect();
            assert!(want[1].is_sign_negative() && want[1] == 0.0);
            let mut b = vec![f32::NAN; blocked_len(n, c, plane)];
            to_blocked(&x, n, c, plane, &mut b);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for threads in [1, 2] {
                crate::par::set_threads(threads);
                let before = crate::par::parallel_splits();
                let mut y = vec![f32::NAN; n * c];
                global_average(&b, n, c, plane, &mut y);
                crate::par::set_threads(1);
                if threads == 2 && c == 1280 {
                    assert!(crate::par::parallel_splits() > before, "no split");
                }
                assert_eq!(
                    bits(&y),
                    bits(&want),
                    "{n} x {c} x {plane}, {threads} threads"
                );
            }
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if supported(lvl) {
                    let mut y = vec![f32::NAN; n * c];
                    global_average_at(lvl, &b, c, plane, &mut y);
                    assert_eq!(bits(&y), bits(&want), "{lvl:?} {n} x {c} x {plane}");
                }
            }
        }
    }

    /// Both conversions put every value where the layout says (padding
    /// channels +0.0) on every level, for planes of whole vectors and not,
    /// and channels that fill the last block or not.
    #[test]
    fn conversions_round_trip() {
        let mut rng = Rng(7);
        let cases = [
            (1, 3, 5),
            (2, 16, 9),
            (2, 40, 33),
            (1, 32, 64),
            (2, 21, 50),
            (1, 1, 17),
        ];
        for ((n, c, plane), lvl) in cases
            .into_iter()
            .flat_map(|k| [Level::Generic, Level::Avx2, Level::Avx512].map(|l| (k, l)))
            .filter(|&(_, l)| supported(l))
        {
            let x = rng.vec(n * c * plane);
            let mut b = vec![f32::NAN; blocked_len(n, c, plane)];
            to_blocked_at(lvl, &x, n, c, plane, &mut b);
            let cb = blocks(c);
            for img in 0..n {
                for ch in 0..cb * BLOCK {
                    for p in 0..plane {
                        let v = b[((img * cb + ch / BLOCK) * plane + p) * BLOCK + ch % BLOCK];
                        let want = if ch < c {
                            x[(img * c + ch) * plane + p]
                        } else {
                            0.0
                        };
                        assert_eq!(v.to_bits(), want.to_bits());
                    }
                }
            }
            let mut y = vec![f32::NAN; x.len()];
            to_planar_at(lvl, &b, n, c, plane, &mut y);
            assert_eq!(x, y, "{lvl:?} {n} x {c} x {plane}");
        }
    }
}
