//! The AVX-512 and AVX2 bodies of the blocked-channel convolution
//! ([`crate::f32::nchwc`]), one generic body over the SIMD vocabulary (and
//! its window maxima, the portable loop compiled for each level): a
//! block of sixteen channels is `NV` vectors (one zmm, two ymm).
//!
//! A dense tile holds `NF` blocks of output channels by `NW` output pixels
//! of one row in registers (up to 4 x 6 zmm, 1 x 6 pairs of ymm); for
//! each input channel it loads the `NF` weight vectors once and
//! broadcasts one input value per pixel. A depthwise tile holds `NW`
//! pixels of one block (up to 8). Output columns whose taps all lie in
//! the image run in full tiles; the columns at the edges one at a time,
//! each over its own taps. The order of operations per output is the
//! portable body's, so are the bits.

#![allow(unsafe_op_in_unsafe_fn)]

use super::simd::{Avx2, Avx512, Simd};
use crate::f32::nchwc::{
    global_average_loop, max_pool_loop, tap_len, Args, Residual, Shape, BLOCK,
};
use std::ops::Range;

recompiled! {
    /// [`max_pool_loop`] with AVX-512F (a block of channels per vector).
    "avx512f" fn max_pool_avx512(
        x: &[f32], in_plane: usize, starts: &[usize], offsets: &[usize], out: &mut [f32],
    ) = max_pool_loop;
    /// [`max_pool_loop`] with AVX2 (a block per two vectors).
    "avx2" fn max_pool_avx2(
        x: &[f32], in_plane: usize, starts: &[usize], offsets: &[usize], out: &mut [f32],
    ) = max_pool_loop;
    /// [`global_average_loop`] with AVX-512F (a block's sums in two
    /// vectors of `f64`).
    "avx512f" fn global_average_avx512(x: &[f32], c: usize, plane: usize, out: &mut [f32]) =
        global_average_loop;
    /// [`global_average_loop`] with AVX2 (a block's sums in four vectors).
    "avx2" fn global_average_avx2(x: &[f32], c: usize, plane: usize, out: &mut [f32]) =
        global_average_loop;
}

/// The AVX-512 body (16 lanes: a block is one vector; 4 x 6 tiles).
///
/// # Safety
/// The CPU must support AVX-512F; `a` checked and `out` the image's
/// blocked output, as for [`crate::f32::nchwc`]'s portable body.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn avx512(a: &Args, out: *mut f32, items: Range<usize>) {
    body::<Avx512, 1, 8>(a, out, items)
}

/// The AVX2 body (8 lanes: a block is two vectors; 1 x 6 tiles).
///
/// # Safety
/// As [`avx512`], with AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn avx2(a: &Args, out: *mut f32, items: Range<usize>) {
    body::<Avx2, 2, 4>(a, out, items)
}

/// [`crate::f32::nchwc::to_blocked`] of one block with AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F; `src` holds `real` (at most 16) rows
/// of `plane`, `dst` `plane * 16` elements.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn to_blocked_avx512(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    to_blocked_block::<Avx512>(src, plane, real, dst)
}

/// [`crate::f32::nchwc::to_blocked`] of one block with AVX2.
///
/// # Safety
/// As [`to_blocked_avx512`], with AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn to_blocked_avx2(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    to_blocked_block::<Avx2>(src, plane, real, dst)
}

/// [`crate::f32::nchwc::to_planar`] of one block with AVX-512F.
///
/// # Safety
/// The CPU must support AVX-512F; `src` holds `plane * 16` elements,
/// `dst` `real` (at most 16) rows of `plane`.
#[target_feature(enable = "avx512f,avx2,fma")]
pub(crate) unsafe fn to_planar_avx512(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    to_planar_block::<Avx512>(src, plane, real, dst)
}

/// [`crate::f32::nchwc::to_planar`] of one block with AVX2.
///
/// # Safety
/// As [`to_planar_avx512`], with AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn to_planar_avx2(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    to_planar_block::<Avx2>(src, plane, real, dst)
}

/// One block to blocked: per group of `S::LANES` channels, `S::LANES`
/// pixels at a time loaded from the channels' rows (zero for padding
/// channels), transposed, stored as pixels; the last pixels one by one.
#[inline(always)]
unsafe fn to_blocked_block<S: Simd>(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    let l = S::LANES;
    let full = plane / l * l;
    assert!(real <= BLOCK && src.len() >= real * plane && dst.len() >= plane * BLOCK);
    for c0 in (0..BLOCK).step_by(l) {
        let mut p0 = 0;
        while p0 < full {
            let mut v = [S::zero(); 16];
            for (t, vt) in v.iter_mut().enumerate().take(l) {
                if c0 + t < real {
                    // SAFETY: row c0 + t < real, pixels p0..p0 + l <= plane.
                    *vt = S::load(src.as_ptr().add((c0 + t) * plane + p0));
                }
            }
            S::transpose(&mut v);
            for (i, vi) in v.iter().enumerate().take(l) {
                // SAFETY: pixel p0 + i < plane, lanes c0..c0 + l <= 16.
                S::store(dst.as_mut_ptr().add((p0 + i) * BLOCK + c0), *vi);
            }
            p0 += l;
        }
        for p in full..plane {
            for ci in c0..c0 + l {
                dst[p * BLOCK + ci] = if ci < real { src[ci * plane + p] } else { 0.0 };
            }
        }
    }
}

/// One block to planar: per group of `S::LANES` channels with a real
/// one, `S::LANES` pixels at a time loaded, transposed, stored as the
/// real channels' rows; the last pixels one by one.
#[inline(always)]
unsafe fn to_planar_block<S: Simd>(src: &[f32], plane: usize, real: usize, dst: &mut [f32]) {
    let l = S::LANES;
    let full = plane / l * l;
    assert!(real <= BLOCK && src.len() >= plane * BLOCK && dst.len() >= real * plane);
    for c0 in (0..real).step_by(l) {
        let rows = (real - c0).min(l);
        let mut p0 = 0;
        while p0 < full {
            let mut v = [S::zero(); 16];
            for (i, vi) in v.iter_mut().enumerate().take(l) {
                // SAFETY: pixel p0 + i < plane, lanes c0..c0 + l <= 16.
                *vi = S::load(src.as_ptr().add((p0 + i) * BLOCK + c0));
            }
            S::transpose(&mut v);
            for (t, vt) in v.iter().enumerate().take(rows) {
                // SAFETY: row c0 + t < real, pixels p0..p0 + l <= plane.
                S::store(dst.as_mut_ptr().add((c0 + t) * plane + p0), *vt);
            }
            p0 += l;
        }
        for p in full..plane {
            for ci in c0..c0 + rows {
                dst[ci * plane + p] = src[p * BLOCK + ci];
            }
        }
    }
}

/// Bytes of the weights one pass over a band reads (a batch of input
/// channel blocks for the group's filters): they stay in L1 while the
/// band's tiles run, the partial sums going to the output in between.
const WEIGHT_BATCH_BYTES: usize = 32 << 10;

/// Calls `$body` with `$t: Tile` and `$nw` for every tile of band
/// `$band` (from [`Shape::segment`]): the columns whose taps are all inside
/// the image in tiles of up to `$step` along each row; then each edge
/// column, in tiles of up to `$step` down the rows whose taps are all
/// inside and one pixel at a time in the others. (A macro, not a closure:
/// a closure would not inherit the target features, and the tiles'
/// intrinsics would not be inlined.)
macro_rules! for_tiles {
    ($s:expr, $band:expr, $step:expr, |$t:ident, $nw:ident| $body:block) => {{
        let s: &Shape = $s;
        let (oy0, oy1, x0, x1) = $band;
        let (lo, hi) = (s.lo.clamp(x0, x1), s.hi.clamp(x0, x1));
        for oy in oy0..oy1 {
            let mut ox = lo;
            while ox < hi {
                let $nw = ($step).min(hi - ox);
                let $t = Tile {
                    oy,
                    ox0: ox,
                    ky: s.rows(oy),
                    kx: (0, s.kw),
                    vertical: false,
                };
                $body
                ox += $nw;
            }
        }
        let (top, bottom) = (s.top.clamp(oy0, oy1), s.bottom.clamp(oy0, oy1));
        for ox in (x0..lo).chain(hi..x1) {
            let kx = s.cols(ox);
            for oy in (oy0..top).chain(bottom..oy1) {
                let $nw = 1;
                let $t = Tile {
                    oy,
                    ox0: ox,
                    ky: s.rows(oy),
                    kx,
                    vertical: false,
                };
                $body
            }
            let mut oy = top;
            while oy < bottom {
                let $nw = ($step).min(bottom - oy);
                let $t = Tile {
                    oy,
                    ox0: ox,
                    ky: (0, s.kh),
                    kx,
                    vertical: true,
                };
                $body
                oy += $nw;
            }
        }
    }};
}

/// Runs the work items (group-major) with depthwise tiles of up to `NWD`
/// pixels and dense tiles of up to `a.nf` blocks by 6 pixels, the dense
/// ones in batches of input channel blocks ([`WEIGHT_BATCH_BYTES`]).
#[inline(always)]
unsafe fn body<S: Simd, const NV: usize, const NWD: usize>(
    a: &Args,
    out: *mut f32,
    items: Range<usize>,
) {
    let s = a.s;
    let (mb, cb) = (a.mb(), a.cb());
    let depthwise = a.f.is_depthwise();
    let ks = s.kh * s.kw;
    for item in items {
        let (grp, sg) = (item / s.segs, item % s.segs);
        let band = s.segment(sg);
        if depthwise {
            for_tiles!(s, band, NWD, |t, nw| {
                depth_n::<S, NV>(a, out, grp, &t, nw)
            });
            continue;
        }
        let fb0 = grp * a.nf;
        let nf = a.nf.min(mb - fb0);
        let batch = (WEIGHT_BATCH_BYTES / (nf * ks * tap_len(s.c) * 4)).max(1);
        let mut b0 = 0;
        while b0 < cb {
            let b1 = (b0 + batch).min(cb);
            let blocks = (b0, b1);
            for_tiles!(s, band, 6, |t, nw| {
                match nf * NV {
                    1 => dense_n::<S, 1>(a, out, fb0, blocks, &t, nw),
                    2 => dense_n::<S, 2>(a, out, fb0, blocks, &t, nw),
                    3 => dense_n::<S, 3>(a, out, fb0, blocks, &t, nw),
                    _ => dense_n::<S, 4>(a, out, fb0, blocks, &t, nw),
                }
            });
            b0 = b1;
        }
    }
}

/// Where a tile lies: its first output pixel, its direction (pixels
/// along the row, or down the column), and the kernel rows and columns
/// inside the image for all its pixels.
struct Tile {
    oy: usize,
    ox0: usize,
    ky: (usize, usize),
    kx: (usize, usize),
    vertical: bool,
}

impl Tile {
    /// The input offset of its first pixel's tap `(ky, kx)` (inside the
    /// image), and the input and output offsets between its pixels.
    #[inline(always)]
    fn at(&self, s: &Shape, ky: usize, kx: usize) -> usize {
        let iy = ((self.oy * s.sh + ky * s.dh) as isize - s.pt) as usize;
        let ix = ((self.ox0 * s.sw + kx * s.dw) as isize - s.pl) as usize;
        iy * s.xs[1] + ix * s.xs[2]
    }

    /// Input elements between its pixels.
    #[inline(always)]
    fn in_step(&self, s: &Shape) -> usize {
        if self.vertical {
            s.sh * s.xs[1]
        } else {
            s.sw * s.xs[2]
        }
    }

    /// The output offset (in a block plane) of its pixel `j`.
    #[inline(always)]
    fn out_at(&self, s: &Shape, j: usize) -> usize {
        let (oy, ox) = if self.vertical {
            (self.oy + j, self.ox0)
        } else {
            (self.oy, self.ox0 + j)
        };
        (oy * s.ow + ox) * BLOCK
    }
}

#[inline(always)]
unsafe fn dense_n<S: Simd, const NR: usize>(
    a: &Args,
    out: *mut f32,
    fb0: usize,
    blocks: (usize, usize),
    t: &Tile,
    nw: usize,
) {
    match nw {
        1 => dense::<S, NR, 1>(a, out, fb0, blocks, t),
        2 => dense::<S, NR, 2>(a, out, fb0, blocks, t),
        3 => dense::<S, NR, 3>(a, out, fb0, blocks, t),
        4 => dense::<S, NR, 4>(a, out, fb0, blocks, t),
        5 => dense::<S, NR, 5>(a, out, fb0, blocks, t),
        _ => dense::<S, NR, 6>(a, out, fb0, blocks, t),
    }
}

#[inline(always)]
unsafe fn depth_n<S: Simd, const NV: usize>(
    a: &Args,
    out: *mut f32,
    fb: usize,
    t: &Tile,
    nw: usize,
) {
    match nw {
        1 => depth::<S, NV, 1>(a, out, fb, t),
        2 => depth::<S, NV, 2>(a, out, fb, t),
        3 => depth::<S, NV, 3>(a, out, fb, t),
        4 => depth::<S, NV, 4>(a, out, fb, t),
        5 => depth::<S, NV, 5>(a, out, fb, t),
        6 => depth::<S, NV, 6>(a, out, fb, t),
        7 => depth::<S, NV, 7>(a, out, fb, t),
        _ => depth::<S, NV, 8>(a, out, fb, t),
    }
}

/// One dense tile over input blocks `blocks.0..blocks.1`: `NR` vectors
/// of output channels (row `r` is lanes `(r % nv) * LANES..` of filter
/// block `fb0 + r / nv`, `nv` vectors a block) by `NW` pixels. The sums
/// start from zero at block 0, else from the partial sums the previous
/// batch stored in `out`; after the last block the epilogue stores the
/// outputs, before it the partial sums are stored.
#[inline(always)]
unsafe fn dense<S: Simd, const NR: usize, const NW: usize>(
    a: &Args,
    out: *mut f32,
    fb0: usize,
    blocks: (usize, usize),
    t: &Tile,
) {
    let s = a.s;
    let cb = a.cb();
    let ks = s.kh * s.kw;
    let tap = tap_len(s.c);
    let wfb = cb * ks * tap;
    let x = a.x.as_ptr();
    let w = a.weights().as_ptr().add(fb0 * wfb);
    let (xcb, xch) = (s.xs[0], s.xs[3]);
    let pstep = t.in_step(s);
    let nv = BLOCK / S::LANES;
    let oplane = s.oh * s.ow * BLOCK;
    // the previous batch's partial sums, or the tile's start
    let mut acc = if blocks.0 > 0 {
        load::<S, NR, NW>(s, out, fb0, t)
    } else {
        start::<S, NR, NW>(a, out, fb0, t)
    };
    let nkx = t.kx.1 - t.kx.0;
    if nkx > 0 && t.ky.1 > t.ky.0 {
        // the whole blocks of the batch in one call, then a partial last
        // block of input channels
        let full = blocks.1.min(s.c / BLOCK).max(blocks.0);
        for (b0, b1, real) in [
            (blocks.0, full, BLOCK),
            (full, blocks.1, s.c.saturating_sub(full * BLOCK).min(BLOCK)),
        ] {
            if b1 <= b0 {
                continue;
            }
            let taps = Taps {
                blocks: b1 - b0,
                x_cb: xcb,
                w_cb: ks * tap,
                rows: t.ky.1 - t.ky.0,
                x_row: s.dh * s.xs[1],
                w_row: s.kw * tap,
                w_tap: tap,
                n: nkx,
                x_step: s.dw * s.xs[2],
                real,
            };
            let xp = x.add(b0 * xcb + t.at(s, t.ky.0, t.kx.0));
            let wp = w.add(b0 * ks * tap + (t.ky.0 * s.kw + t.kx.0) * tap);
            acc = steps::<S, NR, NW>(acc, xp, xch, pstep, wp, wfb, &taps);
        }
    }
    if blocks.1 < cb {
        for (r, accr) in acc.iter().enumerate() {
            let base = out.add((fb0 + r / nv) * oplane + (r % nv) * S::LANES);
            for (j, accj) in accr.iter().enumerate() {
                S::store(base.add(t.out_at(s, j)), *accj);
            }
        }
        return;
    }
    store::<S, NR, NW>(a, out, fb0, t, &acc)
}

/// The taps of a tile in a run of input blocks: `blocks` blocks of `rows`
/// kernel rows of `n` kernel columns, `x_step` input elements apart
/// (their weights `w_tap` apart), each over `real` input channels.
struct Taps {
    /// Input channel blocks, `x_cb` input and `w_cb` weight elements
    /// apart.
    blocks: usize,
    x_cb: usize,
    w_cb: usize,
    /// Kernel rows, `x_row` input and `w_row` weight elements apart.
    rows: usize,
    x_row: usize,
    w_row: usize,
    /// Weight elements between kernel columns.
    w_tap: usize,
    n: usize,
    x_step: usize,
    real: usize,
}

/// The taps of `tp` from `xp` (weights from `wp`): for each input channel,
/// the `NR` weight vectors and one broadcast per pixel (`pstep` apart,
/// channels `xch` apart). By value, so that the sums stay in registers
/// (written in place over nested loops, they were kept in memory).
// (indices, not iterators: one broadcast per pixel feeds every row)
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn steps<S: Simd, const NR: usize, const NW: usize>(
    mut acc: [[S::V; NW]; NR],
    xp: *const f32,
    xch: usize,
    pstep: usize,
    wp: *const f32,
    wfb: usize,
    tp: &Taps,
) -> [[S::V; NW]; NR] {
    let nv = BLOCK / S::LANES;
    for b in 0..tp.blocks {
        for ky in 0..tp.rows {
            for k in 0..tp.n {
                let xk = xp.add(b * tp.x_cb + ky * tp.x_row + k * tp.x_step);
                let wk = wp.add(b * tp.w_cb + ky * tp.w_row + k * tp.w_tap);
                if NW == 6 && tp.real == BLOCK && xch == 1 {
                    // a whole block of a blocked image, four channels per
                    // trip: the loads take constant offsets, the loop's
                    // bookkeeping a quarter of the trips (ResNet-50's
                    // blocked layers 1-7 % faster on one thread). The
                    // channel stride is the literal 1: passed at run time,
                    // the four channels' 24 pixel addresses did not fit
                    // the registers and the layers ran 10-30 % slower.
                    // Only full-width tiles (nearly all the work) take
                    // it: in every tile width it made the crate's
                    // library compile 2.5x as long (89 -> 227 s, 115 s
                    // like this) for about 1 % more on ResNet-50 (its
                    // 7 x 7 layers' 5-pixel tiles).
                    for c4 in (0..BLOCK).step_by(4) {
                        acc = channel::<S, NR, NW>(acc, xk, 1, pstep, wk, wfb, nv, c4);
                        acc = channel::<S, NR, NW>(acc, xk, 1, pstep, wk, wfb, nv, c4 + 1);
                        acc = channel::<S, NR, NW>(acc, xk, 1, pstep, wk, wfb, nv, c4 + 2);
                        acc = channel::<S, NR, NW>(acc, xk, 1, pstep, wk, wfb, nv, c4 + 3);
                    }
                } else {
                    for ci in 0..tp.real {
                        acc = channel::<S, NR, NW>(acc, xk, xch, pstep, wk, wfb, nv, ci);
                    }
                }
            }
        }
    }
    acc
}

/// Input channel `ci` of one tap of [`steps`]: the `NR` weight vectors
/// and one broadcast per pixel, a fused multiply-add into each sum.
#[allow(clippy::needless_range_loop, clippy::too_many_arguments)]
#[inline(always)]
unsafe fn channel<S: Simd, const NR: usize, const NW: usize>(
    mut acc: [[S::V; NW]; NR],
    xk: *const f32,
    xch: usize,
    pstep: usize,
    wk: *const f32,
    wfb: usize,
    nv: usize,
    ci: usize,
) -> [[S::V; NW]; NR] {
    let mut wv = [S::zero(); NR];
    for (r, wr) in wv.iter_mut().enumerate() {
        *wr = S::load(wk.add((r / nv) * wfb + ci * BLOCK + (r % nv) * S::LANES));
    }
    let xc = xk.add(ci * xch);
    for j in 0..NW {
        let xv = S::splat(*xc.add(j * pstep));
        for r in 0..NR {
            acc[r][j] = S::fma(xv, wv[r], acc[r][j]);
        }
    }
    acc
}

/// One depthwise tile: the `NV` vectors of block `fb` by `NW` pixels.
#[inline(always)]
unsafe fn depth<S: Simd, const NV: usize, const NW: usize>(
    a: &Args,
    out: *mut f32,
    fb: usize,
    t: &Tile,
) {
    let s = a.s;
    let ks = s.kh * s.kw;
    let x = a.x.as_ptr().add(fb * s.xs[0]);
    let w = a.weights().as_ptr().add(fb * ks * BLOCK);
    let pstep = t.in_step(s);
    let mut acc = start::<S, NV, NW>(a, out, fb, t);
    for ky in t.ky.0..t.ky.1 {
        for kx in t.kx.0..t.kx.1 {
            let xp = x.add(t.at(s, ky, kx));
            let wp = w.add((ky * s.kw + kx) * BLOCK);
            acc = taps::<S, NV, NW>(acc, xp, pstep, wp);
        }
    }
    store::<S, NV, NW>(a, out, fb, t, &acc)
}

/// One tap of a depthwise tile, by value (as [`steps`]).
#[inline(always)]
unsafe fn taps<S: Simd, const NV: usize, const NW: usize>(
    mut acc: [[S::V; NW]; NV],
    xp: *const f32,
    pstep: usize,
    wp: *const f32,
) -> [[S::V; NW]; NV] {
    for (v, accv) in acc.iter_mut().enumerate() {
        let wv = S::load(wp.add(v * S::LANES));
        for (j, accj) in accv.iter_mut().enumerate() {
            let xv = S::load(xp.add(j * pstep + v * S::LANES));
            *accj = S::fma(xv, wv, *accj);
        }
    }
    acc
}

/// The sums a tile starts from (row `r` as in [`dense`], from filter
/// block `fb0`): its residual (the output itself when in place: this tile
/// alone reads and writes those outputs, and reads them before it
/// stores), else zero.
#[inline(always)]
unsafe fn start<S: Simd, const NR: usize, const NW: usize>(
    a: &Args,
    out: *mut f32,
    fb0: usize,
    t: &Tile,
) -> [[S::V; NW]; NR] {
    match a.residual {
        Residual::Apart(r) => load::<S, NR, NW>(a.s, r.as_ptr(), fb0, t),
        Residual::InOut => load::<S, NR, NW>(a.s, out, fb0, t),
        Residual::None => [[S::zero(); NW]; NR],
    }
}

/// The values of a tile's outputs (row `r` as in [`dense`], from filter
/// block `fb0`) in the blocked image at `p` (the output's layout).
#[inline(always)]
unsafe fn load<S: Simd, const NR: usize, const NW: usize>(
    s: &Shape,
    p: *const f32,
    fb0: usize,
    t: &Tile,
) -> [[S::V; NW]; NR] {
    let nv = BLOCK / S::LANES;
    let oplane = s.oh * s.ow * BLOCK;
    let mut acc = [[S::zero(); NW]; NR];
    for (r, accr) in acc.iter_mut().enumerate() {
        let base = p.add((fb0 + r / nv) * oplane + (r % nv) * S::LANES);
        for (j, accj) in accr.iter_mut().enumerate() {
            *accj = S::load(base.add(t.out_at(s, j)));
        }
    }
    acc
}

/// The epilogue of a tile: `act(sums + bias)` (the sums started from the
/// residual), stored (row `r` of `acc` as in [`dense`], from filter block
/// `fb0`).
#[inline(always)]
unsafe fn store<S: Simd, const NR: usize, const NW: usize>(
    a: &Args,
    out: *mut f32,
    fb0: usize,
    t: &Tile,
    acc: &[[S::V; NW]; NR],
) {
    let s = a.s;
    let nv = BLOCK / S::LANES;
    let oplane = s.oh * s.ow * BLOCK;
    let bias = a.bias().as_ptr();
    for (r, accr) in acc.iter().enumerate() {
        let lane = (fb0 + r / nv) * BLOCK + (r % nv) * S::LANES;
        let bv = S::load(bias.add(lane));
        let base = (fb0 + r / nv) * oplane + (r % nv) * S::LANES;
        for (j, accj) in accr.iter().enumerate() {
            let o = base + t.out_at(s, j);
            let y = S::add(*accj, bv);
            S::store(out.add(o), S::act(y, a.act));
        }
    }
}
