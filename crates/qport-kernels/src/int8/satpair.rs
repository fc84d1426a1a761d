//! The x86 AVX2 u8×s8 integer GEMM accumulation (`vpmaddubsw`, then
//! `vpmaddwd` with ones and `vpaddd`), the accumulator of the `avx2-u8s8`
//! arithmetic profile: along the reduction axis, the products of the raw
//! (zero-point-free) operands are taken in adjacent pairs `(0,1), (2,3), …`,
//! each pair sum saturated to int16, and the pair sums added in int32.
//! Zero points are then corrected exactly with row and column sums, as
//! onnxruntime's MLAS does:
//!
//! ```text
//! C[i][j] = S(i, j) − za(i)·Σ_p B[p][j] − zb(j)·Σ_p A[i][p] + k·za(i)·zb(j)
//! S(i, j) = Σ_t sat16(A[i][2t]·B[2t][j] + A[i][2t+1]·B[2t+1][j])
//! ```
//!
//! (all int32 arithmetic wrapping, like the hardware). An odd last element
//! pairs with zero. [`sat_pair_gemm`] is the fast kernel;
//! [`sat_pair_gemm_reference`] is the scalar definition built on
//! [`qport_core::arith::saturating_pair_dot`], and property tests hold the
//! two bit-identical.
//!
//! On x86-64 hosts with AVX2, when one operand is `i8` and the other `u8`
//! (weights × activations of a convolution, or activations × weights of a
//! `MatMul`), [`sat_pair_gemm`] runs the instructions it models: the
//! right-hand operand is packed in panels of 16 columns whose four
//! consecutive `k` values are adjacent bytes (`[n/16][k/4][16][4]`, zero
//! padded), rows of `A` are broadcast four bytes at a time, and each
//! 32-byte product is `vpmaddwd(vpmaddubsw(u8, s8), 1)` added to an i32
//! lane per column (4 rows × 16 columns of accumulators). Because the byte
//! pairs `(4t, 4t+1)`, `(4t+2, 4t+3)` are the pairs `(2s, 2s+1)` of the
//! definition, zero padding adds only exact zero pairs, and i32 addition
//! wraps associatively, the sums are those of the definition bit for bit.
//! Other operand types, other CPUs and [`crate::force_generic`] use the
//! portable path (a row of `A` against a widened copy of `B`, vectorized by
//! the compiler).

#[cfg(target_arch = "x86_64")]
use crate::arch::x86_64::satpair as x86;
use crate::igemm::{Operands, QInt};

/// The AVX2 u8×s8 accumulation of `A · B` with zero points into `c` (row
/// stride `ldc`), overwriting it (see the module docs). Operand types are
/// any [`QInt`] pair; the saturation models `vpmaddubsw`, which the
/// `avx2-u8s8` profile applies to u8 activations × s8 weights.
///
/// # Panics
/// On inconsistent shapes, zero-point lengths or a short `c`.
pub fn sat_pair_gemm<A: QInt, B: QInt>(ops: Operands<'_, A, B>, c: &mut [i32], ldc: usize) {
    ops.check(c.len(), ldc, "sat_pair_gemm");
    let (a, b) = (&ops.a, &ops.b);
    let (m, n) = (a.rows, b.cols);
    if m == 0 || n == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        let a_signed = A::as_i8(a.data).is_some() && B::as_u8(b.data).is_some();
        let a_unsigned = A::as_u8(a.data).is_some() && B::as_i8(b.data).is_some();
        if a_signed {
            // SAFETY: the dispatch table has an x86-64 row only where the CPU
            // has AVX2 + FMA (`dispatch::detect`).
            unsafe { x86::gemm::<true, A, B>(&ops, c, ldc) };
            return;
        }
        if a_unsigned {
            // SAFETY: the dispatch table has an x86-64 row only where the CPU
            // has AVX2 + FMA (`dispatch::detect`).
            unsafe { x86::gemm::<false, A, B>(&ops, c, ldc) };
            return;
        }
    }
    generic(&ops, c, ldc);
}

/// The portable body of [`sat_pair_gemm`] (shapes already checked, `m` and
/// `n` non-zero).
fn generic<A: QInt, B: QInt>(ops: &Operands<'_, A, B>, c: &mut [i32], ldc: usize) {
    let Operands { a, za, b, zb } = ops;
    let (m, k, n) = (a.rows, a.cols, b.cols);
    // B widened to i32, row-major k × n, and its column sums.
    let mut panel = vec![0i32; k * n];
    let mut col_sum = vec![0i32; n];
    for p in 0..k {
        let row = &mut panel[p * n..(p + 1) * n];
        for (j, v) in row.iter_mut().enumerate() {
            *v = b.data[p * b.row_stride + j * b.col_stride].widen();
            col_sum[j] = col_sum[j].wrapping_add(*v);
        }
    }
    let zero_row = vec![0i32; n];
    let mut acc = vec![0i32; n];
    for i in 0..m {
        let ai = |p: usize| a.data[i * a.row_stride + p * a.col_stride].widen();
        acc.fill(0);
        let mut row_sum = 0i32;
        let mut p = 0;
        while p < k {
            let a0 = ai(p);
            let (a1, r1) = if p + 1 < k {
                (ai(p + 1), &panel[(p + 1) * n..(p + 2) * n])
            } else {
                (0, &zero_row[..])
            };
            row_sum = row_sum.wrapping_add(a0).wrapping_add(a1);
            let r0 = &panel[p * n..(p + 1) * n];
            for ((o, &b0), &b1) in acc.iter_mut().zip(r0).zip(r1) {
                let s = (a0 * b0 + a1 * b1).clamp(i16::MIN as i32, i16::MAX as i32);
                *o = o.wrapping_add(s);
            }
            p += 2;
        }
        let zai = za.get(i);
        let out = &mut c[i * ldc..i * ldc + n];
        for (j, (o, &s)) in out.iter_mut().zip(&acc).enumerate() {
            let zbj = zb.get(j);
            *o = s
                .wrapping_sub(zai.wrapping_mul(col_sum[j]))
                .wrapping_sub(zbj.wrapping_mul(row_sum))
                .wrapping_add((k as i32).wrapping_mul(zai).wrapping_mul(zbj));
        }
    }
}

/// The scalar definition of [`sat_pair_gemm`]: every output element from
/// [`qport_core::arith::saturating_pair_dot`] (operands mapped to `u8` ×
/// `i8` where they are of those types; otherwise the same pair rule on
/// widened values) and the exact zero-point corrections. Slow; for tests.
pub fn sat_pair_gemm_reference<A: QInt, B: QInt>(
    ops: Operands<'_, A, B>,
    c: &mut [i32],
    ldc: usize,
) {
    ops.check(c.len(), ldc, "sat_pair_gemm");
    let Operands { a, za, b, zb } = ops;
    let k = a.cols;
    for i in 0..a.rows {
        let av: Vec<i32> = (0..k)
            .map(|p| a.data[i * a.row_stride + p * a.col_stride].widen())
            .collect();
        for j in 0..b.cols {
            let bv: Vec<i32> = (0..k)
                .map(|p| b.data[p * b.row_stride + j * b.col_stride].widen())
                .collect();
            let s = pair_dot(&av, &bv);
            let (zai, zbj) = (za.get(i), zb.get(j));
            let sa: i32 = av.iter().fold(0, |x, &y| x.wrapping_add(y));
            let sb: i32 = bv.iter().fold(0, |x, &y| x.wrapping_add(y));
            c[i * ldc + j] = s
                .wrapping_sub(zai.wrapping_mul(sb))
                .wrapping_sub(zbj.wrapping_mul(sa))
                .wrapping_add((k as i32).wrapping_mul(zai).wrapping_mul(zbj));
        }
    }
}

/// `saturating_pair_dot` on widened values: the core definition when the
/// operands are u8 × i8 (either order), the same rule otherwise.
fn pair_dot(a: &[i32], b: &[i32]) -> i32 {
    let as_u8 =
        |v: &[i32]| -> Option<Vec<u8>> { v.iter().map(|&x| u8::try_from(x).ok()).collect() };
    let as_i8 =
        |v: &[i32]| -> Option<Vec<i8>> { v.iter().map(|&x| i8::try_from(x).ok()).collect() };
    if let (Some(x), Some(w)) = (as_u8(a), as_i8(b)) {
        return qport_core::arith::saturating_pair_dot(&x, &w);
    }
    if let (Some(x), Some(w)) = (as_u8(b), as_i8(a)) {
        return qport_core::arith::saturating_pair_dot(&x, &w);
    }
    a.chunks(2)
        .zip(b.chunks(2))
        .map(|(x, w)| {
            let s: i32 = x.iter().zip(w).map(|(&x, &w)| x * w).sum();
            s.clamp(i16::MIN as i32, i16::MAX as i32)
        })
        .fold(0, i32::wrapping_add)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::igemm::{MatRef, ZeroPoints};
    use proptest::prelude::*;

    /// The `rows × cols` matrix in `v`: row-major, or (`t`) the transpose
    /// of the row-major `cols × rows` one.
    fn view<T>(v: &[T], rows: usize, cols: usize, t: bool) -> MatRef<'_, T> {
        if t {
            MatRef::row_major(v, cols, rows).t()
        } else {
            MatRef::row_major(v, rows, cols)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run<A: QInt, B: QInt>(
        a: &[A],
        b: &[B],
        m: usize,
        k: usize,
        n: usize,
        za: &[i32],
        zb: i32,
        tb: bool,
    ) {
        let (am, bm) = (MatRef::row_major(a, m, k), view(b, k, n, tb));
        let mut fast = vec![7i32; m * n];
        let mut slow = vec![9i32; m * n];
        let ops = Operands::new(am, ZeroPoints::PerSlice(za), bm, ZeroPoints::Scalar(zb));
        sat_pair_gemm(ops, &mut fast, n);
        sat_pair_gemm_reference(ops, &mut slow, n);
        assert_eq!(fast, slow);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn fast_kernel_matches_the_reference(
            m in 1usize..5, k in 0usize..40, n in 1usize..7, tb in any::<bool>(),
            // extreme values make the pair sums saturate often
            a in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 240),
            b in proptest::collection::vec(prop_oneof![Just(127i8), Just(-128i8), any::<i8>()], 240),
            za in proptest::collection::vec(0i32..256, 5), zb in -128i32..128,
        ) {
            run(&a[..m * k], &b[..k * n], m, k, n, &za[..m], zb, tb);
            // the weights-left orientation of a convolution (i8 · u8)
            run(&b[..m * k], &a[..k * n], m, k, n, &za[..m], zb.clamp(0, 255), tb);
        }
    }

    /// Runs the default path (native where the CPU has AVX2), the portable
    /// path and the reference into outputs with row stride `ldc` and checks
    /// all three equal, padding untouched; returns the result.
    fn all_paths<A: QInt, B: QInt>(ops: Operands<'_, A, B>, ldc: usize) -> Vec<i32> {
        let (a, b) = (ops.a, ops.b);
        let len = a.rows * ldc;
        let mut fast = vec![7i32; len];
        let mut generic = vec![8i32; len];
        let mut slow = vec![9i32; len];
        sat_pair_gemm(ops, &mut fast, ldc);
        crate::with_generic_kernels(|| sat_pair_gemm(ops, &mut generic, ldc));
        sat_pair_gemm_reference(ops, &mut slow, ldc);
        let n = b.cols;
        let pick =
            |v: &[i32]| -> Vec<i32> { v.chunks(ldc).flat_map(|r| r[..n].to_vec()).collect() };
        assert_eq!(pick(&fast), pick(&slow), "default path vs reference");
        assert_eq!(pick(&generic), pick(&slow), "portable path vs reference");
        for r in 0..a.rows {
            assert!(fast[r * ldc + n..(r + 1) * ldc].iter().all(|&v| v == 7));
        }
        pick(&fast)
    }

    /// Pseudo-random bytes, most of them extreme (0, 255 / −128, 127).
    fn extreme_bytes(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (s >> 33) as u32;
                match r % 4 {
                    0 => 0,
                    1 => 255,
                    2 => 127,
                    _ => (r >> 8) as u8,
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        #[test]
        fn native_kernel_matches_the_reference(
            m in 1usize..11, k in 0usize..45, n in 1usize..50, ta in any::<bool>(), tb in any::<bool>(),
            pad in 0usize..3, per_col in any::<bool>(),
            u in proptest::collection::vec(prop_oneof![Just(255u8), Just(0u8), any::<u8>()], 49 * 44),
            s in proptest::collection::vec(prop_oneof![Just(127i8), Just(-128i8), any::<i8>()], 49 * 44),
            zu in proptest::collection::vec(0i32..256, 49), zs in proptest::collection::vec(-128i32..128, 49),
        ) {
            let ldc = n + pad;
            // weights × activations (i8 · u8): per-row weight zero points
            let zb = if per_col { ZeroPoints::PerSlice(&zu[..n]) } else { ZeroPoints::Scalar(zu[0]) };
            all_paths(Operands::new(view(&s[..m * k], m, k, ta), ZeroPoints::PerSlice(&zs[..m]),
                view(&u[..k * n], k, n, tb), zb), ldc);
            // activations × weights (u8 · i8), as QGemm / MatMulInteger
            let zb = if per_col { ZeroPoints::PerSlice(&zs[..n]) } else { ZeroPoints::Scalar(zs[0]) };
            all_paths(Operands::new(view(&u[..m * k], m, k, ta), ZeroPoints::PerSlice(&zu[..m]),
                view(&s[..k * n], k, n, tb), zb), ldc);
        }
    }

    #[test]
    fn native_kernel_saturates_where_the_reference_does() {
        // full and partial panels, odd k, extreme operands: many pair sums
        // saturate, so the result must differ from the exact igemm sum
        let (m, k, n) = (9, 37, 45);
        let u = extreme_bytes(k * n, 1);
        let s: Vec<i8> = extreme_bytes(m * k, 2).iter().map(|&v| v as i8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i * 7 - 30).collect();
        let (a, b) = (
            MatRef::row_major(&s[..], m, k),
            MatRef::row_major(&u[..], k, n),
        );
        let (zav, zbv) = (ZeroPoints::PerSlice(&za), ZeroPoints::Scalar(131));
        let sat = all_paths(Operands::new(a, zav, b, zbv), n);
        let mut exact = vec![0i32; m * n];
        crate::igemm::igemm(Operands::new(a, zav, b, zbv), &mut exact, n, false);
        let differ = sat.iter().zip(&exact).filter(|(x, y)| x != y).count();
        assert!(differ > m * n / 2, "only {differ} of {} saturate", m * n);
        // the other orientation, u8 · i8
        let u = extreme_bytes(m * k, 3);
        let s: Vec<i8> = extreme_bytes(k * n, 4).iter().map(|&v| v as i8).collect();
        let (a, b) = (
            MatRef::row_major(&u[..], m, k),
            MatRef::row_major(&s[..], k, n),
        );
        let sat = all_paths(
            Operands::new(a, ZeroPoints::Scalar(3), b, ZeroPoints::Scalar(-5)),
            n,
        );
        let mut exact = vec![0i32; m * n];
        crate::igemm::igemm(
            Operands::new(a, ZeroPoints::Scalar(3), b, ZeroPoints::Scalar(-5)),
            &mut exact,
            n,
            false,
        );
        let differ = sat.iter().zip(&exact).filter(|(x, y)| x != y).count();
        assert!(differ > m * n / 2, "only {differ} of {} saturate", m * n);
    }

    /// The row blocks split between intra-op threads (the AVX2 kernel's
    /// `store_corrected`): the same sums, saturations included, as the
    /// scalar reference for every thread count.
    #[test]
    fn intra_op_threads_give_the_same_sums() {
        let _g = crate::test_lock();
        let (m, k, n) = (70, 600, 250); // above 4 x par::MIN_WORK, odd sizes
        let u = extreme_bytes(k * n, 5);
        let s: Vec<i8> = extreme_bytes(m * k, 6).iter().map(|&v| v as i8).collect();
        let za: Vec<i32> = (0..m as i32).map(|i| i % 7 - 3).collect();
        let ops = Operands::new(
            MatRef::row_major(&s[..], m, k),
            ZeroPoints::PerSlice(&za),
            MatRef::row_major(&u[..], k, n),
            ZeroPoints::Scalar(77),
        );
        let mut want = vec![0i32; m * n];
        sat_pair_gemm_reference(ops, &mut want, n);
        for t in [1, 2, 3, 8] {
            crate::par::set_threads(t);
            let mut got = vec![0i32; m * n];
            sat_pair_gemm(ops, &mut got, n);
            crate::par::set_threads(1);
            assert!(got == want, "{t} threads differ from the reference");
        }
    }

    #[test]
    fn saturation_shows_and_exact_sums_do_not() {
        // 255·127 + 255·127 = 64770 saturates to 32767 per pair.
        let a = [255u8; 4];
        let b = [127i8; 4];
        let mut c = [0i32; 1];
        sat_pair_gemm(Operands::row_major(&a, 0, &b, 0, (1, 4, 1)), &mut c, 1);
        assert_eq!(c[0], 2 * 32767);
        // small operands never saturate: the exact sum
        let a = [3u8, 4, 5];
        let b = [-2i8, 7, 1];
        sat_pair_gemm(Operands::row_major(&a, 1, &b, 0, (1, 3, 1)), &mut c, 1);
        assert_eq!(c[0], 2 * -2 + 3 * 7 + 4);
    }
}
