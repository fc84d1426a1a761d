//! Depthwise 2-D convolution of `f32` planes (one input channel per group)
//! with the bias and an [`Activation`] applied as each output is written.
//!
//! [`depthwise2d`] is the entry point; [`depthwise2d_reference`] is the
//! portable scalar reference it falls back to (and is tested against).
//!
//! The fast path copies each input channel once into a zero-padded scratch
//! plane whose rows are split into `stride_w` column phases, so that every
//! kernel tap of a block of outputs is one contiguous vector load. It then
//! computes blocks of `R` output rows by `C` vectors of output columns with
//! all `KH * KW` taps accumulated in registers (fused multiply-add, taps in
//! kernel row-major order), adds the bias, applies the activation and
//! stores each output element once. Results are deterministic for a given
//! CPU and differ from the reference only by the rounding of the fused
//! multiply-adds.

use crate::activation::Activation;
use crate::dispatch::{level, Level};
use crate::im2col::ConvGeometry;

/// The geometry of one depthwise call, checked.
#[derive(Clone, Copy, Debug)]
struct Geo {
    h: usize,
    w: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    sh: usize,
    sw: usize,
    dh: usize,
    dw: usize,
    pt: usize,
    pl: usize,
}

impl Geo {
    fn new(g: &ConvGeometry) -> Option<Geo> {
        if g.rank() != 2
            || g.image.len() != 2
            || g.kernel.len() != 2
            || g.output.len() != 2
            || g.strides.len() != 2
            || g.dilations.len() != 2
            || g.pads_begin.len() != 2
            || g.pads_begin.iter().any(|&p| p < 0)
            || g.strides.contains(&0)
            || g.dilations.contains(&0)
            || g.kernel.contains(&0)
        {
            return None;
        }
        Some(Geo {
            h: g.image[0],
            w: g.image[1],
            kh: g.kernel[0],
            kw: g.kernel[1],
            oh: g.output[0],
            ow: g.output[1],
            sh: g.strides[0],
            sw: g.strides[1],
            dh: g.dilations[0],
            dw: g.dilations[1],
            pt: g.pads_begin[0] as usize,
            pl: g.pads_begin[1] as usize,
        })
    }
}

/// Output rows and vectors of columns per register block, from the number
/// of vectors an output row needs (AVX-512 has twice the registers).
fn block(ow: usize, lanes: usize) -> (usize, usize) {
    match (ow.div_ceil(lanes), lanes) {
        (0 | 1, _) => (7, 1),
        (2, 16) => (6, 2),
        (2, _) => (4, 2),
        (3, 16) => (4, 3),
        (3, _) => (2, 3),
        (_, 16) => (3, 4),
        _ => (2, 4),
    }
}

/// The scratch layout for `lanes`-wide vectors: (rows, phase width,
/// plane elements), or `None` on overflow. The phase width is a multiple of
/// `lanes` so that, with an aligned plane, the vector at each block's
/// first column is aligned; it leaves at least one vector past the last
/// block for the shifted loads.
fn layout(g: &Geo, lanes: usize) -> Option<(usize, usize, usize)> {
    let (r, c) = block(g.ow, lanes);
    let oh_pad = g.oh.checked_next_multiple_of(r)?;
    let ow_pad = g.ow.checked_next_multiple_of(c * lanes)?;
    let rows = (oh_pad - 1)
        .checked_mul(g.sh)?
        .checked_add((g.kh - 1).checked_mul(g.dh)?)?
        .checked_add(1)?;
    let wq = ow_pad
        .checked_add(((g.kw - 1).checked_mul(g.dw)? / g.sw).max(1))?
        .checked_next_multiple_of(lanes)?;
    let len = rows.checked_mul(g.sw)?.checked_mul(wq)?;
    len.checked_add(lanes)?;
    Some((rows, wq, len))
}

/// The scratch elements [`depthwise2d`] uses for geometry `g` at most, or
/// `None` when `g` is not a 2-D geometry with non-negative padding, or the
/// size overflows. Callers can use it to refuse pathological geometries.
pub fn depthwise2d_scratch(g: &ConvGeometry) -> Option<usize> {
    let geo = Geo::new(g)?;
    if geo.oh == 0 || geo.ow == 0 {
        return Some(0);
    }
    let a = layout(&geo, 16)?.2 + 16;
    let b = layout(&geo, 8)?.2 + 8;
    Some(a.max(b))
}

/// Checks the slices against the geometry.
fn check(
    g: &Geo,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) {
    let m = channels * mult;
    assert!(
        image.len() >= channels * g.h * g.w,
        "depthwise2d: image too short"
    );
    assert!(
        kernels.len() >= m * g.kh * g.kw,
        "depthwise2d: kernels too short"
    );
    if let Some(b) = bias {
        assert!(b.len() >= m, "depthwise2d: bias too short");
    }
    assert!(out.len() >= m * g.oh * g.ow, "depthwise2d: out too short");
}

/// Depthwise convolution: output channel `o` (of `channels * mult`) is
/// input channel `o / mult` of `image` (`[channels, H, W]`) convolved with
/// kernel `o` of `kernels` (`[channels * mult, KH, KW]`), plus `bias[o]`,
/// through `act`, written to `out` (`[channels * mult, OH, OW]`; every
/// element is overwritten). `scratch` is reused between calls.
///
/// Positions outside the image (padding, including any end padding the
/// output size implies) read as zero.
///
/// # Panics
/// Panics unless the geometry has two spatial axes, non-negative padding,
/// non-zero kernel, strides and dilations, a scratch size that does not
/// overflow ([`depthwise2d_scratch`]), and the slices are long enough.
#[allow(clippy::too_many_arguments)]
pub fn depthwise2d(
    g: &ConvGeometry,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    depthwise_at(
        level(),
        g,
        channels,
        mult,
        image,
        kernels,
        bias,
        act,
        out,
        scratch,
    )
}

/// [`depthwise2d`] at a given SIMD level (the CPU must support it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_at(
    lvl: Level,
    g: &ConvGeometry,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let geo = Geo::new(g).expect("depthwise2d: needs a 2-D geometry with non-negative padding");
    check(&geo, channels, mult, image, kernels, bias, out);
    if geo.oh == 0 || geo.ow == 0 || channels * mult == 0 {
        return;
    }
    match lvl {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: the caller chose a level this CPU supports; the slices
            // were checked against the geometry.
            unsafe {
                x86::avx512(
                    &geo, channels, mult, image, kernels, bias, act, out, scratch,
                )
            }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: as above.
            unsafe {
                x86::avx2(
                    &geo, channels, mult, image, kernels, bias, act, out, scratch,
                )
            }
        }
        _ => reference(&geo, channels, mult, image, kernels, bias, act, out),
    }
}

/// The scalar reference of [`depthwise2d`]: same contract, no SIMD, no
/// scratch. Each output sums `weight * input` over the taps inside the
/// image in kernel row-major order (separate multiplies and adds), then
/// adds the bias and applies the activation.
///
/// # Panics
/// As [`depthwise2d`].
#[allow(clippy::too_many_arguments)]
pub fn depthwise2d_reference(
    g: &ConvGeometry,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let geo = Geo::new(g).expect("depthwise2d: needs a 2-D geometry with non-negative padding");
    check(&geo, channels, mult, image, kernels, bias, out);
    reference(&geo, channels, mult, image, kernels, bias, act, out)
}

#[allow(clippy::too_many_arguments)]
fn reference(
    g: &Geo,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let (ksz, osz, isz) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
    for o in 0..channels * mult {
        let img = &image[(o / mult) * isz..][..isz];
        let k = &kernels[o * ksz..][..ksz];
        let b = bias.map_or(0.0, |b| b[o]);
        let y = &mut out[o * osz..][..osz];
        for r in 0..g.oh {
            for x in 0..g.ow {
                let mut acc = 0.0f32;
                for ki in 0..g.kh {
                    let iy = (r * g.sh + ki * g.dh) as isize - g.pt as isize;
                    if iy < 0 || iy >= g.h as isize {
                        continue;
                    }
                    for kj in 0..g.kw {
                        let ix = (x * g.sw + kj * g.dw) as isize - g.pl as isize;
                        if ix < 0 || ix >= g.w as isize {
                            continue;
                        }
                        acc += k[ki * g.kw + kj] * img[iy as usize * g.w + ix as usize];
                    }
                }
                y[r * g.ow + x] = act.apply(acc + b);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{block, layout, Geo};
    use crate::activation::Activation;
    use crate::simd::{Avx2, Avx512, Simd, IOTA};
    use std::arch::x86_64::*;

    /// The fast path at AVX-512F.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, AVX2 and FMA; slices checked.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx512(
        g: &Geo,
        channels: usize,
        mult: usize,
        image: &[f32],
        kernels: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        let (r, c) = block(g.ow, 16);
        // aligned loads and lane shifts when every tap offset fits in a
        // vector: unit column dilation, 3 or 5 columns, stride 1 or 2
        let perm = g.dw == 1 && (g.kw == 3 || g.kw == 5) && (g.sw == 1 || g.sw == 2);
        let args = Args {
            g,
            channels,
            mult,
            image,
            kernels,
            bias,
            act,
        };
        // SAFETY: forwarded contract; every channel function below reads
        // within the plane `layout` sized for 16 lanes.
        unsafe {
            for_channels::<Avx512>(&args, out, scratch, |p, y| {
                if !perm {
                    return match (r, c) {
                        (7, 1) => channel::<Avx512, 7, 1>(p, y),
                        (6, 2) => channel::<Avx512, 6, 2>(p, y),
                        (4, 3) => channel::<Avx512, 4, 3>(p, y),
                        _ => channel::<Avx512, 3, 4>(p, y),
                    };
                }
                macro_rules! shifted {
                    ($kw:literal, $sw:literal) => {
                        match (r, c) {
                            (7, 1) => channel_shift::<7, 1, $kw, $sw>(p, y),
                            (6, 2) => channel_shift::<6, 2, $kw, $sw>(p, y),
                            (4, 3) => channel_shift::<4, 3, $kw, $sw>(p, y),
                            _ => channel_shift::<3, 4, $kw, $sw>(p, y),
                        }
                    };
                }
                match (g.kw, g.sw) {
                    (3, 1) => shifted!(3, 1),
                    (3, _) => shifted!(3, 2),
                    (5, 1) => shifted!(5, 1),
                    _ => shifted!(5, 2),
                }
            })
        }
    }

    /// The fast path at AVX2 + FMA.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; slices checked.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx2(
        g: &Geo,
        channels: usize,
        mult: usize,
        image: &[f32],
        kernels: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
    ) {
        let (r, c) = block(g.ow, 8);
        let args = Args {
            g,
            channels,
            mult,
            image,
            kernels,
            bias,
            act,
        };
        // SAFETY: forwarded contract.
        unsafe {
            for_channels::<Avx2>(&args, out, scratch, |p, y| match (r, c) {
                (7, 1) => channel::<Avx2, 7, 1>(p, y),
                (4, 2) => channel::<Avx2, 4, 2>(p, y),
                (2, 3) => channel::<Avx2, 2, 3>(p, y),
                _ => channel::<Avx2, 2, 4>(p, y),
            })
        }
    }

    struct Args<'a> {
        g: &'a Geo,
        channels: usize,
        mult: usize,
        image: &'a [f32],
        kernels: &'a [f32],
        bias: Option<&'a [f32]>,
        act: Activation,
    }

    /// What one output channel's computation sees.
    pub(super) struct Channel<'a> {
        g: &'a Geo,
        /// The padded, phase-split plane (aligned to a vector).
        plane: &'a [f32],
        /// Phase width (a multiple of the lanes).
        wq: usize,
        /// Plane offset of kernel column `kj` within a padded row.
        koff: &'a [usize],
        /// The channel's `KH x KW` kernel.
        k: &'a [f32],
        bias: f32,
        act: Activation,
    }

    /// Sets up the plane and calls `f` for every output channel, filling
    /// the plane from the input channel first.
    #[inline(always)]
    unsafe fn for_channels<S: Simd>(
        a: &Args,
        out: &mut [f32],
        scratch: &mut Vec<f32>,
        mut f: impl FnMut(&Channel, &mut [f32]),
    ) {
        let g = a.g;
        let l = S::LANES;
        let (rows, wq, len) = layout(g, l).expect("depthwise2d: scratch size overflows");
        scratch.clear();
        scratch.resize(len + l, 0.0);
        let start = scratch.as_ptr().align_offset(l * 4).min(l);
        let plane = &mut scratch[start..start + len];
        let koff: Vec<usize> = (0..g.kw)
            .map(|kj| ((kj * g.dw) % g.sw) * wq + (kj * g.dw) / g.sw)
            .collect();
        let (ksz, osz, isz) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
        for o in 0..a.channels * a.mult {
            if o % a.mult == 0 {
                // SAFETY: the caller runs with S's target features.
                unsafe {
                    fill_plane::<S>(g, &a.image[(o / a.mult) * isz..][..isz], plane, rows, wq)
                };
            }
            // start fetching the next input channel while this one computes
            let next = o + 1;
            if next < a.channels * a.mult && next % a.mult == 0 {
                let img = &a.image[(next / a.mult) * isz..][..isz];
                for line in img.chunks(16) {
                    // SAFETY: a prefetch of a valid address.
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(line.as_ptr() as *const i8) };
                }
            }
            let p = Channel {
                g,
                plane,
                wq,
                koff: &koff,
                k: &a.kernels[o * ksz..][..ksz],
                bias: a.bias.map_or(0.0, |b| b[o]),
                act: a.act,
            };
            f(&p, &mut out[o * osz..][..osz]);
        }
    }

    /// Copies image channel `img` into the zeroed plane: padded row `y`
    /// (image row `y - pt`), phase `b` holds padded column `j * sw + b`
    /// (image column `j * sw + b - pl`) at `plane[(y * sw + b) * wq + j]`.
    /// Only the parts inside the image are written, so the padding, zero
    /// from the start, stays zero for every channel of the same geometry.
    #[inline(always)]
    unsafe fn fill_plane<S: Simd>(g: &Geo, img: &[f32], plane: &mut [f32], rows: usize, wq: usize) {
        let (sw, pl, l) = (g.sw, g.pl, S::LANES);
        for y in g.pt..rows.min(g.pt + g.h) {
            let src = &img[(y - g.pt) * g.w..][..g.w];
            let dst = &mut plane[y * sw * wq..][..sw * wq];
            if sw == 1 {
                // padded column j = image column j - pl
                let n = g.w.min(wq.saturating_sub(pl));
                let d = &mut dst[pl.min(wq)..][..n];
                let mut j = 0;
                // SAFETY: j + l <= n for full vectors, j + rest <= n after.
                unsafe {
                    while j + l <= n {
                        S::store(d.as_mut_ptr().add(j), S::load(src.as_ptr().add(j)));
                        j += l;
                    }
                    if j < n {
                        let v = S::load_n(src.as_ptr().add(j), n - j);
                        S::store_n(d.as_mut_ptr().add(j), v, n - j);
                    }
                }
            } else if sw == 2 {
                // even image columns 2t go to phase pl % 2 at t + pl / 2, odd
                // ones to phase (pl + 1) % 2 at t + (pl + 1) / 2
                let pe = pl % 2;
                let (oe, oo) = (pl / 2, pl.div_ceil(2));
                let ne = g.w.div_ceil(2).min(wq.saturating_sub(oe));
                let no = (g.w / 2).min(wq.saturating_sub(oo));
                let both = ne.min(no);
                let (d0, d1) = dst.split_at_mut(wq);
                let (de, dodd) = if pe == 0 { (d0, d1) } else { (d1, d0) };
                let de = &mut de[oe.min(wq)..][..ne];
                let dodd = &mut dodd[oo.min(wq)..][..no];
                let mut t = 0;
                // SAFETY: reads src[..2 * (t + l)] with t + l <= both <=
                // w / 2; writes de/dodd[..t + l].
                unsafe {
                    while t + l <= both {
                        let a = S::load(src.as_ptr().add(2 * t));
                        let b = S::load(src.as_ptr().add(2 * t + l));
                        let (e, o) = S::deinterleave(a, b);
                        S::store(de.as_mut_ptr().add(t), e);
                        S::store(dodd.as_mut_ptr().add(t), o);
                        t += l;
                    }
                    if t < both {
                        // the last partial vector pair
                        let rest = both - t;
                        let n0 = (2 * rest).min(l);
                        let a = S::load_n(src.as_ptr().add(2 * t), n0);
                        let b = S::load_n(src.as_ptr().add(2 * t + n0), 2 * rest - n0);
                        let (e, o) = S::deinterleave(a, b);
                        S::store_n(de.as_mut_ptr().add(t), e, rest);
                        S::store_n(dodd.as_mut_ptr().add(t), o, rest);
                        t = both;
                    }
                }
                for (i, d) in de.iter_mut().enumerate().skip(t) {
                    *d = src[2 * i];
                }
                for (i, d) in dodd.iter_mut().enumerate().skip(t) {
                    *d = src[2 * i + 1];
                }
            } else {
                for b in 0..sw {
                    let seg = &mut dst[b * wq..][..wq];
                    for (j, d) in seg.iter_mut().enumerate() {
                        let c = (j * sw + b) as isize - pl as isize;
                        if c >= 0 && (c as usize) < g.w {
                            *d = src[c as usize];
                        }
                    }
                }
            }
        }
    }

    /// Adds the bias, applies the activation and stores the `R x C`
    /// block at output row `r0`, column `x0` (rows and lanes past the
    /// output are dropped).
    #[inline(always)]
    unsafe fn store_block<S: Simd, const R: usize, const C: usize>(
        p: &Channel,
        acc: &[[S::V; C]; R],
        y: *mut f32,
        r0: usize,
        x0: usize,
    ) {
        let (g, l) = (p.g, S::LANES);
        // Identity, Relu and Clip are one clamp
        let clamp = match p.act {
            Activation::Identity => Some((f32::NEG_INFINITY, f32::INFINITY)),
            Activation::Relu => Some((0.0, f32::INFINITY)),
            Activation::Clip { lo, hi } => Some((lo, hi)),
            _ => None,
        };
        // SAFETY: (whole body) stores at rows < OH, columns < OW.
        unsafe {
            let bias = S::splat(p.bias);
            let (lo, hi) = clamp.unwrap_or((0.0, 0.0));
            let (lo, hi) = (S::splat(lo), S::splat(hi));
            for (rr, accr) in acc.iter().enumerate() {
                let r = r0 + rr;
                if r >= g.oh {
                    break;
                }
                for (ci, &a) in accr.iter().enumerate() {
                    let x = x0 + ci * l;
                    if x >= g.ow {
                        break;
                    }
                    let v = S::add(a, bias);
                    let v = if clamp.is_some() {
                        S::min(hi, S::max(lo, v))
                    } else {
                        S::act(v, p.act)
                    };
                    let n = (g.ow - x).min(l);
                    let dst = y.add(r * g.ow + x);
                    if n == l {
                        S::store(dst, v);
                    } else {
                        S::store_n(dst, v, n);
                    }
                }
            }
        }
    }

    /// One output channel in blocks of `R` rows by `C` vectors, every tap
    /// a vector load at its offset (any geometry).
    #[inline(always)]
    unsafe fn channel<S: Simd, const R: usize, const C: usize>(p: &Channel, y: &mut [f32]) {
        let g = p.g;
        let l = S::LANES;
        let plane = p.plane.as_ptr();
        let yp = y.as_mut_ptr();
        let row_pitch = g.sw * p.wq;
        let mut r0 = 0;
        while r0 < g.oh {
            let mut x0 = 0;
            while x0 < g.ow {
                // SAFETY: (whole block) rows (r0 + rr) * sh + ki * dh <
                // plane rows, columns x0 + off + C * lanes <= wq (see
                // `layout`); the caller runs with S's target features.
                unsafe {
                    let mut acc = [[S::zero(); C]; R];
                    for ki in 0..g.kh {
                        let mut rows = [plane; R];
                        for (rr, row) in rows.iter_mut().enumerate() {
                            *row = plane.add(((r0 + rr) * g.sh + ki * g.dh) * row_pitch + x0);
                        }
                        let kr = p.k.as_ptr().add(ki * g.kw);
                        for (kj, &off) in p.koff.iter().enumerate() {
                            let wv = S::splat(*kr.add(kj));
                            for (accr, row) in acc.iter_mut().zip(&rows) {
                                for (ci, a) in accr.iter_mut().enumerate() {
                                    *a = S::fma(S::load(row.add(off + ci * l)), wv, *a);
                                }
                            }
                        }
                    }
                    store_block::<S, R, C>(p, &acc, yp, r0, x0);
                }
                x0 += C * l;
            }
            r0 += R;
        }
    }

    /// One output channel (AVX-512) for unit column dilation, `KW`
    /// columns and column stride `SW`: per kernel row and block row, the
    /// `C + 1` aligned vectors of each phase are loaded once and every tap
    /// takes its lanes from them with a two-vector permute.
    #[inline(always)]
    unsafe fn channel_shift<const R: usize, const C: usize, const KW: usize, const SW: usize>(
        p: &Channel,
        y: &mut [f32],
    ) {
        let g = p.g;
        let plane = p.plane.as_ptr();
        let yp = y.as_mut_ptr();
        let row_pitch = SW * p.wq;
        // SAFETY: (whole body) as in `channel`; loads of C + 1 vectors at
        // x0 stay below x0 + (C + 1) * 16 <= wq (see `layout`).
        unsafe {
            // shift[off] selects lanes off..off + 16 of [lo, hi]
            let mut shift = [_mm512_setzero_si512(); 5];
            for (off, s) in shift.iter_mut().enumerate() {
                *s = _mm512_loadu_si512(IOTA.as_ptr().add(off) as *const _);
            }
            let mut r0 = 0;
            while r0 < g.oh {
                let mut x0 = 0;
                while x0 < g.ow {
                    let mut acc = [[_mm512_setzero_ps(); C]; R];
                    for ki in 0..g.kh {
                        let mut wv = [_mm512_setzero_ps(); KW];
                        for (kj, w) in wv.iter_mut().enumerate() {
                            *w = _mm512_set1_ps(*p.k.get_unchecked(ki * KW + kj));
                        }
                        for (rr, accr) in acc.iter_mut().enumerate() {
                            let row = plane.add(((r0 + rr) * g.sh + ki * g.dh) * row_pitch + x0);
                            for b in 0..SW {
                                let ph = row.add(b * p.wq);
                                let mut v = [_mm512_setzero_ps(); 8];
                                for (ci, vi) in v.iter_mut().enumerate().take(C + 1) {
                                    *vi = _mm512_loadu_ps(ph.add(ci * 16));
                                }
                                let mut kj = b;
                                while kj < KW {
                                    let off = kj / SW;
                                    for (ci, a) in accr.iter_mut().enumerate() {
                                        let x = if off == 0 {
                                            v[ci]
                                        } else {
                                            _mm512_permutex2var_ps(v[ci], shift[off], v[ci + 1])
                                        };
                                        *a = _mm512_fmadd_ps(x, wv[kj], *a);
                                    }
                                    kj += SW;
                                }
                            }
                        }
                    }
                    store_block::<Avx512, R, C>(p, &acc, yp, r0, x0);
                    x0 += C * 16;
                }
                r0 += R;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;
    use proptest::prelude::*;

    fn geometry() -> impl Strategy<Value = ConvGeometry> {
        (
            (1usize..20, 1usize..20),
            (1usize..6, 1usize..6),
            (1usize..4, 1usize..4),
            (1usize..3, 1usize..3),
            (0isize..3, 0isize..3),
            (0usize..3, 0usize..3),
        )
            .prop_map(
                |((h, w), (kh, kw), (sh, sw), (dh, dw), (pt, pl), (eb, er))| {
                    // output size for begin padding, some end padding and a few
                    // extra (all-padding) positions
                    let out = |i: usize, k: usize, s: usize, d: usize, p: isize, e: usize| {
                        let span = (k - 1) * d + 1;
                        (i + p as usize + e).saturating_sub(span) / s + 1
                    };
                    ConvGeometry {
                        image: vec![h, w],
                        kernel: vec![kh, kw],
                        output: vec![out(h, kh, sh, dh, pt, eb), out(w, kw, sw, dw, pl, er)],
                        strides: vec![sh, sw],
                        dilations: vec![dh, dw],
                        pads_begin: vec![pt, pl],
                    }
                },
            )
    }

    fn act() -> impl Strategy<Value = Activation> {
        prop_oneof![
            Just(Activation::Identity),
            Just(Activation::Relu),
            Just(Activation::Clip { lo: -0.5, hi: 0.7 }),
            Just(Activation::LeakyRelu(0.1)),
            Just(Activation::HardSwish),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn simd_matches_reference(
            g in geometry(), ch in 1usize..4, mult in 1usize..3, act in act(),
            with_bias: bool, seed: u64,
        ) {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let m = ch * mult;
            let image: Vec<f32> = (0..ch * g.image_size()).map(|_| rnd()).collect();
            let kern: Vec<f32> = (0..m * g.kernel_size()).map(|_| rnd()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rnd()).collect();
            let bias = with_bias.then_some(&bias[..]);
            let n = m * g.output_size();
            let mut want = vec![f32::NAN; n];
            depthwise2d_reference(&g, ch, mult, &image, &kern, bias, act, &mut want);
            // the same without the activation and with |terms| for the bound
            let abs_img: Vec<f32> = image.iter().map(|v| v.abs()).collect();
            let abs_k: Vec<f32> = kern.iter().map(|v| v.abs()).collect();
            let mut mag = vec![0.0; n];
            depthwise2d_reference(&g, ch, mult, &abs_img, &abs_k, None,
                Activation::Identity, &mut mag);
            for lvl in [Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let mut got = vec![f32::NAN; n];
                let mut scratch = vec![f32::NAN; 7];
                depthwise_at(lvl, &g, ch, mult, &image, &kern, bias, act, &mut got, &mut scratch);
                let mut again = vec![0.0; n];
                depthwise_at(lvl, &g, ch, mult, &image, &kern, bias, act, &mut again, &mut scratch);
                for i in 0..n {
                    prop_assert_eq!(got[i].to_bits(), again[i].to_bits(), "not deterministic");
                    let b = bias.map_or(0.0, |b| b[i / g.output_size()]).abs();
                    let tol = 1e-6 * (mag[i] + b) + 1e-30;
                    prop_assert!((got[i] - want[i]).abs() <= tol,
                        "{:?} at {}: {} vs reference {} (geometry {:?})", lvl, i, got[i], want[i], g);
                }
            }
        }
    }

    #[test]
    fn same_padding_stride_two_5x5() {
        // the EfficientNet-Lite shape class: TF-SAME asymmetric padding
        let g = ConvGeometry {
            image: vec![14, 14],
            kernel: vec![5, 5],
            output: vec![7, 7],
            strides: vec![2, 2],
            dilations: vec![1, 1],
            pads_begin: vec![1, 1],
        };
        let image: Vec<f32> = (0..196).map(|i| (i % 13) as f32 - 6.0).collect();
        let kern: Vec<f32> = (0..25).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut want = vec![0.0; 49];
        depthwise2d_reference(
            &g,
            1,
            1,
            &image,
            &kern,
            None,
            Activation::Identity,
            &mut want,
        );
        let mut got = vec![0.0; 49];
        depthwise2d(
            &g,
            1,
            1,
            &image,
            &kern,
            None,
            Activation::Identity,
            &mut got,
            &mut vec![],
        );
        // small integers: exact whatever the rounding
        assert_eq!(got, want);
    }
}
