//! Exact integer depthwise 2-D convolution of one plane: the accumulator of
//! a quantized depthwise layer (one input channel per group), computed
//! directly instead of through im2col and a one-row GEMM.
//!
//! ```text
//! out[oy][ox] = Σ_{i,j} (w[i][j] − w_zero) · (x[oy·sh + i·dh − pt][ox·sw + j·dw − pl] − x_zero)
//! ```
//!
//! Taps that fall in the padding contribute nothing (padding holds the zero
//! point, so `x − x_zero = 0` there). Every product is at most `255 · 255`
//! in magnitude, so the i32 sum is exact for kernels of up to 33 025 taps.
//! Depthwise layers accumulate exactly under every arithmetic profile (the
//! AVX2 saturating pair path is a GEMM kernel).
//!
//! Entries: [`depthwise_pairs`], the fast one for 8-bit inputs (a layer's
//! channels at once: 16-bit pairs in SIMD, plane by plane or, on narrow
//! maps with AVX-512, channels-last; or, with AVX-512 VNNI and VBMI, byte
//! quads straight from the input rows: see [`PairLayout`]);
//! [`depthwise_pairs_requant`], the same sums requantized into bytes as
//! the channels-last and row-quad layouts write them; [`depthwise_pairs_in`], a chosen
//! layout (benchmarks and tests); and [`depthwise_plane`], one plane of
//! `u8` or `i8` values (the fallback where the pairs do not apply).

use crate::igemm::QInt;
use qport_core::arith::FloatRequant;

/// Geometry of one depthwise plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlaneGeom {
    /// Input height and width.
    pub input: [usize; 2],
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides (height, width).
    pub strides: [usize; 2],
    /// Dilations (height, width).
    pub dilations: [usize; 2],
    /// Padding before the first row and column.
    pub pad_begin: [usize; 2],
    /// Output height and width.
    pub output: [usize; 2],
}

impl PlaneGeom {
    /// The same geometry as the kernels' general [`ConvGeometry`]
    /// (what [`depthwise_pairs`] takes).
    ///
    /// [`ConvGeometry`]: crate::im2col::ConvGeometry
    pub fn conv_geometry(&self) -> crate::im2col::ConvGeometry {
        crate::im2col::ConvGeometry::new_2d(
            self.input,
            self.kernel,
            self.output,
            self.strides,
            self.dilations,
            self.pad_begin.map(|p| p as isize),
        )
    }
}

/// The range of output positions `o` in `0..n_out` whose input coordinate
/// `o·stride + offset − pad` lies in `0..n_in`.
fn valid(n_out: usize, n_in: usize, stride: usize, offset: usize, pad: usize) -> (usize, usize) {
    let (stride, offset, pad) = (stride as i64, offset as i64, pad as i64);
    let lo = (pad - offset).max(0);
    let first = (lo + stride - 1) / stride;
    let hi = n_in as i64 - 1 + pad - offset; // last o with coordinate < n_in
    let last = if hi < 0 { -1 } else { hi / stride };
    let first = first.min(n_out as i64);
    let end = (last + 1).clamp(first, n_out as i64);
    (first as usize, end as usize)
}

/// Accumulates one depthwise plane into `out` (`output[0] × output[1]`,
/// overwritten). `x` is the `input[0] × input[1]` plane, `w` the kernel.
///
/// The plane is widened once (`x − x_zero` as i32), then every tap adds
/// `w·x` along output rows; the loop is compiled a second time for AVX2
/// and chosen at run time (same sums, exact either way).
///
/// # Panics
/// When `x`, `w` or `out` is shorter than the geometry says.
pub fn depthwise_plane<X: QInt, W: QInt>(
    x: &[X],
    x_zero: i32,
    w: &[W],
    w_zero: i32,
    g: &PlaneGeom,
    out: &mut [i32],
) {
    let [ih, iw] = g.input;
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.output;
    assert!(x.len() >= ih * iw && w.len() >= kh * kw && out.len() >= oh * ow);
    PLANE.with(|p| {
        let mut plane = p.borrow_mut();
        plane.clear();
        plane.extend(x[..ih * iw].iter().map(|&v| v.widen() - x_zero));
        let wv: Vec<i32> = w[..kh * kw].iter().map(|&v| v.widen() - w_zero).collect();
        #[cfg(target_arch = "x86_64")]
        if crate::isa().avx2() {
            // SAFETY: the dispatch table has an x86-64 row only where the CPU
            // has AVX2 + FMA (`dispatch::detect`).
            unsafe { crate::arch::x86_64::int8::plane_taps_avx2(&plane, &wv, g, out) };
            return;
        }
        plane_taps(&plane, &wv, g, out);
    });
}

/// Most taps [`depthwise_pairs`] takes: every sum of up to this many
/// products of magnitude `≤ 255·255` lies in i32 range.
pub const PAIRS_MAX_TAPS: usize = 33_025;

/// Every channel of a depthwise layer (`channels` input planes of
/// `image[0] × image[1]` `u8` values, kernel `c` applied to plane `c`, in
/// the two-dimensional geometry `geom`, whose padding is not negative)
/// accumulated exactly in 16-bit pairs: `w_centered` holds `w − w_zero`
/// per kernel (`[channels, kh·kw]`), `out` receives the sums
/// `Σ (w − w_zero)·(x − x_zero)` as `[channels, output[0] × output[1]]`.
///
/// Each input plane is written once, centred and zero-padded, as a plane
/// of 32-bit cells holding two 16-bit values: a padded input row and the
/// row one kernel row (one dilation) below it, split into column phases
/// as the `f32` depthwise kernel splits its planes (so every tap of a
/// block of outputs is one contiguous vector load at any stride). One
/// multiply-add of 16-bit pairs (`vpdpwssd` with AVX-512 VNNI, `vpmaddwd`
/// plus an add with AVX-512BW or AVX2, a scalar loop elsewhere) then
/// covers two kernel rows of a tap column, so a 3×3 kernel takes 6 vector
/// operations per vector of outputs. Every product and every partial sum
/// is an exact integer, so every path returns the same sums as
/// [`depthwise_plane`]. On the VNNI rows of a CPU with VBMI, a layer with
/// i8 centred weights whose output is more than 8 columns wide, or narrow
/// enough that several output rows fill one vector, runs
/// [`PairLayout::RowQuads`]: no plane of pairs, the same sums. Elsewhere
/// on the AVX-512 rows a layer whose input is at most 16 columns wide
/// runs channels-last ([`PairLayout::ChannelsLast`]): the same products
/// and sums, a vector of 16 channels per output position.
///
/// Returns `false` (nothing written) when a centred weight is outside
/// `[−255, 255]`, the kernel has more than [`PAIRS_MAX_TAPS`] taps, or the
/// geometry is not two-dimensional with non-negative padding. (An `i8`
/// input runs as `u8` with its bytes' top bit flipped and `x_zero + 128`.)
///
/// ```
/// use qport_kernels::idepthwise::depthwise_pairs;
/// use qport_kernels::im2col::ConvGeometry;
/// // one 3×3 plane, a 3×3 kernel with padding 1: 3×3 outputs
/// let g = ConvGeometry::new_2d([3, 3], [3, 3], [3, 3], [1, 1], [1, 1], [1, 1]);
/// let x: Vec<u8> = (1..=9).collect(); // x_zero 1: centred 0..=8
/// let w = vec![1; 9]; // already centred
/// let mut out = vec![0; 9];
/// assert!(depthwise_pairs(&x, 1, 1, &w, &g, &mut out));
/// assert_eq!(out[4], (0..9).sum::<i32>()); // the centre sees every tap
/// assert_eq!(out[0], 0 + 1 + 3 + 4); // a corner sees four
/// ```
///
/// # Panics
/// When a slice is shorter than the geometry says, or `x_zero` is not a
/// `u8` value.
pub fn depthwise_pairs(
    x: &[u8],
    x_zero: i32,
    channels: usize,
    w_centered: &[i32],
    geom: &crate::im2col::ConvGeometry,
    out: &mut [i32],
) -> bool {
    pairs_as(x, x_zero, channels, w_centered, geom, out, None)
}

/// [`depthwise_pairs`] in the arrangement `layout` where the dispatch
/// row has it (the others run [`PairLayout::Planes`]): the same sums, for
/// benchmarks and tests that compare the two.
pub fn depthwise_pairs_in(
    layout: PairLayout,
    x: &[u8],
    x_zero: i32,
    channels: usize,
    w_centered: &[i32],
    geom: &crate::im2col::ConvGeometry,
    out: &mut [i32],
) -> bool {
    pairs_as(x, x_zero, channels, w_centered, geom, out, Some(layout))
}

/// How [`depthwise_pairs`] arranges a layer (the same sums either way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairLayout {
    /// One channel at a time, a vector of output columns per register:
    /// every row of the dispatch table.
    Planes,
    /// Blocks of 16 channels, a vector of channels per output position
    /// (the input and the sums transposed through scratch tiles): the
    /// AVX-512 rows, for narrow maps where a vector of columns would be
    /// mostly empty and each channel's own set-up dominates.
    ChannelsLast,
    /// One channel at a time straight from its bytes, no plane of pairs:
    /// 16 output columns per vector (on outputs at most 8 wide, several
    /// whole output rows), each kernel row's taps in quads of bytes that a
    /// byte permute gathers from one load of the input row, multiplied by
    /// `vpdpbusd`. The AVX-512 VNNI rows on CPUs with VBMI, where the
    /// centred weights are i8 and the taps of 16 output columns lie within
    /// 64 bytes of a row (`15·sw + (kw − 1)·dw < 64`).
    RowQuads,
}

/// Input widths up to which the AVX-512 rows run a layer channels-last
/// ([`PairLayout::ChannelsLast`]) where the row quads do not, measured on
/// MobileNetV2's and EfficientNet-Lite0's depthwise layers
/// (`depthwise_speed` and `op_profile`, before the row quads took them):
/// 7 × 7 and 14 × 14 maps, and the stride-2 layers that read 14 × 14 ones
/// (not those that read 28 × 28 maps).
const CHANNELS_LAST_MAX_W: usize = 16;

/// Output widths up to which the channels-last layout stays the pick
/// where [`PairLayout::RowQuads`] could run, unless the row quads pack
/// several output rows into a vector (every narrow map of the networks
/// measured: there they took 0.5x–0.8x the channels-last time on
/// MobileNetV2's and EfficientNet-Lite0's 7 × 7 outputs,
/// `depthwise_speed`). Unpacked, 7 of a vector's 16 lanes would be used.
#[cfg(target_arch = "x86_64")]
const ROW_QUADS_MIN_OW: usize = 8;

/// The layout [`depthwise_pairs`] picks for `g` on `isa`.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn pick_layout(g: &crate::f32::depthwise::Geo, isa: crate::Isa) -> PairLayout {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::arch::x86_64::idepthwise::{packed_rows, row_quads_fit};
        if row_quads_row(isa) && (g.ow > ROW_QUADS_MIN_OW || packed_rows(g) > 1) && row_quads_fit(g)
        {
            return PairLayout::RowQuads;
        }
        if isa.avx512() && g.w <= CHANNELS_LAST_MAX_W {
            return PairLayout::ChannelsLast;
        }
    }
    PairLayout::Planes
}

/// The layout that runs `g`, whose centred weights are `w`, on `isa`:
/// `want` (a caller's choice or [`pick_layout`]'s), except that row quads
/// where the dispatch row, the geometry or the weights do not take them
/// run channels-last on narrow maps of the AVX-512 rows, else planes.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
fn runnable_layout(
    g: &crate::f32::depthwise::Geo,
    isa: crate::Isa,
    w: &[i32],
    want: PairLayout,
) -> PairLayout {
    #[cfg(target_arch = "x86_64")]
    if want == PairLayout::RowQuads
        && !(row_quads_row(isa)
            && crate::arch::x86_64::idepthwise::row_quads_fit(g)
            && i8_weights(w))
    {
        return if isa.avx512() && g.w <= CHANNELS_LAST_MAX_W {
            PairLayout::ChannelsLast
        } else {
            PairLayout::Planes
        };
    }
    want
}

/// Whether [`PairLayout::RowQuads`] may run on `isa`: a VNNI row of the
/// dispatch table on a CPU with AVX-512 VBMI.
#[cfg(target_arch = "x86_64")]
fn row_quads_row(isa: crate::Isa) -> bool {
    isa.vnni() && crate::dispatch::has_vbmi()
}

/// Whether every centred weight is an i8, as [`PairLayout::RowQuads`]
/// multiplies them.
#[cfg(target_arch = "x86_64")]
fn i8_weights(w: &[i32]) -> bool {
    w.iter().all(|&w| i8::try_from(w).is_ok())
}

/// [`depthwise_pairs`] in the layout `force` (on rows that have it; the
/// others run [`PairLayout::Planes`]), or the one it picks when `None`.
pub(crate) fn pairs_as(
    x: &[u8],
    x_zero: i32,
    channels: usize,
    w_centered: &[i32],
    geom: &crate::im2col::ConvGeometry,
    out: &mut [i32],
    force: Option<PairLayout>,
) -> bool {
    let Some(a) = operands(x, x_zero, channels, w_centered, geom, out.len()) else {
        return false;
    };
    if a.is_empty() {
        return true;
    }
    PAIR_BUFS.with(|p| {
        let plane = &mut *p.borrow_mut();
        #[cfg(target_arch = "x86_64")]
        {
            let isa = crate::isa();
            let want = force.unwrap_or_else(|| pick_layout(&a.g, isa));
            let layout = runnable_layout(&a.g, isa, a.w, want);
            if layout == PairLayout::RowQuads {
                #[cfg(test)]
                ROW_QUADS_RUNS.with(|r| r.set(r.get() + 1));
                // SAFETY: a VNNI row with VBMI, the geometry and weights
                // it takes (`runnable_layout`), `a` checked by `operands`.
                unsafe { crate::arch::x86_64::idepthwise::row_quads_vnni(&a, ClOut::Sums(out)) };
                return;
            }
            // SAFETY: each body runs only on the dispatch row that
            // guarantees its features (`dispatch::detect`): AVX-512F + BW
            // (+ VNNI on the top row), AVX2 + FMA on every x86-64 row.
            unsafe {
                if layout == PairLayout::ChannelsLast && isa.avx512() {
                    return channels_last(&a, plane, ClOut::Sums(out));
                }
                if isa.vnni() {
                    return crate::arch::x86_64::idepthwise::pairs_vnni(&a, plane, out);
                }
                if isa.avx512() {
                    return crate::arch::x86_64::idepthwise::pairs_avx512(&a, plane, out);
                }
                if isa.avx2() {
                    return crate::arch::x86_64::idepthwise::pairs_avx2(&a, plane, out);
                }
            }
        }
        // SAFETY: `One` needs no CPU feature.
        unsafe { pairs_body::<One>(&a, plane, out) }
    });
    true
}

/// The checked operands of a call of [`depthwise_pairs`] (or of its
/// fused form) with an output of `out_len` elements; `None` where the
/// kernel does not apply (a geometry that is not two-dimensional with
/// non-negative padding, too many taps, a centred weight outside
/// `[−255, 255]`).
///
/// # Panics
/// When a slice is shorter than the geometry says, or `x_zero` is not a
/// `u8` value.
fn operands<'a>(
    x: &'a [u8],
    x_zero: i32,
    channels: usize,
    w_centered: &'a [i32],
    geom: &crate::im2col::ConvGeometry,
    out_len: usize,
) -> Option<PairArgs<'a>> {
    let g = crate::f32::depthwise::Geo::new(geom)?;
    let (is, ks, os) = (g.h * g.w, g.kh * g.kw, g.oh * g.ow);
    if ks > PAIRS_MAX_TAPS {
        return None;
    }
    assert!(x.len() >= channels * is && w_centered.len() >= channels * ks);
    assert!(out_len >= channels * os);
    assert!(
        (0..=255).contains(&x_zero),
        "depthwise_pairs: a u8 zero point"
    );
    let w = &w_centered[..channels * ks];
    // (a maximum rather than a short-circuiting test: it vectorizes, and
    // the engine calls this for every chunk of every depthwise layer)
    let in_range = w.iter().map(|w| w.unsigned_abs()).max().unwrap_or(0) <= 255;
    in_range.then_some(PairArgs {
        g,
        x,
        x_zero,
        channels,
        w,
    })
}

impl PairArgs<'_> {
    /// No output positions or no channels: nothing to compute.
    fn is_empty(&self) -> bool {
        self.g.oh * self.g.ow == 0 || self.channels == 0
    }
}

/// Where the channels-last layout writes: the sums (`[channels, os]`), or
/// each channel's sums requantized by its float form, as bytes.
pub(crate) enum ClOut<'a> {
    Sums(&'a mut [i32]),
    Bytes {
        forms: &'a [FloatRequant],
        out: &'a mut [u8],
    },
}

/// The channels-last body of the host's AVX-512 row.
///
/// # Safety
/// The CPU must support AVX-512F and BW.
#[cfg(target_arch = "x86_64")]
unsafe fn channels_last(a: &PairArgs, bufs: &mut PairBufs, out: ClOut) {
    use crate::arch::x86_64::idepthwise as cl;
    // SAFETY: AVX-512F + BW (the caller's), VNNI on its row.
    unsafe {
        if crate::isa().vnni() {
            cl::channels_last_vnni(a, bufs, out)
        } else {
            cl::channels_last_avx512(a, bufs, out)
        }
    }
}

/// [`depthwise_pairs`] with each channel's sums requantized by its float
/// form (`forms[c]`, as [`crate::int8::elementwise::requantize`] does for
/// a requantizer of that form) into the 8-bit `out`
/// (`[channels, output positions]`), where the layer runs channels-last
/// (the AVX-512 rows, narrow maps) or in row quads (see [`PairLayout`]).
/// Returns `false`, with nothing written, where it does not: other rows
/// or geometries, forms of both variants (channels-last), centred weights
/// outside i8 where the row quads would run (on narrow maps the layer
/// then runs channels-last), a `T` wider than a byte, or where
/// [`depthwise_pairs`] returns `false`. The bytes are those of the sums
/// of [`depthwise_pairs`] requantized.
///
/// # Panics
/// As [`depthwise_pairs`]; when `forms` has fewer than `channels` forms.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
#[allow(clippy::too_many_arguments)]
pub fn depthwise_pairs_requant<T: QInt>(
    x: &[u8],
    x_zero: i32,
    channels: usize,
    w_centered: &[i32],
    geom: &crate::im2col::ConvGeometry,
    forms: &[FloatRequant],
    out: &mut [T],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // (the layout first: the engine asks for every chunk of every
        // depthwise layer, and most of those that decline are planes)
        let isa = crate::isa();
        let picked = crate::f32::depthwise::Geo::new(geom)
            .map(|g| runnable_layout(&g, isa, w_centered, pick_layout(&g, isa)));
        let one_variant = || {
            forms
                .windows(2)
                .all(|p| std::mem::discriminant(&p[0]) == std::mem::discriminant(&p[1]))
        };
        let fits = match picked {
            Some(PairLayout::ChannelsLast) => one_variant(),
            Some(PairLayout::RowQuads) => true,
            _ => false,
        };
        if std::mem::size_of::<T>() != 1 || !fits {
            return false;
        }
        let Some(a) = operands(x, x_zero, channels, w_centered, geom, out.len()) else {
            return false;
        };
        assert!(
            forms.len() >= channels,
            "depthwise_pairs_requant: a form per channel"
        );
        if a.is_empty() {
            return true;
        }
        // SAFETY: `T` is one byte (checked above): its slice as bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<u8>(), out.len()) };
        if picked == Some(PairLayout::RowQuads) {
            #[cfg(test)]
            ROW_QUADS_RUNS.with(|r| r.set(r.get() + 1));
            // SAFETY: a VNNI row with VBMI, the geometry and weights it
            // takes (`runnable_layout`), `a` checked by `operands`.
            unsafe {
                crate::arch::x86_64::idepthwise::row_quads_vnni(
                    &a,
                    ClOut::Bytes { forms, out: bytes },
                )
            };
            return true;
        }
        PAIR_BUFS.with(|p| {
            // SAFETY: the channels-last layout is picked on AVX-512 rows
            // only (`pick_layout`, `runnable_layout`), which have F + BW.
            unsafe { channels_last(&a, &mut p.borrow_mut(), ClOut::Bytes { forms, out: bytes }) }
        });
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The checked operands of [`depthwise_pairs`].
pub(crate) struct PairArgs<'a> {
    pub(crate) g: crate::f32::depthwise::Geo,
    /// `channels` planes of `g.h × g.w` bytes.
    pub(crate) x: &'a [u8],
    pub(crate) x_zero: i32,
    pub(crate) channels: usize,
    /// `[channels, kh·kw]` centred weights in `[−255, 255]`.
    pub(crate) w: &'a [i32],
}

/// The vector operations of [`pairs_body`]: `LANES` 32-bit lanes, each
/// two 16-bit halves.
pub(crate) trait PairVec: Copy {
    /// Lanes per vector.
    const LANES: usize;
    /// All lanes zero.
    ///
    /// # Safety
    /// The implementation's CPU features.
    unsafe fn zero() -> Self;
    /// Every lane `w`.
    ///
    /// # Safety
    /// As [`PairVec::zero`].
    unsafe fn splat(w: i32) -> Self;
    /// `acc` plus, per lane, the products of the 16-bit halves of the
    /// lane loaded from `p` and of `w`, summed (exact: see
    /// [`depthwise_pairs`]).
    ///
    /// # Safety
    /// `p` is valid for `LANES` reads; the implementation's features.
    unsafe fn dot(acc: Self, p: *const i32, w: Self) -> Self;
    /// Stores the first `n` (`1..=LANES`) lanes at `dst`.
    ///
    /// # Safety
    /// `dst` is valid for `n` writes; the implementation's features.
    unsafe fn store(self, dst: *mut i32, n: usize);
    /// One padded row of the plane of pairs from image rows `lo` and `hi`
    /// ([`fill_row_from`] from column 0; implementations may run a
    /// prefix in vectors).
    ///
    /// # Safety
    /// The implementation's features.
    #[inline(always)]
    unsafe fn fill_row(
        lo: &[u8],
        hi: &[u8],
        x_zero: i32,
        pl: usize,
        sw: usize,
        wq: usize,
        dst: &mut [i32],
    ) {
        fill_row_from(lo, hi, x_zero, pl, sw, wq, dst, 0)
    }
}

/// The scalar [`PairVec`]: one lane.
#[derive(Clone, Copy)]
pub(crate) struct One(i32);

/// Two 16-bit values as one 32-bit cell (`lo` in the low half).
#[inline(always)]
pub(crate) fn pair(lo: i32, hi: i32) -> i32 {
    (lo as u16 as u32 | ((hi as u16 as u32) << 16)) as i32
}

impl PairVec for One {
    const LANES: usize = 1;
    #[inline(always)]
    unsafe fn zero() -> Self {
        One(0)
    }
    #[inline(always)]
    unsafe fn splat(w: i32) -> Self {
        One(w)
    }
    #[inline(always)]
    unsafe fn dot(acc: Self, p: *const i32, w: Self) -> Self {
        // SAFETY: the caller's contract.
        let v = unsafe { *p };
        let ((a0, a1), (b0, b1)) = (halves(v), halves(w.0));
        One(acc.0 + a0 * b0 + a1 * b1)
    }
    #[inline(always)]
    unsafe fn store(self, dst: *mut i32, _n: usize) {
        // SAFETY: the caller's contract (n is 1).
        unsafe { *dst = self.0 }
    }
}

/// The signed 16-bit halves `(low, high)` of a cell of [`pair`].
#[inline(always)]
fn halves(c: i32) -> (i32, i32) {
    (c as i16 as i32, (c >> 16) as i16 as i32)
}

/// The body of [`depthwise_pairs`] on vectors `V` (inlined into each
/// caller, so compiled with its CPU features): per channel, the plane of
/// pairs ([`fill_pairs`]), then blocks of `R` output rows by `C` vectors
/// of output columns in registers, each sum stored once.
///
/// # Safety
/// `V`'s CPU features.
#[inline(always)]
pub(crate) unsafe fn pairs_body<V: PairVec>(a: &PairArgs, bufs: &mut PairBufs, out: &mut [i32]) {
    use crate::f32::depthwise::{block, layout};
    let g = &a.g;
    let l = V::LANES;
    let (rows, wq, len) = layout(g, l).expect("depthwise_pairs: scratch size overflows");
    let PairBufs {
        plane,
        pad,
        flags,
        needed,
        ..
    } = bufs;
    plane.clear();
    // (one vector past the end: the widest load of the last block stays
    // inside, see `layout`)
    plane.resize(len + l, 0);
    pad.clear();
    pad.resize(g.w, a.x_zero as u8);
    needed_rows(g, rows, flags, needed);
    let (ks, os, is) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
    // the pairs of kernel rows (2p, 2p + 1) by kernel columns: the tap
    // index of the first row and the plane offset of that tap
    let kp = g.kh.div_ceil(2);
    let mut offs = [0usize; 64];
    let mut heap = Vec::new();
    let offs: &mut [usize] = if kp * g.kw <= offs.len() {
        &mut offs[..kp * g.kw]
    } else {
        heap.resize(kp * g.kw, 0);
        &mut heap
    };
    for (i, o) in offs.iter_mut().enumerate() {
        let t = (2 * (i / g.kw)) * g.kw + i % g.kw;
        *o = crate::f32::depthwise::tap_offset(g, wq, t);
    }
    let mut wstack = [0i32; 64];
    let mut wheap = Vec::new();
    let wp: &mut [i32] = if kp * g.kw <= wstack.len() {
        &mut wstack[..kp * g.kw]
    } else {
        wheap.resize(kp * g.kw, 0);
        &mut wheap
    };
    let (r, c) = block(g.ow, l);
    for ch in 0..a.channels {
        // SAFETY: the caller's features.
        unsafe { fill_pairs::<V>(g, &a.x[ch * is..][..is], a.x_zero, pad, needed, wq, plane) };
        let k = &a.w[ch * ks..][..ks];
        // kernel rows 2p (low half) and 2p + 1 (high, zero past the kernel)
        for (p, wr) in wp.chunks_mut(g.kw).enumerate() {
            let lo = &k[2 * p * g.kw..][..g.kw];
            let hi = (2 * p + 1 < g.kh).then(|| &k[(2 * p + 1) * g.kw..][..g.kw]);
            for (j, w) in wr.iter_mut().enumerate() {
                *w = pair(lo[j], hi.map_or(0, |h| h[j]));
            }
        }
        let y = &mut out[ch * os..][..os];
        // SAFETY: the plane was laid out by `layout` for `l` lanes and
        // blocks of `block(ow, l)`; the caller's CPU features.
        unsafe {
            match (r, c) {
                (7, 1) => pair_blocks::<V, 7, 1>(g, plane, wq, offs, wp, y),
                (6, 2) => pair_blocks::<V, 6, 2>(g, plane, wq, offs, wp, y),
                (4, 2) => pair_blocks::<V, 4, 2>(g, plane, wq, offs, wp, y),
                (4, 3) => pair_blocks::<V, 4, 3>(g, plane, wq, offs, wp, y),
                (2, 3) => pair_blocks::<V, 2, 3>(g, plane, wq, offs, wp, y),
                (3, 4) => pair_blocks::<V, 3, 4>(g, plane, wq, offs, wp, y),
                _ => pair_blocks::<V, 2, 4>(g, plane, wq, offs, wp, y),
            }
        }
    }
}

/// One channel's outputs `y` (`oh × ow`) in blocks of `R` rows by `C`
/// vectors from the plane of pairs: per block, one [`PairVec::dot`] per
/// kernel-row pair and column and per register.
///
/// # Safety
/// The plane is laid out by `layout(g, V::LANES)` with `R × C` from
/// `block`; `V`'s CPU features.
#[inline(always)]
unsafe fn pair_blocks<V: PairVec, const R: usize, const C: usize>(
    g: &crate::f32::depthwise::Geo,
    plane: &[i32],
    wq: usize,
    offs: &[usize],
    wp: &[i32],
    y: &mut [i32],
) {
    let l = V::LANES;
    let pitch = g.sh * g.sw * wq;
    let base = plane.as_ptr();
    let yp = y.as_mut_ptr();
    let mut r0 = 0;
    while r0 < g.oh {
        let mut x0 = 0;
        while x0 < g.ow {
            // SAFETY: (whole block) every load lies in the plane: rows
            // (r0 + rr)·sh + ki·dh < rows and columns below wq (see
            // `layout`); stores at rows < oh, columns < ow.
            unsafe {
                let mut acc = [[V::zero(); C]; R];
                for (&off, &w) in offs.iter().zip(wp) {
                    let wv = V::splat(w);
                    for (rr, accr) in acc.iter_mut().enumerate() {
                        let p = base.add((r0 + rr) * pitch + x0 + off);
                        for (ci, a) in accr.iter_mut().enumerate() {
                            *a = V::dot(*a, p.add(ci * l), wv);
                        }
                    }
                }
                for (rr, accr) in acc.iter().enumerate() {
                    let row = r0 + rr;
                    if row >= g.oh {
                        break;
                    }
                    for (ci, a) in accr.iter().enumerate() {
                        let x = x0 + ci * l;
                        if x >= g.ow {
                            break;
                        }
                        a.store(yp.add(row * g.ow + x), (g.ow - x).min(l));
                    }
                }
            }
            x0 += C * l;
        }
        r0 += R;
    }
}

/// Writes the plane of pairs of one input channel `img` (`h × w`,
/// centred by `x_zero`) into `plane` (laid out by `layout`: `rows` padded
/// rows of `sw` phases of `wq` cells): the cell of padded row `y`, phase
/// `b`, column `j` holds padded column `j·sw + b` of padded rows `y` (low
/// half) and `y + dh` (high half), zero where that is padding. Only the
/// rows the taps read (`needed`) and the columns inside the image are
/// written; the others stay zero (the plane is zeroed per call and every
/// channel has the same padding). `pad` is a row of `w` values `x_zero`
/// (padding rows, centred, are zero).
///
/// # Safety
/// `V`'s CPU features.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fill_pairs<V: PairVec>(
    g: &crate::f32::depthwise::Geo,
    img: &[u8],
    x_zero: i32,
    pad: &[u8],
    needed: &[usize],
    wq: usize,
    plane: &mut [i32],
) {
    let sw = g.sw;
    let image_row = |y: usize| {
        y.checked_sub(g.pt)
            .filter(|&iy| iy < g.h)
            .map(|iy| &img[iy * g.w..][..g.w])
    };
    for &y in needed {
        let (lo, hi) = (image_row(y), image_row(y + g.dh));
        if lo.is_none() && hi.is_none() {
            continue;
        }
        let dst = &mut plane[y * sw * wq..][..sw * wq];
        // SAFETY: the caller's features.
        unsafe {
            V::fill_row(
                lo.unwrap_or(pad),
                hi.unwrap_or(pad),
                x_zero,
                g.pl,
                sw,
                wq,
                dst,
            )
        };
    }
}

/// The portable [`PairVec::fill_row`]: `dst` (`sw` phases of `wq` cells)
/// receives, at phase `b`, column `j`, the pair of image columns
/// `j·sw + b − pl` of `lo` and `hi` (centred by `x_zero`), for the
/// columns inside the image and below `wq`; from image column `from` on
/// (the columns before were written by a vector loop).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill_row_from(
    lo: &[u8],
    hi: &[u8],
    x_zero: i32,
    pl: usize,
    sw: usize,
    wq: usize,
    dst: &mut [i32],
    from: usize,
) {
    let w = lo.len().min(hi.len());
    if sw == 1 {
        let (c0, j0) = (from, from + pl);
        if j0 >= wq || c0 >= w {
            return;
        }
        let n = (w - c0).min(wq - j0);
        let d = &mut dst[j0..][..n];
        for ((d, &a), &b) in d.iter_mut().zip(&lo[c0..c0 + n]).zip(&hi[c0..c0 + n]) {
            *d = pair(i32::from(a) - x_zero, i32::from(b) - x_zero);
        }
        return;
    }
    if sw == 2 {
        // image columns of one parity go to one phase, consecutively:
        // column c to phase (c + pl) % 2, cell (c + pl) / 2 (a constant
        // stride the compiler vectorizes)
        for e in 0..2 {
            let c0 = from + (e + 2 - from % 2) % 2;
            if c0 >= w {
                continue;
            }
            let (b, j0) = ((c0 + pl) % 2, (c0 + pl) / 2);
            let n = (w - c0).div_ceil(2).min(wq.saturating_sub(j0));
            if n == 0 {
                continue;
            }
            let (l, h) = (&lo[c0..c0 + 2 * n - 1], &hi[c0..c0 + 2 * n - 1]);
            let d = &mut dst[b * wq + j0..][..n];
            for (i, d) in d.iter_mut().enumerate() {
                *d = pair(i32::from(l[2 * i]) - x_zero, i32::from(h[2 * i]) - x_zero);
            }
        }
        return;
    }
    // (phase and cell of padded column pc = c + pl, stepped without a
    // division per column)
    let (mut b, mut j) = ((from + pl) % sw, (from + pl) / sw);
    for c in from..w {
        if j >= wq {
            break;
        }
        dst[b * wq + j] = pair(i32::from(lo[c]) - x_zero, i32::from(hi[c]) - x_zero);
        b += 1;
        if b == sw {
            b = 0;
            j += 1;
        }
    }
}

/// The padded rows of a plane of `rows` rows that the taps read and that
/// hold image values, ascending: the rows `r·sh + ki·dh` for output rows
/// `r` and even kernel rows `ki` (each cell pairs row `ki` with row
/// `ki + 1`, `dh` below) whose row or row `dh` below is an image row.
/// `flags` is scratch.
fn needed_rows(
    g: &crate::f32::depthwise::Geo,
    rows: usize,
    flags: &mut Vec<bool>,
    needed: &mut Vec<usize>,
) {
    flags.clear();
    flags.resize(rows, false);
    for ki in (0..g.kh).step_by(2) {
        let mut y = ki * g.dh;
        while y < rows {
            flags[y] = true;
            y += g.sh;
        }
    }
    let image = |y: usize| (g.pt..g.pt + g.h).contains(&y);
    needed.clear();
    needed.extend(
        flags
            .iter()
            .enumerate()
            .filter(|&(y, &f)| f && (image(y) || image(y + g.dh)))
            .map(|(y, _)| y),
    );
}

/// The scratch of [`depthwise_pairs`]: the plane of pairs, a padding row
/// and the rows the taps read.
#[derive(Default)]
pub(crate) struct PairBufs {
    plane: Vec<i32>,
    pad: Vec<u8>,
    flags: Vec<bool>,
    needed: Vec<usize>,
    /// The channels-last tiles (x86-64's AVX-512 bodies).
    pub(crate) cl: ClBufs,
}

/// The scratch of the channels-last layout ([`PairLayout::ChannelsLast`]),
/// per block of 16 channels: the centred input as 16-bit values per
/// padded position (`single`), as pairs of a row and the row a dilation
/// below (`pairs`), the weight pairs per tap and the sums per output
/// position (`sums`), each a vector of the block's channels.
#[derive(Default)]
pub(crate) struct ClBufs {
    pub(crate) single: Vec<i16>,
    pub(crate) pairs: Vec<i32>,
    pub(crate) weights: Vec<i32>,
    pub(crate) sums: Vec<i32>,
    /// The pair tile's rows the taps read ([`cl_pair_rows`]).
    pub(crate) rows: Vec<usize>,
    /// Per output position, the offset in the pair tile of its first tap.
    pub(crate) bases: Vec<usize>,
    /// Per input position, its offset in the single tile (`usize::MAX`
    /// where no tap reads it).
    pub(crate) spos: Vec<usize>,
}

/// The rows of the channels-last pair tile the taps read: `r·sh + 2p·dh`
/// for output rows `r` and kernel-row pairs `p`, ascending, and the tile's
/// height (the last of them plus one).
pub(crate) fn cl_pair_rows(g: &crate::f32::depthwise::Geo, rows: &mut Vec<usize>) -> usize {
    let kp = g.kh.div_ceil(2);
    let height = (g.oh - 1) * g.sh + 2 * (kp - 1) * g.dh + 1;
    rows.clear();
    for r in 0..g.oh {
        rows.extend((0..kp).map(|p| r * g.sh + 2 * p * g.dh));
    }
    rows.sort_unstable();
    rows.dedup();
    height
}

#[cfg(test)]
thread_local! {
    /// Calls of this thread that ran [`PairLayout::RowQuads`] (tests
    /// check that the path they cover ran).
    static ROW_QUADS_RUNS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

thread_local! {
    /// The scratch of [`depthwise_pairs`], reused.
    static PAIR_BUFS: std::cell::RefCell<PairBufs> = std::cell::RefCell::new(PairBufs::default());
}

thread_local! {
    /// The widened plane, reused across calls on a thread.
    static PLANE: std::cell::RefCell<Vec<i32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The tap loop over a widened, zero-point-free plane.
#[inline(always)]
pub(crate) fn plane_taps(plane: &[i32], w: &[i32], g: &PlaneGeom, out: &mut [i32]) {
    let [ih, iw] = g.input;
    let [kh, kw] = g.kernel;
    let [oh, ow] = g.output;
    let out = &mut out[..oh * ow];
    out.fill(0);
    let sw = g.strides[1];
    for i in 0..kh {
        let (y0, y1) = valid(oh, ih, g.strides[0], i * g.dilations[0], g.pad_begin[0]);
        for j in 0..kw {
            let wv = w[i * kw + j];
            if wv == 0 {
                continue;
            }
            let (x0, x1) = valid(ow, iw, sw, j * g.dilations[1], g.pad_begin[1]);
            if x0 >= x1 {
                continue;
            }
            let ix0 = x0 * sw + j * g.dilations[1] - g.pad_begin[1];
            for oy in y0..y1 {
                let iy = oy * g.strides[0] + i * g.dilations[0] - g.pad_begin[0];
                let src = &plane[iy * iw + ix0..(iy + 1) * iw];
                let dst = &mut out[oy * ow + x0..oy * ow + x1];
                if sw == 1 {
                    for (o, &v) in dst.iter_mut().zip(src) {
                        *o += wv * v;
                    }
                } else if sw == 2 {
                    for (o, v) in dst.iter_mut().zip(src.chunks(2)) {
                        *o += wv * v[0];
                    }
                } else {
                    for (o, &v) in dst.iter_mut().zip(src.iter().step_by(sw)) {
                        *o += wv * v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(x: &[u8], xz: i32, w: &[i8], wz: i32, g: &PlaneGeom) -> Vec<i32> {
        let mut out = vec![0; g.output[0] * g.output[1]];
        for oy in 0..g.output[0] {
            for ox in 0..g.output[1] {
                let mut s = 0;
                for i in 0..g.kernel[0] {
                    for j in 0..g.kernel[1] {
                        let iy =
                            (oy * g.strides[0] + i * g.dilations[0]) as i64 - g.pad_begin[0] as i64;
                        let ix =
                            (ox * g.strides[1] + j * g.dilations[1]) as i64 - g.pad_begin[1] as i64;
                        if iy < 0 || ix < 0 || iy >= g.input[0] as i64 || ix >= g.input[1] as i64 {
                            continue;
                        }
                        let v = x[iy as usize * g.input[1] + ix as usize] as i32 - xz;
                        s += (w[i * g.kernel[1] + j] as i32 - wz) * v;
                    }
                }
                out[oy * g.output[1] + ox] = s;
            }
        }
        out
    }

    /// The layer `case` (input, zero point, channels, centred weights,
    /// geometry) through [`depthwise_pairs_requant`] on `isa` into `T`:
    /// it runs where `fused` says, and then gives the `sums`
    /// requantized apart by `rq` (whose float forms are `forms`).
    #[allow(clippy::type_complexity)]
    fn fused_equals_apart<T: QInt + std::fmt::Debug + PartialEq>(
        (x, xz, nch, w, geom): (&[u8], i32, usize, &[i32], &crate::im2col::ConvGeometry),
        (rq, forms): (&[qport_core::arith::Requantizer], &[FloatRequant]),
        sums: &[i32],
        isa: crate::Isa,
        fused: bool,
    ) -> Result<(), TestCaseError> {
        let os = geom.output_size();
        let mut want = vec![T::truncate(0); nch * os];
        crate::int8::elementwise::requantize(rq, sums, os, &mut want);
        let mut got = vec![T::truncate(7); nch * os];
        let ran = crate::dispatch::with_isa(isa, || {
            depthwise_pairs_requant(x, xz, nch, w, geom, forms, &mut got)
        });
        prop_assert_eq!(ran, fused, "{}", isa);
        if ran {
            prop_assert_eq!(&got, &want, "{}", isa);
        }
        Ok(())
    }

    /// The row-quads body on the layers of MobileNetV2 and
    /// EfficientNet-Lite0 (3 x 3 and 5 x 5, strides 1 and 2, maps from
    /// 7 to 112 wide, narrow ones with output rows packed in a vector)
    /// and on 7 x 7 and 9 x 9 kernels (more taps than one permute of
    /// the weights takes), holding its sums to the direct definition,
    /// and the count of its runs to the rows that have it.
    #[test]
    fn row_quads_match_the_direct_definition_on_network_layers() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for &(hw, k, s) in &[
            (112, 3, 1),
            (112, 3, 2),
            (56, 3, 1),
            (28, 5, 2),
            (14, 5, 1),
            (7, 3, 1),
            (7, 5, 1),
            (17, 3, 2),
            (20, 7, 1),
            (11, 9, 1),
            (13, 9, 2),
        ] {
            let p = k / 2;
            let o = (hw + 2 * p - k) / s + 1;
            let g = PlaneGeom {
                input: [hw, hw],
                kernel: [k, k],
                strides: [s, s],
                dilations: [1, 1],
                pad_begin: [p, p],
                output: [o, o],
            };
            let nch = 5;
            let xz = (next() % 256) as i32;
            let x: Vec<u8> = (0..nch * hw * hw).map(|_| next() as u8).collect();
            let w: Vec<i8> = (0..nch * k * k).map(|_| next() as i8).collect();
            let wc: Vec<i32> = w.iter().map(|&v| i32::from(v)).collect();
            for isa in crate::dispatch::supported_isas() {
                for layout in [None, Some(PairLayout::RowQuads)] {
                    let before = ROW_QUADS_RUNS.with(|r| r.get());
                    let mut got = vec![7; nch * o * o];
                    let ran = crate::dispatch::with_isa(isa, || {
                        pairs_as(&x, xz, nch, &wc, &g.conv_geometry(), &mut got, layout)
                    });
                    assert!(ran);
                    for c in 0..nch {
                        let want = naive(&x[c * hw * hw..], xz, &w[c * k * k..], 0, &g);
                        assert_eq!(
                            &got[c * o * o..(c + 1) * o * o],
                            &want[..],
                            "{isa} {layout:?} {hw} {k} {s}"
                        );
                    }
                    #[cfg(target_arch = "x86_64")]
                    {
                        // (every layer here: the narrow ones with rows
                        // packed into a vector)
                        assert_eq!(
                            ROW_QUADS_RUNS.with(|r| r.get()) - before,
                            usize::from(row_quads_row(isa)),
                            "{isa} {layout:?} {hw}: the row-quads body runs where the row has it"
                        );
                    }
                    let _ = before;
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn matches_the_direct_definition(
            ih in 1usize..9, iw in 1usize..9, kh in 1usize..4, kw in 1usize..4,
            sh in 1usize..3, sw in 1usize..3, dh in 1usize..3, dw in 1usize..3,
            pt in 0usize..3, pl in 0usize..3, pb in 0usize..3, pr in 0usize..3,
            xz in 0i32..256, wz in -128i32..128,
            xs in proptest::collection::vec(any::<u8>(), 64),
            ws in proptest::collection::vec(any::<i8>(), 9),
        ) {
            let eh = (kh - 1) * dh + 1;
            let ew = (kw - 1) * dw + 1;
            prop_assume!(ih + pt + pb >= eh && iw + pl + pr >= ew);
            let g = PlaneGeom {
                input: [ih, iw], kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw],
                pad_begin: [pt, pl],
                output: [(ih + pt + pb - eh) / sh + 1, (iw + pl + pr - ew) / sw + 1],
            };
            let want = naive(&xs, xz, &ws, wz, &g);
            let mut out = vec![7; g.output[0] * g.output[1]];
            depthwise_plane(&xs[..ih * iw], xz, &ws[..kh * kw], wz, &g, &mut out);
            prop_assert_eq!(&out, &want);
            // the portable loop too (the fast one ran above where AVX2 exists)
            let mut out = vec![7; g.output[0] * g.output[1]];
            crate::with_generic_kernels(|| {
                depthwise_plane(&xs[..ih * iw], xz, &ws[..kh * kw], wz, &g, &mut out)
            });
            prop_assert_eq!(&out, &want);
        }

        /// The fused requantization of the channels-last layout equals the
        /// sums requantized apart (every row: those without it decline),
        /// for both float policies, 8-bit outputs of either sign, per-channel
        /// forms, and biases whose i32 addition overflows.
        #[test]
        fn fused_requantization_matches_the_sums_requantized(
            ih in 1usize..10, iw in 1usize..40, kh in 1usize..6, kw in 1usize..6,
            sh in 1usize..3, sw in 1usize..3,
            pt in 0usize..3, pl in 0usize..3, pb in 0usize..3, pr in 0usize..3,
            nch in prop_oneof![1usize..4, 15usize..35],
            xz in 0i32..256,
            seed in any::<u64>(),
            big_bias in any::<bool>(),
            signed in any::<bool>(),
            small_w in any::<bool>(),
        ) {
            use qport_core::arith::{ArithProfile, Requantizer};
            prop_assume!(ih + pt + pb >= kh && iw + pl + pr >= kw);
            let geom = crate::im2col::ConvGeometry::new_2d(
                [ih, iw], [kh, kw],
                [(ih + pt + pb - kh) / sh + 1, (iw + pl + pr - kw) / sw + 1],
                [sh, sw], [1, 1], [pt as isize, pl as isize],
            );
            let (is, ks, os) = (ih * iw, kh * kw, geom.output_size());
            let mut r = seed;
            let mut next = move || {
                r = r.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (r >> 33) as i64
            };
            let x: Vec<u8> = (0..nch * is).map(|_| next() as u8).collect();
            // centred weights of the full range, or i8 ones (the range
            // of the row quads)
            let span = if small_w { 256 } else { 511 };
            let w: Vec<i32> = (0..nch * ks)
                .map(|_| next().rem_euclid(span) as i32 - (span as i32) / 2)
                .collect();
            let mut sums = vec![0; nch * os];
            prop_assert!(depthwise_pairs(&x, xz, nch, &w, &geom, &mut sums));
            let (lo, hi) = if signed { (-128, 127) } else { (0, 255) };
            for name in ["f32-rne", "exact"] {
                let p = ArithProfile::preset(name).unwrap();
                let rq: Vec<Requantizer> = (0..nch)
                    .map(|_| {
                        let bias = if big_bias && next() % 3 == 0 {
                            f64::from(i32::MAX - (next() % 1000) as i32)
                        } else {
                            (next() % 20_000 - 10_000) as f64
                        };
                        let m = (next() % 1000 + 1) as f64 * 1e-5;
                        let z = (next() % 256) as i32 + lo;
                        Requantizer::new(bias, m, z, lo, hi, &p)
                    })
                    .collect();
                let forms: Vec<FloatRequant> = rq.iter().map(|r| r.float_form().unwrap()).collect();
                for isa in crate::dispatch::supported_isas() {
                    // (row quads with i8 weights, else channels-last on
                    // narrow maps)
                    let fused = match crate::f32::depthwise::Geo::new(&geom)
                        .map(|g| (pick_layout(&g, isa), g.w))
                    {
                        Some((PairLayout::ChannelsLast, _)) => true,
                        Some((PairLayout::RowQuads, w_in)) => {
                            w.iter().all(|&v| i8::try_from(v).is_ok())
                                || w_in <= CHANNELS_LAST_MAX_W
                        }
                        _ => false,
                    };
                    let case = (&x[..], xz, nch, &w[..], &geom);
                    if signed {
                        fused_equals_apart::<i8>(case, (&rq, &forms), &sums, isa, fused)?;
                    } else {
                        fused_equals_apart::<u8>(case, (&rq, &forms), &sums, isa, fused)?;
                    }
                }
            }
        }

        #[test]
        fn pairs_match_the_direct_definition(
            ih in 1usize..12, iw in 1usize..70, kh in 1usize..6, kw in 1usize..6,
            sh in 1usize..4, sw in 1usize..4, dh in 1usize..3, dw in 1usize..3,
            pt in 0usize..3, pl in 0usize..3, pb in 0usize..3, pr in 0usize..3,
            nch in prop_oneof![1usize..4, 14usize..40],
            xz in prop_oneof![Just(0i32), Just(255), 0i32..256],
            wz in prop_oneof![Just(-128i32), Just(127), Just(0), -128i32..128],
            xs in proptest::collection::vec(prop_oneof![Just(0u8), Just(255), any::<u8>()], 3 * 800),
            ws in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127), any::<i8>()], 3 * 25),
        ) {
            let e = |k: usize, d: usize| (k - 1) * d + 1;
            prop_assume!(ih + pt + pb >= e(kh, dh) && iw + pl + pr >= e(kw, dw));
            let g = PlaneGeom {
                input: [ih, iw], kernel: [kh, kw], strides: [sh, sw], dilations: [dh, dw],
                pad_begin: [pt, pl],
                output: [(ih + pt + pb - e(kh, dh)) / sh + 1, (iw + pl + pr - e(kw, dw)) / sw + 1],
            };
            let (is, ks, os) = (ih * iw, kh * kw, g.output[0] * g.output[1]);
            // `nch` channels: the drawn values, shifted per channel past
            // the first three (blocks of 16 channels, full and partial)
            let x: Vec<u8> = (0..nch * is).map(|i| xs[(i + i / (3 * is) * 7) % xs.len()]).collect();
            let wv: Vec<i8> = (0..nch * ks).map(|i| ws[(i + i / (3 * ks) * 5) % ws.len()]).collect();
            let wc: Vec<i32> = wv.iter().map(|&v| i32::from(v) - wz).collect();
            let want: Vec<Vec<i32>> = (0..nch)
                .map(|c| naive(&x[c * is..], xz, &wv[c * ks..], wz, &g))
                .collect();
            // every row of the dispatch table, the portable one included,
            // in each layout (rows without the channels-last one run the
            // planes), and in the one the call picks
            for isa in crate::dispatch::supported_isas() {
                for layout in [
                    None,
                    Some(PairLayout::Planes),
                    Some(PairLayout::ChannelsLast),
                    Some(PairLayout::RowQuads),
                ] {
                    let mut got = vec![7; nch * os];
                    let ran = crate::dispatch::with_isa(isa, || {
                        pairs_as(&x, xz, nch, &wc, &g.conv_geometry(), &mut got, layout)
                    });
                    prop_assert!(ran);
                    for (c, want) in want.iter().enumerate() {
                        prop_assert_eq!(&got[c * os..(c + 1) * os], &want[..], "{} {:?}", isa, layout);
                    }
                }
            }
        }

    }
}
