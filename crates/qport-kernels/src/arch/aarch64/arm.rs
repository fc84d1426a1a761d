//! Exact u8×s8 integer GEMM on Arm (aarch64): the Arm counterpart of
//! the x86-64 VNNI kernel, with the contract of [`crate::qgemm`], checked bit for bit against
//! [`crate::igemm::igemm`] by property tests.
//!
//! Two kernels, chosen at run time:
//!
//! - `sdot` (the dot-product extension, Armv8.2+ and most Armv8.4+ cores):
//!   each instruction multiplies four signed bytes of `A` by four signed
//!   bytes of `B` and adds the four products to an i32 lane without
//!   saturation. It is emitted with `asm!` (the `vdotq_s32` intrinsic is
//!   not stable Rust).
//! - `neon` (every aarch64 core): `smull` multiplies signed bytes into i16
//!   (every product of two i8 fits), and `sadalp` adds adjacent pairs of
//!   those products into i32 lanes straight away, before two products could
//!   overflow i16.
//!
//! Both are signed × signed, so the unsigned `B` is shifted into i8 by
//! flipping its top bit: `b ^ 0x80 == b − 128` as an i8, and with
//! `zb' = zb − 128`, `b − zb == (b ^ 0x80) − zb'` exactly. `B` is packed in
//! panels of 16 columns, each column's four consecutive `k` values adjacent
//! (`[n/16][k/4][16][4]`, zero padded), `A` in blocks of four rows, each
//! row's four consecutive `k` values adjacent (`[m/4][k/4][4][4]`), and a
//! 4 × 16 block of `C` is accumulated in sixteen vector registers. Zero
//! points are corrected with row and column sums:
//!
//! ```text
//! C[i][j] = Σ_p A[i][p]·B'[p][j] − zb'·Σ_p A[i][p] − za(i)·Σ_p B'[p][j] + k·za(i)·zb'
//! ```
//!
//! [`gemm_u8s8`] returns `false` (and leaves `c` alone) on other
//! architectures, when the portable path is forced
//! ([`crate::force_generic`]), or when `k` exceeds [`crate::int8::MAX_K`];
//! callers then use `igemm`. [`kernel_name`] says which kernel runs.

/// The kernel [`gemm_u8s8`] runs on this thread: `"sdot"` (aarch64 with
/// the dot-product extension), `"neon"` (other aarch64 CPUs) or `"none"`
/// (other architectures, or the portable path forced by
/// [`crate::force_generic`]).
pub fn kernel_name() -> &'static str {
    #[cfg(target_arch = "aarch64")]
    {
        match imp::detect() {
            Some(imp::Path::Sdot) => "sdot",
            Some(imp::Path::Neon) => "neon",
            None => "none",
        }
    }
    #[cfg(not(target_arch = "aarch64"))]
    {
        "none"
    }
}

use crate::int8::packed::gemm_u8s8_entry;

/// True when [`gemm_u8s8`] runs an Arm kernel on this thread (see
/// [`kernel_name`]).
pub fn available() -> bool {
    kernel_name() != "none"
}

gemm_u8s8_entry! {
    /// `C = (A − za) · (B − zb)` exactly, `A` i8 `m × k` row-major with one zero
    /// point per row (`za.len() >= m`), `B` u8 `k × n` row-major with zero point
    /// `zb`, `C` row-major with row stride `ldc` (overwritten). Returns `false`
    /// without touching `c` when no Arm kernel can run (see the module docs).
    /// The contract of [`crate::qgemm::gemm_u8s8`] on unpacked `A`.
    ///
    /// # Panics
    /// When a slice is shorter than its shape says.
    on "aarch64" => imp::detect().map(|path| {
        move |o, c: &mut [i32], ldc| {
            // SAFETY: `detect` checked NEON (and, for `Sdot`, the
            // dot-product extension).
            unsafe { imp::gemm(path, o, c, ldc) }
        }
    })
}

#[cfg(target_arch = "aarch64")]
mod imp {
    use crate::int8::packed::U8s8;
    use std::arch::aarch64::*;
    use std::arch::asm;

    /// Rows of `C` per register block.
    const MR: usize = 4;
    /// Columns of `C` per register block (four vectors of four i32).
    const NR: usize = 16;

    /// A 4 × 16 block of i32 sums: `[row][column / 4]`.
    type Block = [[int32x4_t; 4]; MR];

    /// Which Arm kernel runs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(super) enum Path {
        /// The dot-product extension (`sdot`).
        Sdot,
        /// Plain NEON (`smull` + `sadalp`).
        Neon,
    }

    /// The kernel for this CPU and thread, `None` when the portable path is
    /// forced or NEON is missing. Big-endian aarch64 is left to the portable
    /// path: the packing below assumes little-endian lanes.
    pub(super) fn detect() -> Option<Path> {
        match crate::isa() {
            crate::Isa::Dotprod => Some(Path::Sdot),
            crate::Isa::Neon => Some(Path::Neon),
            _ => None,
        }
    }

    /// Operands packed for the register blocks, with the zero-point
    /// corrections.
    struct Packed {
        /// `k / 4`, rounded up.
        kq: usize,
        /// `A` as `[m/4][kq][4 rows][4]`.
        ap: Vec<i8>,
        /// `B ^ 0x80` as `[n/16][kq][16 columns][4]`.
        bp: Vec<i8>,
        /// Per row: `k·za(i)·zb' − zb'·Σ_p A[i][p]` (wrapping).
        row_corr: Vec<i32>,
        /// Per column (padded to a multiple of 16 with zeros): `Σ_p B'[p][j]`.
        col_sum: Vec<i32>,
    }

    fn pack(a: &[i8], za: &[i32], b: &[u8], zb: i32, (m, k, n): (usize, usize, usize)) -> Packed {
        let kq = k.div_ceil(4);
        let zb_s = zb.wrapping_sub(128);
        let mut ap = vec![0i8; m.div_ceil(MR) * kq * MR * 4];
        let mut row_corr = vec![0i32; m];
        for i in 0..m {
            let (blk, r) = (i / MR, i % MR);
            let row = &a[i * k..(i + 1) * k];
            for (p, &v) in row.iter().enumerate() {
                ap[((blk * kq + p / 4) * MR + r) * 4 + p % 4] = v;
            }
            let sum: i32 = row.iter().map(|&v| i32::from(v)).sum();
            row_corr[i] = (k as i32)
                .wrapping_mul(za[i])
                .wrapping_mul(zb_s)
                .wrapping_sub(zb_s.wrapping_mul(sum));
        }
        let panels = n.div_ceil(NR);
        let mut bp = vec![0i8; panels * kq * NR * 4];
        let mut col_sum = vec![0i32; panels * NR];
        for p in 0..k {
            let (t, d) = (p / 4, p % 4);
            for (j, &v) in b[p * n..(p + 1) * n].iter().enumerate() {
                let s = (v ^ 0x80) as i8;
                bp[(((j / NR) * kq + t) * NR + j % NR) * 4 + d] = s;
                col_sum[j] += i32::from(s);
            }
        }
        Packed {
            kq,
            ap,
            bp,
            row_corr,
            col_sum,
        }
    }

    /// Runs `path` for [`super::gemm_u8s8`] on checked shapes, `m` and `n`
    /// non-zero. The caller checks that the CPU
    /// has NEON and, for `Sdot`, the dot-product extension.
    #[target_feature(enable = "neon")]
    pub(super) fn gemm(path: Path, o: U8s8<'_, [i8]>, c: &mut [i32], ldc: usize) {
        let U8s8 {
            a,
            za,
            b,
            zb,
            dims: (m, k, n),
            ldb,
        } = o;
        debug_assert_eq!(ldb, n, "a dense B");
        let p = pack(a, za, b, zb, (m, k, n));
        let (a_blk, b_panel) = (p.kq * MR * 4, p.kq * NR * 4);
        for (jb, bpanel) in p.bp.chunks_exact(b_panel.max(1)).enumerate() {
            let j0 = jb * NR;
            for (ib, ablk) in p.ap.chunks_exact(a_blk.max(1)).enumerate() {
                let acc = match path {
                    // SAFETY: the caller checked the dot-product extension
                    // for `Sdot`.
                    Path::Sdot => unsafe { block_sdot(ablk, bpanel) },
                    Path::Neon => block_neon(ablk, bpanel),
                };
                store(&acc, ib * MR, j0, &p, za, (m, n), c, ldc);
            }
        }
        if p.kq == 0 {
            // k == 0: the chunk loops above saw empty buffers; C is 0.
            for i in 0..m {
                c[i * ldc..i * ldc + n].fill(0);
            }
        }
    }

    /// Writes the block at rows `i0..`, columns `j0..` of `C` (clipped to
    /// `m × n`), corrected for the zero points.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    #[target_feature(enable = "neon")]
    fn store(
        acc: &Block,
        i0: usize,
        j0: usize,
        p: &Packed,
        za: &[i32],
        (m, n): (usize, usize),
        c: &mut [i32],
        ldc: usize,
    ) {
        let cs = &p.col_sum[j0..j0 + NR];
        let w = (n - j0).min(NR);
        for (r, acc_r) in acc.iter().enumerate() {
            let i = i0 + r;
            if i >= m {
                break;
            }
            let corr = vdupq_n_s32(p.row_corr[i]);
            let mut row = [0i32; NR];
            for ((v, out), sums) in acc_r
                .iter()
                .zip(row.chunks_exact_mut(4))
                .zip(cs.chunks_exact(4))
            {
                // SAFETY: `sums` and `out` hold exactly four i32.
                unsafe {
                    let s = vld1q_s32(sums.as_ptr());
                    vst1q_s32(out.as_mut_ptr(), vmlsq_n_s32(vaddq_s32(*v, corr), s, za[i]));
                }
            }
            c[i * ldc + j0..i * ldc + j0 + w].copy_from_slice(&row[..w]);
        }
    }

    /// One 4 × 16 block with `sdot`: per group of four `k`, one 16-byte
    /// load of `A` (four rows × four bytes), four of `B` (sixteen columns ×
    /// four bytes) and sixteen `sdot`s, each broadcasting one row's four
    /// bytes (`.4b[r]`) against four columns.
    #[target_feature(enable = "neon,dotprod")]
    fn block_sdot(a: &[i8], b: &[i8]) -> Block {
        let mut c = [[vdupq_n_s32(0); 4]; MR];
        for (av, bv) in a.chunks_exact(MR * 4).zip(b.chunks_exact(NR * 4)) {
            // SAFETY: `av` holds 16 bytes and `bv` 64; this function's
            // target features include the dot-product extension; the asm
            // only reads and writes the named registers.
            unsafe {
                let va = vld1q_s8(av.as_ptr());
                let b0 = vld1q_s8(bv.as_ptr());
                let b1 = vld1q_s8(bv.as_ptr().add(16));
                let b2 = vld1q_s8(bv.as_ptr().add(32));
                let b3 = vld1q_s8(bv.as_ptr().add(48));
                asm!(
                    ".arch_extension dotprod",
                    "sdot {c00:v}.4s, {b0:v}.16b, {a:v}.4b[0]",
                    "sdot {c01:v}.4s, {b1:v}.16b, {a:v}.4b[0]",
                    "sdot {c02:v}.4s, {b2:v}.16b, {a:v}.4b[0]",
                    "sdot {c03:v}.4s, {b3:v}.16b, {a:v}.4b[0]",
                    "sdot {c10:v}.4s, {b0:v}.16b, {a:v}.4b[1]",
                    "sdot {c11:v}.4s, {b1:v}.16b, {a:v}.4b[1]",
                    "sdot {c12:v}.4s, {b2:v}.16b, {a:v}.4b[1]",
                    "sdot {c13:v}.4s, {b3:v}.16b, {a:v}.4b[1]",
                    "sdot {c20:v}.4s, {b0:v}.16b, {a:v}.4b[2]",
                    "sdot {c21:v}.4s, {b1:v}.16b, {a:v}.4b[2]",
                    "sdot {c22:v}.4s, {b2:v}.16b, {a:v}.4b[2]",
                    "sdot {c23:v}.4s, {b3:v}.16b, {a:v}.4b[2]",
                    "sdot {c30:v}.4s, {b0:v}.16b, {a:v}.4b[3]",
                    "sdot {c31:v}.4s, {b1:v}.16b, {a:v}.4b[3]",
                    "sdot {c32:v}.4s, {b2:v}.16b, {a:v}.4b[3]",
                    "sdot {c33:v}.4s, {b3:v}.16b, {a:v}.4b[3]",
                    c00 = inout(vreg) c[0][0],
                    c01 = inout(vreg) c[0][1],
                    c02 = inout(vreg) c[0][2],
                    c03 = inout(vreg) c[0][3],
                    c10 = inout(vreg) c[1][0],
                    c11 = inout(vreg) c[1][1],
                    c12 = inout(vreg) c[1][2],
                    c13 = inout(vreg) c[1][3],
                    c20 = inout(vreg) c[2][0],
                    c21 = inout(vreg) c[2][1],
                    c22 = inout(vreg) c[2][2],
                    c23 = inout(vreg) c[2][3],
                    c30 = inout(vreg) c[3][0],
                    c31 = inout(vreg) c[3][1],
                    c32 = inout(vreg) c[3][2],
                    c33 = inout(vreg) c[3][3],
                    a = in(vreg) va,
                    b0 = in(vreg) b0,
                    b1 = in(vreg) b1,
                    b2 = in(vreg) b2,
                    b3 = in(vreg) b3,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
        }
        c
    }

    /// One 4 × 16 block with plain NEON, in two halves of eight columns
    /// (sixteen accumulators each). Per group of four `k` and row, the
    /// row's four bytes are broadcast, `smull` multiplies them by two
    /// columns' four bytes into eight i16 (each exact: |a·b| ≤ 2^14), and
    /// `sadalp` adds adjacent pairs into i32 lanes right away; a final
    /// pairwise add (`addp`) folds each column's two partial sums.
    #[inline]
    #[target_feature(enable = "neon")]
    fn block_neon(a: &[i8], b: &[i8]) -> Block {
        let mut out = [[vdupq_n_s32(0); 4]; MR];
        for h in 0..2 {
            // acc[r][q]: row r, columns 8h + 2q and 8h + 2q + 1, as
            // [col0 k0+k1, col0 k2+k3, col1 k0+k1, col1 k2+k3].
            let mut acc = [[vdupq_n_s32(0); 4]; MR];
            for (av, bv) in a.chunks_exact(MR * 4).zip(b.chunks_exact(NR * 4)) {
                let bh = &bv[h * 32..h * 32 + 32];
                // SAFETY: `av` holds 16 bytes, `bh` 32.
                let (a32, b0, b1) = unsafe {
                    (
                        vreinterpretq_s32_s8(vld1q_s8(av.as_ptr())),
                        vld1q_s8(bh.as_ptr()),
                        vld1q_s8(bh.as_ptr().add(16)),
                    )
                };
                let rows = [
                    vreinterpretq_s8_s32(vdupq_laneq_s32::<0>(a32)),
                    vreinterpretq_s8_s32(vdupq_laneq_s32::<1>(a32)),
                    vreinterpretq_s8_s32(vdupq_laneq_s32::<2>(a32)),
                    vreinterpretq_s8_s32(vdupq_laneq_s32::<3>(a32)),
                ];
                let (b0l, b1l) = (vget_low_s8(b0), vget_low_s8(b1));
                for (acc_r, &ar) in acc.iter_mut().zip(&rows) {
                    let arl = vget_low_s8(ar);
                    acc_r[0] = vpadalq_s16(acc_r[0], vmull_s8(b0l, arl));
                    acc_r[1] = vpadalq_s16(acc_r[1], vmull_high_s8(b0, ar));
                    acc_r[2] = vpadalq_s16(acc_r[2], vmull_s8(b1l, arl));
                    acc_r[3] = vpadalq_s16(acc_r[3], vmull_high_s8(b1, ar));
                }
            }
            for (out_r, acc_r) in out.iter_mut().zip(&acc) {
                out_r[2 * h] = vpaddq_s32(acc_r[0], acc_r[1]);
                out_r[2 * h + 1] = vpaddq_s32(acc_r[2], acc_r[3]);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::int8::packed::backend_tests::{self, check, exact};
    use proptest::prelude::*;

    /// Runs one kernel path, or `None` where it cannot run on this CPU.
    #[cfg(target_arch = "aarch64")]
    fn run(
        path: imp::Path,
        a: &[i8],
        za: &[i32],
        b: &[u8],
        zb: i32,
        (m, k, n): (usize, usize, usize),
        ldc: usize,
    ) -> Option<Vec<i32>> {
        if path == imp::Path::Sdot && !std::arch::is_aarch64_feature_detected!("dotprod") {
            return None;
        }
        let mut got = vec![7i32; m * ldc];
        let o = crate::int8::packed::U8s8::dense(a, za, b, zb, (m, k, n));
        // SAFETY: NEON is in every aarch64 CPU that runs these tests (std's
        // baseline), and `Sdot` was checked above.
        unsafe { imp::gemm(path, o, &mut got, ldc) };
        Some(got)
    }

    fn operands() -> impl Strategy<Value = (Vec<i8>, Vec<u8>, Vec<i32>, i32, usize)> {
        (
            proptest::collection::vec(
                prop_oneof![Just(-128i8), Just(127i8), Just(0i8), any::<i8>()],
                11 * 70,
            ),
            proptest::collection::vec(
                prop_oneof![Just(255u8), Just(0u8), Just(128u8), any::<u8>()],
                70 * 50,
            ),
            proptest::collection::vec(prop_oneof![Just(-128i32), Just(127i32), -128i32..128], 11),
            prop_oneof![Just(0i32), Just(255i32), Just(128i32), 0i32..256],
            0usize..3,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// Every path equals `igemm`: the public entry point bit-exact
        /// where it runs and `c` untouched where it does not, the NEON
        /// fallback on every aarch64 CPU (with or without `sdot`), the
        /// `sdot` kernel where the CPU has it.
        #[test]
        fn every_path_matches_the_exact_reference(
            m in 1usize..12, k in 1usize..70, n in 1usize..50,
            (a, b, za, zb, pad) in operands(),
        ) {
            let (a, b, za, ldc) = (&a[..m * k], &b[..k * n], &za[..m], n + pad);
            if !check(gemm_u8s8, (a, za), (b, zb), (m, k, n), ldc) {
                prop_assert!(!available());
            }
            let want = exact((a, za), (b, zb), (m, k, n), ldc);
            let got = run(imp::Path::Neon, a, za, b, zb, (m, k, n), ldc).unwrap();
            prop_assert_eq!(got, want.clone());
            if let Some(got) = run(imp::Path::Sdot, a, za, b, zb, (m, k, n), ldc) {
                prop_assert_eq!(got, want);
            }
        }
    }

    /// Extreme operands over a long `k`: every partial sum at its largest
    /// magnitude (`(−128)·(−128)` after the shift of `B`, and the most
    /// negative products), on every path this CPU has.
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn extremes_over_a_long_k() {
        let (m, k, n) = (5, 4099, 17);
        for (av, bv, zav, zb) in [
            (-128i8, 0u8, 127, 255),
            (-128, 255, -128, 0),
            (127, 0, -128, 255),
            (-128, 0, 0, 0),
            (127, 255, 127, 128),
        ] {
            let a = vec![av; m * k];
            let b = vec![bv; k * n];
            let za = vec![zav; m];
            let want = exact((&a, &za), (&b, zb), (m, k, n), n);
            for path in [imp::Path::Neon, imp::Path::Sdot] {
                if let Some(got) = run(path, &a, &za, &b, zb, (m, k, n), n) {
                    assert_eq!(got, want, "{path:?} a={av} b={bv} za={zav} zb={zb}");
                }
            }
        }
    }

    #[test]
    fn reports_whether_it_ran() {
        backend_tests::reports_whether_it_ran(gemm_u8s8, available);
        assert_eq!(
            available(),
            cfg!(target_arch = "aarch64") && !crate::force_generic()
        );
        // the portable path is forced inside with_generic_kernels
        assert_eq!(crate::with_generic_kernels(kernel_name), "none");
        // too long a `k` for an exact i32 sum
        let k = crate::int8::MAX_K + 1;
        let mut c = [7i32; 1];
        assert!(!gemm_u8s8(
            &vec![1; k],
            &[0],
            &vec![1; k],
            0,
            (1, k, 1),
            &mut c,
            1
        ));
        assert_eq!(c[0], 7);
    }

    #[test]
    fn empty_shapes() {
        let mut c = [7i32; 4];
        let ran = gemm_u8s8(&[], &[3, 4], &[], 9, (2, 0, 2), &mut c, 2);
        if ran {
            assert_eq!(c, [0; 4]);
        }
        assert!(!ran || gemm_u8s8(&[], &[], &[], 0, (0, 3, 0), &mut c, 0));
    }

    /// `kernel_name` names the kernel the CPU model should get: set
    /// `QPORT_EXPECT_ARM_KERNEL` to `sdot`, `neon` or `none` (as
    /// `scripts/test-aarch64` does under `qemu-aarch64 -cpu max` and
    /// `-cpu cortex-a53`) to prove which path ran.
    #[test]
    fn kernel_matches_the_expected_cpu() {
        let name = kernel_name();
        if !cfg!(target_arch = "aarch64") {
            assert_eq!(name, "none");
            assert!(!available());
        }
        if let Ok(want) = std::env::var("QPORT_EXPECT_ARM_KERNEL") {
            assert_eq!(name, want, "QPORT_EXPECT_ARM_KERNEL");
            let mut c = [0i32; 1];
            let ran = gemm_u8s8(&[-128], &[127], &[255], 0, (1, 1, 1), &mut c, 1);
            assert_eq!(ran, want != "none");
            if ran {
                assert_eq!(c[0], -255 * 255);
            }
        }
    }
}
