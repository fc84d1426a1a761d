//! The AVX-512F and AVX2+FMA kernels of [`crate::pgemm::gemm_bias_act`]
//! (see that module for the layout), written once over the SIMD
//! vocabulary of [`crate::simd`] and instantiated per level with its tile
//! [`Geom`]; reached only through the dispatch table.
//!
//! Both orders keep two vectors of `C` per row (wide `B`: `MR` rows of
//! `C` by two vectors of columns) or `V` vectors per column (narrow `B`,
//! [`transposed`]: `MT = V` vectors of rows by up to `NT` columns) in
//! registers: 16 (wide) or 28 (transposed) accumulators of the 32 `zmm`
//! registers on AVX-512, 12 (wide) or 9 (transposed) of the 16 `ymm`
//! registers on AVX2.

use crate::activation::Activation;
use crate::arch::x86_64::depthwise::fill_plane;
use crate::dispatch::Level;
use crate::f32::depthwise::Geo;
use crate::f32::pgemm::{Call, Geom, AVX2, AVX512};
use crate::simd::{Avx2, Avx512, Simd};
use std::arch::x86_64::*;

/// Runs `call` on the kernels of `level` (AVX-512 or AVX2; `call.a`
/// packed for that level), in the order [`goes_transposed`] picks.
///
/// # Safety
/// The CPU supports `level`; views checked by the caller; `a` packed for
/// `level`.
pub(crate) unsafe fn run(level: Level, call: &Call, c: *mut f32, scratch: &mut Vec<f32>) {
    let g = geom(level);
    // SAFETY: forwarded contract.
    unsafe {
        if goes_transposed(call, g) {
            transposed(level, call, c, scratch, 0..call.a.m.div_ceil(g.mt));
        } else if level == Level::Avx512 {
            wide512(call, c, scratch);
        } else {
            wide2(call, c, scratch);
        }
    }
}

/// The tile geometry of `level`'s kernels.
pub(crate) fn geom(level: Level) -> Geom {
    if level == Level::Avx512 {
        AVX512
    } else {
        AVX2
    }
}

/// Whether [`run`] takes `call` in the [`transposed`] order: for a
/// narrow B (small images), vectors along the rows of C waste fewer lanes
/// when m fills panels of `MT` better than n fills panels of `NR`, by
/// more than the transposed tile's lower rate ([`Geom::t_rate`]) costs.
pub(crate) fn goes_transposed(call: &Call, g: Geom) -> bool {
    let (m, n, ldc) = (call.a.m, call.n, call.ldc);
    let used_n =
        n as f64 / (n.div_ceil(g.nr) * g.nr) as f64 * (m as f64 / (m.div_ceil(g.mr) * g.mr) as f64);
    let used_t = m as f64 / (m.div_ceil(g.mt) * g.mt) as f64;
    let ld = ldc.max(call.addend.map_or(0, |(_, ldr)| ldr));
    let fits_i32 = ld.checked_mul(g.mt).is_some_and(|v| v <= i32::MAX as usize);
    n <= 512 && fits_i32 && used_t * g.t_rate > used_n + 0.02
}

/// The wide order on AVX-512: tiles of 8 rows by 32 columns.
///
/// # Safety
/// As [`run`], AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn wide512(call: &Call, c: *mut f32, scratch: &mut Vec<f32>) {
    // SAFETY: forwarded contract.
    unsafe { wide::<Avx512, 8>(call, c, scratch, AVX512) }
}

/// The wide order on AVX2: tiles of 6 rows by 16 columns.
///
/// # Safety
/// As [`run`], AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn wide2(call: &Call, c: *mut f32, scratch: &mut Vec<f32>) {
    // SAFETY: forwarded contract.
    unsafe { wide::<Avx2, 6>(call, c, scratch, AVX2) }
}

/// The wide order: `MR x NR` tiles (`NR` two vectors), B packed once in
/// panels of `NR` columns (all of it when it fits in L2, else one panel
/// at a time).
///
/// # Safety
/// As [`run`]; `MR == g.mr`, `2 * S::LANES == g.nr`; the caller enables
/// `S`'s features.
#[inline(always)]
unsafe fn wide<S: Simd, const MR: usize>(
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    g: Geom,
) {
    let Call {
        a,
        b,
        ldb,
        n,
        bias,
        addend,
        act,
        ldc,
        kc,
    } = *call;
    let (nr, mt) = (g.nr, g.mt);
    debug_assert!(MR == g.mr && 2 * S::LANES == nr && mt % MR == 0);
    let (m, k) = (a.m, a.k);
    let np = m.div_ceil(MR);
    let nj = n.div_ceil(nr);
    // When all of B packed fits in L2, pack it once and run each panel
    // of A over every column panel (A, often the larger operand for
    // small images, is then read once); otherwise pack one column
    // panel at a time and run every panel of A over it.
    let whole_b = k * nj * nr * 4 <= 256 << 10;
    let b_len = if whole_b { k * nj * nr } else { k * nr };
    // the packed B (every element written by `pack_b`, so stale values
    // from an earlier call do no harm), then the bias padded to whole
    // panels
    let need = b_len + np * MR;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (bp, bpad) = scratch[..need].split_at_mut(b_len);
    match bias {
        Some(bias) => bpad[..m].copy_from_slice(&bias[..m]),
        None => bpad[..m].fill(0.0),
    }
    bpad[m..].fill(0.0);
    // (A macro, not a closure: a closure in this generic body would not
    // inherit the features of the entry it is inlined into.)
    macro_rules! tile {
        ($q:expr, $j:expr, $bpanel:expr) => {{
            let (q, j): (usize, usize) = ($q, $j);
            let j0 = j * nr;
            // SAFETY: (both orders) rows p < k of B hold columns j0..j0 +
            // nc (checked); the panel of A holding rows q * MR.. has k *
            // mt elements, MR of them from the tile's start at each step
            // of mt; C rows q * MR + r < m, columns j0..j0 + nc are in the
            // checked view.
            unsafe {
                kernel::<S, MR>(
                    k,
                    kc,
                    // rows q * MR.. of A: MR lanes inside a panel of mt rows
                    a.panels.as_ptr().add((q * MR / mt) * k * mt + q * MR % mt),
                    mt,
                    $bpanel.as_ptr(),
                    Tail::at(bpad, act, addend, q * MR, j0),
                    c.add(q * MR * ldc + j0),
                    ldc,
                    MR.min(m - q * MR),
                    nr.min(n - j0),
                )
            }
        }};
    }
    if whole_b {
        for j in 0..nj {
            let j0 = j * nr;
            let panel = &mut bp[j * k * nr..][..k * nr];
            // SAFETY: columns j0..j0 + nc of rows p < k of B are in the
            // caller's checked view (nc = nr.min(n − j0)).
            unsafe { pack_b::<S>(b.as_ptr().add(j0), ldb, k, nr.min(n - j0), panel) };
        }
        for q in 0..np {
            for j in 0..nj {
                tile!(q, j, &bp[j * k * nr..]);
            }
        }
    } else {
        for j in 0..nj {
            let j0 = j * nr;
            // SAFETY: columns j0..j0 + nc of rows p < k of B are in the
            // caller's checked view (nc = nr.min(n − j0)).
            unsafe { pack_b::<S>(b.as_ptr().add(j0), ldb, k, nr.min(n - j0), bp) };
            // fetch the next column panel of B while this one computes
            if j + 1 < nj {
                let nc = nr.min(n - j0 - nr);
                for p in 0..k {
                    let row = &b[p * ldb + j0 + nr..][..nc];
                    // SAFETY: prefetches only; SSE is part of x86-64.
                    unsafe {
                        _mm_prefetch::<_MM_HINT_T0>(row.as_ptr() as *const i8);
                        _mm_prefetch::<_MM_HINT_T0>(row[nc - 1..].as_ptr() as *const i8);
                    }
                }
            }
            for q in 0..np {
                // the addend's rows of the next tile down, fetched while
                // this one computes (a column of tiles reads a row segment
                // every ldr elements, a stride the hardware does not
                // follow)
                if let Some((r, ldr)) = addend.filter(|_| q + 1 < np) {
                    let nc = nr.min(n - j0);
                    for row in (q + 1) * MR..m.min((q + 2) * MR) {
                        let seg = &r[row * ldr + j0..][..nc];
                        // SAFETY: prefetches only; SSE is part of x86-64.
                        unsafe {
                            _mm_prefetch::<_MM_HINT_T0>(seg.as_ptr() as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(seg[nc - 1..].as_ptr() as *const i8);
                        }
                    }
                }
                tile!(q, j, bp);
            }
        }
    }
}

/// The image side of [`conv_wide`]: one image (`[c_in, h, w]`) and its
/// convolution geometry (two spatial axes, checked).
pub(crate) struct ConvB<'a> {
    pub(crate) image: &'a [f32],
    pub(crate) c_in: usize,
    pub(crate) geo: Geo,
}

thread_local! {
    /// The plane offset of each step of the sum ([`conv_wide`]), kept
    /// between calls.
    static STEP_OFFSETS: std::cell::RefCell<Vec<usize>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A convolution as the wide order's product of `call.a` (the packed
/// weight, `k = c_in * kh * kw` columns) and the column matrix of
/// `conv.image` (`call.n` = the output size; `call.b` unused), without
/// the column matrix: each input channel is copied once into a
/// zero-padded plane of `sw` column phases (the depthwise kernel's
/// layout), and step `p = (ci, ki, kj)` of a tile reads its two vectors
/// of columns from that plane at a fixed offset from the tile's output
/// row and first column. Tiles never cross an output row. The output
/// rows are divided between the intra-op threads. Every element is the
/// wide order's sequence of operations on the column matrix, so the
/// bits of im2col followed by [`run`].
///
/// # Safety
/// The CPU supports `level`; `call` checked against `c` (`m` rows of
/// `ldc = n`), `conv` against `call.a` (`k = c_in * kh * kw`) and its
/// image; `a` packed for `level`.
pub(crate) unsafe fn conv_wide(
    level: Level,
    call: &Call,
    conv: &ConvB,
    c: *mut f32,
    scratch: &mut Vec<f32>,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if level == Level::Avx512 {
            conv_wide512(call, conv, c, scratch)
        } else {
            conv_wide2(call, conv, c, scratch)
        }
    }
}

/// [`conv_wide`] on AVX-512: tiles of 8 rows by 32 columns.
///
/// # Safety
/// As [`conv_wide`], AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn conv_wide512(call: &Call, conv: &ConvB, c: *mut f32, scratch: &mut Vec<f32>) {
    // SAFETY: forwarded contract.
    unsafe { conv_wide_in::<Avx512>(call, conv, c, scratch, AVX512, conv_rows512) }
}

/// [`conv_wide`] on AVX2: tiles of 6 rows by 16 columns.
///
/// # Safety
/// As [`conv_wide`], AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn conv_wide2(call: &Call, conv: &ConvB, c: *mut f32, scratch: &mut Vec<f32>) {
    // SAFETY: forwarded contract.
    unsafe { conv_wide_in::<Avx2>(call, conv, c, scratch, AVX2, conv_rows2) }
}

/// What the output rows of one [`conv_wide`] call read and write.
struct ConvRows<'a> {
    call: &'a Call<'a>,
    geo: &'a Geo,
    /// The zero-padded planes, each `plane` elements.
    planes: &'a [f32],
    /// Phase width of a plane row.
    wq: usize,
    /// The bias padded to whole tiles.
    bpad: &'a [f32],
    /// Plane offset of each step of the sum.
    offs: &'a [usize],
    c: crate::par::SendPtr<f32>,
}

/// [`conv_rows`] at AVX-512F (a function the threads call: a closure
/// would not inherit the target features).
///
/// # Safety
/// As [`conv_rows`], AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn conv_rows512(job: &ConvRows, r0: usize, r1: usize) {
    // SAFETY: forwarded contract.
    unsafe { conv_rows::<Avx512, 8>(job, r0, r1, AVX512) }
}

/// [`conv_rows`] at AVX2 + FMA.
///
/// # Safety
/// As [`conv_rows`], AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn conv_rows2(job: &ConvRows, r0: usize, r1: usize) {
    // SAFETY: forwarded contract.
    unsafe { conv_rows::<Avx2, 6>(job, r0, r1, AVX2) }
}

/// The body of [`conv_wide`] for `S` (the planes, offsets and split over
/// the threads; the tiles run in `rows`).
///
/// # Safety
/// As [`conv_wide`]; `rows` the level's [`conv_rows`]; the caller enables
/// `S`'s features.
#[inline(always)]
unsafe fn conv_wide_in<S: Simd>(
    call: &Call,
    conv: &ConvB,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    g: Geom,
    rows_fn: unsafe fn(&ConvRows, usize, usize),
) {
    let (m, k, nr, l) = (call.a.m, call.a.k, g.nr, S::LANES);
    let d = &conv.geo;
    debug_assert!(2 * l == nr && k == conv.c_in * d.kh * d.kw);
    let (oh, ow) = (d.oh, d.ow);
    // each plane: the rows the outputs read, each in `sw` phases of `wq`
    // (a tile's two vectors at its step's offset stay inside a phase)
    let rows = (oh - 1) * d.sh + (d.kh - 1) * d.dh + 1;
    let wq = (ow.next_multiple_of(nr) + (d.kw - 1) * d.dw / d.sw).next_multiple_of(l);
    let plane = rows * d.sw * wq;
    let np = m.div_ceil(g.mr);
    // the planes (zero, then each channel's image written in), then the
    // bias padded to whole tiles
    scratch.clear();
    scratch.resize(conv.c_in * plane + np * g.mr, 0.0);
    let (planes, bpad) = scratch.split_at_mut(conv.c_in * plane);
    if let Some(bias) = call.bias {
        bpad[..m].copy_from_slice(&bias[..m]);
    }
    let isz = d.h * d.w;
    for (ci, pl) in planes.chunks_exact_mut(plane).enumerate() {
        // SAFETY: the caller enables S's features; the plane has `rows`
        // rows of `sw` phases of `wq`, as `fill_plane` writes.
        unsafe { fill_plane::<S>(d, &conv.image[ci * isz..][..isz], pl, rows, wq) };
    }
    STEP_OFFSETS.with(|offs| {
        let mut offs = offs.borrow_mut();
        offs.clear();
        let taps = d.kh * d.kw;
        offs.extend((0..k).map(|p| {
            let (ci, t) = (p / taps, p % taps);
            let (ki, kj) = (t / d.kw, t % d.kw);
            ci * plane + ki * d.dh * d.sw * wq + (kj * d.dw) % d.sw * wq + kj * d.dw / d.sw
        }));
        let job = ConvRows {
            call,
            geo: d,
            planes,
            wq,
            bpad,
            offs: &offs,
            c: crate::par::SendPtr(c),
        };
        let work = m * k * call.n;
        crate::par::split(oh, 1, work, |r0, r1| {
            // SAFETY: forwarded contract; rows r0..r1 write only their own
            // columns of C.
            unsafe { rows_fn(&job, r0, r1) }
        });
    });
}

/// Output rows `r0..r1` of [`conv_wide`]: per row, tiles of `MR` rows of
/// C by `NR` columns (the last one partial), each step's vectors read
/// from the planes.
///
/// # Safety
/// As [`conv_wide`]; `MR == g.mr`, `2 * S::LANES == g.nr`; `job` built by
/// [`conv_wide_in`]; the caller enables `S`'s features.
#[inline(always)]
unsafe fn conv_rows<S: Simd, const MR: usize>(job: &ConvRows, r0: usize, r1: usize, g: Geom) {
    let call = job.call;
    let (a, ldc, kc) = (call.a, call.ldc, call.kc);
    let (m, k, mt, nr) = (a.m, a.k, g.mt, g.nr);
    let d = job.geo;
    let (ow, wq, offs) = (d.ow, job.wq, job.offs);
    let c = job.c.get();
    let np = m.div_ceil(MR);
    // tiles of one output row by rows of A: the row's planes (every
    // tile's steps) and one tile's rows of A stay in L1 together
    for r in r0..r1 {
        for q in 0..np {
            let mut x0 = 0;
            while x0 < ow {
                let nc = nr.min(ow - x0);
                // SAFETY: (the tile) plane rows r * sh + ki * dh < the
                // plane's rows, phase columns x0 + offset + nr <= wq; panel
                // rows q * MR.. of A with k * mt elements; C and the addend
                // rows q * MR + i < m, columns r * ow + x0 .. + nc inside
                // the checked views.
                unsafe {
                    let base = job.planes.as_ptr().add(r * d.sh * d.sw * wq + x0);
                    let j0 = r * ow + x0;
                    let ap = a.panels.as_ptr().add((q * MR / mt) * k * mt + q * MR % mt);
                    let row = |p: usize| base.add(*offs.get_unchecked(p));
                    let acc = rank1_at::<S, 2, MR>(k, kc, row, ap, mt);
                    let tail = Tail::at(job.bpad, call.act, call.addend, q * MR, j0);
                    let rows = MR.min(m - q * MR);
                    finish_tile::<S, MR>(&acc, tail, c.add(q * MR * ldc + j0), ldc, rows, nc);
                }
                x0 += nr;
            }
        }
    }
}

/// The transposed order, for the panels `qs` of `MT` rows of C: tiles of
/// `MT` rows of C (vectors along the rows, from A packed in panels of
/// `MT`) by up to `NT` columns (broadcast from B, read in place on
/// AVX-512 and from strips on AVX2, see [`transposed_in`]); each C
/// element is the same sequence of fused multiply-adds as in the other
/// order. The intra-op threads take disjoint panel
/// ranges of one call.
///
/// # Safety
/// As [`run`]; `ldc * MT` fits in `i32`; `qs` within the panels.
pub(crate) unsafe fn transposed(
    level: Level,
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    qs: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract.
    unsafe {
        if level == Level::Avx512 {
            transposed512(call, c, scratch, qs)
        } else {
            transposed2(call, c, scratch, qs)
        }
    }
}

/// [`transposed`] on AVX-512: tiles of 32 rows (two vectors) by up to 14
/// columns (28 accumulators, two vectors of A and a broadcast: 31 of the
/// 32 registers).
///
/// # Safety
/// As [`transposed`], AVX-512F.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn transposed512(
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    qs: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract.
    unsafe { transposed_in::<Avx512, 2, 14, false>(call, c, scratch, qs) }
}

/// [`transposed`] on AVX2: tiles of 24 rows (three vectors) by up to 3
/// columns.
///
/// # Safety
/// As [`transposed`], AVX2 + FMA.
#[target_feature(enable = "avx2,fma")]
unsafe fn transposed2(
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    qs: std::ops::Range<usize>,
) {
    // SAFETY: forwarded contract.
    unsafe { transposed_in::<Avx2, 3, 3, true>(call, c, scratch, qs) }
}

/// The body of [`transposed`] for `V` vectors of rows (`MT = V *
/// S::LANES`) and tiles of at most `NT <= 14` columns; with `PACK`, B is
/// first copied into strips of each tile's columns, so that a tile reads
/// its columns contiguously rather than a few values of each row of B.
/// The sum runs block by block of `k` (the call's `kc`) over all the
/// tiles of a panel, so that the panel's block of A (`kc x MT`) stays in
/// L1 while every tile reads it; each tile's sums wait between blocks in
/// the scratch.
///
/// (Measured on ResNet-50 at 14 x 14 and 7 x 7, Zen 4: AVX2's tiles of 3
/// columns run 7 % faster on strips; AVX-512's tiles of 8 columns, which
/// use half of each cache line they touch, run 4–8 % slower for the
/// copy. On an AVX-512 Xeon with two 512-bit FMA units, the blocks of `k`
/// and tiles of 14 columns rather than 8 run the transposed shapes of
/// ResNet-50 21–48 % faster: the whole sum per tile streamed the panel
/// of A from L2 for every tile.)
///
/// # Safety
/// As [`transposed`]; the caller enables `S`'s features.
#[inline(always)]
unsafe fn transposed_in<S: Simd, const V: usize, const NT: usize, const PACK: bool>(
    call: &Call,
    c: *mut f32,
    scratch: &mut Vec<f32>,
    qs: std::ops::Range<usize>,
) {
    let (a, n, ldc) = (call.a, call.n, call.ldc);
    let (m, k) = (a.m, a.k);
    let mt = V * S::LANES;
    let panels = &a.panels;
    let nq = m.div_ceil(mt);
    debug_assert!(qs.end <= nq && NT <= 14);
    // balanced tiles of at most NT columns
    let tiles = n.div_ceil(NT);
    let (base, extra) = (n / tiles, n % tiles);
    let pack = PACK;
    // the bias padded to whole panels, then (when packing) B in strips:
    // the tile of columns j0..j0 + w at j0 * k, row p at j0 * k + p * w;
    // then the sums of the blocks of k done so far, per tile: column
    // j of the panel at j * mt (when k spans more than one block)
    let bias_len = nq * mt;
    let kc = call.kc;
    let blocks = k.div_ceil(kc).max(1);
    let strips_len = if pack { k * n } else { 0 };
    let part_len = if blocks > 1 { n * mt } else { 0 };
    scratch.clear();
    scratch.resize(bias_len + strips_len + part_len, 0.0);
    let (bpad, rest) = scratch.split_at_mut(bias_len);
    let (strips, parts) = rest.split_at_mut(strips_len);
    if let Some(bias) = call.bias {
        bpad[..m].copy_from_slice(&bias[..m]);
    }
    if pack {
        // blocks of rows of B (a block of every strip stays in L1)
        const PB: usize = 32;
        for p0 in (0..k).step_by(PB) {
            let p1 = k.min(p0 + PB);
            let mut j0 = 0;
            for t in 0..tiles {
                let w = base + usize::from(t < extra);
                let strip = strips[j0 * k..][..k * w].as_mut_ptr();
                for p in p0..p1 {
                    // SAFETY: columns j0..j0 + w of row p of B are in the
                    // checked view; a whole vector is stored only where it
                    // ends inside the strip (its lanes past w are written
                    // over by the next rows).
                    unsafe {
                        let v = S::load_n(call.b.as_ptr().add(p * call.ldb + j0), w);
                        if p * w + S::LANES <= k * w {
                            S::store(strip.add(p * w), v);
                        } else {
                            S::store_n(strip.add(p * w), v, w);
                        }
                    }
                }
                j0 += w;
            }
        }
    }
    let cp = c;
    for q in qs {
        let rows = mt.min(m - q * mt);
        // block by block of k: the panel's block of A stays in L1 while
        // every tile of columns reads it
        for blk in 0..blocks {
            let p0 = blk * kc;
            let p1 = k.min(p0 + kc);
            let last = blk + 1 == blocks;
            let mut j0 = 0;
            for t in 0..tiles {
                let w = base + usize::from(t < extra);
                // SAFETY: panel q holds k * mt elements; B rows p < k hold
                // columns j0..j0 + w (or the strip does); C rows q * mt + r
                // < m, columns j0..j0 + w are in the checked view; the
                // tile's partial sums are columns j0..j0 + w of `parts`
                // (n * mt elements when there is more than one block).
                // (Arms wider than NT are never taken, and fold away.)
                unsafe {
                    let ap = panels.as_ptr().add(q * k * mt);
                    let (bp, ldb) = if pack {
                        (strips.as_ptr().add(j0 * k), w)
                    } else {
                        (call.b.as_ptr().add(j0), call.ldb)
                    };
                    let tail = Tail::at(bpad, call.act, call.addend, q * mt, j0);
                    // the addend's columns of the next tile, fetched while
                    // this one computes (every row of the panel one line)
                    // (a prefetch past the view is harmless: no access)
                    if last && !tail.r.is_null() {
                        let next = tail.r.wrapping_add(w);
                        for row in 0..rows {
                            let at = next.wrapping_add(row * tail.ldr);
                            _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
                        }
                    }
                    let tile = TileT {
                        a: ap,
                        b: bp,
                        ldb,
                        steps: p0..p1,
                        part: if blocks > 1 {
                            parts.as_mut_ptr().add(j0 * mt)
                        } else {
                            std::ptr::null_mut()
                        },
                        last,
                    };
                    let cq = cp.add(q * mt * ldc + j0);
                    // the tile's width as a constant (arms wider than NT
                    // are never taken)
                    macro_rules! by_width {
                        ($($w:literal)+) => {
                            match w {
                                $($w if NT >= $w => kernel_t::<S, V, $w>(&tile, tail, cq, ldc, rows),)+
                                _ => kernel_t::<S, V, 1>(&tile, tail, cq, ldc, rows),
                            }
                        };
                    }
                    by_width!(14 13 12 11 10 9 8 7 6 5 4 3 2);
                }
                j0 += w;
            }
        }
    }
}

/// The epilogue of one tile: its rows' bias (padded to whole tiles), the
/// activation, and the addend's element at the tile's first output (null
/// for none) with its leading dimension.
#[derive(Clone, Copy)]
struct Tail {
    bias: *const f32,
    act: Activation,
    r: *const f32,
    ldr: usize,
}

impl Tail {
    /// The epilogue of the tile whose first output is row `i0`, column
    /// `j0`, with `bias` padded to whole tiles.
    ///
    /// # Safety
    /// `i0` is a row of the checked view (below `m`), `j0` a column.
    #[inline(always)]
    unsafe fn at(
        bias: &[f32],
        act: Activation,
        addend: Option<(&[f32], usize)>,
        i0: usize,
        j0: usize,
    ) -> Tail {
        // SAFETY: row i0 < m and column j0 are in the checked views of
        // the bias (padded) and of the addend.
        unsafe {
            Tail {
                bias: bias.as_ptr().add(i0),
                act,
                r: addend.map_or(std::ptr::null(), |(r, ldr)| r.as_ptr().add(i0 * ldr + j0)),
                ldr: addend.map_or(0, |(_, ldr)| ldr),
            }
        }
    }
}

/// One block of steps of a transposed tile: panel `a` (step `p` at `a +
/// p * MT`), B's columns from `b` (row `p` at `b + p * ldb`), the steps
/// `steps` of the sum, and where the sums of the blocks before it are
/// kept between blocks (`W * MT` elements, column `j` at `j * MT`; null
/// when the tile's sum is one block).
struct TileT {
    a: *const f32,
    b: *const f32,
    ldb: usize,
    steps: std::ops::Range<usize>,
    part: *mut f32,
    last: bool,
}

/// One block of steps of an `MT x W` tile of C (`MT = V * S::LANES`):
/// the block's sums from zero, added to the blocks before it (kept in
/// `tile.part`); after the last block `act((sum + bias) + addend)`,
/// stored column by column ([`Simd::store_col`]). Each element is thus
/// [`rank1`]'s sequence: per block one chain of fused multiply-adds, the
/// blocks added in order.
#[inline(always)]
unsafe fn kernel_t<S: Simd, const V: usize, const W: usize>(
    tile: &TileT,
    tail: Tail,
    c: *mut f32,
    ldc: usize,
    rows: usize,
) {
    let mt = V * S::LANES;
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let (a, p0, p1) = (tile.a, tile.steps.start, tile.steps.end);
        let mut acc = block::<S, V, W>(p0, p1, |p| a.add(p * mt), tile.b, tile.ldb);
        if p0 > 0 {
            for (j, accj) in acc.iter_mut().enumerate() {
                for (v, x) in accj.iter_mut().enumerate() {
                    *x = S::add(S::load(tile.part.add(j * mt + v * S::LANES)), *x);
                }
            }
        }
        if !tile.last {
            for (j, accj) in acc.iter().enumerate() {
                for (v, x) in accj.iter().enumerate() {
                    S::store(tile.part.add(j * mt + v * S::LANES), *x);
                }
            }
            return;
        }
        let mut bv = [S::zero(); V];
        for (v, bvv) in bv.iter_mut().enumerate() {
            *bvv = S::load(tail.bias.add(v * S::LANES));
        }
        for (jj, accj) in acc.iter().enumerate() {
            for v in 0..V {
                let lo = v * S::LANES;
                if lo >= rows {
                    break;
                }
                let mut x = S::add(accj[v], bv[v]);
                if !tail.r.is_null() {
                    let rv = S::load_col(tail.r.add(lo * tail.ldr + jj), tail.ldr, rows - lo);
                    x = S::add(x, rv);
                }
                let x = S::act(x, tail.act);
                S::store_col(c.add(lo * ldc + jj), ldc, x, rows - lo);
            }
        }
    }
}

/// The accumulators of a wide tile: for `p` in `0..k`, the `V` vectors
/// at `vecs + p * vs` times each of the `N` values at `scal + p * ss`
/// added to its `V` vectors by one fused multiply-add each, starting from
/// zero again every `kc` steps with the block's sum then added to the
/// blocks before it (so every element is, per block, one sequence of
/// fused multiply-adds in order of increasing `p`, and the blocks are
/// added in order). The transposed tiles run the same [`block`]s one at
/// a time over a panel's tiles ([`kernel_t`]), keeping the sums between
/// them, which gives every element the same sequence in the other
/// orientation.
///
/// # Safety
/// `S`'s features enabled by the caller; the `k` rows of `V` vectors and
/// of `N` elements are in bounds; `kc >= 1`.
#[inline(always)]
unsafe fn rank1<S: Simd, const V: usize, const N: usize>(
    k: usize,
    kc: usize,
    vecs: *const f32,
    vs: usize,
    scal: *const f32,
    ss: usize,
) -> [[S::V; V]; N] {
    // SAFETY: forwarded contract.
    unsafe { rank1_at::<S, V, N>(k, kc, |p| vecs.add(p * vs), scal, ss) }
}

/// [`rank1`] with the `V` vectors of step `p` at `row(p)` (any address:
/// [`conv_wide`] reads them from a padded image). `row` computes an
/// address only (it is no SIMD code, which a closure would not inline
/// with the caller's target features).
///
/// # Safety
/// As [`rank1`], for the vectors at `row(p)`, `p < k`.
#[inline(always)]
unsafe fn rank1_at<S: Simd, const V: usize, const N: usize>(
    k: usize,
    kc: usize,
    row: impl Fn(usize) -> *const f32 + Copy,
    scal: *const f32,
    ss: usize,
) -> [[S::V; V]; N] {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let mut acc = block::<S, V, N>(0, k.min(kc), row, scal, ss);
        let mut p0 = kc;
        while p0 < k {
            let part = block::<S, V, N>(p0, k.min(p0 + kc), row, scal, ss);
            for (a, b) in acc.iter_mut().zip(&part) {
                for v in 0..V {
                    a[v] = S::add(a[v], b[v]);
                }
            }
            p0 += kc;
        }
        acc
    }
}

/// One block of [`rank1_at`]: the accumulators of steps `p0..p1`, from
/// zero. A function, not a closure: a closure would not inherit the
/// caller's target features, and its SIMD operations would become calls.
///
/// # Safety
/// As [`rank1_at`].
#[inline(always)]
unsafe fn block<S: Simd, const V: usize, const N: usize>(
    p0: usize,
    p1: usize,
    row: impl Fn(usize) -> *const f32,
    scal: *const f32,
    ss: usize,
) -> [[S::V; V]; N] {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let mut acc = [[S::zero(); V]; N];
        for p in p0..p1 {
            let mut x = [S::zero(); V];
            let rp = row(p);
            for (v, xv) in x.iter_mut().enumerate() {
                *xv = S::load(rp.add(v * S::LANES));
            }
            let sp = scal.add(p * ss);
            for (i, acci) in acc.iter_mut().enumerate() {
                let sv = S::splat(*sp.add(i));
                for v in 0..V {
                    acci[v] = S::fma(x[v], sv, acci[v]);
                }
            }
        }
        acc
    }
}

/// Copies `nc <= NR` columns (`NR = 2 * S::LANES`) of `k` rows of B into
/// `dst` (`k x NR`, zero past `nc`).
#[inline(always)]
unsafe fn pack_b<S: Simd>(b: *const f32, ldb: usize, k: usize, nc: usize, dst: &mut [f32]) {
    let l = S::LANES;
    let nr = 2 * l;
    let d = dst.as_mut_ptr();
    for p in 0..k {
        // SAFETY: in bounds per the caller.
        unsafe {
            let src = b.add(p * ldb);
            let out = d.add(p * nr);
            if nc == nr {
                S::store(out, S::load(src));
                S::store(out.add(l), S::load(src.add(l)));
            } else {
                let n0 = nc.min(l);
                S::store(out, S::load_n(src, n0));
                S::store(out.add(l), S::load_n(src.add(n0), nc - n0));
            }
        }
    }
}

/// One `MR x NR` tile (`NR = 2 * S::LANES`): `k` steps of rank-1 updates
/// (in blocks of `kc`), then `act((sum + bias) + addend)` and a masked
/// store of `rows x cols`; `a` points at the tile's `MR` rows inside a
/// panel of `mt` (step `mt` per `k`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn kernel<S: Simd, const MR: usize>(
    k: usize,
    kc: usize,
    a: *const f32,
    mt: usize,
    b: *const f32,
    tail: Tail,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let acc = rank1::<S, 2, MR>(k, kc, b, 2 * S::LANES, a, mt);
        finish_tile::<S, MR>(&acc, tail, c, ldc, rows, cols);
    }
}

/// The epilogue of a wide tile's sums `acc`: `act((sum + bias) +
/// addend)`, stored as `rows x cols` (masked) from `c`.
///
/// # Safety
/// `S`'s features; the `rows x cols` view of `c` (leading dimension
/// `ldc`) and of the tail's addend in bounds, `cols <= 2 * S::LANES`.
#[inline(always)]
unsafe fn finish_tile<S: Simd, const MR: usize>(
    acc: &[[S::V; 2]; MR],
    tail: Tail,
    c: *mut f32,
    ldc: usize,
    rows: usize,
    cols: usize,
) {
    // SAFETY: (whole body) pointers in bounds per the caller.
    unsafe {
        let l = S::LANES;
        let n0 = cols.min(l);
        let n1 = cols - n0;
        for (r, accr) in acc.iter().enumerate().take(rows) {
            let bv = S::splat(*tail.bias.add(r));
            let mut v0 = S::add(accr[0], bv);
            let mut v1 = S::add(accr[1], bv);
            if !tail.r.is_null() {
                let src = tail.r.add(r * tail.ldr);
                let (r0, r1) = if cols == 2 * l {
                    (S::load(src), S::load(src.add(l)))
                } else {
                    (S::load_n(src, n0), S::load_n(src.add(l), n1))
                };
                v0 = S::add(v0, r0);
                v1 = S::add(v1, r1);
            }
            let v0 = S::act(v0, tail.act);
            let v1 = S::act(v1, tail.act);
            let dst = c.add(r * ldc);
            if cols == 2 * l {
                S::store(dst, v0);
                S::store(dst.add(l), v1);
            } else {
                S::store_n(dst, v0, n0);
                if n1 > 0 {
                    S::store_n(dst.add(l), v1, n1);
                }
            }
        }
    }
}
