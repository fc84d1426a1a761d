//! The AVX2 + FMA and AVX-512F bodies of [`crate::depthwise::depthwise2d`]
//! (see that module for the algorithm), instantiated over the SIMD
//! vocabulary of [`crate::simd`]; reached only through the dispatch table.

use crate::activation::Activation;
use crate::f32::depthwise::{block, fill_row, layout, tap_blocks, tap_offset, Args, Geo};
use crate::simd::{Avx2, Avx512, Simd};
use std::arch::x86_64::*;

/// The fast path at AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA; slices checked.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn avx512(args: &Args, out: &mut [f32], scratch: &mut Vec<f32>) {
    let g = &args.g;
    if goes_by_channels(args) {
        // SAFETY: forwarded contract; mult is 1.
        unsafe { by_channels(args, out, scratch) };
        return;
    }
    let (r, c) = block(g.ow, 16);
    // SAFETY: forwarded contract; every channel function below reads
    // within the plane `layout` sized for 16 lanes.
    unsafe {
        for_channels::<Avx512>(args, out, scratch, |p, y| match (r, c) {
            (7, 1) => channel::<Avx512, 7, 1>(p, y),
            (6, 2) => channel::<Avx512, 6, 2>(p, y),
            (4, 3) => channel::<Avx512, 4, 3>(p, y),
            _ => channel::<Avx512, 3, 4>(p, y),
        })
    }
}

/// The fast path at AVX2 + FMA.
///
/// # Safety
/// The CPU must support AVX2 and FMA; slices checked.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn avx2(args: &Args, out: &mut [f32], scratch: &mut Vec<f32>) {
    let g = &args.g;
    let (r, c) = block(g.ow, 8);
    // SAFETY: forwarded contract.
    unsafe {
        for_channels::<Avx2>(args, out, scratch, |p, y| match (r, c) {
            (7, 1) => channel::<Avx2, 7, 1>(p, y),
            (4, 2) => channel::<Avx2, 4, 2>(p, y),
            (2, 3) => channel::<Avx2, 2, 3>(p, y),
            _ => channel::<Avx2, 2, 4>(p, y),
        })
    }
}

/// What one output channel's computation sees.
pub(crate) struct Channel<'a> {
    g: &'a Geo,
    /// The padded, phase-split plane (aligned to a vector).
    plane: &'a [f32],
    /// Phase width (a multiple of the lanes).
    wq: usize,
    /// Plane offset of tap `t` (kernel row-major) from the block's first
    /// output row and column.
    toff: &'a [usize],
    /// The channel's `KH x KW` kernel.
    k: &'a [f32],
    /// One filter per channel: the taps are summed in blocks
    /// ([`tap_blocks`]); else in one fused multiply-add chain.
    blocked: bool,
    bias: Option<f32>,
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
    let g = &a.g;
    let l = S::LANES;
    let (rows, wq, len) = layout(g, l).expect("depthwise2d: scratch size overflows");
    scratch.clear();
    scratch.resize(len + l, 0.0);
    let start = scratch.as_ptr().align_offset(l * 4).min(l);
    let plane = &mut scratch[start..start + len];
    // each tap's offset in the plane (on the stack for kernels up to 8x8)
    let mut stack = [0usize; 64];
    let mut heap = Vec::new();
    let toff: &mut [usize] = if g.kh * g.kw <= stack.len() {
        &mut stack[..g.kh * g.kw]
    } else {
        heap.resize(g.kh * g.kw, 0);
        &mut heap
    };
    for (t, off) in toff.iter_mut().enumerate() {
        *off = tap_offset(g, wq, t);
    }
    let toff = &*toff;
    let (ksz, osz, isz) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
    for o in 0..a.channels * a.mult {
        if o % a.mult == 0 {
            // SAFETY: the caller runs with S's target features.
            unsafe { fill_plane::<S>(g, &a.image[(o / a.mult) * isz..][..isz], plane, rows, wq) };
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
            toff,
            k: &a.kernels[o * ksz..][..ksz],
            blocked: a.mult == 1,
            bias: a.bias.map(|b| b[o]),
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
            fill_row(g, src, dst, wq);
        }
    }
}

/// Identity, Relu and Clip as one clamp `(lo, hi)`; `None` for the other
/// activations.
fn clamp_of(act: Activation) -> Option<(f32, f32)> {
    match act {
        Activation::Identity => Some((f32::NEG_INFINITY, f32::INFINITY)),
        Activation::Relu => Some((0.0, f32::INFINITY)),
        Activation::Clip { lo, hi } => Some((lo, hi)),
        _ => None,
    }
}

/// The sum `a` plus the bias (when there is one), through the activation:
/// the clamp to `lo`, `hi` where `clamp` is set ([`clamp_of`]), else
/// `act`.
///
/// # Safety
/// `S`'s target features.
#[inline(always)]
unsafe fn finish<S: Simd>(
    a: S::V,
    bias: Option<S::V>,
    clamp: Option<(f32, f32)>,
    lo: S::V,
    hi: S::V,
    act: Activation,
) -> S::V {
    // SAFETY: forwarded contract.
    unsafe {
        let v = match bias {
            Some(b) => S::add(a, b),
            None => a,
        };
        if clamp.is_some() {
            S::min(hi, S::max(lo, v))
        } else {
            S::act(v, act)
        }
    }
}

/// Adds the bias (when there is one), applies the activation and stores the `R x C`
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
    let clamp = clamp_of(p.act);
    // SAFETY: (whole body) stores at rows < OH, columns < OW.
    unsafe {
        let bias = p.bias.map(|b| S::splat(b));
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
                let v = finish::<S>(a, bias, clamp, lo, hi, p.act);
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
/// a vector load at its offset (any geometry), the taps summed in the
/// order of [`crate::f32::depthwise`].
#[inline(always)]
unsafe fn channel<S: Simd, const R: usize, const C: usize>(p: &Channel, y: &mut [f32]) {
    let g = p.g;
    let l = S::LANES;
    let plane = p.plane.as_ptr();
    let yp = y.as_mut_ptr();
    let row_pitch = g.sw * p.wq;
    let (taps, toff) = (g.kh * g.kw, p.toff);
    let mut r0 = 0;
    while r0 < g.oh {
        let mut x0 = 0;
        while x0 < g.ow {
            // SAFETY: (whole block) rows (r0 + rr) * sh + ki * dh <
            // plane rows, columns x0 + off + C * lanes <= wq (see
            // `layout`); the caller runs with S's target features.
            unsafe {
                let mut rows = [plane; R];
                for (rr, row) in rows.iter_mut().enumerate() {
                    *row = plane.add((r0 + rr) * g.sh * row_pitch + x0);
                }
                let mut acc = [[S::zero(); C]; R];
                if p.blocked {
                    for (t0, n) in tap_blocks(taps) {
                        let mut blk = [[S::zero(); C]; R];
                        for t in t0..t0 + n {
                            let wv = S::splat(*p.k.get_unchecked(t));
                            let off = *toff.get_unchecked(t);
                            for (bkr, row) in blk.iter_mut().zip(&rows) {
                                for (ci, b) in bkr.iter_mut().enumerate() {
                                    let prod = S::mul(S::load(row.add(off + ci * l)), wv);
                                    *b = if t == t0 { prod } else { S::add(*b, prod) };
                                }
                            }
                        }
                        for (accr, bkr) in acc.iter_mut().zip(&blk) {
                            for (a, &b) in accr.iter_mut().zip(bkr) {
                                *a = S::add(b, *a);
                            }
                        }
                    }
                } else {
                    for (t, &off) in toff.iter().enumerate() {
                        let wv = S::splat(*p.k.get_unchecked(t));
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

/// Whether [`avx512`] runs `a` with vectors across channels
/// ([`by_channels`]) rather than along output rows: one filter per
/// channel, at least a vector of channels, and short output rows, where
/// row vectors waste lanes (measured on EfficientNet-Lite0's depthwise
/// shapes: 0.6x the time at 7 x 7 and at 14 x 14 with stride 2, about
/// 0.95x at 14 x 14 and 28 x 28, but 1.05x to 1.3x at 56 x 56 and
/// 112 x 112).
pub(crate) fn goes_by_channels(a: &Args) -> bool {
    let g = &a.g;
    a.mult == 1 && a.channels >= 16 && (g.ow <= 16 || (g.ow <= 28 && g.sw == 1))
}

/// Output pixels per register block of [`by_channels`].
const XB: usize = 8;

/// [`crate::depthwise::depthwise2d`] with one filter per channel (`mult ==
/// 1`) and vectors across channels, at AVX-512F: for each group of 16
/// channels, the input planes are interleaved into a zero-padded scratch
/// image of pixels (each pixel the group's 16 channels, one aligned vector;
/// a 16 x 16 transpose per 16 columns), each output pixel's 16 channels
/// are summed in one vector (lane `l` the sum of channel `l`, in the tap
/// blocks of the module's order, then bias and activation), a row at a
/// time, and each finished row is transposed back into the 16 output
/// planes. Every output element is the same sequence of operations as on
/// the other paths.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA; slices checked; `a.mult ==
/// 1`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn by_channels(a: &Args, out: &mut [f32], scratch: &mut Vec<f32>) {
    const L: usize = 16;
    let g = &a.g;
    debug_assert_eq!(a.mult, 1);
    // the padded image: the rows and columns the outputs read
    let hp = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1;
    let wp = (g.ow - 1) * g.sw + (g.kw - 1) * g.dw + 1;
    let taps = g.kh * g.kw;
    let (isz, osz) = (g.h * g.w, g.oh * g.ow);
    let row_px = g.ow.next_multiple_of(L);
    let n_in = hp * wp * L;
    let need = n_in + taps * L + L + row_px * L + L;
    scratch.clear();
    scratch.resize(need, 0.0);
    let start = scratch.as_ptr().align_offset(64).min(L);
    let (inp, rest) = scratch[start..start + need - L].split_at_mut(n_in);
    let (wts, rest) = rest.split_at_mut(taps * L);
    let (bia, row) = rest.split_at_mut(L);
    // image rows and columns inside the padded image (the padding, zero
    // from the start, is never written)
    let ny = g.h.min(hp.saturating_sub(g.pt));
    let nx = g.w.min(wp.saturating_sub(g.pl));
    let clamp = clamp_of(a.act);
    // SAFETY: (whole body) every pointer below stays inside the slices
    // split above or the checked views of `a` and `out`: image rows y <
    // ny <= h, columns x0 + n <= nx <= w of channels c0 + l < channels;
    // padded pixels (py, px) with py < hp, px < wp; output rows r < oh,
    // columns < ow.
    unsafe {
        let (lo, hi) = clamp.unwrap_or((0.0, 0.0));
        let (lo, hi) = (Avx512::splat(lo), Avx512::splat(hi));
        // each tap's offset (kernel row-major) from an output pixel's
        // first tap, in floats (on the stack for kernels up to 8x8)
        let mut stack = [0usize; 64];
        let mut heap = Vec::new();
        let toff: &mut [usize] = if taps <= stack.len() {
            &mut stack[..taps]
        } else {
            heap.resize(taps, 0);
            &mut heap
        };
        for (t, o) in toff.iter_mut().enumerate() {
            *o = ((t / g.kw) * g.dh * wp + (t % g.kw) * g.dw) * L;
        }
        let toff = &*toff;
        for c0 in (0..a.channels).step_by(L) {
            let nc = L.min(a.channels - c0);
            // the taps of the group's filters, a vector of channels per tap
            let mut t0 = 0;
            while t0 < taps {
                let n = L.min(taps - t0);
                let mut v = [Avx512::zero(); L];
                for (l, vl) in v.iter_mut().enumerate().take(nc) {
                    *vl = Avx512::load_n(a.kernels.as_ptr().add((c0 + l) * taps + t0), n);
                }
                transpose16(&mut v);
                for (i, vi) in v.iter().enumerate().take(n) {
                    Avx512::store(wts.as_mut_ptr().add((t0 + i) * L), *vi);
                }
                t0 += L;
            }
            if let Some(b) = a.bias {
                for l in 0..L {
                    bia[l] = if l < nc { b[c0 + l] } else { 0.0 };
                }
            }
            let bias = a.bias.map(|_| Avx512::load(bia.as_ptr()));
            // interleave
            let ip = inp.as_mut_ptr();
            for y in 0..ny {
                let dst = ip.add(((y + g.pt) * wp + g.pl) * L);
                let mut x0 = 0;
                while x0 < nx {
                    let n = L.min(nx - x0);
                    let mut v = [Avx512::zero(); L];
                    for (l, vl) in v.iter_mut().enumerate().take(nc) {
                        let src = a.image.as_ptr().add((c0 + l) * isz + y * g.w + x0);
                        *vl = Avx512::load_n(src, n);
                    }
                    transpose16(&mut v);
                    for (i, vi) in v.iter().enumerate().take(n) {
                        Avx512::store(dst.add((x0 + i) * L), *vi);
                    }
                    x0 += L;
                }
            }
            let px = PixelTaps {
                toff,
                step: g.sw * L,
                wts: wts.as_ptr(),
                bias,
                clamp,
                lo,
                hi,
                act: a.act,
            };
            let rp = row.as_mut_ptr();
            for r in 0..g.oh {
                // the first tap of output (r, x) is padded pixel (r * sh,
                // x * sw)
                let src = |x: usize| inp.as_ptr().add((r * g.sh * wp + x * g.sw) * L);
                let mut x = 0;
                while x + XB <= g.ow {
                    pixels::<XB>(&px, src(x), rp.add(x * L));
                    x += XB;
                }
                if x < g.ow {
                    // (called in each arm, not through a function pointer,
                    // so that the body is inlined with AVX-512 enabled)
                    let (s, d) = (src(x), rp.add(x * L));
                    match g.ow - x {
                        7 => pixels::<7>(&px, s, d),
                        6 => pixels::<6>(&px, s, d),
                        5 => pixels::<5>(&px, s, d),
                        4 => pixels::<4>(&px, s, d),
                        3 => pixels::<3>(&px, s, d),
                        2 => pixels::<2>(&px, s, d),
                        _ => pixels::<1>(&px, s, d),
                    }
                }
                // the row back into the planes
                let mut x0 = 0;
                while x0 < g.ow {
                    let n = L.min(g.ow - x0);
                    let mut v = [Avx512::zero(); L];
                    for (i, vi) in v.iter_mut().enumerate().take(n) {
                        *vi = Avx512::load(rp.add((x0 + i) * L));
                    }
                    transpose16(&mut v);
                    for (l, vl) in v.iter().enumerate().take(nc) {
                        let dst = out.as_mut_ptr().add((c0 + l) * osz + r * g.ow + x0);
                        Avx512::store_n(dst, *vl, n);
                    }
                    x0 += L;
                }
            }
        }
    }
}

/// What every block of output pixels of one [`by_channels`] group reads.
struct PixelTaps<'a> {
    /// Each tap's offset from a pixel's first tap, in floats.
    toff: &'a [usize],
    /// Floats between the first taps of neighbouring output pixels.
    step: usize,
    /// The group's filters: a vector of channels per tap.
    wts: *const f32,
    bias: Option<__m512>,
    /// See [`finish`].
    clamp: Option<(f32, f32)>,
    lo: __m512,
    hi: __m512,
    act: Activation,
}

/// `N` neighbouring output pixels of [`by_channels`], the first of which
/// has its first tap at `src`, each a vector of the group's channels,
/// written to `dst` (pixel-major).
///
/// # Safety
/// AVX-512F; every tap of the `N` pixels lies in the padded image; `dst`
/// holds `N` vectors.
#[inline(always)]
unsafe fn pixels<const N: usize>(p: &PixelTaps, src: *const f32, dst: *mut f32) {
    const L: usize = 16;
    // SAFETY: (whole body) in bounds per the caller.
    unsafe {
        let mut acc = [Avx512::zero(); N];
        for (t0, n) in tap_blocks(p.toff.len()) {
            let mut blk = [Avx512::zero(); N];
            for t in t0..t0 + n {
                let wv = Avx512::load(p.wts.add(t * L));
                let base = src.add(*p.toff.get_unchecked(t));
                for (i, b) in blk.iter_mut().enumerate() {
                    let prod = Avx512::mul(Avx512::load(base.add(i * p.step)), wv);
                    *b = if t == t0 { prod } else { Avx512::add(*b, prod) };
                }
            }
            for (a, &b) in acc.iter_mut().zip(&blk) {
                *a = Avx512::add(b, *a);
            }
        }
        for (i, &v) in acc.iter().enumerate() {
            let v = finish::<Avx512>(v, p.bias, p.clamp, p.lo, p.hi, p.act);
            Avx512::store(dst.add(i * L), v);
        }
    }
}

/// Transposes 16 vectors of 16 lanes: lane `j` of vector `i` goes to lane
/// `i` of vector `j`.
///
/// # Safety
/// AVX-512F.
#[inline(always)]
pub(crate) unsafe fn transpose16(v: &mut [__m512; 16]) {
    // SAFETY: register operations only, under the caller's AVX-512F.
    unsafe {
        // pairs of rows interleaved within each 128-bit block
        let mut t = [_mm512_setzero_ps(); 16];
        for i in 0..8 {
            t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
            t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
        }
        // u[4i + c], block k: column 4k + c of rows 4i..4i + 4
        let mut u = [_mm512_setzero_ps(); 16];
        for i in 0..4 {
            let pd = |x: __m512| _mm512_castps_pd(x);
            u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
            u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
            u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
            u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
        }
        // gather block k of u[c], u[4 + c], u[8 + c], u[12 + c] into
        // vector 4k + c
        for c in 0..4 {
            let v0 = _mm512_shuffle_f32x4::<0x88>(u[c], u[4 + c]);
            let v1 = _mm512_shuffle_f32x4::<0xdd>(u[c], u[4 + c]);
            let v2 = _mm512_shuffle_f32x4::<0x88>(u[8 + c], u[12 + c]);
            let v3 = _mm512_shuffle_f32x4::<0xdd>(u[8 + c], u[12 + c]);
            v[c] = _mm512_shuffle_f32x4::<0x88>(v0, v2);
            v[8 + c] = _mm512_shuffle_f32x4::<0xdd>(v0, v2);
            v[4 + c] = _mm512_shuffle_f32x4::<0x88>(v1, v3);
            v[12 + c] = _mm512_shuffle_f32x4::<0xdd>(v1, v3);
        }
    }
}
