//! Dense matrix multiply over row-major strided slices.
//!
//! [`gemm()`] computes `C = alpha * op(A) * op(B) + beta * C` where `op(X)` is
//! `X` or its transpose, in the style of BLAS but for row-major storage:
//! element `(i, j)` of a matrix with leading dimension `ld` lives at
//! `i * ld + j`. For `f32` and `f64` the fast path is the `gemm` crate (SIMD
//! chosen at run time, single-threaded so results are deterministic),
//! except an `f32` product of one row by columns of `B` that are contiguous
//! (`B` transposed: a classifier's last `Gemm`), which runs
//! [`crate::f32::gemv`] (onnxruntime's blocked order for that product when
//! it packs `B`, the same bits on every SIMD level and thread count, split
//! over the intra-op threads); every
//! other element type, and every type when [`crate::force_generic`] is set
//! (`QPORT_FORCE_GENERIC`, or a call inside [`crate::with_generic_kernels`]),
//! uses the scalar reference: a plain loop that computes each `C[i][j]` as
//! `alpha * (sum over p in 0..k, in order, of A[i][p] * B[p][j]) + beta *
//! C[i][j]` with separate multiplies and adds.
//!
//! When `beta` is zero, `C` is write-only: whatever it held (NaN included)
//! does not reach the result.

/// An element type [`gemm()`] accepts: floats (with a SIMD path) and integers
/// (scalar, wrapping arithmetic as numpy does).
pub trait GemmScalar: Copy + Send + Sync + PartialEq + 'static {
    /// The additive identity.
    const ZERO: Self;
    /// The multiplicative identity.
    const ONE: Self;
    /// `self + rhs` (wrapping for integers).
    fn add(self, rhs: Self) -> Self;
    /// `self * rhs` (wrapping for integers).
    fn mul(self, rhs: Self) -> Self;
    /// Runs the SIMD kernel if this type has one; returns `false` otherwise.
    ///
    /// # Safety
    /// The views must be in bounds (as checked by [`gemm()`]).
    #[doc(hidden)]
    unsafe fn simd(_p: &GemmArgs<Self>) -> bool {
        false
    }
    /// Runs the one-row product with contiguous columns of `B`
    /// ([`crate::f32::gemv`]) if this type has it; returns `false`
    /// otherwise.
    ///
    /// # Safety
    /// As [`Self::simd`], with `m == 1`, `a_cs == 1` and `b_rs == 1`.
    #[doc(hidden)]
    unsafe fn gemv(_p: &GemmArgs<Self>) -> bool {
        false
    }
}

/// Raw operands of one multiply, already bounds-checked by [`gemm()`].
#[doc(hidden)]
pub struct GemmArgs<T> {
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: *const T,
    a_rs: isize,
    a_cs: isize,
    b: *const T,
    b_rs: isize,
    b_cs: isize,
    beta: T,
    c: *mut T,
    ldc: isize,
    /// The block of the sum over `k` of the one-row path.
    k_block: usize,
}

macro_rules! float_scalar {
    ($t:ty $(, $gemv:item)?) => {
        impl GemmScalar for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self + rhs
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self * rhs
            }
            unsafe fn simd(p: &GemmArgs<Self>) -> bool {
                // The gemm crate computes dst := alpha*dst + beta*lhs*rhs
                // (its alpha/beta are BLAS's beta/alpha).
                // SAFETY: the caller guarantees the views are in bounds.
                unsafe {
                    gemm::gemm(
                        p.m,
                        p.n,
                        p.k,
                        p.c,
                        1,
                        p.ldc,
                        p.beta != 0.0,
                        p.a,
                        p.a_cs,
                        p.a_rs,
                        p.b,
                        p.b_cs,
                        p.b_rs,
                        p.beta,
                        p.alpha,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    );
                }
                true
            }
            $($gemv)?
        }
    };
}
float_scalar!(
    f32,
    unsafe fn gemv(p: &GemmArgs<Self>) -> bool {
        // SAFETY: (whole block) the caller's contract: A's row holds `k`
        // contiguous elements, B's `n` columns `k` contiguous elements
        // each, `b_cs` apart (a stride of at least `k` when n > 1, as
        // `MatRef::check` ensured), and C's row `n` elements.
        unsafe {
            let x = std::slice::from_raw_parts(p.a, p.k);
            let ldw = p.b_cs.max(0) as usize;
            let w = std::slice::from_raw_parts(p.b, (p.n - 1) * ldw + p.k);
            let y = std::slice::from_raw_parts_mut(p.c, p.n);
            crate::f32::gemv::gemv_rows(x, w, ldw, p.alpha, p.beta, p.k_block, y);
        }
        true
    }
);
float_scalar!(f64);

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl GemmScalar for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, rhs: Self) -> Self {
                self.wrapping_add(rhs)
            }
            #[inline(always)]
            fn mul(self, rhs: Self) -> Self {
                self.wrapping_mul(rhs)
            }
        }
    )*};
}
int_scalar!(i8, u8, i16, u16, i32, u32, i64, u64);

/// One operand of [`gemm()`]: a row-major slice, its leading dimension (the
/// distance between consecutive rows as stored) and whether it is used
/// transposed.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a, T> {
    /// The stored elements.
    pub data: &'a [T],
    /// Elements between the starts of consecutive stored rows.
    pub ld: usize,
    /// Use the transpose of the stored matrix.
    pub trans: bool,
}

impl<'a, T> MatRef<'a, T> {
    /// A view of `data` as stored, with leading dimension `ld`.
    pub fn new(data: &'a [T], ld: usize) -> Self {
        MatRef {
            data,
            ld,
            trans: false,
        }
    }

    /// A view of the transpose of the matrix stored in `data`.
    pub fn transposed(data: &'a [T], ld: usize) -> Self {
        MatRef {
            data,
            ld,
            trans: true,
        }
    }

    /// Row and column strides of the logical (possibly transposed) matrix.
    fn strides(&self) -> (isize, isize) {
        if self.trans {
            (1, self.ld as isize)
        } else {
            (self.ld as isize, 1)
        }
    }

    /// Panics unless the logical `rows x cols` matrix is in bounds.
    fn check(&self, rows: usize, cols: usize, what: &str) {
        let (srows, scols) = if self.trans {
            (cols, rows)
        } else {
            (rows, cols)
        };
        if srows == 0 || scols == 0 {
            return;
        }
        assert!(
            self.ld >= scols,
            "gemm: {what} leading dimension {} < {scols} columns",
            self.ld
        );
        let need = (srows - 1) * self.ld + scols;
        assert!(
            self.data.len() >= need,
            "gemm: {what} has {} elements, needs {need}",
            self.data.len()
        );
    }
}

/// `C = alpha * op(A) * op(B) + beta * C` with `op(A)` of shape `m x k`,
/// `op(B)` of shape `k x n` and `C` of shape `m x n` with leading dimension
/// `ldc`.
///
/// With `beta == 0` the previous contents of `C` are ignored. With `k == 0`
/// the product is zero (so `C = beta * C`).
///
/// # Panics
/// Panics if a view is out of bounds of its slice or a leading dimension is
/// smaller than the row length it must hold.
///
/// ```
/// use qport_kernels::gemm::{gemm, MatRef};
/// let a = [1.0f32, 2.0, 3.0, 4.0]; // [[1, 2], [3, 4]]
/// let b = [1.0f32, 0.0, 1.0, 1.0]; // [[1, 0], [1, 1]]
/// let mut c = [0.0f32; 4];
/// gemm(2, 2, 2, 1.0, MatRef::new(&a, 2), MatRef::new(&b, 2), 0.0, &mut c, 2);
/// assert_eq!(c, [3.0, 2.0, 7.0, 4.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm<T: GemmScalar>(
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: &mut [T],
    ldc: usize,
) {
    let k_block = crate::f32::pgemm::ort_k_block(n, k);
    gemm_k_block(m, n, k, alpha, a, b, beta, c, ldc, k_block)
}

/// The `K` block of onnxruntime's SGEMM over a right operand packed once
/// (MLAS's prepacked `B`, which its `Gemm` and `MatMul` kernels use when
/// `B` is a constant): 256, whatever the shape. Measured: a one-row `Gemm`
/// with `transB = 1` and a constant `B` of 1000 x 2048 or 1000 x 1280 is
/// onnxruntime's bit for bit with blocks of 256 and not with
/// [`crate::pgemm::ort_k_block`]'s 128.
pub const ORT_PACKED_K_BLOCK: usize = 256;

/// [`gemm()`] with the block of the sum over `k` of its one-row path
/// ([`crate::f32::gemv`]; `f32`, one row, contiguous columns of `B`) given:
/// [`ORT_PACKED_K_BLOCK`] reproduces onnxruntime where it packed a
/// constant `B`, [`crate::pgemm::ort_k_block`] (what [`gemm()`] passes)
/// where it packs per call (see [`crate::f32::gemv`] for the case it
/// does not). Other products ignore it.
///
/// ```
/// use qport_kernels::gemm::{gemm_k_block, MatRef, ORT_PACKED_K_BLOCK};
/// let x = [1.0f32, 2.0]; // one row
/// let w = [1.0f32, 1.0, 3.0, -1.0]; // B transposed: columns [1 1], [3 -1]
/// let mut y = [0.0f32; 2];
/// let b = MatRef::transposed(&w, 2);
/// gemm_k_block(1, 2, 2, 1.0, MatRef::new(&x, 2), b, 0.0, &mut y, 2, ORT_PACKED_K_BLOCK);
/// assert_eq!(y, [3.0, 1.0]);
/// ```
#[allow(clippy::too_many_arguments)]
pub fn gemm_k_block<T: GemmScalar>(
    m: usize,
    n: usize,
    k: usize,
    alpha: T,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    beta: T,
    c: &mut [T],
    ldc: usize,
    k_block: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    a.check(m, k, "A");
    b.check(k, n, "B");
    assert!(ldc >= n, "gemm: C leading dimension {ldc} < {n} columns");
    let need = (m - 1) * ldc + n;
    assert!(
        c.len() >= need,
        "gemm: C has {} elements, needs {need}",
        c.len()
    );
    let (a_rs, a_cs) = a.strides();
    let (b_rs, b_cs) = b.strides();
    let p = GemmArgs {
        m,
        n,
        k,
        alpha,
        a: a.data.as_ptr(),
        a_rs,
        a_cs,
        b: b.data.as_ptr(),
        b_rs,
        b_cs,
        beta,
        c: c.as_mut_ptr(),
        ldc: ldc as isize,
        k_block,
    };
    // one row times columns of B that are contiguous (a classifier's last
    // Gemm, transB = 1): onnxruntime's order at the speed of memory, on the
    // intra-op threads
    let one_row = m == 1 && k > 0 && a_cs == 1 && b_rs == 1 && b_cs >= 0;
    // SAFETY: the checks above put every view in bounds.
    if !crate::force_generic() && one_row && unsafe { T::gemv(&p) } {
        return;
    }
    // SAFETY: the checks above put every view in bounds.
    if crate::force_generic() || !unsafe { T::simd(&p) } {
        // SAFETY: as above.
        unsafe { scalar(&p) }
    }
}

/// The scalar loop: row by row, accumulating each row of products in `k`
/// order into a temporary so `B` rows are read contiguously.
///
/// # Safety
/// The views in `p` must be in bounds.
unsafe fn scalar<T: GemmScalar>(p: &GemmArgs<T>) {
    if p.b_cs == 1 {
        // SAFETY: forwarded contract.
        return unsafe { tiled(p) };
    }
    let mut acc = vec![T::ZERO; p.n];
    for i in 0..p.m as isize {
        acc.iter_mut().for_each(|v| *v = T::ZERO);
        for kk in 0..p.k as isize {
            // SAFETY: i < m, kk < k: in bounds of A by the caller's contract.
            let aik = unsafe { *p.a.offset(i * p.a_rs + kk * p.a_cs) };
            // SAFETY: kk < k: row kk of B starts in bounds by the caller's
            // contract.
            let brow = unsafe { p.b.offset(kk * p.b_rs) };
            if p.b_cs == 1 {
                // a contiguous row: the same operations per element, in a
                // loop the compiler vectorizes
                // SAFETY: row kk of B holds n contiguous elements (b_cs 1).
                let brow = unsafe { std::slice::from_raw_parts(brow, p.n) };
                for (v, &bkj) in acc.iter_mut().zip(brow) {
                    *v = v.add(aik.mul(bkj));
                }
                continue;
            }
            for (j, v) in acc.iter_mut().enumerate() {
                // SAFETY: j < n: in bounds of B.
                let bkj = unsafe { *brow.offset(j as isize * p.b_cs) };
                *v = v.add(aik.mul(bkj));
            }
        }
        // SAFETY: row i of C holds n elements.
        let crow = unsafe { std::slice::from_raw_parts_mut(p.c.offset(i * p.ldc), p.n) };
        for (cv, &v) in crow.iter_mut().zip(&acc) {
            let prod = p.alpha.mul(v);
            *cv = if p.beta == T::ZERO {
                prod
            } else {
                prod.add(p.beta.mul(*cv))
            };
        }
    }
}

/// Rows of `C` per tile of [`tiled`].
const TILE_M: usize = 4;
/// Columns of `C` per tile of [`tiled`].
const TILE_N: usize = 8;

/// [`scalar`] for a `B` with contiguous rows: tiles of `TILE_M x TILE_N`
/// elements of `C` whose sums stay in registers over the whole `k` loop
/// (each element still `((0 + a0·b0) + a1·b1) + …` in order of `p`, with
/// separate multiplies and adds, then the same `alpha` / `beta` step);
/// the tiles at the right and bottom edges take the same loop element by
/// element.
///
/// # Safety
/// As [`scalar`], with `b_cs == 1`.
unsafe fn tiled<T: GemmScalar>(p: &GemmArgs<T>) {
    let (m, n, k) = (p.m, p.n, p.k);
    // The three accessors are called with i < m, j < n, kk < k only.
    // SAFETY: element (i, kk) of the checked view of A.
    let a =
        |i: usize, kk: usize| unsafe { *p.a.offset(i as isize * p.a_rs + kk as isize * p.a_cs) };
    // SAFETY: element (kk, j) of the checked view of B (b_cs == 1).
    let b = |kk: usize, j: usize| unsafe { *p.b.offset(kk as isize * p.b_rs + j as isize) };
    // SAFETY: element (i, j) of the checked view of C.
    let store = |i: usize, j: usize, v: T| unsafe {
        let c = p.c.offset(i as isize * p.ldc + j as isize);
        let prod = p.alpha.mul(v);
        *c = if p.beta == T::ZERO {
            prod
        } else {
            prod.add(p.beta.mul(*c))
        };
    };
    let mut i0 = 0;
    while i0 < m {
        let mi = TILE_M.min(m - i0);
        let mut j0 = 0;
        while j0 < n {
            let nj = TILE_N.min(n - j0);
            if mi == TILE_M && nj == TILE_N {
                let mut acc = [[T::ZERO; TILE_N]; TILE_M];
                for kk in 0..k {
                    let bv: [T; TILE_N] = std::array::from_fn(|c| b(kk, j0 + c));
                    for (r, row) in acc.iter_mut().enumerate() {
                        let av = a(i0 + r, kk);
                        for (v, &bc) in row.iter_mut().zip(&bv) {
                            *v = v.add(av.mul(bc));
                        }
                    }
                }
                for (r, row) in acc.iter().enumerate() {
                    for (c, &v) in row.iter().enumerate() {
                        store(i0 + r, j0 + c, v);
                    }
                }
            } else {
                for i in i0..i0 + mi {
                    for j in j0..j0 + nj {
                        let mut v = T::ZERO;
                        for kk in 0..k {
                            v = v.add(a(i, kk).mul(b(kk, j)));
                        }
                        store(i, j, v);
                    }
                }
            }
            j0 += nj;
        }
        i0 += mi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: &[f64],
        ta: bool,
        b: &[f64],
        tb: bool,
    ) -> (Vec<f64>, Vec<f64>) {
        // exact-ish product (f64) and the sum of |a||b| for error bounds
        let mut out = vec![0.0; m * n];
        let mut mag = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let av = if ta { a[p * m + i] } else { a[i * k + p] };
                    let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                    out[i * n + j] += av * bv;
                    mag[i * n + j] += (av * bv).abs();
                }
            }
        }
        (out, mag)
    }

    #[test]
    fn integers_wrap_and_accumulate() {
        let a = [1i32, 2, 3, 4, 5, 6]; // 2x3
        let b = [1i32, 0, 0, 1, 1, 1]; // 3x2
        let mut c = [10i32; 4];
        gemm(
            2,
            2,
            3,
            1,
            MatRef::new(&a, 3),
            MatRef::new(&b, 2),
            1,
            &mut c,
            2,
        );
        assert_eq!(c, [14, 15, 20, 21]);
    }

    #[test]
    fn beta_zero_ignores_nan_and_k_zero_scales() {
        let a = [1.0f32, 2.0];
        let b = [3.0f32, 4.0];
        let mut c = [f32::NAN];
        gemm(
            1,
            1,
            2,
            2.0,
            MatRef::new(&a, 2),
            MatRef::new(&b, 1),
            0.0,
            &mut c,
            1,
        );
        assert_eq!(c, [22.0]);
        let mut c = [3.0f32, 5.0];
        let empty: [f32; 0] = [];
        gemm(
            1,
            2,
            0,
            1.0,
            MatRef::new(&empty, 0),
            MatRef::new(&empty, 2),
            2.0,
            &mut c,
            2,
        );
        assert_eq!(c, [6.0, 10.0]);
    }

    #[test]
    fn strided_c_leaves_gaps_alone() {
        let a = [1.0f64, 2.0];
        let b = [1.0f64, 1.0];
        let mut c = [0.0, -1.0, 0.0, -1.0];
        // 2x1 times 1x2, C with ldc 2 but only 1 column written? use n=1
        gemm(
            2,
            1,
            1,
            1.0,
            MatRef::new(&a, 1),
            MatRef::new(&b, 2),
            0.0,
            &mut c,
            2,
        );
        assert_eq!(c, [1.0, -1.0, 2.0, -1.0]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn simd_matches_reference(
            m in 1usize..40, n in 1usize..40, k in 0usize..70,
            ta: bool, tb: bool, use_beta: bool,
            alpha in -2.0f32..2.0, beta in -2.0f32..2.0, seed: u64,
        ) {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let a: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rnd()).collect();
            let c0: Vec<f32> = (0..m * n).map(|_| rnd()).collect();
            let beta = if use_beta { beta } else { 0.0 };
            let (lda, ldb) = (if ta { m } else { k }, if tb { k } else { n });
            let av = MatRef { data: &a, ld: lda, trans: ta };
            let bv = MatRef { data: &b, ld: ldb, trans: tb };
            let mut fast = c0.clone();
            gemm(m, n, k, alpha, av, bv, beta, &mut fast, n);
            let mut slow = c0.clone();
            crate::with_generic_kernels(|| gemm(m, n, k, alpha, av, bv, beta, &mut slow, n));
            let a64: Vec<f64> = a.iter().map(|&v| v as f64).collect();
            let b64: Vec<f64> = b.iter().map(|&v| v as f64).collect();
            let (exact, mag) = naive(m, n, k, &a64, ta, &b64, tb);
            for i in 0..m * n {
                let want = alpha as f64 * exact[i] + beta as f64 * c0[i] as f64;
                // relative 1e-5 of the magnitude of the terms summed
                let scale = (alpha as f64).abs() * mag[i] + (beta as f64 * c0[i] as f64).abs();
                let tol = 1e-5 * scale + 1e-30;
                prop_assert!((fast[i] as f64 - slow[i] as f64).abs() <= tol,
                    "fast {} vs reference {} at {}", fast[i], slow[i], i);
                prop_assert!((slow[i] as f64 - want).abs() <= tol,
                    "reference {} vs exact {} at {}", slow[i], want, i);
            }
        }

        /// The generic path (tiled or not) is the documented sum, bit for
        /// bit: each element `((0 + a0·b0) + a1·b1) + …` in order of `p`
        /// with separately rounded operations, then `alpha·v (+ beta·c)`.
        #[test]
        fn generic_path_is_the_in_order_sum(
            m in 1usize..11, n in 1usize..20, k in 0usize..30,
            ta: bool, tb: bool, use_beta: bool, seed: u64,
        ) {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let a: Vec<f32> = (0..m * k).map(|_| rnd() * 1e3).collect();
            let b: Vec<f32> = (0..k * n).map(|_| rnd()).collect();
            let c0: Vec<f32> = (0..m * n).map(|_| rnd()).collect();
            let (alpha, beta) = (rnd(), if use_beta { rnd() } else { 0.0 });
            let (lda, ldb) = (if ta { m } else { k }, if tb { k } else { n });
            let mut got = c0.clone();
            let (av, bv) = (
                MatRef { data: &a[..], ld: lda, trans: ta },
                MatRef { data: &b[..], ld: ldb, trans: tb },
            );
            crate::with_generic_kernels(|| gemm(m, n, k, alpha, av, bv, beta, &mut got, n));
            for i in 0..m {
                for j in 0..n {
                    let mut v = 0.0f32;
                    for p in 0..k {
                        let x = if ta { a[p * m + i] } else { a[i * k + p] };
                        let y = if tb { b[j * k + p] } else { b[p * n + j] };
                        v += x * y;
                    }
                    let prod = alpha * v;
                    let want = if beta == 0.0 { prod } else { prod + beta * c0[i * n + j] };
                    prop_assert_eq!(got[i * n + j].to_bits(), want.to_bits(), "({}, {})", i, j);
                }
            }
        }

        #[test]
        fn f64_simd_matches_reference(
            m in 1usize..20, n in 1usize..20, k in 1usize..40, ta: bool, tb: bool,
        ) {
            let a: Vec<f64> = (0..m * k).map(|i| ((i * 7 % 13) as f64) - 6.0).collect();
            let b: Vec<f64> = (0..k * n).map(|i| ((i * 5 % 11) as f64) - 5.0).collect();
            let (lda, ldb) = (if ta { m } else { k }, if tb { k } else { n });
            let mut fast = vec![0.0; m * n];
            let (av, bv) = (
                MatRef { data: &a[..], ld: lda, trans: ta },
                MatRef { data: &b[..], ld: ldb, trans: tb },
            );
            gemm(m, n, k, 1.0, av, bv, 0.0, &mut fast, n);
            let (exact, _) = naive(m, n, k, &a, ta, &b, tb);
            // small integers: exact in f64 whatever the order
            prop_assert_eq!(fast, exact);
        }
    }
}
