//! Exact u8×s8 integer GEMM on AVX-512 VNNI (`vpdpbusd`): the accumulator
//! of the exact-accumulating profiles on hosts that have it. `vpdpbusd`
//! multiplies unsigned bytes by signed bytes in groups of four and adds the
//! four products to an i32 lane without intermediate saturation, so the
//! result equals [`crate::igemm::igemm`]'s exact sum bit for bit (property
//! tests hold the two equal).
//!
//! Layout: `A` is the signed operand (`m × k` row-major, e.g. convolution
//! weights, one zero point per row), `B` the unsigned one (`k × n`
//! row-major, e.g. im2col patches or a pointwise input, one zero point).
//! `B` is packed so that each column's four consecutive `k` values are
//! adjacent (`[k/4][n][4]`, zero padded), rows of `A` are broadcast four
//! bytes at a time, and the zero points are corrected with row and column
//! sums:
//!
//! ```text
//! C[i][j] = Σ_p A[i][p]·B[p][j] − zb·Σ_p A[i][p] − za(i)·Σ_p B[p][j] + k·za(i)·zb
//! ```
//!
//! A `B` of at most four columns (a batch-1 classifier head) runs in one
//! pass over `A` instead: each column's quads broadcast against 16 rows
//! of `A` per vector (`A` then laid out as blocks of 16 rows, built on
//! first use), where a 16-lane tile would hold mostly padding. The one to
//! four columns past the last full vector of 16 under a long reduction
//! (49 = 3·16 + 1 output positions at 7 × 7) are computed with the tiles
//! of the last columns, each row's quads 16 at a time against the
//! column's, while the tile's rows of `A` are still in cache: a layer
//! whose columns are few reads its weights from memory once, not twice.
//!
//! On the AMX row ([`crate::Isa::Amx`]) the blocks of a product whose
//! reduction is 125 or longer, and of a direct convolution whose channels
//! come in runs of 64, run on the AMX tiles instead (the `amx` module:
//! 32 × 32 blocks of `tdpbsud`, the same products), through the same
//! correction and epilogue; everything else runs as above.
//!
//! The kernel writes its corrected sums as i32 ([`gemm_u8s8`],
//! [`gemm_packed`]) or requantizes them in its epilogue into 8-bit outputs
//! (`gemm_requant_packed`, behind [`crate::qgemm::gemm_u8s8_requant`]).
//!
//! [`gemm_u8s8`] returns `false` (and leaves `c` alone) when the CPU lacks
//! AVX-512 VNNI, when the portable path is forced
//! ([`crate::force_generic`]), or when `k` is too large for an exact i32
//! sum; callers then use `igemm`.

/// True when [`gemm_u8s8`] runs its VNNI kernel on this thread: the
/// dispatch table's row ([`crate::isa`]) is [`crate::Isa::Avx512Vnni`]
/// or the AMX row above it.
pub fn available() -> bool {
    crate::isa().vnni()
}

use crate::int8::packed::{gemm_u8s8_entry, run_u8s8, Kernel, U8s8};

/// How many products ran on the AMX tiles (tests check that the tile path
/// they mean to cover ran).
#[cfg(test)]
pub(crate) static AMX_RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
pub use crate::int8::packed::{PackedI8, MAX_K};

gemm_u8s8_entry! {
    /// `C = (A − za) · (B − zb)` exactly, `A` i8 `m × k` row-major with one zero
    /// point per row (`za.len() == m`), `B` u8 `k × n` row-major with zero point
    /// `zb`, `C` row-major with row stride `ldc` (overwritten). Returns `false`
    /// without touching `c` when the VNNI kernel cannot run (see the module
    /// docs).
    ///
    /// # Panics
    /// When a slice is shorter than its shape says.
    on "x86_64" => kernel().map(|run| {
        move |o: U8s8<'_, [i8]>, c: &mut [i32], ldc| {
            let (m, k, _) = o.dims;
            let a = PackedI8::new(o.a, m, k);
            run(o.with_a(&a), c, ldc)
        }
    })
}

/// [`gemm_u8s8`] with `A` packed ahead of time ([`PackedI8`]). `B` is
/// `a.depth() × n` row-major. Returns `false` without touching `c` when the
/// VNNI kernel cannot run.
///
/// # Panics
/// When a slice is shorter than its shape says.
pub fn gemm_packed(
    a: &PackedI8,
    za: &[i32],
    b: &[u8],
    zb: i32,
    n: usize,
    c: &mut [i32],
    ldc: usize,
) -> bool {
    let dims = (a.m, a.k, n);
    run_u8s8(U8s8::dense(a, za, b, zb, dims), a.m * a.k, c, ldc, kernel())
}

/// `(A − za)·(B − zb)` requantized row by row (`rq[i]` for row `i`) into
/// rows `row0..row0 + m` of the one-byte column block `out`, whose columns
/// are the product's `n` columns (`B`'s rows `ldb ≥ n` apart): the
/// requantization in the kernel's
/// epilogue, on the sums still in registers. The same bits as
/// [`gemm_packed`] followed by [`crate::int8::elementwise::requantize`].
/// Returns `false` (nothing written) where the VNNI kernel cannot run or
/// `T` is not one byte.
///
/// # Panics
/// When a slice is shorter than its shape says, `ldb < n`, `rq` has fewer
/// than `m` entries or the block fewer than `row0 + m` rows.
pub(crate) fn gemm_requant_packed<T: crate::igemm::QInt>(
    a: &PackedI8,
    za: &[i32],
    (b, ldb): (&[u8], usize),
    zb: i32,
    rq: &[qport_core::arith::FloatRequant],
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    let bytes = kernel().map(|_| gemm_requant_bytes as crate::int8::packed::RequantBytes);
    #[cfg(not(target_arch = "x86_64"))]
    let bytes = None;
    crate::int8::packed::run_requant(a, za, (b, ldb), zb, rq, out, row0, bytes)
}

/// The body of [`gemm_requant_packed`] once `T` is known to be one byte:
/// not generic, so that the fused kernel is compiled once, here, and the
/// same way whatever the crate that calls the generic entry (compiled
/// in the caller's code units, its loops were inlined and unrolled
/// differently from one build of the engine to the next: ResNet-50's
/// 128 → 512 @28 layers 0.105 against 0.160 ms between two builds that
/// differed only in an unrelated operator).
///
/// # Safety
/// The CPU must have the VNNI kernel's features (`kernel()` is `Some`);
/// `out` (row stride `ldo`) takes `o`'s `m` rows of `n` bytes, written by
/// no one else meanwhile.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn gemm_requant_bytes(
    o: U8s8<'_, PackedI8>,
    rq: &[qport_core::arith::FloatRequant],
    out: *mut u8,
    ldo: usize,
) {
    B_SCRATCH.with(|s| {
        let out = x86::BytesOut {
            out: crate::par::SendPtr(out),
            ldo,
            rq,
        };
        // SAFETY: the caller's contract.
        unsafe { x86::gemm(o, &out, &mut s.borrow_mut()) };
    });
}

/// The VNNI kernel on checked operands, `None` where it cannot run on this
/// thread (see [`available`]).
fn kernel() -> Option<Kernel<PackedI8>> {
    #[cfg(target_arch = "x86_64")]
    {
        fn run(o: U8s8<'_, PackedI8>, c: &mut [i32], ldc: usize) {
            B_SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                // SAFETY: `run` is handed out only where `available()`
                // checked the CPU features; `run_u8s8` checked that `c`
                // holds the m rows of stride `ldc`.
                unsafe {
                    if o.dims.2 <= x86::GEMV_MAX_N {
                        return x86::gemv(o, c, ldc, &mut s.xq);
                    }
                    let out = x86::SumsOut {
                        c: crate::par::SendPtr(c.as_mut_ptr()),
                        ldc,
                    };
                    x86::gemm(o, &out, &mut s)
                };
            });
        }
        available().then_some(run)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// The buffers of [`x86::gemm`], [`x86::gemv`] and the direct
/// convolution.
struct Scratch {
    /// `B` packed; the direct convolution's bytes on the padded width, or
    /// its row-compact planes.
    bp: Vec<u8>,
    /// `B`'s column sums.
    col_sum: Vec<i32>,
    /// The quads of the columns computed apart from the vectors.
    xq: Vec<i32>,
    /// The direct convolution's sums on the padded width.
    tail: Vec<i32>,
    /// The direct convolution's step offsets.
    offs: Vec<usize>,
}

thread_local! {
    /// A thread's packed tiles of `B` and their column sums, for its part
    /// of an AMX product split by column panels (reused across calls).
    static PANELS: std::cell::RefCell<(Vec<u8>, Vec<i32>)> =
        const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    /// The kernels' buffers, reused across calls on a thread.
    static B_SCRATCH: std::cell::RefCell<Scratch> = const {
        std::cell::RefCell::new(Scratch {
            bp: Vec::new(),
            col_sum: Vec::new(),
            xq: Vec::new(),
            tail: Vec::new(),
            offs: Vec::new(),
        })
    };
}

/// Output rows `oy0..oy1` of one image of a convolution from its
/// channel quads `img` ([`crate::int8::direct::quad_image`]) with the
/// direct weights `a` ([`crate::int8::direct::pack_weights`]), on the
/// padded width (`wp` columns a row, the last `(kw − 1) / s` of them past the
/// output), through `out` (which sees rows `0..a.m`, columns `0..(oy1 −
/// oy0)·wp`). `false` where the VNNI kernel cannot run.
#[cfg(target_arch = "x86_64")]
fn direct_on<O: x86::TileOut>(
    conv: &crate::int8::direct::DirectConv<'_>,
    (oy0, oy1): (usize, usize),
    out: impl FnOnce(&mut Scratch, usize) -> O,
    finish: impl FnOnce(&Scratch, usize),
) -> bool {
    let crate::int8::direct::DirectConv { a, za, g, img, zb } = *conv;
    let crate::int8::direct::DirectImage::Quads(img) = img else {
        return false;
    };
    if kernel().is_none() || a.k > MAX_K {
        return false;
    }
    let (cq, wp) = (g.quads(), g.padded_width());
    let nv = (oy1 - oy0) * wp;
    assert!(a.kq == g.kh * g.kw * cq && za.len() >= a.m && oy1 <= g.oh);
    assert!(img.len() >= g.image_len(), "the image's quads are short");
    if a.m == 0 || nv == 0 {
        return true;
    }
    B_SCRATCH.with(|s| {
        let s = &mut *s.borrow_mut();
        s.offs.clear();
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                s.offs
                    .extend((0..cq).map(|q| g.step_offset((ki, kj), q, oy0)));
            }
        }
        let o = out(s, nv);
        let Scratch { offs, col_sum, .. } = s;
        // SAFETY: `kernel()` is `Some` only where the CPU has the
        // features; `out` takes the a.m rows of nv columns (its builder's
        // contract), and `direct` checks that every step's padded columns
        // lie inside `img`.
        unsafe { x86::direct(a, (za, zb, g.k()), (img, offs), nv, &o, col_sum) };
        finish(s, nv);
    });
    true
}

/// True where the direct kernel computes only the output's own columns
/// ([`direct_exact_on`]; else [`direct_on`], on the padded width): the
/// VNNI row (the AMX row reads the padded image as tiles in place).
pub(crate) fn exact_columns() -> bool {
    #[cfg(test)]
    if PADDED.with(|p| p.get()) {
        return false;
    }
    crate::isa() == crate::Isa::Avx512Vnni
}

#[cfg(test)]
thread_local! {
    /// Set by [`with_padded`]: this thread's direct convolutions run on
    /// the padded width.
    static PADDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f` with this thread's direct convolutions on the padded width
/// ([`direct_on`]) when `padded`, else as [`exact_columns`] says (tests
/// hold the two paths to the same bits on one host).
#[cfg(test)]
pub(crate) fn with_padded<R>(padded: bool, f: impl FnOnce() -> R) -> R {
    let before = PADDED.with(|p| p.replace(padded));
    let r = f();
    PADDED.with(|p| p.set(before));
    r
}

/// True where [`direct_exact_on`] gathers the compact planes straight from
/// the planar image ([`crate::int8::direct::reads_planar`]): the compact
/// planes, VBMI, and the taps of 16 output pixels within 64 columns.
pub(crate) fn reads_planar(g: &crate::int8::direct::DirectGeom) -> bool {
    exact_columns() && crate::dispatch::has_vbmi() && 15 * g.stride + g.kw <= 64
}

/// How many blocks ran on the row-compact planes, and how many products
/// left columns to the tail (tests check that the paths they mean to
/// cover ran).
#[cfg(test)]
pub(crate) static EXACT_RUNS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);
#[cfg(test)]
pub(crate) static TAIL_RUNS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);
/// How many blocks gathered their compact planes from the planar image.
#[cfg(test)]
pub(crate) static PLANAR_RUNS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// Output rows `oy0..oy1` of one image of a convolution (as
/// [`direct_on`]) through `out`, which sees rows `0..a.m` and columns
/// `0..(oy1 − oy0)·ow`: the output positions themselves, no padding
/// column computed. The block's rows of the image's planes are first
/// copied row-compact: per channel quad, row phase `a` (`0..s`) and
/// kernel column `kj`, a plane of `ow` pixels a row whose row `y`, column
/// `x` is the padded image's pixel `(s·(oy0 + y) + a, s·x + kj)` (read from
/// phase `(a, kj mod s)` of the quad image, `kj / s` columns in). Tap
/// `(ki, kj)` of output `(oy0 + y, x)` then reads that plane of row phase
/// `ki mod s`, `ki / s` rows down, at position `y·ow + x`: every step's
/// columns are the block's output positions side by side, which the GEMM
/// tile reads as it reads a packed `B` ([`x86::direct_exact`]). The
/// planes are copied from the image's quads, or gathered from the planar
/// image ([`x86::planar_planes`]). `false` where the VNNI kernel cannot
/// run or cannot read a planar image ([`reads_planar`]); the caller
/// checked [`exact_columns`].
#[cfg(target_arch = "x86_64")]
fn direct_exact_on<O: x86::TileOut>(
    conv: &crate::int8::direct::DirectConv<'_>,
    (oy0, oy1): (usize, usize),
    out: O,
) -> bool {
    use crate::int8::direct::DirectImage;
    let crate::int8::direct::DirectConv { a, za, g, img, zb } = *conv;
    if kernel().is_none() || a.k > MAX_K {
        return false;
    }
    let (cq, s, ow, wp) = (g.quads(), g.stride, g.ow, g.padded_width());
    assert!(a.kq == g.kh * g.kw * cq && za.len() >= a.m && oy1 <= g.oh);
    match img {
        DirectImage::Quads(q) => {
            assert!(q.len() >= g.image_len(), "the image's quads are short")
        }
        DirectImage::Planar(x) => {
            if !reads_planar(g) {
                return false;
            }
            assert!(x.len() >= g.c * g.h * g.w, "the image is short");
        }
    }
    let n = (oy1 - oy0) * ow;
    if a.m == 0 || n == 0 {
        return true;
    }
    #[cfg(test)]
    EXACT_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // rows of a compact plane: the block's and those the taps below reach
    let rows = oy1 - oy0 + (g.kh - 1) / s;
    // (each plane on a cache line)
    let plane = (rows * ow * 4).next_multiple_of(64);
    let planes = cq * s * g.kw;
    // (a tile reads whole vectors of 64 columns: room past the last plane)
    let len = planes * plane + n.next_multiple_of(64) * 4;
    B_SCRATCH.with(|sc| {
        let sc = &mut *sc.borrow_mut();
        let Scratch {
            bp,
            offs,
            col_sum,
            xq,
            ..
        } = sc;
        // (the planes start on cache lines)
        let bp = crate::aligned::line_slice(bp, len);
        match img {
            DirectImage::Quads(img) => {
                for q in 0..cq {
                    // (the row phases a tap reads: a 1 × 1 kernel at
                    // stride 2 reads phase 0 alone)
                    for ra in 0..s.min(g.kh) {
                        for kj in 0..g.kw {
                            let at = ((q * s + ra) * g.kw + kj) * plane;
                            // phase (ra, kj mod s) of quad q, row oy0,
                            // column kj / s
                            let src = g.step_offset((ra, kj), q, oy0);
                            assert!(src + ((rows - 1) * wp + ow) * 4 <= img.len());
                            // SAFETY: `kernel()` is `Some`, so the CPU
                            // has AVX-512F and BW; the rows' runs lie
                            // inside `img` (asserted) and inside the
                            // plane at `at` of `bp` (`len` bytes).
                            unsafe {
                                x86::copy_runs(
                                    (img.as_ptr().add(src), wp * 4),
                                    (bp.as_mut_ptr().add(at), ow * 4),
                                    rows,
                                    ow * 4,
                                )
                            };
                        }
                    }
                }
            }
            DirectImage::Planar(x) => {
                #[cfg(test)]
                PLANAR_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                // SAFETY: `reads_planar` held, so the CPU has AVX-512F,
                // BW and VBMI and 15·s + kw ≤ 64; `x` holds the image
                // (asserted); the planes of `rows` rows of `ow` pixels,
                // `plane` bytes apart, lie inside `bp` (`len` bytes).
                unsafe {
                    x86::planar_planes(
                        x,
                        g,
                        (oy0, rows),
                        zb.clamp(0, 255) as u8,
                        (bp.as_mut_ptr(), plane),
                    )
                };
            }
        }
        offs.clear();
        for ki in 0..g.kh {
            for kj in 0..g.kw {
                offs.extend(
                    (0..cq).map(|q| (((q * s + ki % s) * g.kw + kj) * plane) + ki / s * ow * 4),
                );
            }
        }
        // SAFETY: `kernel()` is `Some` only where the CPU has the
        // features; `out` takes the a.m rows of the block's n columns (the
        // caller's contract), and `direct_exact` checks that every step's
        // columns lie inside `bp`.
        unsafe { x86::direct_exact(a, (za, zb, g.k()), (bp, offs), n, &out, (col_sum, xq)) };
    });
    true
}

/// [`direct_on`] requantized by `rq` (one per row) into rows `row0..row0 +
/// a.m` of the one-byte block `out`, whose columns are output positions
/// `oy0·ow..oy1·ow`.
pub(crate) fn direct_requant<T: crate::igemm::QInt>(
    conv: &crate::int8::direct::DirectConv<'_>,
    rq: &[qport_core::arith::FloatRequant],
    rows: (usize, usize),
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    let (a, g) = (conv.a, conv.g);
    let m = a.m;
    assert!(rq.len() >= m && row0 + m <= out.rows());
    assert_eq!(
        out.cols().len(),
        (rows.1 - rows.0) * g.ow,
        "the block's columns"
    );
    if std::mem::size_of::<T>() != 1 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let (ptr, ldo) = out.raw_parts();
        // SAFETY: `T` is one byte; rows row0..row0 + m of the block's
        // columns are the block's alone, borrowed mutably here.
        unsafe { direct_requant_bytes(conv, rq, rows, (ptr.cast::<u8>(), ldo), row0) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rq, row0, rows, out);
        false
    }
}

/// The body of [`direct_requant`] once `T` is known to be one byte: not
/// generic, compiled once here (as [`gemm_requant_bytes`]).
///
/// # Safety
/// `ptr` (row stride `ldo`) holds rows `row0..row0 + a.m` of the block's
/// `(rows.1 − rows.0)·ow` columns, written by no one else meanwhile.
#[cfg(target_arch = "x86_64")]
#[inline(never)]
unsafe fn direct_requant_bytes(
    conv: &crate::int8::direct::DirectConv<'_>,
    rq: &[qport_core::arith::FloatRequant],
    rows: (usize, usize),
    (ptr, ldo): (*mut u8, usize),
    row0: usize,
) -> bool {
    let (m, g) = (conv.a.m, conv.g);
    let (wp, ow) = (g.padded_width(), g.ow);
    if exact_columns() || matches!(conv.img, crate::int8::direct::DirectImage::Planar(_)) {
        let out = x86::BytesOut {
            // SAFETY: row row0 of the block lies inside it (the caller's
            // contract).
            out: crate::par::SendPtr(unsafe { ptr.add(row0 * ldo) }),
            ldo,
            rq,
        };
        return direct_exact_on(conv, rows, out);
    }
    direct_on(
        conv,
        rows,
        |s, nv| {
            if s.bp.len() < m * nv {
                s.bp.resize(m * nv, 0);
            }
            x86::BytesOut {
                out: crate::par::SendPtr(s.bp.as_mut_ptr()),
                ldo: nv,
                rq,
            }
        },
        |s, nv| {
            let (src, dst) = (&s.bp[..m * nv], crate::par::SendPtr(ptr));
            // the output's rows from the padded width, on the threads
            crate::par::split(m, 1, m * nv * crate::par::STREAM_COST, |i0, i1| {
                for i in i0..i1 {
                    // SAFETY: row row0 + i of the block holds its
                    // (oy1 − oy0)·ow columns (asserted), this part's rows
                    // alone; `T` is one byte; the direct kernel ran, so
                    // the CPU has AVX-512F and BW.
                    unsafe {
                        x86::drop_padding(
                            &src[i * nv..(i + 1) * nv],
                            (wp, ow),
                            dst.get().add((row0 + i) * ldo),
                        )
                    };
                }
            });
        },
    )
}

/// [`direct_on`]'s i32 sums into `c` (rows `0..a.m`, row stride `ldc`),
/// whose columns `0..(oy1 − oy0)·ow` are output positions `oy0·ow..`.
pub(crate) fn direct_sums(
    conv: &crate::int8::direct::DirectConv<'_>,
    rows: (usize, usize),
    c: &mut [i32],
    ldc: usize,
) -> bool {
    let (a, g) = (conv.a, conv.g);
    let (m, cols) = (a.m, (rows.1 - rows.0) * g.ow);
    assert!(ldc >= cols && (m == 0 || c.len() >= (m - 1) * ldc + cols));
    #[cfg(target_arch = "x86_64")]
    {
        let (wp, ow) = (g.padded_width(), g.ow);
        if exact_columns() || matches!(conv.img, crate::int8::direct::DirectImage::Planar(_)) {
            let out = x86::SumsOut {
                c: crate::par::SendPtr(c.as_mut_ptr()),
                ldc,
            };
            return direct_exact_on(conv, rows, out);
        }
        direct_on(
            conv,
            rows,
            |s, nv| {
                if s.tail.len() < m * nv {
                    s.tail.resize(m * nv, 0);
                }
                x86::SumsOut {
                    c: crate::par::SendPtr(s.tail.as_mut_ptr()),
                    ldc: nv,
                }
            },
            |s, nv| {
                for (i, row) in s.tail[..m * nv].chunks(nv).enumerate() {
                    for (y, r) in row.chunks(wp).enumerate() {
                        c[i * ldc + y * ow..][..ow].copy_from_slice(&r[..ow]);
                    }
                }
            },
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = c;
        false
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::PackedI8;
    use crate::arch::x86_64::amx;
    use crate::arch::x86_64::requant::{F32Row, Lanes16};
    use crate::int8::packed::U8s8;
    use qport_core::arith::FloatRequant;
    use std::arch::x86_64::*;

    /// Columns per vector.
    const L: usize = 16;
    /// Rows per register tile: 6 rows of 4 vectors are 24 accumulators,
    /// with the 4 vectors of `B` and the broadcast 29 of the 32 registers,
    /// and each step's 4 loads of `B` serve 24 `vpdpbusd` (16 with 4
    /// rows: where two run a cycle, as on Zen 5, the loads of `B` from L2
    /// held a 4-row tile of a long reduction to ~340 multiply-adds a
    /// nanosecond, 6 rows reach ~450). The last rows of a block (fewer
    /// than 6) take strips of 4, 2 and 1.
    const MR: usize = 6;
    /// Vectors (of 16 columns) per register tile.
    const NV: usize = 4;

    /// Packs `B` (`k × n` u8 row-major) as `[kq][np][4]` (four consecutive
    /// `k` of a column adjacent, zero padded) into `bp`, the steps of `k`
    /// divided between the intra-op threads (each step's bytes are its own).
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_b((b, ldb): (&[u8], usize), k: usize, n: usize, np: usize, bp: &mut [u8]) {
        let kq = k.div_ceil(4);
        let bp = &mut bp[..kq * np * 4];
        if np == 0 {
            return;
        }
        let work = bp.len() * crate::par::STREAM_COST;
        crate::par::split_mut(bp, np * 4, work, |start, block| {
            let t0 = start / (np * 4);
            // SAFETY: the caller's CPU has the features; steps t0.. of
            // `k` fill `block` exactly.
            unsafe { pack_b_steps((b, ldb), k, n, np, t0, block) };
        });
    }

    /// Steps `t0..` of `k` of [`pack_b`] into `bp` (`np · 4` bytes each).
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_b_steps(
        (b, ldb): (&[u8], usize),
        k: usize,
        n: usize,
        np: usize,
        t0: usize,
        bp: &mut [u8],
    ) {
        for (dst, t) in bp.chunks_exact_mut(np * 4).zip(t0..) {
            let rows: [Option<&[u8]>; 4] = std::array::from_fn(|r| {
                let p = t * 4 + r;
                (p < k).then(|| &b[p * ldb..p * ldb + n])
            });
            let full = n / 16 * 16;
            if rows.iter().all(|r| r.is_some()) {
                let [r0, r1, r2, r3] = rows.map(|r| r.unwrap_or(&[]));
                let mut j = 0;
                while j + 64 <= n {
                    // SAFETY: j + 64 <= n for every row; dst has np * 4 >=
                    // (j + 64) * 4 bytes; the caller's AVX-512F and BW.
                    unsafe { quads64([r0, r1, r2, r3], j, dst.as_mut_ptr().add(j * 4)) };
                    j += 64;
                }
                while j < full {
                    // SAFETY: j + 16 <= n for every row; dst has np * 4 >=
                    // (j + 16) * 4 bytes.
                    unsafe { quads16([r0, r1, r2, r3], j, dst.as_mut_ptr().add(j * 4)) };
                    j += 16;
                }
                for j in full..n {
                    dst[j * 4] = r0[j];
                    dst[j * 4 + 1] = r1[j];
                    dst[j * 4 + 2] = r2[j];
                    dst[j * 4 + 3] = r3[j];
                }
                dst[n * 4..].fill(0);
            } else {
                dst.fill(0);
                for (r, row) in rows.iter().enumerate() {
                    if let Some(row) = row {
                        for (j, &v) in row.iter().enumerate() {
                            dst[j * 4 + r] = v;
                        }
                    }
                }
            }
        }
    }

    /// Columns `j..j + 64` of four rows of `B` as 64 quads (256 bytes at
    /// `dst`, as four [`quads16`]): the bytes interleaved within each
    /// 128-bit lane (pairs, then quads: lane `l` of the `q`-th vector
    /// holds the quads of columns `j + 16l + 4q..`), then the 4 × 4 lanes
    /// transposed so that each vector holds 16 consecutive columns.
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW; each row holds columns
    /// `j..j + 64`; `dst` takes 256 bytes.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn quads64(rows: [&[u8]; 4], j: usize, dst: *mut u8) {
        debug_assert!(rows.iter().all(|r| r.len() >= j + 64));
        // SAFETY: the caller's contract.
        unsafe {
            let ld = |r: &[u8]| _mm512_loadu_si512(r.as_ptr().add(j).cast());
            let (a, b, c, d) = (ld(rows[0]), ld(rows[1]), ld(rows[2]), ld(rows[3]));
            let (ab_lo, ab_hi) = (_mm512_unpacklo_epi8(a, b), _mm512_unpackhi_epi8(a, b));
            let (cd_lo, cd_hi) = (_mm512_unpacklo_epi8(c, d), _mm512_unpackhi_epi8(c, d));
            let q0 = _mm512_unpacklo_epi16(ab_lo, cd_lo);
            let q1 = _mm512_unpackhi_epi16(ab_lo, cd_lo);
            let q2 = _mm512_unpacklo_epi16(ab_hi, cd_hi);
            let q3 = _mm512_unpackhi_epi16(ab_hi, cd_hi);
            // [q0.0, q0.1, q1.0, q1.1], [q0.2, q0.3, q1.2, q1.3], and of q2, q3
            let t0 = _mm512_shuffle_i32x4::<0b01_00_01_00>(q0, q1);
            let t1 = _mm512_shuffle_i32x4::<0b11_10_11_10>(q0, q1);
            let t2 = _mm512_shuffle_i32x4::<0b01_00_01_00>(q2, q3);
            let t3 = _mm512_shuffle_i32x4::<0b11_10_11_10>(q2, q3);
            let o = dst.cast::<__m512i>();
            // columns 16l.. of vector l: lane l of q0, q1, q2, q3
            _mm512_storeu_si512(o, _mm512_shuffle_i32x4::<0b10_00_10_00>(t0, t2));
            _mm512_storeu_si512(o.add(1), _mm512_shuffle_i32x4::<0b11_01_11_01>(t0, t2));
            _mm512_storeu_si512(o.add(2), _mm512_shuffle_i32x4::<0b10_00_10_00>(t1, t3));
            _mm512_storeu_si512(o.add(3), _mm512_shuffle_i32x4::<0b11_01_11_01>(t1, t3));
        }
    }

    /// Columns `j..j + 16` of four rows of `B` as 16 quads (64 bytes at
    /// `dst`: column `j + c`'s four bytes at `4c`, row `r`'s byte at `r`).
    ///
    /// # Safety
    /// The CPU must support SSE2 (every x86-64 CPU); each row holds
    /// columns `j..j + 16`; `dst` takes 64 bytes.
    #[inline(always)]
    unsafe fn quads16(rows: [&[u8]; 4], j: usize, dst: *mut u8) {
        debug_assert!(rows.iter().all(|r| r.len() >= j + 16));
        // SAFETY: the caller's contract.
        unsafe {
            let ld = |r: &[u8]| _mm_loadu_si128(r.as_ptr().add(j) as *const _);
            let (a, b1, c, d) = (ld(rows[0]), ld(rows[1]), ld(rows[2]), ld(rows[3]));
            let ab_lo = _mm_unpacklo_epi8(a, b1);
            let ab_hi = _mm_unpackhi_epi8(a, b1);
            let cd_lo = _mm_unpacklo_epi8(c, d);
            let cd_hi = _mm_unpackhi_epi8(c, d);
            let o = dst as *mut __m128i;
            _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
            _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
            _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
            _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
        }
    }

    /// Packs `B` (`k × n` u8 row-major) for the AMX tiles: in tiles of 16
    /// columns, each tile's
    /// `kt ≥ ⌈k/4⌉` steps of 64 bytes (16 columns' quads) one after the
    /// other: step `t` of column tile `c` at `64 · (c · kt + t)`, the
    /// padding (past `k`, past `n`) zero. The steps are divided between
    /// the intra-op threads.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_b_tiles((b, ldb): (&[u8], usize), k: usize, n: usize, kt: usize, bp: &mut [u8]) {
        let tiles = bp.len() / (64 * kt);
        assert!(tiles * 16 >= n && kt >= k.div_ceil(4) && ldb >= n);
        assert!(k == 0 || b.len() >= (k - 1) * ldb + n);
        let dst = crate::par::SendPtr(bp.as_mut_ptr());
        crate::par::split(kt, 1, bp.len() * crate::par::STREAM_COST, |t0, t1| {
            // SAFETY: steps t0..t1 of every tile are inside `bp` (tiles ·
            // kt · 64 bytes) and this part's alone; the caller's features.
            unsafe { pack_steps((b, ldb), k, n, kt, dst.get(), (t0, t1), (0, tiles)) };
        });
    }

    /// Steps `t0..t1` of column tiles `c0..c1` of [`pack_b_tiles`]'s
    /// layout, written at `bp` (the layout's start).
    ///
    /// # Safety
    /// AVX-512F + BW; those steps of those tiles lie in the caller's
    /// buffer at `bp` and are this call's alone; `b` holds `k` rows of `n`
    /// bytes, `ldb` apart.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn pack_steps(
        (b, ldb): (&[u8], usize),
        k: usize,
        n: usize,
        kt: usize,
        bp: *mut u8,
        (t0, t1): (usize, usize),
        (c0, c1): (usize, usize),
    ) {
        for t in t0..t1 {
            let rows: [Option<&[u8]>; 4] = std::array::from_fn(|r| {
                let p = t * 4 + r;
                (p < k).then(|| &b[p * ldb..p * ldb + n])
            });
            // the four rows when the step has them all
            let whole = rows
                .iter()
                .all(|r| r.is_some())
                .then(|| rows.map(|r| r.unwrap_or(&[])));
            for c in c0..c1 {
                // SAFETY: step t of tile c is 64 bytes inside the caller's
                // buffer, this call's alone (the caller's contract).
                let o = unsafe { bp.add(64 * (c * kt + t)) };
                let j = c * 16;
                if let (Some(r), true) = (whole, j + 16 <= n) {
                    // SAFETY: 16 columns from j in every row; 64 bytes at o.
                    unsafe { quads16(r, j, o) };
                    continue;
                }
                // SAFETY: as above.
                let q = unsafe { std::slice::from_raw_parts_mut(o, 64) };
                q.fill(0);
                for (r, row) in rows.iter().enumerate() {
                    if let Some(row) = row {
                        for (cc, &v) in row.iter().skip(j).take(16).enumerate() {
                            q[cc * 4 + r] = v;
                        }
                    }
                }
            }
        }
    }

    /// `(A − za)·(B − zb)` into `out` (every row and column `0..n`) on the
    /// AMX tiles: `B` packed in tiles ([`pack_b_tiles`]), `A` as
    /// [`amx::a_tiles`], blocks of 32 × 32 ([`rows_amx`]). With several
    /// intra-op threads and at least two panels of 32 columns per thread,
    /// each thread packs the tiles of its own panels into its own buffer
    /// and then runs all rows of them, in one hand-off, so that its part
    /// of `B` stays in its core's cache (`qgemm_speed`, 2 threads, fused:
    /// 64 x 576 x 3136 0.29 → 0.16 ms, 256 x 1024 x 196 0.10 → 0.07);
    /// otherwise the packing is divided by
    /// steps of `k` and the blocks as [`split_amx`] divides them.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI and the process hold the
    /// AMX tiles ([`crate::Isa::Amx`]); `out` must take rows `0..m`,
    /// columns `0..n`, and no one else may write there meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn gemm_amx<O: TileOut>(o: U8s8<'_, PackedI8>, out: &O, scratch: &mut super::Scratch) {
        let U8s8 {
            a,
            za,
            b,
            zb,
            dims: (m, k, n),
            ldb,
        } = o;
        let kt = amx::padded_quads(a);
        let tiles = n.div_ceil(amx::CB) * 2;
        let len = tiles * kt * 64;
        let with_za = za[..m].iter().any(|&z| z != 0);
        let b_dev = i64::from(zb).abs().max(i64::from(255 - zb).abs());
        let work = m * k * n / 16;
        let panels = n.div_ceil(amx::CB);
        if crate::par::parts_for(work) > 1 && panels >= 2 * crate::par::threads() {
            // each thread packs the columns of its own panels into its
            // own buffer and runs them, all rows, in one hand-off: its
            // part of B is written and read in its core's cache only
            // (packed into a buffer shared by the threads, a thread's
            // next call rewrote lines another core held)
            #[cfg(test)]
            super::AMX_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let at = amx::a_tiles(a);
            let per = amx::CB / L;
            crate::par::split(panels, 1, work, |p0, p1| {
                super::PANELS.with(|s| {
                    let (bp, col_sum) = &mut *s.borrow_mut();
                    // (the whole product's layout, of which this part
                    // fills and reads its own tiles)
                    let bp = crate::aligned::line_slice(bp, len);
                    col_sum.clear();
                    col_sum.resize(tiles * L, 0);
                    let (c0, c1) = (p0 * per, (p1 * per).min(tiles));
                    // SAFETY: the tiles c0..c1 (all steps) and their
                    // column sums lie inside this thread's `bp` and
                    // `col_sum`; the caller's features.
                    unsafe {
                        pack_steps((b, ldb), k, n, kt, bp.as_mut_ptr(), (0, kt), (c0, c1));
                        if with_za {
                            tile_sums(bp.as_mut_ptr(), kt, (c0, c1), col_sum.as_mut_ptr());
                        }
                    }
                    let corr = Corr {
                        za,
                        zb,
                        k,
                        col_sum: &col_sum[..],
                        b_dev,
                        lean: None,
                    };
                    let src = BTiles { bytes: &*bp, kt };
                    let cols = (p0 * amx::CB, (p1 * amx::CB).min(n));
                    // SAFETY: the caller's features and output; these
                    // columns are this part's alone, and their tiles and
                    // sums were written just above.
                    unsafe { rows_amx(a, at, &src, &corr, out, (0, m), cols) };
                })
            });
            return;
        }
        let super::Scratch { bp, col_sum, .. } = scratch;
        // (the tiles start on a cache line, so no row of a tile straddles
        // two)
        let bp = crate::aligned::line_slice(bp, len);
        col_sum.clear();
        col_sum.resize(tiles * L, 0);
        // SAFETY: the caller checked avx512f + avx512bw.
        unsafe { pack_b_tiles((b, ldb), k, n, kt, bp) };
        // B's column sums, where a row has a zero point
        if with_za {
            // SAFETY: `bp` holds `tiles` tiles of `kt` steps, `col_sum`
            // tiles · 16 sums; the caller's features.
            unsafe { tile_sums(bp.as_mut_ptr(), kt, (0, tiles), col_sum.as_mut_ptr()) };
        }
        let corr = Corr {
            za,
            zb,
            k,
            col_sum: &col_sum[..],
            b_dev,
            lean: None,
        };
        // SAFETY: the caller's features, tiles and output; the packed
        // tiles hold every column tile of n (asserted by `rows_amx`).
        unsafe { split_amx(a, &BTiles { bytes: &*bp, kt }, &corr, out, n) };
    }

    /// The column sums of packed tiles `c0..c1` (16 each, at `sums + 16c`).
    ///
    /// # Safety
    /// AVX-512F + VNNI; the tiles lie at `bp` as [`pack_b_tiles`] lays
    /// them out and `sums` holds `16 · c1` values.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tile_sums(bp: *const u8, kt: usize, (c0, c1): (usize, usize), sums: *mut i32) {
        let ones = _mm512_set1_epi32(0x0101_0101);
        for c in c0..c1 {
            let mut s = _mm512_setzero_si512();
            for t in 0..kt {
                // SAFETY: step t of tile c: 64 bytes (the caller's).
                let x = unsafe { _mm512_loadu_si512(bp.add(64 * (c * kt + t)) as *const _) };
                s = _mm512_dpbusd_epi32(s, x, ones);
            }
            // SAFETY: 16 i32 at sums + 16c (the caller's).
            unsafe { _mm512_storeu_si512(sums.add(L * c) as *mut _, s) };
        }
    }

    /// The blocks of `(A − za)·(B − zb)` (columns `0..n`) on the AMX tiles
    /// ([`rows_amx`]), `B`'s tiles from `src`, divided between the intra-op
    /// threads in blocks of 32 rows, or panels of 32 columns when the rows
    /// make too few blocks for the threads.
    ///
    /// # Safety
    /// As [`rows_amx`] for rows `0..a.m`, columns `0..n`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn split_amx<O: TileOut, T: TileSource>(
        a: &PackedI8,
        src: &T,
        c: &Corr<'_>,
        out: &O,
        n: usize,
    ) {
        let m = a.m;
        #[cfg(test)]
        super::AMX_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let at = amx::a_tiles(a);
        // (a tdpbsud does 16 × 16 × 64 multiply-adds: count a sixteenth of
        // the work against the hand-off cost)
        let work = m * c.k * n / 16;
        divide((m, amx::RB), (n, amx::CB), work, |rows, cols| {
            // SAFETY: the caller's contract; these rows and columns are
            // this block's alone.
            unsafe { rows_amx(a, at, src, c, out, rows, cols) };
        });
    }

    /// Divides an output of `m` rows and `n` columns between the intra-op
    /// threads: blocks of rows (multiples of `mr`), or panels of `nr`
    /// columns when the rows make too few blocks for the threads (a
    /// projection layer of 16 to 64 output channels on 8 threads). `f`
    /// gets each part's rows and columns.
    fn divide(
        (m, mr): (usize, usize),
        (n, nr): (usize, usize),
        work: usize,
        f: impl Fn((usize, usize), (usize, usize)) + Sync,
    ) {
        let panels = n.div_ceil(nr);
        if m.div_ceil(mr) >= 2 * crate::par::threads() || panels < 2 {
            crate::par::split(m, mr, work, |r0, r1| f((r0, r1), (0, n)));
        } else {
            crate::par::split(panels, 1, work, |p0, p1| {
                f((0, m), (p0 * nr, (p1 * nr).min(n)))
            });
        }
    }

    /// Where [`rows_amx`] finds `B`'s tiles: 16 rows (steps of four `k`) of
    /// 64 bytes (16 columns' quads), [`Self::stride`] bytes apart.
    trait TileSource: Sync {
        /// The first row of the tile of steps `16·g..` and columns `16·c..`.
        fn tile(&self, c: usize, g: usize) -> *const u8;
        /// Bytes from one row of a tile to the next.
        fn stride(&self) -> usize;
        /// True when every tile of the columns `0..cols` (a multiple of 32)
        /// and of `groups` passes lies inside `B`.
        fn holds(&self, cols: usize, groups: usize) -> bool;
    }

    impl TileSource for BTiles<'_> {
        #[inline(always)]
        fn tile(&self, c: usize, g: usize) -> *const u8 {
            self.bytes
                .as_ptr()
                .wrapping_add(64 * (c * self.kt + g * amx::KT))
        }
        fn stride(&self) -> usize {
            64
        }
        fn holds(&self, cols: usize, groups: usize) -> bool {
            groups * amx::KT <= self.kt && self.bytes.len() >= cols / 16 * self.kt * 64
        }
    }

    /// A direct convolution's channel-quad image ([`crate::int8::direct`]):
    /// step `t` at `offs[t]`, the 16 steps of each tile `stride` bytes
    /// apart (one tap, 16 channel quads: [`image_tiles`] checks it).
    struct ImageTiles<'a> {
        bytes: &'a [u8],
        offs: &'a [usize],
        stride: usize,
    }

    impl TileSource for ImageTiles<'_> {
        #[inline(always)]
        fn tile(&self, c: usize, g: usize) -> *const u8 {
            // SAFETY: g < groups ≤ offs.len() / 16 (`holds`, asserted by
            // the caller).
            let off = unsafe { *self.offs.get_unchecked(g * amx::KT) };
            self.bytes.as_ptr().wrapping_add(off + 64 * c)
        }
        fn stride(&self) -> usize {
            self.stride
        }
        fn holds(&self, cols: usize, groups: usize) -> bool {
            groups * amx::KT <= self.offs.len()
                && (0..groups).all(|g| {
                    self.offs[g * amx::KT] + (amx::KT - 1) * self.stride + cols * 4
                        <= self.bytes.len()
                })
        }
    }

    /// The image's steps as AMX tiles: `Some` when `kq` is a multiple of 16
    /// and each run of 16 steps lies one stride apart, the same stride for
    /// all (16 channel quads of one tap: the channels a multiple of 64).
    fn image_tiles<'a>(img: &'a [u8], offs: &'a [usize], kq: usize) -> Option<ImageTiles<'a>> {
        if kq == 0 || !kq.is_multiple_of(amx::KT) || offs.len() < kq {
            return None;
        }
        let stride = offs[1].wrapping_sub(offs[0]);
        let uniform = offs[..kq].chunks_exact(amx::KT).all(|run| {
            run.iter()
                .enumerate()
                .all(|(r, &o)| o == run[0].wrapping_add(r.wrapping_mul(stride)))
        });
        uniform.then_some(ImageTiles {
            bytes: img,
            offs: &offs[..kq],
            stride,
        })
    }

    /// The shortest reduction (in quads of `k`) [`gemm`] runs on the AMX
    /// tiles: two passes of 16 quads (`k` from 125). Shorter ones stay on
    /// the VNNI tiles: there the epilogue dominates, and the tiles would
    /// multiply padding below 64 (`qgemm_speed`: 256 x 64 x 3136 0.86x
    /// on the tiles, 512 x 128 x 784 1.10x; ResNet-50 INT8 alternated,
    /// 11.8–12.4 ms against 11.7–12.9 with one pass).
    const AMX_MIN_QUADS: usize = 2 * amx::KT;

    /// Blocks of 32 columns whose sums [`rows_amx`] holds before their
    /// epilogue (which prepares each row's requantization once for them).
    const STRIP: usize = 4;

    /// `B` as [`pack_b_tiles`] lays it out.
    struct BTiles<'a> {
        bytes: &'a [u8],
        kt: usize,
    }

    /// Rows `r0..r1` (`r0` a multiple of [`amx::RB`]), columns `c0..c1`
    /// (`c0` a multiple of [`amx::CB`]) of the output, in 32 × 32 blocks
    /// on the AMX tiles ([`amx::block`]), then the VNNI kernel's
    /// correction and store.
    ///
    /// # Safety
    /// As [`gemm_amx`]; rows `r0..r1`, columns `c0..c1` are this call's
    /// alone.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows_amx<O: TileOut, T: TileSource>(
        a: &PackedI8,
        at: &[i32],
        src: &T,
        c: &Corr<'_>,
        out: &O,
        (r0, r1): (usize, usize),
        (c0, c1): (usize, usize),
    ) {
        let kt = amx::padded_quads(a);
        let groups = kt / amx::KT;
        debug_assert!(r0 % amx::RB == 0 && c0 % amx::CB == 0);
        let cols = c1.div_ceil(amx::CB) * amx::CB;
        assert!(at.len() >= a.m.div_ceil(amx::RB) * amx::RB * kt);
        assert!(
            src.holds(cols, groups) && c.col_sum.len() >= cols,
            "a tile leaves B"
        );
        let acc = [const { amx::Block([0; 1024]) }; STRIP];
        let (ap, sb) = (at.as_ptr(), src.stride());
        // rows i0..i0 + 32, columns s0..s1 (up to STRIP blocks): their
        // sums first, then the epilogue row by row (one row setup a strip)
        let strip = |i0: usize, s0: usize, acc: &mut [amx::Block; STRIP]| {
            let h0 = i0 / 16;
            // SAFETY: row halves h0 and h0 + 1 exist (rows padded to RB).
            let a_half = unsafe { [ap.add(256 * h0 * groups), ap.add(256 * (h0 + 1) * groups)] };
            {
                let s1 = (s0 + amx::CB * STRIP).min(c1);
                for (blk, j0) in acc.iter_mut().zip((s0..s1).step_by(amx::CB)) {
                    let c16 = j0 / 16;
                    // SAFETY: column tiles c16 and c16 + 1 exist
                    // (asserted), their `kt` steps of 64 bytes each;
                    // the tiles are configured (`with_tiles` below).
                    unsafe {
                        amx::block(
                            a_half,
                            |g| [src.tile(c16, g), src.tile(c16 + 1, g)],
                            sb,
                            groups,
                            blk,
                        )
                    };
                }
                for r in 0..amx::RB.min(r1 - i0) {
                    let i = i0 + r;
                    // C = acc − zb·rowsum(i) − za(i)·colsum(j) + k·za(i)·zb
                    let za = c.za[i];
                    let rt = c.row_term(a, i);
                    let (rt, zav) = (_mm512_set1_epi32(rt), _mm512_set1_epi32(za));
                    // SAFETY: the caller's features.
                    let row = unsafe { out.row(i, c.bound(a, i)) };
                    let acc = &*acc;
                    let y = |js: usize| {
                        let (blk, h) = ((js - s0) / amx::CB, (js / L) % 2);
                        let t = 2 * (r / L) + h;
                        // SAFETY: tile t's row r % 16 is 16 i32 of
                        // the block's sums; col_sum has js + 16
                        // (asserted).
                        unsafe {
                            let s = _mm512_load_si512(
                                acc[blk].0.as_ptr().add(t * 256 + (r % L) * L) as *const _,
                            );
                            let y = _mm512_add_epi32(s, rt);
                            if za == 0 {
                                y
                            } else {
                                let cs = _mm512_loadu_si512(c.col_sum.as_ptr().add(js) as *const _);
                                _mm512_sub_epi32(y, _mm512_mullo_epi32(zav, cs))
                            }
                        }
                    };
                    // SAFETY: columns s0..c1 of row i are this call's
                    // (the caller's contract).
                    unsafe { out.put_run(&row, i, (s0, s1, c1), y) };
                }
            }
        };
        let body = || {
            let mut acc = acc;
            // (a block's rows of A stay in L1 while B streams by)
            for i0 in (r0..r1).step_by(amx::RB) {
                for s0 in (c0..c1).step_by(amx::CB * STRIP) {
                    strip(i0, s0, &mut acc);
                }
            }
        };
        // SAFETY: the process holds the tiles (the caller's contract).
        unsafe { amx::with_tiles(body) };
    }

    /// One `R × V·16` register tile: rows `i0..i0+R`, columns `j0..`,
    /// corrected and stored (the last vector masked to `n`).
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tile<const R: usize, const V: usize, O: TileOut, S: Steps>(
        a: &PackedI8,
        i0: usize,
        b: &BRows<'_, S>,
        j0: usize,
        n: usize,
        corr: &Corr<'_>,
        out: &O,
    ) {
        let kq = a.kq;
        let lean = corr.lean.map(|l| &l[i0..i0 + R]);
        let mut acc = [[_mm512_setzero_si512(); V]; R];
        // (raw pointers: bounds checked once here, not per step of `k`,
        // and nothing the compiler leaves out of line in the loop)
        assert!(i0 + R <= a.m && a.quads.len() >= a.m * kq);
        assert!(kq == 0 || b.last + (j0 + V * L) * 4 <= b.bytes.len());
        // SAFETY: row i0 starts inside `quads` (asserted above).
        let ap = unsafe { a.quads.as_ptr().add(i0 * kq) };
        // the rows of the next tile down, read into L2 while this one
        // runs (one row a step, in turn: the weights of a layer whose
        // columns are few come from memory, each quad used by few columns;
        // a prefetch reads nothing and cannot fault past the end)
        let next = ap.wrapping_add(R * kq);
        for t in 0..kq {
            _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add((t % R) * kq + t).cast());
            // SAFETY: step t's V · 64 bytes at column j0 lie inside the
            // bytes (no step starts past `last`, asserted above).
            let row = unsafe { b.bytes.as_ptr().add(b.steps.at(t) + j0 * 4) };
            if S::PREFETCH && t + PF_AHEAD < kq {
                let ahead = b
                    .bytes
                    .as_ptr()
                    .wrapping_add(b.steps.at(t + PF_AHEAD) + j0 * 4);
                for v in 0..V {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(v * 64).cast());
                }
            }
            let mut x = [_mm512_setzero_si512(); V];
            for (v, xv) in x.iter_mut().enumerate() {
                // SAFETY: as above.
                *xv = unsafe { _mm512_loadu_si512(row.add(v * 64) as *const _) };
            }
            for r in 0..R {
                // SAFETY: rows i0..i0 + R have kq quads each (asserted).
                let w = _mm512_set1_epi32(unsafe { *ap.add(r * kq + t) });
                for v in 0..V {
                    acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], x[v], w);
                }
            }
        }
        if let Some(l) = lean {
            // C + bias: the row's start added (no zero point in A)
            for ((r, accr), (start, f)) in acc.iter().enumerate().zip(l) {
                let start = _mm512_set1_epi32(*start);
                for (v, &s) in accr.iter().enumerate() {
                    let js = j0 + v * L;
                    if js >= n {
                        break;
                    }
                    let y = f.finish(_mm512_add_epi32(s, start));
                    // SAFETY: columns js..js + cnt of row i0 + r are this
                    // tile's (`out`'s contract), which gave `f`.
                    unsafe { out.put_finished(i0 + r, js, y, (n - js).min(L)) };
                }
            }
            return;
        }
        for (r, accr) in acc.iter().enumerate() {
            let i = i0 + r;
            // C = acc − zb·rowsum(i) − za(i)·colsum(j) + k·za(i)·zb
            let za = corr.za[i];
            let rt = _mm512_set1_epi32(corr.row_term(a, i));
            let zav = _mm512_set1_epi32(za);
            // SAFETY: the caller's CPU has the features.
            let row = unsafe { out.row(i, corr.bound(a, i)) };
            for (v, &s) in accr.iter().enumerate() {
                let js = j0 + v * L;
                if js >= n {
                    break;
                }
                let mut y = _mm512_add_epi32(s, rt);
                if za != 0 {
                    // SAFETY: col_sum is padded to np >= js + 16.
                    let cs =
                        unsafe { _mm512_loadu_si512(corr.col_sum.as_ptr().add(js) as *const _) };
                    y = _mm512_sub_epi32(y, _mm512_mullo_epi32(zav, cs));
                }
                // SAFETY: columns js..js + cnt of row i are this tile's
                // (`out`'s contract)
                unsafe { out.put(&row, i, js, y, (n - js).min(L)) };
            }
        }
    }

    struct Corr<'a> {
        za: &'a [i32],
        zb: i32,
        k: usize,
        col_sum: &'a [i32],
        /// `max |B[p][j] − zb|` over the u8 range.
        b_dev: i64,
        /// Where every row of the product has no zero point and an
        /// [`F32Row`] ([`TileOut::f32_row`]): each row's, with its row
        /// term and bias as one i32 (wrapping), so that a tile's epilogue
        /// adds once, then scales, clamps and stores, and builds no
        /// [`Lanes16`] per row.
        lean: Option<&'a [(i32, F32Row)]>,
    }

    /// The part of a row's zero-point correction that does not depend on
    /// the column, `k·za·zb − zb·rowsum` (wrapping, as every term of the
    /// correction: the exact sum is an i32), for a reduction of length
    /// `k`, the row's zero point `za`, `B`'s `zb` and the row's sum.
    #[inline(always)]
    fn row_term(k: usize, (za, zb): (i32, i32), row_sum: i32) -> i32 {
        (k as i32)
            .wrapping_mul(za)
            .wrapping_mul(zb)
            .wrapping_sub(zb.wrapping_mul(row_sum))
    }

    impl Corr<'_> {
        /// The part of row `i`'s correction that does not depend on the
        /// column: `k·za(i)·zb − zb·rowsum(i)` (so that `C = acc +
        /// row_term − za(i)·colsum(j)`).
        #[inline(always)]
        fn row_term(&self, a: &PackedI8, i: usize) -> i32 {
            row_term(self.k, (self.za[i], self.zb), a.row_sum[i])
        }

        /// A bound on row `i`'s corrected sums: `|C| ≤ Σ_p |A[i][p] −
        /// za| · max |B − zb|`.
        #[inline(always)]
        fn bound(&self, a: &PackedI8, i: usize) -> i64 {
            (a.abs_sum[i] + self.k as i64 * i64::from(self.za[i]).abs()).saturating_mul(self.b_dev)
        }
    }

    /// Where step `t` of `k` (four rows of `B`) starts in the bytes a
    /// tile reads: `t · np · 4` in the packed layout ([`Packed`]), or a
    /// direct convolution's offset of its tap and channel quad
    /// ([`Offsets`]); either way, column `j`'s four bytes follow at `4j`.
    pub(super) trait Steps: Sync {
        /// Whether a tile prefetches the bytes of the step `PF_AHEAD` on
        /// (where the steps jump about, which no hardware prefetcher
        /// follows).
        const PREFETCH: bool = false;
        /// Byte offset of step `t`'s column 0 (`t < kq`).
        fn at(&self, t: usize) -> usize;
    }

    /// Steps ahead a tile prefetches ([`Steps::PREFETCH`]).
    const PF_AHEAD: usize = 3;

    /// The packed `[kq][np][4]` layout of [`pack_b`].
    pub(super) struct Packed {
        /// `np · 4`: the bytes of one step.
        step: usize,
    }

    impl Steps for Packed {
        #[inline(always)]
        fn at(&self, t: usize) -> usize {
            t * self.step
        }
    }

    /// One offset per step (a table of `kq` or more).
    pub(super) struct Offsets<'a>(pub(super) &'a [usize]);

    impl Steps for Offsets<'_> {
        const PREFETCH: bool = true;
        #[inline(always)]
        fn at(&self, t: usize) -> usize {
            // SAFETY: `BRows::new` checked that the table has a value for
            // every step the tiles run (t < kq).
            unsafe { *self.0.get_unchecked(t) }
        }
    }

    /// The bytes of `B` the tiles read and where each step starts in
    /// them; `last` is the largest start, so that a tile reading
    /// columns up to `j` stays inside when `last + 4j ≤ bytes.len()`.
    pub(super) struct BRows<'a, S: Steps> {
        bytes: &'a [u8],
        steps: S,
        last: usize,
    }

    impl<'a> BRows<'a, Offsets<'a>> {
        /// `kq` steps at `offs` in `bytes`, readable up to `np` columns
        /// from each.
        ///
        /// # Panics
        /// When `offs` has fewer than `kq` values or a step's `np`
        /// columns leave `bytes`.
        pub(super) fn new(bytes: &'a [u8], offs: &'a [usize], kq: usize, np: usize) -> Self {
            assert!(
                offs.len() >= kq,
                "{} step offsets for {kq} steps",
                offs.len()
            );
            let last = offs[..kq].iter().copied().max().unwrap_or(0);
            assert!(last + np * 4 <= bytes.len(), "a step's columns leave B");
            BRows {
                bytes,
                steps: Offsets(offs),
                last,
            }
        }
    }

    /// Where a tile's corrected sums go: row `i`'s vector of columns
    /// `js..js + cnt` (`cnt ≤ 16`), with what [`Self::row`] prepared for
    /// the row.
    pub(super) trait TileOut: Sync {
        /// What a row's stores share (its requantization constants).
        type Row;
        /// Prepares row `i`'s stores, whose sums lie in `[-bound,
        /// bound]`.
        ///
        /// # Safety
        /// The CPU must support AVX-512F and BW.
        unsafe fn row(&self, i: usize, bound: i64) -> Self::Row;
        /// Stores the first `cnt` lanes of `y` as row `i`, columns
        /// `js..js + cnt`.
        ///
        /// # Safety
        /// The CPU must support AVX-512F and BW; no other thread writes
        /// those elements, which lie inside the output.
        unsafe fn put(&self, row: &Self::Row, i: usize, js: usize, y: __m512i, cnt: usize);
        /// Row `i`'s requantization as an [`F32Row`] where its sums, in
        /// `[-bound, bound]`, may take it (bytes out), else `None`.
        fn f32_row(&self, _i: usize, _bound: i64) -> Option<F32Row> {
            None
        }
        /// Stores the first `cnt` lanes of `r`, [`F32Row::finish`]'s
        /// result, as row `i`, columns `js..js + cnt`: only for an output
        /// whose [`Self::f32_row`] gave one.
        ///
        /// # Safety
        /// As [`Self::put`].
        unsafe fn put_finished(&self, _i: usize, _js: usize, _r: __m512i, _cnt: usize) {
            unreachable!("an output without f32 rows stores no finished bytes")
        }
        /// Stores row `i`'s vectors of columns `js..` for `js` in
        /// `(s0..s1).step_by(16)`, the first `c1 − js` lanes (at most 16)
        /// of each, `y(js)` giving each vector: [`Self::put`] for each.
        ///
        /// # Safety
        /// As [`Self::put`] for every vector.
        #[inline(always)]
        unsafe fn put_run(
            &self,
            row: &Self::Row,
            i: usize,
            (s0, s1, c1): (usize, usize, usize),
            y: impl Fn(usize) -> __m512i,
        ) {
            for js in (s0..s1).step_by(L) {
                // SAFETY: the caller's contract.
                unsafe { self.put(row, i, js, y(js), (c1 - js).min(L)) };
            }
        }
    }

    /// The i32 sums, into a row-major `C` (row stride `ldc`).
    pub(super) struct SumsOut {
        pub(super) c: crate::par::SendPtr<i32>,
        pub(super) ldc: usize,
    }

    impl TileOut for SumsOut {
        type Row = ();
        unsafe fn row(&self, _: usize, _: i64) {}
        #[inline(always)]
        unsafe fn put(&self, _: &(), i: usize, js: usize, y: __m512i, cnt: usize) {
            let mask: __mmask16 = if cnt == L { 0xffff } else { (1u16 << cnt) - 1 };
            // SAFETY: the element is inside `C` and this thread's
            // (the caller's contract); the mask covers `cnt` lanes.
            unsafe {
                _mm512_mask_storeu_epi32(self.c.get().add(i * self.ldc + js).cast(), mask, y)
            };
        }
    }

    /// The sums requantized (one [`FloatRequant`] per row) into one-byte
    /// outputs, row stride `ldo`.
    pub(super) struct BytesOut<'a> {
        pub(super) out: crate::par::SendPtr<u8>,
        pub(super) ldo: usize,
        pub(super) rq: &'a [FloatRequant],
    }

    impl TileOut for BytesOut<'_> {
        type Row = Lanes16;
        #[inline(always)]
        unsafe fn row(&self, i: usize, bound: i64) -> Lanes16 {
            // SAFETY: the caller's CPU has AVX-512F.
            unsafe { Lanes16::new(&self.rq[i]).bounded(bound) }
        }
        #[inline(always)]
        unsafe fn put(&self, row: &Lanes16, i: usize, js: usize, y: __m512i, cnt: usize) {
            // SAFETY: the bytes are inside the output and this thread's
            // (the caller's contract).
            unsafe { row.store(y, self.out.get().add(i * self.ldo + js), cnt) };
        }
        #[inline(always)]
        fn f32_row(&self, i: usize, bound: i64) -> Option<F32Row> {
            F32Row::of(&self.rq[i], bound)
        }
        #[inline(always)]
        unsafe fn put_finished(&self, i: usize, js: usize, r: __m512i, cnt: usize) {
            // SAFETY: the bytes are inside the output and this thread's
            // (the caller's contract).
            unsafe { F32Row::store(r, self.out.get().add(i * self.ldo + js), cnt) };
        }
        #[inline(always)]
        unsafe fn put_run(
            &self,
            row: &Lanes16,
            i: usize,
            span: (usize, usize, usize),
            y: impl Fn(usize) -> __m512i,
        ) {
            // SAFETY: as `put`, for every vector of the run.
            unsafe { row.store_run(self.out.get().add(i * self.ldo), span, y) };
        }
    }

    /// The rows of `ow` bytes of `src` (rows of `wp ≥ ow`, the direct
    /// convolution's output on the padded width) back to back at `dst`
    /// ([`copy_runs`]: a row of 7 to 56 positions is one masked load and
    /// store, not a library call).
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW; `(src.len() / wp) · ow`
    /// bytes writable at `dst`, which `src` does not overlap.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn drop_padding(src: &[u8], (wp, ow): (usize, usize), dst: *mut u8) {
        debug_assert!(ow <= wp);
        // SAFETY: row y's ow bytes lie in `src` (ow ≤ wp) and at dst +
        // y·ow (the caller's contract); the caller's features.
        unsafe { copy_runs((src.as_ptr(), wp), (dst, ow), src.len() / wp, ow) };
    }

    /// `(A − za)·(B − zb)` into `out` (every row and column `0..n`).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` must take rows
    /// `0..m`, columns `0..n`, and no one else may write there meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemm<O: TileOut>(
        o: U8s8<'_, PackedI8>,
        out: &O,
        scratch: &mut super::Scratch,
    ) {
        let U8s8 {
            a,
            za,
            b,
            zb,
            dims: (_, _, n),
            ldb,
        } = o;
        if crate::isa() == crate::Isa::Amx && o.a.kq >= AMX_MIN_QUADS {
            // SAFETY: the AMX row: the features and the tiles; the
            // caller's output contract.
            return unsafe { gemm_amx(o, out, scratch) };
        }
        let (k, kq) = (a.k, a.kq);
        let np = n.div_ceil(L * NV) * L * NV;
        let super::Scratch {
            bp, col_sum, xq, ..
        } = scratch;
        // (the packed steps start on a cache line, so each vector of 16
        // columns is one line)
        let bp = crate::aligned::line_slice(bp, kq * np * 4);
        // SAFETY: the caller checked avx512f + avx512bw.
        unsafe { pack_b((b, ldb), k, n, np, bp) };
        let b_rows = BRows {
            bytes: &*bp,
            steps: Packed { step: np * 4 },
            last: kq.saturating_sub(1) * np * 4,
        };
        let (nm, tail) = tail_of(&b_rows, kq, n, xq);
        // SAFETY: the caller's features and output contract; every step
        // has np ≥ n columns in `bp`.
        unsafe { compute(a, (za, zb, k), &b_rows, np, (nm, tail), col_sum, out) };
    }

    /// The columns of `b` (`n` of them, `kq` steps) past the last full
    /// vector that the tiles leave to [`tail_rows`], when few and the
    /// reduction long (a vector of 16 columns would hold mostly padding;
    /// they cost a sum across the lanes and a store per row, which a
    /// short reduction does not repay): the columns the tiles take, and
    /// the tail, its quads side by side in `xq`, each padded with zeros to
    /// a multiple of 16 steps.
    fn tail_of<'x, S: Steps>(
        b: &BRows<'_, S>,
        kq: usize,
        n: usize,
        xq: &'x mut Vec<i32>,
    ) -> (usize, Option<Tail<'x>>) {
        let r = n % L;
        let tail = if n > L && r <= TAIL_MAX && kq * (L - r) > 640 * r {
            r
        } else {
            0
        };
        let nm = n - tail;
        #[cfg(test)]
        if tail > 0 {
            super::TAIL_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        let kqp = kq.div_ceil(L) * L;
        xq.clear();
        xq.resize(tail * kqp, 0);
        for c in 0..tail {
            for t in 0..kq {
                let q = &b.bytes[b.steps.at(t) + (nm + c) * 4..][..4];
                xq[c * kqp + t] = i32::from_le_bytes([q[0], q[1], q[2], q[3]]);
            }
        }
        let tail = (tail > 0).then_some(Tail {
            quads: &xq[..],
            kqp,
            w: tail,
        });
        (nm, tail)
    }

    /// The columns past the last full vector of 16 that [`gemm`] computes
    /// with the tiles of the last columns ([`tail_rows`]), where a vector
    /// of 16 columns would hold mostly padding.
    #[derive(Clone, Copy)]
    struct Tail<'a> {
        /// Column `c`'s quads at `c · kqp`, zero past `kq`.
        quads: &'a [i32],
        /// `kq` rounded up to a multiple of 16.
        kqp: usize,
        /// How many (1 to [`TAIL_MAX`]).
        w: usize,
    }

    /// Columns `n..n + W` of rows `i0..i0 + R` (the [`Tail`]), while
    /// the tile of those rows has just read them: each row's quads, 16
    /// a vector, against each column's, summed across the lanes
    /// ([`lane_sums`]), corrected and stored.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` takes columns
    /// `n..n + W` of those rows, written by no one else meanwhile.
    #[allow(clippy::needless_range_loop)]
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tail_rows<const R: usize, const W: usize, O: TileOut>(
        a: &PackedI8,
        i0: usize,
        (tail, n): (&Tail<'_>, usize),
        corr: &Corr<'_>,
        out: &O,
    ) {
        let kq = a.kq;
        assert!(i0 + R <= a.m && a.quads.len() >= a.m * kq && W <= tail.w && W <= 4);
        assert!(tail.quads.len() >= W * tail.kqp && tail.kqp >= kq);
        // (the tail's columns are `col_sum`'s n..n + W: it spans np ≥ n + 16)
        assert!(corr.col_sum.len() >= n + L);
        let mut acc = [[_mm512_setzero_si512(); W]; R];
        // SAFETY: row i0 starts inside `quads` (asserted above).
        let ap = unsafe { a.quads.as_ptr().add(i0 * kq) };
        for t in (0..kq).step_by(L) {
            // the last vector of a row masked to the row's steps
            let mask: __mmask16 = if t + L <= kq {
                0xffff
            } else {
                (1u16 << (kq - t)) - 1
            };
            let mut x = [_mm512_setzero_si512(); W];
            for (c, xc) in x.iter_mut().enumerate() {
                // SAFETY: column c has kqp ≥ t + 16 quads (asserted).
                *xc =
                    unsafe { _mm512_loadu_si512(tail.quads.as_ptr().add(c * tail.kqp + t).cast()) };
            }
            for r in 0..R {
                // SAFETY: the mask keeps the load inside row i0 + r's
                // kq quads.
                let w = unsafe { _mm512_maskz_loadu_epi32(mask, ap.add(r * kq + t).cast()) };
                for c in 0..W {
                    acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], x[c], w);
                }
            }
        }
        for (r, accr) in acc.iter().enumerate() {
            let i = i0 + r;
            let mut four = [_mm512_setzero_si512(); 4];
            four[..W].copy_from_slice(accr);
            if let Some(&(start, f)) = corr.lean.map(|l| &l[i]) {
                // C + bias: the row's start added (no zero point in A)
                let y = f.finish(_mm512_add_epi32(lane_sums(four), _mm512_set1_epi32(start)));
                // SAFETY: the caller's features and output contract, the
                // output that gave `f`.
                unsafe { out.put_finished(i, n, y, W) };
                continue;
            }
            let za = corr.za[i];
            // C = acc − zb·rowsum(i) − za(i)·colsum(j) + k·za(i)·zb
            let row_term = corr.row_term(a, i);
            let mut y = _mm512_add_epi32(lane_sums(four), _mm512_set1_epi32(row_term));
            if za != 0 {
                // SAFETY: col_sum has n + 16 values (asserted).
                let cs = unsafe { _mm512_loadu_si512(corr.col_sum.as_ptr().add(n).cast()) };
                y = _mm512_sub_epi32(y, _mm512_mullo_epi32(_mm512_set1_epi32(za), cs));
            }
            // SAFETY: the caller's features and output contract.
            unsafe {
                let row = out.row(i, corr.bound(a, i));
                out.put(&row, i, n, y, W);
            }
        }
    }

    /// The sums across the lanes of four vectors, in lanes 0 to 3 (the
    /// others hold partial sums): pairs interleaved and added within each
    /// 128-bit lane, then the four 128-bit lanes added.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn lane_sums(v: [__m512i; 4]) -> __m512i {
        // per 128-bit lane: [a0 + a2, b0 + b2, a1 + a3, b1 + b3]
        let pair =
            |a, b| _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
        let (s01, s23) = (pair(v[0], v[1]), pair(v[2], v[3]));
        // per 128-bit lane: each vector's sum of its four lanes there
        let t = _mm512_add_epi32(
            _mm512_unpacklo_epi64(s01, s23),
            _mm512_unpackhi_epi64(s01, s23),
        );
        let u = _mm512_add_epi32(t, _mm512_shuffle_i32x4::<0b01_00_11_10>(t, t));
        _mm512_add_epi32(u, _mm512_shuffle_i32x4::<0b10_11_00_01>(u, u))
    }

    /// The shared body of [`gemm`] and [`direct`]: the correction
    /// ([`correction`]), then the tiles of columns `0..n` (the steps of `b`
    /// readable over `np ≥ n` columns, a multiple of `L · NV`), divided
    /// between the intra-op threads, into `out`, and the `tail` columns
    /// `n..` with the tiles of the last columns ([`tail_rows`]); `k` is
    /// the reduction's true length (the zero-point correction's).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` must take rows
    /// `0..a.m`, columns `0..n` and the tail's, and no one else may write
    /// there meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn compute<'c, O: TileOut, S: Steps>(
        a: &PackedI8,
        (za, zb, k): (&'c [i32], i32, usize),
        b: &BRows<'_, S>,
        np: usize,
        (n, tail): (usize, Option<Tail<'_>>),
        col_sum: &'c mut Vec<i32>,
        out: &O,
    ) {
        let m = a.m;
        assert!(n + tail.map_or(0, |t| t.w) <= np);
        // SAFETY: the caller's features.
        let corr = unsafe { correction(a, (za, zb, k), b, np, col_sum) };
        // every tile the same whichever way the output is divided. (A
        // vpdpbusd does 64 multiply-adds to an FMA's 16: count a quarter of
        // the work against the hand-off cost.)
        let work = m * k * n / 4;
        LEAN_ROWS.with(|lean| {
            let mut lean = lean.borrow_mut();
            lean.clear();
            let all = (0..m).all(|i| {
                let f = out.f32_row(i, corr.bound(a, i)).filter(|_| corr.za[i] == 0);
                f.inspect(|f| lean.push((corr.row_term(a, i).wrapping_add(f.bias), *f)))
                    .is_some()
            });
            let c = &Corr {
                lean: all.then_some(&lean[..]),
                ..corr
            };
            divide((m, MR), (n, L * NV), work, |rows_, cols| {
                // SAFETY: the caller checked the CPU features and gave rows
                // 0..m, columns 0..n to this call; these are this block's
                // alone.
                unsafe { rows(a, b, (n, tail.as_ref()), c, out, rows_, cols) };
            });
        });
    }

    thread_local! {
        /// [`Corr::lean`]'s rows, kept from one product to the next (no
        /// allocation once it has held the most rows).
        static LEAN_ROWS: std::cell::RefCell<Vec<(i32, F32Row)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    /// The zero-point correction of `A` with the `B` of `b` (the steps
    /// readable over `np` columns, a multiple of `L · NV`): `B`'s column
    /// sums when a row has a zero point, over the `np` columns; `k` is the
    /// reduction's true length.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn correction<'c, S: Steps>(
        a: &PackedI8,
        (za, zb, k): (&'c [i32], i32, usize),
        b: &BRows<'_, S>,
        np: usize,
        col_sum: &'c mut Vec<i32>,
    ) -> Corr<'c> {
        let (m, kq) = (a.m, a.kq);
        assert!(np.is_multiple_of(L * NV));
        assert!(kq == 0 || b.last + np * 4 <= b.bytes.len());
        col_sum.clear();
        col_sum.resize(np, 0);
        if za[..m].iter().any(|&z| z != 0) {
            let ones = _mm512_set1_epi32(0x0101_0101);
            for j in (0..np).step_by(L) {
                let mut s = _mm512_setzero_si512();
                for t in 0..kq {
                    // SAFETY: step t has np * 4 bytes from its start
                    // (asserted above), j + 16 <= np.
                    let x = unsafe {
                        _mm512_loadu_si512(b.bytes.as_ptr().add(b.steps.at(t) + j * 4) as *const _)
                    };
                    s = _mm512_dpbusd_epi32(s, x, ones);
                }
                // SAFETY: col_sum has np >= j + 16 elements.
                unsafe { _mm512_storeu_si512(col_sum.as_mut_ptr().add(j) as *mut _, s) };
            }
        }
        let b_dev = i64::from(zb).abs().max(i64::from(255 - zb).abs());
        Corr {
            za,
            zb,
            k,
            col_sum: &col_sum[..],
            b_dev,
            lean: None,
        }
    }

    /// A convolution of dilation 1 (any stride: see the module) as an implicit GEMM
    /// ([`crate::int8::direct`]): `B`'s step `t` is the image's bytes from
    /// `offs[t]` (a tap's offset in a channel quad's padded plane), its
    /// `n` columns the output positions on the padded width; `k` is the
    /// true reduction length (the padded channels have zero weights and
    /// zero bytes).
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` must take rows
    /// `0..a.m`, columns `0..n`, and no one else may write there
    /// meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn direct<O: TileOut>(
        a: &PackedI8,
        (za, zb, k): (&[i32], i32, usize),
        (img, offs): (&[u8], &[usize]),
        n: usize,
        out: &O,
        col_sum: &mut Vec<i32>,
    ) {
        let np = n.div_ceil(L * NV) * L * NV;
        let b = BRows::new(img, offs, a.kq, np);
        if crate::isa() == crate::Isa::Amx {
            if let Some(src) = image_tiles(img, offs, a.kq) {
                // SAFETY: the AMX row: the features and the tiles; every
                // tile of the np columns lies inside the image (`BRows::new`
                // checked the largest step; a tile's steps are among them).
                unsafe {
                    let corr = correction(a, (za, zb, k), &b, np, col_sum);
                    split_amx(a, &src, &corr, out, n);
                }
                return;
            }
        }
        // SAFETY: the caller's features and output contract.
        unsafe { compute(a, (za, zb, k), &b, np, (n, None), col_sum, out) };
    }

    /// [`direct`] on the output's own columns: `B`'s step `t` is `bytes`
    /// from `offs[t]`, its `n` columns side by side (the output positions
    /// of the block, each step's row-compact plane: see
    /// [`super::direct_exact_on`]), readable over `n` rounded up to a
    /// multiple of `L · NV`.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `out` must take rows
    /// `0..a.m`, columns `0..n`, and no one else may write there
    /// meanwhile.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn direct_exact<O: TileOut>(
        a: &PackedI8,
        zp: (&[i32], i32, usize),
        (bytes, offs): (&[u8], &[usize]),
        n: usize,
        out: &O,
        (col_sum, xq): (&mut Vec<i32>, &mut Vec<i32>),
    ) {
        let np = n.div_ceil(L * NV) * L * NV;
        let b = BRows::new(bytes, offs, a.kq, np);
        let (nm, tail) = tail_of(&b, a.kq, n, xq);
        // SAFETY: the caller's features and output contract; `BRows::new`
        // checked that every step's np columns lie inside `bytes`.
        unsafe { compute(a, zp, &b, np, (nm, tail), col_sum, out) };
    }

    /// Copies `rows` runs of `len` bytes, the `r`-th from `src + r·sstep`
    /// to `dst + r·dstep` (64 bytes a move, the rest of a run by one
    /// masked move).
    ///
    /// # Safety
    /// The CPU must support AVX-512F and BW; every run lies inside its
    /// buffer, and the two do not overlap.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn copy_runs(
        (src, sstep): (*const u8, usize),
        (dst, dstep): (*mut u8, usize),
        rows: usize,
        len: usize,
    ) {
        for r in 0..rows {
            // SAFETY: bytes 0..len of run r of each buffer (the caller's
            // contract).
            unsafe {
                let (s, d) = (src.add(r * sstep), dst.add(r * dstep));
                let mut j = 0;
                while j + 64 <= len {
                    _mm512_storeu_si512(d.add(j).cast(), _mm512_loadu_si512(s.add(j).cast()));
                    j += 64;
                }
                if j < len {
                    let mask = u64::MAX >> (64 - (len - j));
                    let v = _mm512_maskz_loadu_epi8(mask, s.add(j).cast());
                    _mm512_mask_storeu_epi8(d.add(j).cast(), mask, v);
                }
            }
        }
    }

    /// The row-compact planes of [`super::direct_exact_on`] for output
    /// rows `oy0..` gathered from the image itself, `x` (`[c][h][w]`
    /// bytes), with no quad image between: plane `(q, a, kj)` (at
    /// `((q·s + a)·kw + kj)·plane` bytes of `bp`) holds, at row `y` and
    /// column `x`, the padded image's pixel `(s·(oy0 + y) + a, s·x + kj)`
    /// of the four channels of quad `q`, for `rows` rows of `ow` pixels
    /// (the row phases `a < kh` that taps read):
    /// `pad` outside the image for the true channels, zero for the missing
    /// channels of the last quad (the bytes [`copy_runs`] takes from
    /// [`crate::int8::direct::quad_image`]).
    ///
    /// Per plane row and 16 output pixels, each channel's 64 image columns
    /// from `s·x0 − left` are loaded once (the columns outside the image
    /// masked to `pad`); every kernel column's 16 pixels are then one
    /// byte permute across two channels' registers (`vpermt2b`: pixel `p`,
    /// channel `r` is column `s·p + kj` of channel `r`, `+ 64` for the odd
    /// channel of a pair), the two pairs blended and stored, masked to the
    /// row's pixels.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VBMI; `15·s + kw ≤ 64`; `x`
    /// holds `c·h·w` bytes; the planes lie inside the buffer at `bp`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    pub(super) unsafe fn planar_planes(
        x: &[u8],
        g: &crate::int8::direct::DirectGeom,
        (oy0, rows): (usize, usize),
        pad: u8,
        (bp, plane): (*mut u8, usize),
    ) {
        let (c, h, w, s, kw, ow) = (g.c, g.h, g.w, g.stride, g.kw, g.ow);
        debug_assert!(15 * s + kw <= 64 && x.len() >= c * h * w);
        // byte 4p + r: column s·p of channel r's window, in the first
        // register of its pair (r even) or the second (r odd)
        let base: [u8; 64] = std::array::from_fn(|i| ((i / 4) * s + (i % 2) * 64) as u8);
        // SAFETY: 64 bytes.
        let base = unsafe { _mm512_loadu_si512(base.as_ptr().cast()) };
        // the bytes of channels 2 and 3 of each pixel
        let odd_pair: __mmask64 = 0xcccc_cccc_cccc_cccc;
        let padv = _mm512_set1_epi8(pad as i8);
        let vectors = ow.div_ceil(L);
        for q in 0..g.quads() {
            let real = (c - 4 * q).min(4);
            let mut border = [0u8; 4];
            border[..real].fill(pad);
            let border = _mm512_set1_epi32(i32::from_le_bytes(border));
            // (the row phases a tap reads, `ki mod s` for `ki < kh`)
            for a in 0..s.min(g.kh) {
                for y in 0..rows {
                    // the image row, `h` or more where it is padding
                    let iy = (s * (oy0 + y) + a).wrapping_sub(g.top);
                    for v in 0..vectors {
                        let x0 = v * L;
                        let px = (ow - x0).min(L);
                        let store: __mmask64 = u64::MAX >> (64 - 4 * px);
                        let at = (y * ow + x0) * 4;
                        let dst = |kj: usize| {
                            // SAFETY: the plane of (q, a, kj) lies inside
                            // the buffer and row y's pixels x0.. inside it
                            // (the caller's contract).
                            unsafe { bp.add(((q * s + a) * kw + kj) * plane + at) }
                        };
                        if iy >= h {
                            for kj in 0..kw {
                                // SAFETY: as `dst`, for `px` pixels.
                                unsafe { _mm512_mask_storeu_epi8(dst(kj).cast(), store, border) };
                            }
                            continue;
                        }
                        // the window's first image column, and its
                        // columns inside the image: lo..hi
                        let c0 = (s * x0) as isize - g.left as isize;
                        let lo = (-c0).clamp(0, 64) as u32;
                        let hi = (w as isize - c0).clamp(0, 64) as u32;
                        let inside: __mmask64 = if hi > lo {
                            (u64::MAX >> (64 - hi)) & (u64::MAX << lo)
                        } else {
                            0
                        };
                        let chan = |r: usize| {
                            if r >= real {
                                return _mm512_setzero_si512();
                            }
                            let row = ((4 * q + r) * h + iy) * w;
                            // SAFETY: the masked bytes are columns lo..hi
                            // of the row, inside `x` (the masked-off
                            // bytes are not read: they fault on no
                            // address).
                            unsafe {
                                _mm512_mask_loadu_epi8(
                                    padv,
                                    inside,
                                    x.as_ptr().add(row).wrapping_offset(c0).cast(),
                                )
                            }
                        };
                        let (r0, r1, r2, r3) = (chan(0), chan(1), chan(2), chan(3));
                        for kj in 0..kw {
                            let idx = _mm512_add_epi8(base, _mm512_set1_epi8(kj as i8));
                            let lo2 = _mm512_permutex2var_epi8(r0, idx, r1);
                            let hi2 = _mm512_permutex2var_epi8(r2, idx, r3);
                            let px4 = _mm512_mask_blend_epi8(odd_pair, lo2, hi2);
                            // SAFETY: as `dst`, for `px` pixels.
                            unsafe { _mm512_mask_storeu_epi8(dst(kj).cast(), store, px4) };
                        }
                    }
                }
            }
        }
    }

    /// Columns past the last full vector of 16 that [`gemm`] computes
    /// apart ([`tail_rows`]) rather than in a vector of 16: at most this
    /// many.
    const TAIL_MAX: usize = 4;

    /// Columns of `B` up to which [`gemv`] runs instead of [`gemm`]
    /// (whose register tile spans 16 columns at least: one column, a
    /// classifier head at batch 1, would use one lane in 16).
    pub(super) const GEMV_MAX_N: usize = 4;

    /// `A` as [`PackedI8::row_blocks`] says: blocks of 16 rows, per step
    /// `t` of `k` the 16 rows' quads side by side.
    fn row_blocks(a: &PackedI8) -> &[i32] {
        a.row_blocks.get_or_init(|| {
            let (m, kq) = (a.m, a.kq);
            let mut v = vec![0i32; m.div_ceil(L) * kq * L];
            for i in 0..m {
                let (blk, r) = (i / L, i % L);
                for t in 0..kq {
                    v[(blk * kq + t) * L + r] = a.quads[i * kq + t];
                }
            }
            v
        })
    }

    /// `(A − za)·(B − zb)` into `C` (row stride `ldc`) for a `B` of few
    /// columns (`n ≤` [`GEMV_MAX_N`]), all columns in one pass over `A` ([`columns`]):
    /// the same exact sums as [`gemm`]. `xq` is scratch.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; `c` holds `m` rows of
    /// stride `ldc ≥ n`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn gemv(o: U8s8<'_, PackedI8>, c: &mut [i32], ldc: usize, xq: &mut Vec<i32>) {
        let n = o.dims.2;
        let cp = crate::par::SendPtr(c.as_mut_ptr());
        if n == 0 {
            return;
        }
        // SAFETY: the caller's features; row i < m, column c < n ≤ ldc
        // (the caller's contract), each row written by one block.
        unsafe { columns(&o, 0, n, xq, |i, c, v| *cp.get().add(i * ldc + c) = v) };
    }

    /// Columns `j0..j0 + w` (`w` from 1 to 4) of `(A − za)·(B − zb)`,
    /// in one pass over `A`: [`columns_of`] with its unrolling for `w`.
    ///
    /// # Safety
    /// As [`columns_of`]; `1 <= w <= 4`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn columns(
        o: &U8s8<'_, PackedI8>,
        j0: usize,
        w: usize,
        xq: &mut Vec<i32>,
        emit: impl Fn(usize, usize, i32) + Sync,
    ) {
        // SAFETY: forwarded contract. (Independent sums per column: `U`
        // of them for one column, where the dependency chain of one
        // accumulator would bound the loop by latency; the columns are
        // independent chains themselves.)
        unsafe {
            match w {
                1 => columns_of::<1, 4>(o, j0, xq, emit),
                2 => columns_of::<2, 2>(o, j0, xq, emit),
                3 => columns_of::<3, 2>(o, j0, xq, emit),
                _ => columns_of::<4, 1>(o, j0, xq, emit),
            }
        }
    }

    /// Columns `j0..j0 + C` of `(A − za)·(B − zb)`, handed row by row to
    /// `emit(i, c, sum)` (column `j0 + c`; rows in blocks of 16 on the
    /// intra-op threads): each column's quads broadcast against 16 rows
    /// of `A` per vector (`vpdpbusd` with the u8 operand broadcast, `A` as
    /// [`row_blocks`]), every vector of `A` loaded once for the `C`
    /// columns, in `U` independent sums per column. `xq` is scratch for
    /// the columns' quads.
    ///
    /// # Safety
    /// The CPU must support AVX-512F, BW and VNNI; columns `j0..j0 + C`
    /// exist; `emit` may be called from several threads at once, for
    /// different rows.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn columns_of<const C: usize, const U: usize>(
        o: &U8s8<'_, PackedI8>,
        j0: usize,
        xq: &mut Vec<i32>,
        emit: impl Fn(usize, usize, i32) + Sync,
    ) {
        let U8s8 {
            a,
            za,
            b,
            zb,
            dims: (_, _, n),
            ldb,
        } = *o;
        let (m, k, kq) = (a.m, a.k, a.kq);
        assert!(j0 + C <= n && ldb >= n);
        let blocks = row_blocks(a);
        // the columns as quads (zero padded), column c at c * kq, and
        // their sums
        xq.clear();
        xq.resize(C * kq, 0);
        let mut col_sum = [0i32; C];
        for p in 0..k {
            for (c, cs) in col_sum.iter_mut().enumerate() {
                let v = b[p * ldb + j0 + c];
                *cs += i32::from(v);
                xq[c * kq + p / 4] |= i32::from(v) << (8 * (p % 4));
            }
        }
        let xq = &xq[..];
        crate::par::split(m.div_ceil(L), 1, C * m * k / 4, |b0, b1| {
            for blk in b0..b1 {
                let w = &blocks[blk * kq * L..(blk + 1) * kq * L];
                let mut acc = [[_mm512_setzero_si512(); C]; U];
                let mut t = 0;
                while t + U <= kq {
                    for (u, accu) in acc.iter_mut().enumerate() {
                        // SAFETY: step t + u < kq of this block.
                        let wv =
                            unsafe { _mm512_loadu_si512(w.as_ptr().add((t + u) * L) as *const _) };
                        for (c, s) in accu.iter_mut().enumerate() {
                            let x = _mm512_set1_epi32(xq[c * kq + t + u]);
                            *s = _mm512_dpbusd_epi32(*s, x, wv);
                        }
                    }
                    t += U;
                }
                while t < kq {
                    // SAFETY: as above.
                    let wv = unsafe { _mm512_loadu_si512(w.as_ptr().add(t * L) as *const _) };
                    for (c, s) in acc[0].iter_mut().enumerate() {
                        *s = _mm512_dpbusd_epi32(*s, _mm512_set1_epi32(xq[c * kq + t]), wv);
                    }
                    t += 1;
                }
                let rows = blk * L..((blk + 1) * L).min(m);
                for c in 0..C {
                    let mut sums = acc[0][c];
                    for accu in &acc[1..] {
                        sums = _mm512_add_epi32(sums, accu[c]);
                    }
                    let mut lanes = [0i32; L];
                    // SAFETY: `lanes` holds 16 i32.
                    unsafe { _mm512_storeu_si512(lanes.as_mut_ptr() as *mut _, sums) };
                    for (i, &s) in rows.clone().zip(&lanes) {
                        // C = acc − zb·rowsum(i) − za(i)·colsum + k·za(i)·zb
                        let v = s
                            .wrapping_add(row_term(k, (za[i], zb), a.row_sum[i]))
                            .wrapping_sub(za[i].wrapping_mul(col_sum[c]));
                        emit(i, c, v);
                    }
                }
            }
        });
    }

    /// Rows `r0..r1`, columns `c0..c1` of the output (`c0` a multiple of
    /// `L · NV`; `c1` one too, or `n`), and where `c1` is `n` the `tail`
    /// columns `n..` of those rows, each tile's rows right after their
    /// last tile (`A`'s rows still in cache).
    #[allow(clippy::too_many_arguments)]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows<O: TileOut, S: Steps>(
        a: &PackedI8,
        b: &BRows<'_, S>,
        (n, tail): (usize, Option<&Tail<'_>>),
        corr: &Corr<'_>,
        out: &O,
        (r0, r1): (usize, usize),
        (c0, c1): (usize, usize),
    ) {
        debug_assert!(c0 % (L * NV) == 0 && (c1 % (L * NV) == 0 || c1 == n) && c1 <= n);
        for j0 in (c0..c1).step_by(L * NV) {
            // the tail with the last tiles of the output's columns
            let tail = tail.filter(|_| c1 == n && j0 + L * NV >= n);
            let mut i = r0;
            while i + MR <= r1 {
                // SAFETY: features checked by the caller; every tile reads
                // NV vectors inside B's padded row; the tail's columns are
                // this block's (its last columns are).
                unsafe { strip::<MR, O, S>(a, i, b, (j0, n), tail, corr, out) };
                i += MR;
            }
            // the last rows (fewer than MR) in strips of 4, 2 and 1
            if i + 4 <= r1 {
                // SAFETY: as above.
                unsafe { strip::<4, O, S>(a, i, b, (j0, n), tail, corr, out) };
                i += 4;
            }
            if i + 2 <= r1 {
                // SAFETY: as above.
                unsafe { strip::<2, O, S>(a, i, b, (j0, n), tail, corr, out) };
                i += 2;
            }
            if i < r1 {
                // SAFETY: as above.
                unsafe { strip::<1, O, S>(a, i, b, (j0, n), tail, corr, out) };
            }
        }
    }

    /// The tile of rows `i0..i0 + R` and columns `j0..` (as many vectors
    /// as the columns left, at most NV) and, with `tail`, the tail's
    /// columns of those rows.
    ///
    /// # Safety
    /// As [`tile`] and [`tails`].
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn strip<const R: usize, O: TileOut, S: Steps>(
        a: &PackedI8,
        i0: usize,
        b: &BRows<'_, S>,
        (j0, n): (usize, usize),
        tail: Option<&Tail<'_>>,
        corr: &Corr<'_>,
        out: &O,
    ) {
        // SAFETY: the caller's contract.
        unsafe {
            match (n - j0).div_ceil(L) {
                1 => tile::<R, 1, O, S>(a, i0, b, j0, n, corr, out),
                2 => tile::<R, 2, O, S>(a, i0, b, j0, n, corr, out),
                3 => tile::<R, 3, O, S>(a, i0, b, j0, n, corr, out),
                _ => tile::<R, NV, O, S>(a, i0, b, j0, n, corr, out),
            }
            if let Some(t) = tail {
                tails::<R, O>(a, i0, (t, n), corr, out);
            }
        }
    }

    /// [`tail_rows`] with its unrolling for the tail's width.
    ///
    /// # Safety
    /// As [`tail_rows`].
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn tails<const R: usize, O: TileOut>(
        a: &PackedI8,
        i0: usize,
        (tail, n): (&Tail<'_>, usize),
        corr: &Corr<'_>,
        out: &O,
    ) {
        // SAFETY: forwarded contract.
        unsafe {
            match tail.w {
                1 => tail_rows::<R, 1, O>(a, i0, (tail, n), corr, out),
                2 => tail_rows::<R, 2, O>(a, i0, (tail, n), corr, out),
                3 => tail_rows::<R, 3, O>(a, i0, (tail, n), corr, out),
                _ => tail_rows::<R, 4, O>(a, i0, (tail, n), corr, out),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int8::packed::backend_tests::{self, check, exact};
    use proptest::prelude::*;
    use qport_core::arith::{ArithProfile, FloatRequant, Requantizer};

    /// The float forms of `m` requantizers (`f32-rne`, bias `i`, scale
    /// `step · (1 + i)` for row `i`, to u8 around 100) and the bytes they
    /// make of the exact sums of `(A − za)·(B − zb)`: what the requantizing
    /// epilogue must write.
    fn requantized(
        (a, za): (&[i8], &[i32]),
        (b, zb): (&[u8], i32),
        (m, k, n): (usize, usize, usize),
        step: f64,
    ) -> (Vec<FloatRequant>, Vec<u8>) {
        requantized_as(("f32-rne", 0.0), (a, za), (b, zb), (m, k, n), step)
    }

    /// [`requantized`] under `profile`'s float form (`exact`: the f64
    /// one), every bias raised by `bias` (near `i32::MAX`, the f32 form's
    /// stores check for overflow).
    fn requantized_as(
        (profile, bias): (&str, f64),
        (a, za): (&[i8], &[i32]),
        (b, zb): (&[u8], i32),
        (m, k, n): (usize, usize, usize),
        step: f64,
    ) -> (Vec<FloatRequant>, Vec<u8>) {
        let p = ArithProfile::preset(profile).unwrap();
        let rq: Vec<Requantizer> = (0..m)
            .map(|i| Requantizer::new(bias + i as f64, step * (1.0 + i as f64), 100, 0, 255, &p))
            .collect();
        let sums = exact((a, za), (b, zb), (m, k, n), n);
        let mut want = vec![0u8; m * n];
        crate::int8::elementwise::requantize(&rq, &sums, n, &mut want);
        (rq.iter().map(|r| r.float_form().unwrap()).collect(), want)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn matches_the_exact_reference(
            m in 1usize..11, k in 1usize..70, n in 1usize..150,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 10 * 70),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 70 * 150),
            za in proptest::collection::vec(-128i32..128, 10), zb in 0i32..256,
            symmetric in any::<bool>(),
        ) {
            let (a, b) = (&a[..m * k], &b[..k * n]);
            // symmetric weights (every za 0) skip the column sums
            let za: Vec<i32> = if symmetric { vec![0; 10] } else { za };
            // untouched where it does not run: no VNNI here (or the
            // portable path is forced)
            check(gemm_u8s8, (a, &za[..m]), (b, zb), (m, k, n), n);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// The matrix-vector path (`n ≤ GEMV_MAX_N`: several blocks of
        /// 16 rows and a partial one, `k` across the unrolled steps and
        /// their remainder, a padded `C`) gives the exact sums.
        #[test]
        fn few_columns_match_the_exact_reference(
            m in 1usize..70, k in 1usize..90, n in 1usize..6, pad in 0usize..3,
            a in proptest::collection::vec(prop_oneof![Just(-128i8), Just(127i8), any::<i8>()], 70 * 90),
            b in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 90 * 6),
            za in proptest::collection::vec(-128i32..128, 70), zb in 0i32..256,
            symmetric in any::<bool>(),
        ) {
            let (a, b) = (&a[..m * k], &b[..k * n]);
            let za: Vec<i32> = if symmetric { vec![0; 70] } else { za };
            check(gemm_u8s8, (a, &za[..m]), (b, zb), (m, k, n), n + pad);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// A long reduction with 1 to 4 columns past the last full vector
        /// (those columns computed apart, with the tiles of the last
        /// columns), short and long: the exact sums, as i32 and
        /// requantized in the epilogue.
        #[test]
        fn tail_columns_match_the_exact_reference(
            m in 1usize..40, k in prop_oneof![60usize..140, 860usize..1000],
            n in prop_oneof![17usize..21, Just(33), Just(49), Just(52), Just(196)],
            seed in any::<u64>(), zb in 0i32..256, symmetric in any::<bool>(),
        ) {
            let mut s = seed | 1;
            let mut next = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let a: Vec<i8> = (0..m * k).map(|_| next() as i8).collect();
            let b: Vec<u8> = (0..k * n).map(|_| next() as u8).collect();
            let za: Vec<i32> = (0..m).map(|i| if symmetric { 0 } else { (next() % 256) as i32 - 128 + i as i32 % 2 }).collect();
            let za: Vec<i32> = za.iter().map(|&z| z.clamp(-128, 127)).collect();
            check(gemm_u8s8, (&a, &za), (&b, zb), (m, k, n), n);
            // the requantizing epilogue
            let (frq, want) = requantized((&a, &za), (&b, zb), (m, k, n), 1e-5);
            let packed = PackedI8::new(&a, m, k);
            let mut got = vec![7u8; m * n];
            let ran = std::sync::atomic::AtomicBool::new(false);
            crate::par::split_columns(&mut got, n, &[0, n], 0, |_, mut blk| {
                let r = crate::qgemm::gemm_u8s8_requant(&packed, &za, (&b, n), zb, &frq, &mut blk, 0);
                ran.store(r, std::sync::atomic::Ordering::Relaxed);
            });
            if ran.load(std::sync::atomic::Ordering::Relaxed) {
                prop_assert_eq!(got, want);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Shapes across the AMX blocks (several blocks of 32 rows and a
        /// partial one, `k` over one or more passes of 16 quads and a
        /// partial one, or too short for the tiles; strips of columns and a
        /// partial one): the exact
        /// sums, and the requantized bytes of the epilogue (the f32 form,
        /// with and without its overflow check, and the f64 one, from `B`
        /// read in place inside a wider matrix), on the tiles where the
        /// process holds them (the path is checked to run) and on VNNI
        /// alone.
        #[test]
        fn amx_blocks_match_the_exact_reference(
            m in 1usize..75, k in 1usize..300, n in 5usize..300,
            seed in any::<u64>(), zb in 0i32..256, symmetric in any::<bool>(),
            form in prop_oneof![
                Just(("f32-rne", 0.0)),
                Just(("exact", 0.0)),
                Just(("f32-rne", f64::from(i32::MAX) - 80.0)),
            ],
        ) {
            let mut s = seed | 1;
            let mut next = move || { s ^= s << 13; s ^= s >> 7; s ^= s << 17; s };
            let a: Vec<i8> = (0..m * k).map(|_| next() as i8).collect();
            let b: Vec<u8> = (0..k * n).map(|_| next() as u8).collect();
            let za: Vec<i32> = (0..m).map(|_| if symmetric { 0 } else { (next() % 256) as i32 - 128 }).collect();
            let (frq, want) = requantized_as(form, (&a, &za), (&b, zb), (m, k, n), 1e-4);
            let packed = PackedI8::new(&a, m, k);
            // the fused path reads B in place: its rows at column 2 of a
            // matrix 5 columns wider
            let ldb = n + 5;
            let mut wide = vec![0xA5u8; k * ldb];
            for (p, row) in b.chunks_exact(n).enumerate() {
                wide[p * ldb + 2..p * ldb + 2 + n].copy_from_slice(row);
            }
            for isa in [crate::Isa::Amx, crate::Isa::Avx512Vnni] {
                if !isa.supported() {
                    continue;
                }
                crate::with_isa(isa, || -> Result<(), TestCaseError> {
                    let before = AMX_RUNS.load(std::sync::atomic::Ordering::Relaxed);
                    prop_assert!(check(gemm_u8s8, (&a, &za), (&b, zb), (m, k, n), n + 1));
                    let mut got = vec![7u8; m * n];
                    crate::par::split_columns(&mut got, n, &[0, n], 0, |_, mut blk| {
                        assert!(crate::qgemm::gemm_u8s8_requant(&packed, &za, (&wide[2..], ldb), zb, &frq, &mut blk, 0));
                    });
                    prop_assert_eq!(&got, &want);
                    let ran = AMX_RUNS.load(std::sync::atomic::Ordering::Relaxed) > before;
                    // (reductions the tiles take: AMX_MIN_QUADS)
                    if isa == crate::Isa::Amx && k.div_ceil(4) >= 32 {
                        prop_assert!(ran, "the AMX path did not run");
                    }
                    Ok(())
                })?;
            }
        }
    }

    #[test]
    fn intra_op_threads_give_the_same_sums() {
        let _g = crate::test_lock();
        // above 4 x par::MIN_WORK, odd sizes; rows split between the
        // threads, and (12 rows: 2 blocks of MR, fewer than two a thread
        // from 2 threads up) panels of columns
        for (m, k, n) in [(70, 600, 250), (12, 3000, 300)] {
            let a: Vec<i8> = (0..m * k).map(|i| (i * 37 % 256) as u8 as i8).collect();
            let b: Vec<u8> = (0..k * n).map(|i| (i * 101 % 256) as u8).collect();
            let za: Vec<i32> = (0..m as i32).map(|i| i % 5 - 2).collect();
            let want = exact((&a, &za), (&b, 9), (m, k, n), n);
            // on the tiles where the process holds them, and on VNNI alone
            let rows = [crate::Isa::Amx, crate::Isa::Avx512Vnni];
            for (isa, t) in rows.iter().flat_map(|&i| [2, 3, 8, 16].map(|t| (i, t))) {
                if !isa.supported() {
                    continue;
                }
                crate::par::set_threads(t);
                let before = crate::par::parallel_splits();
                let mut got = vec![0i32; m * n];
                let ran =
                    crate::with_isa(isa, || gemm_u8s8(&a, &za, &b, 9, (m, k, n), &mut got, n));
                let split = crate::par::parallel_splits() > before;
                // and the matrix-vector path (one column)
                let mut col = vec![0i32; m];
                crate::with_isa(isa, || {
                    gemm_u8s8(&a, &za, &b[..k], 9, (m, k, 1), &mut col, 1)
                });
                crate::par::set_threads(1);
                if ran {
                    assert!(
                        split,
                        "{m}x{k}x{n}, {t} threads, {isa}: nothing ran in parallel"
                    );
                    assert_eq!(got, want, "{m}x{k}x{n}, {t} threads, {isa}");
                    assert_eq!(
                        col,
                        exact((&a, &za), (&b[..k], 9), (m, k, 1), 1),
                        "{t} threads"
                    );
                }
            }
        }
    }

    #[test]
    fn reports_whether_it_ran() {
        backend_tests::reports_whether_it_ran(gemm_u8s8, available);
    }
}
