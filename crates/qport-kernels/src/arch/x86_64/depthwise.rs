//! The AVX2 + FMA and AVX-512F bodies of [`crate::depthwise::depthwise2d`]
//! (see that module for the algorithm), instantiated over the SIMD
//! vocabulary of [`crate::simd`]; reached only through the dispatch table.

use crate::activation::Activation;
use crate::f32::depthwise::{block, fill_row, layout, tap_offset, Args, Geo};
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
    let shifted = shifted_kernel(args);
    // SAFETY: forwarded contract; every channel function below reads
    // within the plane `layout` sized for 16 lanes.
    unsafe { for_channels::<Avx512>(args, out, scratch, |p, y| channel512(shifted, r, c, p, y)) }
}

/// The kernel side `K` (3 or 5) when [`channel_k`] runs `a`: one filter
/// per channel, a `K x K` kernel without dilation, both strides 1 or
/// both 2; else 0.
fn shifted_kernel(a: &Args) -> usize {
    let g = &a.g;
    let stride = g.sh == g.sw && (g.sh == 1 || g.sh == 2);
    if a.mult == 1 && stride && (g.dh, g.dw) == (1, 1) && g.kh == g.kw && matches!(g.kh, 3 | 5) {
        g.kh
    } else {
        0
    }
}

/// One channel at AVX-512F: [`channel_k`] for a `K x K` kernel (`shifted`
/// = `K`, see [`shifted_kernel`]), else [`channel`], in blocks of `r x c`
/// ([`block`]; [`channel_k`] at stride 2 or with `K` = 5 splits the
/// block's rows, to keep its sums and shifted rows in registers). (A
/// function, not the closure's body: a closure does not inherit its
/// caller's target features.)
///
/// # Safety
/// AVX-512F, AVX2 and FMA; `p` as [`channel`] and, with `shifted`,
/// [`channel_k`] require.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn channel512(shifted: usize, r: usize, c: usize, p: &Channel, y: &mut [f32]) {
    // SAFETY: forwarded contract.
    unsafe {
        match (shifted, p.g.sh, r, c) {
            (3, 1, 7, 1) => channel_k::<7, 1, 3, 1>(p, y),
            (3, 1, 6, 2) => channel_k::<6, 2, 3, 1>(p, y),
            (3, 1, 4, 3) => channel_k::<4, 3, 3, 1>(p, y),
            (3, 1, _, _) => channel_k::<3, 4, 3, 1>(p, y),
            (5, 1, 7, 1) => channel_k::<7, 1, 5, 1>(p, y),
            (5, 1, 6, 2) => channel_k::<3, 2, 5, 1>(p, y),
            (5, 1, 4, 3) => channel_k::<2, 3, 5, 1>(p, y),
            (5, 1, _, _) => channel_k::<3, 4, 5, 1>(p, y),
            (3, 2, 7, 1) => channel_k::<7, 1, 3, 2>(p, y),
            (3, 2, 6, 2) => channel_k::<3, 2, 3, 2>(p, y),
            (3, 2, 4, 3) => channel_k::<2, 3, 3, 2>(p, y),
            (3, 2, _, _) => channel_k::<3, 4, 3, 2>(p, y),
            (5, 2, 7, 1) => channel_k::<7, 1, 5, 2>(p, y),
            (5, 2, 6, 2) => channel_k::<3, 2, 5, 2>(p, y),
            (5, 2, 4, 3) => channel_k::<2, 3, 5, 2>(p, y),
            (5, 2, _, _) => channel_k::<1, 4, 5, 2>(p, y),
            (_, _, 7, 1) => channel::<Avx512, 7, 1>(p, y),
            (_, _, 6, 2) => channel::<Avx512, 6, 2>(p, y),
            (_, _, 4, 3) => channel::<Avx512, 4, 3>(p, y),
            _ => channel::<Avx512, 3, 4>(p, y),
        }
    }
}

/// Whether tap `t` of `taps` starts (`.0`) and ends (`.1`) a block of
/// [`tap_blocks`](crate::f32::depthwise::tap_blocks).
const fn tap_role(t: usize, taps: usize) -> (bool, bool) {
    let fours = 4 * (taps / 4);
    if t < fours {
        (t.is_multiple_of(4), t % 4 == 3)
    } else if taps - fours >= 2 && t < fours + 2 {
        (t == fours, t == fours + 1)
    } else {
        (true, true)
    }
}

/// `v0` and `v1` (16 consecutive floats each) shifted down by `j` lanes:
/// the vector starting `j` floats past `v0`'s first.
///
/// # Safety
/// AVX-512F.
#[inline(always)]
unsafe fn shift16(v0: __m512, v1: __m512, j: usize) -> __m512 {
    // SAFETY: AVX-512F (forwarded contract).
    unsafe {
        let (a, b) = (_mm512_castps_si512(v1), _mm512_castps_si512(v0));
        _mm512_castsi512_ps(match j {
            0 => b,
            1 => _mm512_alignr_epi32::<1>(a, b),
            2 => _mm512_alignr_epi32::<2>(a, b),
            3 => _mm512_alignr_epi32::<3>(a, b),
            _ => _mm512_alignr_epi32::<4>(a, b),
        })
    }
}

/// [`channel`] for a `K x K` kernel (`K` 3 or 5) at stride `S` (1 or 2 on
/// both axes) without dilation, one filter per channel, at AVX-512F:
/// each of the block's plane rows (each phase of it at stride 2) is read
/// as aligned vectors once, the column shifts its taps need are made in
/// registers (tap column `kc` reads phase `kc % S` shifted by `kc / S`)
/// and applied to every output row of the block that uses that row.
/// (Loading each tap at its own offset made two of three loads of a 3 x 3
/// kernel straddle cache lines. Every output element is still the same
/// sequence of operations: its taps in kernel row-major order, in the
/// blocks of [`tap_blocks`](crate::f32::depthwise::tap_blocks).)
///
/// # Safety
/// AVX-512F; `p.g` as [`shifted_kernel`] accepts with `K` and `S`, `R`
/// dividing the block rows of `layout`; the plane of `layout` for 16
/// lanes (a block's plane rows `S * r0 .. S * (r0 + R - 1) + K` and its
/// columns `x0 .. x0 + (C + 1) * 16` of each phase inside it, `x0` and
/// the phase width multiples of 16, the plane aligned).
#[inline(always)]
unsafe fn channel_k<const R: usize, const C: usize, const K: usize, const S: usize>(
    p: &Channel,
    y: &mut [f32],
) {
    const L: usize = 16;
    let g = p.g;
    debug_assert!((g.kh, g.kw, g.sh, g.sw, g.dh, g.dw) == (K, K, S, S, 1, 1) && p.blocked);
    let plane = p.plane.as_ptr();
    let yp = y.as_mut_ptr();
    let ph = (S * p.wq, p.wq);
    // SAFETY: (whole body) plane rows below S * (r0 + R - 1) + K <= plane
    // rows and columns below x0 + (C + 1) * 16 <= wq of each phase (see
    // `layout`); aligned loads at multiples of 16 floats from an aligned
    // plane.
    unsafe {
        let mut w = [Avx512::zero(); 25];
        for (t, wt) in w.iter_mut().enumerate().take(K * K) {
            *wt = Avx512::splat(p.k[t]);
        }
        let mut r0 = 0;
        while r0 < g.oh {
            p.prefetch_next(r0, R);
            let mut x0 = 0;
            while x0 < g.ow {
                let base = plane.add(S * r0 * ph.0 + x0);
                let mut acc = [[Avx512::zero(); C]; R];
                let mut blk = [[Avx512::zero(); C]; R];
                let st = (&mut acc, &mut blk);
                // one call per plane row, its index a constant (a loop
                // here kept the sums in memory); calls past the block's
                // last row return at once
                const { assert!(S * (R - 1) + K <= 17) };
                kernel_row::<R, C, K, S, 0>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 1>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 2>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 3>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 4>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 5>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 6>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 7>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 8>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 9>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 10>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 11>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 12>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 13>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 14>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 15>(base, ph, &w, st.0, st.1);
                kernel_row::<R, C, K, S, 16>(base, ph, &w, st.0, st.1);
                store_block::<Avx512, R, C>(p, &acc, yp, r0, x0);
                x0 += C * L;
            }
            r0 += R;
        }
    }
}

/// Plane row `Y` of a block of [`channel_k`] (nothing past its last, `S *
/// (R - 1) + K - 1`): per vector of columns, each phase's two vectors and
/// the shifts of them the taps read, applied to every output row `rr` of
/// the block with kernel row `Y - S * rr` in `0..K`. `ph` is the plane's
/// row pitch and phase width.
///
/// # Safety
/// As [`channel_k`]; `base` the block's first plane element.
#[inline(always)]
unsafe fn kernel_row<
    const R: usize,
    const C: usize,
    const K: usize,
    const S: usize,
    const Y: usize,
>(
    base: *const f32,
    ph: (usize, usize),
    w: &[__m512; 25],
    acc: &mut [[__m512; C]; R],
    blk: &mut [[__m512; C]; R],
) {
    const L: usize = 16;
    if Y >= S * (R - 1) + K {
        return;
    }
    // SAFETY: forwarded contract.
    unsafe {
        let row = base.add(Y * ph.0);
        for c in 0..C {
            // tap column kc: phase kc % S, shifted by kc / S
            let mut s = [Avx512::zero(); K];
            for b in 0..S.min(K) {
                let v0 = _mm512_load_ps(row.add(b * ph.1 + c * L));
                let v1 = _mm512_load_ps(row.add(b * ph.1 + (c + 1) * L));
                let mut kc = b;
                while kc < K {
                    s[kc] = shift16(v0, v1, kc / S);
                    kc += S;
                }
            }
            for rr in 0..R {
                if Y < S * rr || Y - S * rr >= K {
                    continue;
                }
                let kr = Y - S * rr;
                for (kc, &sv) in s.iter().enumerate() {
                    let t = kr * K + kc;
                    let prod = Avx512::mul(sv, w[t]);
                    let (start, end) = tap_role(t, K * K);
                    let b = if start {
                        prod
                    } else {
                        Avx512::add(blk[rr][c], prod)
                    };
                    blk[rr][c] = b;
                    if end {
                        acc[rr][c] = Avx512::add(b, acc[rr][c]);
                    }
                }
            }
        }
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
    /// ([`tap_blocks`](crate::f32::depthwise::tap_blocks)); else in one fused multiply-add chain.
    blocked: bool,
    bias: Option<f32>,
    act: Activation,
    /// The next channel's input (empty if none), prefetched a part per
    /// block of output rows ([`Channel::prefetch_next`]).
    next: &'a [f32],
}

impl Channel<'_> {
    /// Prefetches into L2 the part of [`Channel::next`] proportional to
    /// output rows `r0 .. r0 + rows`: spread over the channel's blocks,
    /// the requests do not queue up behind each other as a loop over the
    /// whole channel's lines did.
    #[inline(always)]
    fn prefetch_next(&self, r0: usize, rows: usize) {
        let (n, oh) = (self.next.len(), self.g.oh.max(1));
        let lo = (r0 * n / oh) & !15;
        let hi = ((r0 + rows).min(oh) * n / oh).min(n);
        let mut i = lo;
        while i < hi {
            // SAFETY: a prefetch of an address inside `next`.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(self.next.as_ptr().add(i) as *const i8) };
            i += 16;
        }
    }
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
        // the next input channel, fetched while this one computes
        let next = o + 1;
        let next_image: &[f32] = if next < a.channels * a.mult && next % a.mult == 0 {
            &a.image[(next / a.mult) * isz..][..isz]
        } else {
            &[]
        };
        let p = Channel {
            g,
            plane,
            wq,
            toff,
            k: &a.kernels[o * ksz..][..ksz],
            blocked: a.mult == 1,
            bias: a.bias.map(|b| b[o]),
            act: a.act,
            next: next_image,
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
pub(crate) unsafe fn fill_plane<S: Simd>(
    g: &Geo,
    img: &[f32],
    plane: &mut [f32],
    rows: usize,
    wq: usize,
) {
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
        p.prefetch_next(r0, R);
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
                    // the blocks of `tap_blocks` as plain loops (an
                    // iterator here kept the sums in memory)
                    let mut t0 = 0;
                    while t0 + 4 <= taps {
                        tap_block::<S, R, C, 4>(p, &rows, t0, &mut acc);
                        t0 += 4;
                    }
                    if taps - t0 >= 2 {
                        tap_block::<S, R, C, 2>(p, &rows, t0, &mut acc);
                        t0 += 2;
                    }
                    if t0 < taps {
                        tap_block::<S, R, C, 1>(p, &rows, t0, &mut acc);
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

/// One block of `N` taps from `t0` ([`tap_blocks`](crate::f32::depthwise::tap_blocks)) of an `R x C` block
/// of outputs: the products summed left to right, then added to `acc`.
///
/// # Safety
/// `S`'s target features; every `rows[rr] + toff[t] + C * lanes` inside
/// the plane, `t0 + N <= taps`.
#[inline(always)]
unsafe fn tap_block<S: Simd, const R: usize, const C: usize, const N: usize>(
    p: &Channel,
    rows: &[*const f32; R],
    t0: usize,
    acc: &mut [[S::V; C]; R],
) {
    let l = S::LANES;
    // SAFETY: forwarded contract.
    unsafe {
        let mut blk = [[S::zero(); C]; R];
        for i in 0..N {
            let t = t0 + i;
            let wv = S::splat(*p.k.get_unchecked(t));
            let off = *p.toff.get_unchecked(t);
            for (bkr, row) in blk.iter_mut().zip(rows) {
                for (ci, b) in bkr.iter_mut().enumerate() {
                    let prod = S::mul(S::load(row.add(off + ci * l)), wv);
                    *b = if i == 0 { prod } else { S::add(*b, prod) };
                }
            }
        }
        for (accr, bkr) in acc.iter_mut().zip(&blk) {
            for (a, &b) in accr.iter_mut().zip(bkr) {
                *a = S::add(b, *a);
            }
        }
    }
}

/// Whether [`avx512`] runs `a` with vectors across channels
/// ([`by_channels`]) rather than along output rows: one filter per
/// channel, at least a vector of channels, and short output rows, where
/// row vectors waste lanes. Measured on the depthwise shapes of
/// MobileNetV2 and EfficientNet-Lite0 (`depthwise_speed`): against
/// [`channel_k`] (3 x 3 and 5 x 5 kernels, stride 1 or 2) by channels
/// takes 0.6x–0.85x the time at 7 x 7 outputs and at 14 x 14 with stride
/// 2, but 1.1x–1.45x at 14 x 14 and 28 x 28 with stride 1; against
/// [`channel`] (other kernels) 0.6x at 7 x 7 and at 14 x 14 with stride
/// 2, about 0.95x at 14 x 14 and 28 x 28, 1.05x–1.3x at 56 x 56 and
/// 112 x 112.
pub(crate) fn goes_by_channels(a: &Args) -> bool {
    let g = &a.g;
    let narrow = if shifted_kernel(a) != 0 && g.sw == 1 {
        g.ow <= 8
    } else {
        g.ow <= 16 || (g.ow <= 28 && g.sw == 1)
    };
    a.mult == 1 && a.channels >= 16 && narrow
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
        // the blocks of `tap_blocks` as plain loops (an iterator here kept
        // the sums in memory)
        let taps = p.toff.len();
        let mut t0 = 0;
        while t0 + 4 <= taps {
            pixel_block::<N, 4>(p, src, t0, &mut acc);
            t0 += 4;
        }
        if taps - t0 >= 2 {
            pixel_block::<N, 2>(p, src, t0, &mut acc);
            t0 += 2;
        }
        if t0 < taps {
            pixel_block::<N, 1>(p, src, t0, &mut acc);
        }
        for (i, &v) in acc.iter().enumerate() {
            let v = finish::<Avx512>(v, p.bias, p.clamp, p.lo, p.hi, p.act);
            Avx512::store(dst.add(i * L), v);
        }
    }
}

/// One block of `M` taps from `t0` ([`tap_blocks`](crate::f32::depthwise::tap_blocks)) of [`pixels`]: the
/// products summed left to right, then added to `acc`.
///
/// # Safety
/// As [`pixels`]; `t0 + M` at most the taps.
#[inline(always)]
unsafe fn pixel_block<const N: usize, const M: usize>(
    p: &PixelTaps,
    src: *const f32,
    t0: usize,
    acc: &mut [__m512; N],
) {
    const L: usize = 16;
    // SAFETY: forwarded contract.
    unsafe {
        let mut blk = [Avx512::zero(); N];
        for j in 0..M {
            let t = t0 + j;
            let wv = Avx512::load(p.wts.add(t * L));
            let base = src.add(*p.toff.get_unchecked(t));
            for (i, b) in blk.iter_mut().enumerate() {
                let prod = Avx512::mul(Avx512::load(base.add(i * p.step)), wv);
                *b = if j == 0 { prod } else { Avx512::add(*b, prod) };
            }
        }
        for (a, &b) in acc.iter_mut().zip(&blk) {
            *a = Avx512::add(b, *a);
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
