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
    // Identity, Relu and Clip are one clamp
    let clamp = match p.act {
        Activation::Identity => Some((f32::NEG_INFINITY, f32::INFINITY)),
        Activation::Relu => Some((0.0, f32::INFINITY)),
        Activation::Clip { lo, hi } => Some((lo, hi)),
        _ => None,
    };
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
                let v = match bias {
                    Some(b) => S::add(a, b),
                    None => a,
                };
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
