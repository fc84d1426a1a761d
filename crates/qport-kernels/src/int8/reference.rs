//! Exact integer matrix multiply of 8-bit operands with zero points: the
//! reference every quantized operator (and every later integer-arithmetic
//! profile) is checked against.
//!
//! [`igemm`] computes, for an `m × k` matrix `A` and a `k × n` matrix `B`,
//!
//! ```text
//! C[i][j] (+)= Σ_p (A[i][p] - za(i)) · (B[p][j] - zb(j))
//! ```
//!
//! where `za` is a zero point per tensor or per row of `A` and `zb` one per
//! tensor or per column of `B` ([`ZeroPoints`]). Operands are `u8` or `i8`
//! ([`QInt`]), addressed with arbitrary row and column strides so that
//! transposed views need no copy. The sum is exact: terms are at most
//! `255 · 255` in magnitude, so an `i32` accumulator cannot overflow while
//! `k ≤` [`MAX_EXACT_K_I32`]; beyond that the kernel accumulates in `i64`.
//! [`igemm_i64`] returns the 64-bit sums; [`igemm`] stores them into `i32`,
//! which is exact whenever the true result fits in 32 bits (otherwise it wraps
//! in two's complement, like onnxruntime's and numpy's `int32` results).
//!
//! The implementation is deliberately plain (zero points are subtracted while
//! packing each operand to `i16`, then a row-times-panel loop the compiler
//! vectorizes); speed comes from later, profile-specific kernels that are
//! checked against this one.

/// An 8-bit quantized operand type (`u8` or `i8`).
pub trait QInt: Copy + Send + Sync + 'static {
    /// The smallest representable value.
    const MIN: i32;
    /// The largest representable value.
    const MAX: i32;
    /// The value widened to `i32`.
    fn widen(self) -> i32;
    /// `v` saturated to this type's range.
    fn saturate(v: i32) -> Self;
    /// `v` converted by keeping its low bits (`as`); equal to
    /// [`Self::saturate`] for values in range, which is how the kernels
    /// call it, and free of the clamp.
    #[inline(always)]
    fn truncate(v: i32) -> Self {
        Self::saturate(v)
    }
    /// The slice as `u8`, when this type is `u8` (for kernels specialised
    /// to one operand type, such as the u8×s8 GEMMs).
    fn as_u8(s: &[Self]) -> Option<&[u8]> {
        let _ = s;
        None
    }
    /// The slice as `i8`, when this type is `i8`.
    fn as_i8(s: &[Self]) -> Option<&[i8]> {
        let _ = s;
        None
    }
}

impl QInt for u8 {
    const MIN: i32 = 0;
    const MAX: i32 = 255;
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
    #[inline(always)]
    fn saturate(v: i32) -> Self {
        v.clamp(0, 255) as u8
    }
    #[inline(always)]
    fn truncate(v: i32) -> Self {
        v as u8
    }
    fn as_u8(s: &[u8]) -> Option<&[u8]> {
        Some(s)
    }
}

impl QInt for i8 {
    const MIN: i32 = -128;
    const MAX: i32 = 127;
    #[inline(always)]
    fn widen(self) -> i32 {
        self as i32
    }
    #[inline(always)]
    fn saturate(v: i32) -> Self {
        v.clamp(-128, 127) as i8
    }
    #[inline(always)]
    fn truncate(v: i32) -> Self {
        v as i8
    }
    fn as_i8(s: &[i8]) -> Option<&[i8]> {
        Some(s)
    }
}

/// Zero points of one operand: a single value, or one per row of `A` / one
/// per column of `B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZeroPoints<'a> {
    /// One zero point for the whole matrix.
    Scalar(i32),
    /// One zero point per row (for `A`, length `m`) or per column (for `B`,
    /// length `n`).
    PerSlice(&'a [i32]),
}

impl From<i32> for ZeroPoints<'_> {
    fn from(z: i32) -> Self {
        ZeroPoints::Scalar(z)
    }
}

impl<'a> From<&'a [i32]> for ZeroPoints<'a> {
    fn from(z: &'a [i32]) -> Self {
        ZeroPoints::PerSlice(z)
    }
}

impl<'a> From<&'a Vec<i32>> for ZeroPoints<'a> {
    fn from(z: &'a Vec<i32>) -> Self {
        ZeroPoints::PerSlice(z)
    }
}

impl ZeroPoints<'_> {
    /// The zero point of row / column `i`.
    #[inline(always)]
    pub(crate) fn get(&self, i: usize) -> i32 {
        match self {
            ZeroPoints::Scalar(z) => *z,
            ZeroPoints::PerSlice(v) => v[i],
        }
    }

    fn check(&self, len: usize, who: &str, what: &str) {
        if let ZeroPoints::PerSlice(v) = self {
            assert_eq!(
                v.len(),
                len,
                "{who}: {what} zero points: expected {len}, got {}",
                v.len()
            );
        }
    }
}

/// A read-only strided matrix view: element `(r, c)` is
/// `data[r * row_stride + c * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct MatRef<'a, T> {
    /// The backing elements.
    pub data: &'a [T],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance between consecutive rows, in elements.
    pub row_stride: usize,
    /// Distance between consecutive columns, in elements.
    pub col_stride: usize,
}

impl<'a, T> MatRef<'a, T> {
    /// A dense row-major `rows × cols` view.
    pub fn row_major(data: &'a [T], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transpose of this view (no copy).
    pub fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    #[inline(always)]
    fn at(&self, r: usize, c: usize) -> &T {
        &self.data[r * self.row_stride + c * self.col_stride]
    }

    fn check_bounds(&self, who: &str, what: &str) {
        if self.rows == 0 || self.cols == 0 {
            return;
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|a| {
                (self.cols - 1)
                    .checked_mul(self.col_stride)
                    .and_then(|b| a.checked_add(b))
            })
            .unwrap_or_else(|| panic!("{who}: {what} view extent overflows"));
        assert!(
            last < self.data.len(),
            "{who}: {what} view {}x{} (strides {}, {}) exceeds its {} elements",
            self.rows,
            self.cols,
            self.row_stride,
            self.col_stride,
            self.data.len()
        );
    }
}

/// The largest inner dimension for which an `i32` accumulator is provably
/// exact: `k · 255² ≤ i32::MAX`.
pub const MAX_EXACT_K_I32: usize = (i32::MAX as usize) / (255 * 255);

/// The operands of an integer matrix product with zero points,
/// `(A − za) · (B − zb)`: `A` is `m × k` with a zero point per tensor or per
/// row, `B` is `k × n` with one per tensor or per column. Every integer GEMM
/// of this crate ([`igemm`], [`igemm_i64`], [`crate::satpair`]) takes them.
#[derive(Debug, Clone, Copy)]
pub struct Operands<'a, A, B> {
    /// The left operand, `m × k`.
    pub a: MatRef<'a, A>,
    /// Zero points of `A` (one, or one per row).
    pub za: ZeroPoints<'a>,
    /// The right operand, `k × n`.
    pub b: MatRef<'a, B>,
    /// Zero points of `B` (one, or one per column).
    pub zb: ZeroPoints<'a>,
}

impl<'a, A, B> Operands<'a, A, B> {
    /// The four operands of `(a − za) · (b − zb)`.
    pub fn new(a: MatRef<'a, A>, za: ZeroPoints<'a>, b: MatRef<'a, B>, zb: ZeroPoints<'a>) -> Self {
        Operands { a, za, b, zb }
    }

    /// Dense row-major `A` (`m × k`) and `B` (`k × n`); a zero point is an
    /// `i32` (one for the matrix) or a slice (one per row of `A` / column of
    /// `B`).
    ///
    /// ```
    /// use qport_kernels::igemm::{igemm, Operands};
    /// let mut c = [0i32; 1];
    /// igemm(Operands::row_major(&[3u8, 4], 1, &[5i8, -1], 0, (1, 2, 1)), &mut c, 1, false);
    /// assert_eq!(c, [2 * 5 + 3 * -1]);
    /// ```
    pub fn row_major(
        a: &'a [A],
        za: impl Into<ZeroPoints<'a>>,
        b: &'a [B],
        zb: impl Into<ZeroPoints<'a>>,
        (m, k, n): (usize, usize, usize),
    ) -> Self {
        let (a, b) = (MatRef::row_major(a, m, k), MatRef::row_major(b, k, n));
        Operands::new(a, za.into(), b, zb.into())
    }

    /// Panics, naming the kernel `who`, unless the inner dimensions agree,
    /// both views are within their slices, the zero points have the right
    /// lengths and an output of `c_len` elements with row stride `ldc` holds
    /// the `m × n` result.
    pub(crate) fn check(&self, c_len: usize, ldc: usize, who: &str) {
        let (a, b) = (&self.a, &self.b);
        assert_eq!(
            a.cols, b.rows,
            "{who}: A is {}x{} but B is {}x{}",
            a.rows, a.cols, b.rows, b.cols
        );
        a.check_bounds(who, "A");
        b.check_bounds(who, "B");
        self.za.check(a.rows, who, "A row");
        self.zb.check(b.cols, who, "B column");
        if a.rows > 0 && b.cols > 0 {
            assert!(ldc >= b.cols, "{who}: C row stride {ldc} < n = {}", b.cols);
            let need = (a.rows - 1) * ldc + b.cols;
            assert!(c_len >= need, "{who}: C has {c_len} elements, needs {need}");
        }
    }
}

/// Exact integer matrix multiply into `i32` (see the module docs).
///
/// `c` is row-major with row stride `c_row_stride` (`≥ n`); with
/// `accumulate` the products are added to its contents, otherwise they
/// overwrite them. The result is exact when it fits in `i32`, and wraps
/// otherwise.
///
/// ```
/// use qport_kernels::igemm::{igemm, MatRef, Operands, ZeroPoints};
/// let a: [u8; 4] = [130, 128, 127, 129]; // 2x2, zero point 128
/// let b: [i8; 4] = [1, 2, 3, 4]; // 2x2
/// let b_zero = [0, 1]; // one zero point per column of B
/// let mut c = [0i32; 4];
/// let ops = Operands::new(
///     MatRef::row_major(&a, 2, 2),
///     ZeroPoints::Scalar(128),
///     MatRef::row_major(&b, 2, 2),
///     ZeroPoints::PerSlice(&b_zero),
/// );
/// igemm(ops, &mut c, 2, false);
/// assert_eq!(c, [2, 2, 2, 2]); // [[2, 0], [-1, 1]] · [[1, 1], [3, 3]]
/// ```
///
/// # Panics
/// Panics when shapes disagree (`a.cols != b.rows`), a view exceeds its
/// slice, per-slice zero points have the wrong length, or `c` is too short.
/// Callers validate model-provided shapes before calling.
pub fn igemm<A: QInt, B: QInt>(
    ops: Operands<'_, A, B>,
    c: &mut [i32],
    c_row_stride: usize,
    accumulate: bool,
) {
    let Some(bp) = checked_b(&ops, c.len(), c_row_stride) else {
        return;
    };
    let Operands { a, za: a_zero, .. } = ops;
    let (m, n) = (a.rows, ops.b.cols);
    if a.cols <= MAX_EXACT_K_I32 {
        let k = a.cols;
        let mut ap = vec![0i16; m * k];
        for (i, row) in ap.chunks_mut(k.max(1)).enumerate().take(m) {
            pack_a_row(&a, &a_zero, i, row);
        }
        let mut acc = vec![0i32; ROWS * COLS];
        for j0 in (0..n).step_by(COLS) {
            let nb = COLS.min(n - j0);
            for i0 in (0..m).step_by(ROWS) {
                let rows = ROWS.min(m - i0);
                let acc = &mut acc[..rows * nb];
                acc.fill(0);
                if rows == ROWS {
                    rows4_times_block(&ap[i0 * k..(i0 + ROWS) * k], k, &bp, n, j0, nb, acc);
                } else {
                    for r in 0..rows {
                        let arow = &ap[(i0 + r) * k..(i0 + r + 1) * k];
                        row_times_panel_i32(arow, &bp[j0..], n, nb, &mut acc[r * nb..(r + 1) * nb]);
                    }
                }
                for r in 0..rows {
                    let i = i0 + r;
                    store(
                        &mut c[i * c_row_stride + j0..i * c_row_stride + j0 + nb],
                        &acc[r * nb..(r + 1) * nb],
                        accumulate,
                        |v| v,
                    );
                }
            }
        }
    } else {
        rows_i64(&a, &a_zero, &bp, n, (c, c_row_stride), accumulate, |v| {
            v as i32
        });
    }
}

/// Exact integer matrix multiply into `i64` (never overflows for any `k`
/// that fits in memory). Same contract as [`igemm`] otherwise.
pub fn igemm_i64<A: QInt, B: QInt>(
    ops: Operands<'_, A, B>,
    c: &mut [i64],
    c_row_stride: usize,
    accumulate: bool,
) {
    let Some(bp) = checked_b(&ops, c.len(), c_row_stride) else {
        return;
    };
    let n = ops.b.cols;
    rows_i64(
        &ops.a,
        &ops.za,
        &bp,
        n,
        (c, c_row_stride),
        accumulate,
        |v| v,
    );
}

/// The checks of [`igemm`] and [`igemm_i64`], then `B − zb` packed
/// ([`pack_b`]); `None` when `C` is empty (nothing to do).
fn checked_b<A, B: QInt>(ops: &Operands<'_, A, B>, c_len: usize, ldc: usize) -> Option<Vec<i16>> {
    ops.check(c_len, ldc, "igemm");
    (ops.a.rows > 0 && ops.b.cols > 0).then(|| pack_b(&ops.b, &ops.zb))
}

/// The exact i64 row loop (any `k`): each row of `C` (row stride `ldc`)
/// is row `i` of `A − za` times the packed `bp` (`k × n`), its sums through
/// `narrow`, stored or added ([`store`]).
fn rows_i64<A: QInt, T: Copy + std::ops::Add<Output = T>>(
    a: &MatRef<'_, A>,
    a_zero: &ZeroPoints<'_>,
    bp: &[i16],
    n: usize,
    (c, ldc): (&mut [T], usize),
    accumulate: bool,
    narrow: impl Fn(i64) -> T,
) {
    let mut arow = vec![0i16; a.cols];
    let mut acc = vec![0i64; n];
    for i in 0..a.rows {
        pack_a_row(a, a_zero, i, &mut arow);
        acc.fill(0);
        row_times_panel_i64(&arow, bp, n, &mut acc);
        store(&mut c[i * ldc..i * ldc + n], &acc, accumulate, &narrow);
    }
}

/// Packs `B - zb` as a dense row-major `k × n` panel of `i16` (the
/// difference of two 8-bit values always fits).
fn pack_b<B: QInt>(b: &MatRef<'_, B>, zero: &ZeroPoints<'_>) -> Vec<i16> {
    let (k, n) = (b.rows, b.cols);
    let mut out = Vec::with_capacity(k * n);
    let zs: Vec<i32> = (0..n).map(|j| zero.get(j)).collect();
    for p in 0..k {
        for (j, &z) in zs.iter().enumerate() {
            out.push(diff16(b.at(p, j).widen(), z));
        }
    }
    out
}

fn pack_a_row<A: QInt>(a: &MatRef<'_, A>, zero: &ZeroPoints<'_>, i: usize, out: &mut [i16]) {
    let z = zero.get(i);
    for (p, o) in out.iter_mut().enumerate() {
        *o = diff16(a.at(i, p).widen(), z);
    }
}

/// `v - z` as `i16`. Zero points outside the operand's range (which no valid
/// model has) are clamped so the product bound of the module docs holds.
#[inline(always)]
fn diff16(v: i32, z: i32) -> i16 {
    (v - z).clamp(-255, 255) as i16
}

/// Rows of `A` per register block of the i32 kernel.
const ROWS: usize = 4;
/// Columns of `B` per cache block of the i32 kernel.
const COLS: usize = 256;

/// `acc[j] += Σ_p arow[p] · panel[p·ld + j]` for `j < nb` (`panel` starts
/// at the block's first column; `ld` is the panel's row stride).
fn row_times_panel_i32(arow: &[i16], panel: &[i16], ld: usize, nb: usize, acc: &mut [i32]) {
    for (p, &av) in arow.iter().enumerate() {
        if av == 0 {
            continue;
        }
        let av = av as i32;
        let brow = &panel[p * ld..p * ld + nb];
        for (o, &bv) in acc.iter_mut().zip(brow) {
            *o += av * bv as i32;
        }
    }
}

/// Four rows of `A` (`a`, row-major `4 × k`) against columns `j0..j0+nb`
/// of the packed panel (row stride `ld`): each panel row is loaded once for
/// the four accumulator rows in `acc` (`4 × nb`).
fn rows4_times_block(
    a: &[i16],
    k: usize,
    panel: &[i16],
    ld: usize,
    j0: usize,
    nb: usize,
    acc: &mut [i32],
) {
    let (acc0, rest) = acc.split_at_mut(nb);
    let (acc1, rest) = rest.split_at_mut(nb);
    let (acc2, acc3) = rest.split_at_mut(nb);
    for p in 0..k {
        let (a0, a1, a2, a3) = (
            a[p] as i32,
            a[k + p] as i32,
            a[2 * k + p] as i32,
            a[3 * k + p] as i32,
        );
        let brow = &panel[p * ld + j0..p * ld + j0 + nb];
        for j in 0..nb {
            let b = brow[j] as i32;
            acc0[j] += a0 * b;
            acc1[j] += a1 * b;
            acc2[j] += a2 * b;
            acc3[j] += a3 * b;
        }
    }
}

fn row_times_panel_i64(arow: &[i16], panel: &[i16], n: usize, acc: &mut [i64]) {
    // Accumulate exact i32 partial sums over chunks of k, then widen.
    let mut part = vec![0i32; n];
    for (chunk_idx, chunk) in arow.chunks(MAX_EXACT_K_I32).enumerate() {
        part.fill(0);
        let p0 = chunk_idx * MAX_EXACT_K_I32;
        row_times_panel_i32(chunk, &panel[p0 * n..], n, n, &mut part);
        for (o, &v) in acc.iter_mut().zip(&part) {
            *o += v as i64;
        }
    }
}

fn store<T: Copy, U: Copy + std::ops::Add<Output = U>>(
    dst: &mut [U],
    src: &[T],
    accumulate: bool,
    conv: impl Fn(T) -> U,
) {
    if accumulate {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = *d + conv(s);
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = conv(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn naive<A: QInt, B: QInt>(
        a: &MatRef<'_, A>,
        za: &ZeroPoints<'_>,
        b: &MatRef<'_, B>,
        zb: &ZeroPoints<'_>,
    ) -> Vec<i64> {
        let mut out = vec![0i64; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                let mut s = 0i64;
                for p in 0..a.cols {
                    s += (a.at(i, p).widen() - za.get(i)) as i64
                        * (b.at(p, j).widen() - zb.get(j)) as i64;
                }
                out[i * b.cols + j] = s;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_naive(m in 1usize..6, k in 0usize..9, n in 1usize..6, seed in any::<u64>(),
                         per_row in any::<bool>(), per_col in any::<bool>(), trans_b in any::<bool>()) {
            let mut s = seed;
            let mut next = || { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) as u32 };
            let a: Vec<u8> = (0..m * k).map(|_| next() as u8).collect();
            let b: Vec<i8> = (0..k * n).map(|_| next() as i8).collect();
            let za: Vec<i32> = (0..m).map(|_| (next() % 256) as i32).collect();
            let zb: Vec<i32> = (0..n).map(|_| (next() % 256) as i32 - 128).collect();
            let zav = if per_row { ZeroPoints::PerSlice(&za) } else { ZeroPoints::Scalar(za[0]) };
            let zbv = if per_col { ZeroPoints::PerSlice(&zb) } else { ZeroPoints::Scalar(zb[0]) };
            let av = MatRef::row_major(&a, m, k);
            let bv = if trans_b { MatRef::row_major(&b, n, k).t() } else { MatRef::row_major(&b, k, n) };
            let want = naive(&av, &zav, &bv, &zbv);
            let mut c = vec![7i32; m * n];
            igemm(Operands::new(av, zav, bv, zbv), &mut c, n, false);
            prop_assert_eq!(c.iter().map(|&v| v as i64).collect::<Vec<_>>(), want.clone());
            let mut c64 = vec![1i64; m * n];
            igemm_i64(Operands::new(av, zav, bv, zbv), &mut c64, n, true);
            prop_assert_eq!(c64, want.iter().map(|v| v + 1).collect::<Vec<_>>());
        }
    }

    #[test]
    fn large_k_is_exact_in_i64() {
        // k beyond the i32-exact bound: every product is 255 * 255.
        let k = MAX_EXACT_K_I32 + 10;
        let a = vec![255u8; k];
        let b = vec![0u8; k];
        let (av, bv) = (MatRef::row_major(&a, 1, k), MatRef::row_major(&b, k, 1));
        let (za, zb) = (ZeroPoints::Scalar(0), ZeroPoints::Scalar(255));
        let mut c = [0i64; 1];
        igemm_i64(Operands::new(av, za, bv, zb), &mut c, 1, false);
        assert_eq!(c[0], -(k as i64) * 255 * 255);
        let mut c32 = [0i32; 1];
        igemm(Operands::new(av, za, bv, zb), &mut c32, 1, false);
        assert_eq!(c32[0], (-(k as i64) * 255 * 255) as i32);
    }

    #[test]
    fn strided_output() {
        let a: [i8; 2] = [1, -1];
        let b: [i8; 2] = [3, 4];
        let mut c = [9i32; 6];
        igemm(
            Operands::row_major(&a, 0, &b, 0, (2, 1, 2)),
            &mut c,
            3,
            false,
        );
        assert_eq!(c, [3, 4, 9, -3, -4, 9]);
    }
}
