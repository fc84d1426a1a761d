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
//! pairs with zero. [`sat_pair_gemm`] is the fast kernel (a row of `A`
//! against panels of `B`, vectorized across columns by the compiler);
//! [`sat_pair_gemm_reference`] is the scalar definition built on
//! [`qport_core::arith::saturating_pair_dot`], and property tests hold the
//! two bit-identical.

use crate::igemm::{MatRef, QInt, ZeroPoints};

fn zp(z: &ZeroPoints<'_>, i: usize) -> i32 {
    match z {
        ZeroPoints::Scalar(v) => *v,
        ZeroPoints::PerSlice(v) => v[i],
    }
}

fn check<A, B>(
    a: &MatRef<'_, A>,
    b: &MatRef<'_, B>,
    za: &ZeroPoints,
    zb: &ZeroPoints,
    c: usize,
    ldc: usize,
) {
    assert_eq!(a.cols, b.rows, "sat_pair_gemm: inner dimensions differ");
    if let ZeroPoints::PerSlice(v) = za {
        assert_eq!(v.len(), a.rows, "sat_pair_gemm: A zero points");
    }
    if let ZeroPoints::PerSlice(v) = zb {
        assert_eq!(v.len(), b.cols, "sat_pair_gemm: B zero points");
    }
    assert!(ldc >= b.cols, "sat_pair_gemm: output row stride");
    if a.rows > 0 && b.cols > 0 {
        assert!(
            c >= (a.rows - 1) * ldc + b.cols,
            "sat_pair_gemm: output too short"
        );
    }
}

/// The AVX2 u8×s8 accumulation of `A · B` with zero points into `c` (row
/// stride `ldc`), overwriting it (see the module docs). Operand types are
/// any [`QInt`] pair; the saturation models `vpmaddubsw`, which the
/// `avx2-u8s8` profile applies to u8 activations × s8 weights.
///
/// # Panics
/// On inconsistent shapes, zero-point lengths or a short `c`.
pub fn sat_pair_gemm<A: QInt, B: QInt>(
    a: MatRef<'_, A>,
    za: ZeroPoints<'_>,
    b: MatRef<'_, B>,
    zb: ZeroPoints<'_>,
    c: &mut [i32],
    ldc: usize,
) {
    check(&a, &b, &za, &zb, c.len(), ldc);
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if m == 0 || n == 0 {
        return;
    }
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
        let zai = zp(&za, i);
        let out = &mut c[i * ldc..i * ldc + n];
        for (j, (o, &s)) in out.iter_mut().zip(&acc).enumerate() {
            let zbj = zp(&zb, j);
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
    a: MatRef<'_, A>,
    za: ZeroPoints<'_>,
    b: MatRef<'_, B>,
    zb: ZeroPoints<'_>,
    c: &mut [i32],
    ldc: usize,
) {
    check(&a, &b, &za, &zb, c.len(), ldc);
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
            let (zai, zbj) = (zp(&za, i), zp(&zb, j));
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
    use proptest::prelude::*;

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
        let am = MatRef::row_major(a, m, k);
        let bm = if tb {
            MatRef::row_major(b, n, k).t()
        } else {
            MatRef::row_major(b, k, n)
        };
        let mut fast = vec![7i32; m * n];
        let mut slow = vec![9i32; m * n];
        sat_pair_gemm(
            am,
            ZeroPoints::PerSlice(za),
            bm,
            ZeroPoints::Scalar(zb),
            &mut fast,
            n,
        );
        sat_pair_gemm_reference(
            am,
            ZeroPoints::PerSlice(za),
            bm,
            ZeroPoints::Scalar(zb),
            &mut slow,
            n,
        );
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

    #[test]
    fn saturation_shows_and_exact_sums_do_not() {
        // 255·127 + 255·127 = 64770 saturates to 32767 per pair.
        let a = [255u8; 4];
        let b = [127i8; 4];
        let mut c = [0i32; 1];
        sat_pair_gemm(
            MatRef::row_major(&a, 1, 4),
            ZeroPoints::Scalar(0),
            MatRef::row_major(&b, 4, 1),
            ZeroPoints::Scalar(0),
            &mut c,
            1,
        );
        assert_eq!(c[0], 2 * 32767);
        // small operands never saturate: the exact sum
        let a = [3u8, 4, 5];
        let b = [-2i8, 7, 1];
        sat_pair_gemm(
            MatRef::row_major(&a, 1, 3),
            ZeroPoints::Scalar(1),
            MatRef::row_major(&b, 3, 1),
            ZeroPoints::Scalar(0),
            &mut c,
            1,
        );
        assert_eq!(c[0], 2 * -2 + 3 * 7 + 4);
    }
}
