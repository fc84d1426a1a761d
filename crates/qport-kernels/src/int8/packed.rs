//! What every exact u8×s8 GEMM backend shares: the signed operand packed
//! once ([`PackedI8`]), the largest reduction length whose i32 sums are
//! exact ([`MAX_K`]) and the shape checks of the backends' common
//! contract (`A` i8 `m × k` row-major with one zero point per row, `B` u8
//! `k × n` row-major with one zero point, `C` i32 row-major with row
//! stride `ldc`).

/// Largest `k` for which every i32 lane sum is exact: `k · 255 · 128 <
/// 2^31`.
pub const MAX_K: usize = 65_536;

/// The signed operand `A` (`m × k`, i8) of the exact u8×s8 GEMM
/// ([`crate::qgemm::gemm_u8s8`]) prepared once:
/// rows as groups of four bytes (zero padded to a multiple of four) and the
/// row sums the zero-point correction needs. Convolution weights are packed
/// when a plan is built, so inference never repacks them.
#[derive(Debug, Clone)]
pub struct PackedI8 {
    pub(crate) m: usize,
    pub(crate) k: usize,
    /// `k / 4`, rounded up.
    pub(crate) kq: usize,
    /// The matrix as given (row-major `m × k`), for the other kernels.
    given: Vec<i8>,
    /// Each row as `kq` groups of four bytes (little-endian i32), zero
    /// padded: the VNNI kernel's broadcast operand.
    pub(crate) quads: Vec<i32>,
    /// `Σ_p A[i][p]` per row.
    pub(crate) row_sum: Vec<i32>,
    /// `Σ_p |A[i][p]|` per row (bounds the sums, for the requantizing
    /// epilogue's overflow check).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) abs_sum: Vec<i64>,
    /// The AVX2 kernel's layout (`[⌈m/6⌉][⌈k/2⌉][6]` int16 pairs), built on
    /// its first use.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) pairs: std::sync::OnceLock<Vec<i32>>,
    /// The VNNI matrix-vector kernel's layout (`[⌈m/16⌉][kq][16]` quads:
    /// sixteen rows' quads side by side), built on its first use.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) row_blocks: std::sync::OnceLock<Vec<i32>>,
    /// The AMX tiles' layout (rows padded to a multiple of 32, each row's
    /// quads to a multiple of 16, every byte of `A` plus 128 as u8), built
    /// on its first use.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) tiles: std::sync::OnceLock<(Vec<i32>, usize)>,
}

impl PackedI8 {
    /// Packs `a` (`m × k` row-major).
    ///
    /// # Panics
    /// When `a` is shorter than `m · k`.
    pub fn new(a: &[i8], m: usize, k: usize) -> PackedI8 {
        assert!(a.len() >= m * k);
        let kq = k.div_ceil(4);
        let mut quads = vec![0i32; m * kq];
        let mut row_sum = vec![0i32; m];
        let mut abs_sum = vec![0i64; m];
        for i in 0..m {
            let row = &a[i * k..(i + 1) * k];
            for (t, g) in row.chunks(4).enumerate() {
                let mut bytes = [0u8; 4];
                for (d, &v) in bytes.iter_mut().zip(g) {
                    *d = v as u8;
                }
                quads[i * kq + t] = i32::from_le_bytes(bytes);
            }
            row_sum[i] = row.iter().map(|&v| i32::from(v)).sum();
            abs_sum[i] = row.iter().map(|&v| i64::from(v).abs()).sum();
        }
        PackedI8 {
            m,
            k,
            kq,
            quads,
            row_sum,
            abs_sum,
            given: a[..m * k].to_vec(),
            pairs: std::sync::OnceLock::new(),
            row_blocks: std::sync::OnceLock::new(),
            tiles: std::sync::OnceLock::new(),
        }
    }

    /// The matrix as given (row-major `m × k`).
    pub fn as_slice(&self) -> &[i8] {
        &self.given
    }

    /// Rows (`m`).
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Reduction length (`k`).
    pub fn depth(&self) -> usize {
        self.k
    }
}

/// Panics unless the slices of one u8×s8 GEMM call are as long as its
/// shape says: `A` (`a_len`) `m × k`, `za` `m`, `B` `k × n`, `C` `m` rows
/// of stride `ldc ≥ n`.
///
/// # Panics
/// When a slice is shorter than its shape says, or `ldc < n`.
fn check_u8s8(
    a_len: usize,
    za_len: usize,
    b_len: usize,
    c_len: usize,
    (m, k, n): (usize, usize, usize),
    ldc: usize,
) {
    assert!(a_len >= m * k && b_len >= k * n && za_len >= m);
    assert!(ldc >= n && (m == 0 || c_len >= (m - 1) * ldc + n));
}

/// The operands of one u8×s8 GEMM call under the backends' common
/// contract: `A` (`m × k`, a row-major slice or a [`PackedI8`]) with one
/// zero point per row, `B` (`k × n` u8 row-major) with zero point `zb`.
pub(crate) struct U8s8<'a, A: ?Sized> {
    /// The signed operand.
    pub(crate) a: &'a A,
    /// `A`'s zero points, one per row.
    pub(crate) za: &'a [i32],
    /// The unsigned operand.
    pub(crate) b: &'a [u8],
    /// `B`'s zero point.
    pub(crate) zb: i32,
    /// `(m, k, n)`.
    pub(crate) dims: (usize, usize, usize),
    /// Elements from one row of `B` to the next: `n` for a dense `B`;
    /// more only where a kernel reads `B` in place (the VNNI kernel's
    /// fused requantization, [`crate::qgemm::gemm_u8s8_requant`]).
    pub(crate) ldb: usize,
}

impl<'a, A: ?Sized> U8s8<'a, A> {
    /// The operands with a dense `B` (rows `n` apart, `dims = (m, k, n)`).
    pub(crate) fn dense(
        a: &'a A,
        za: &'a [i32],
        b: &'a [u8],
        zb: i32,
        dims: (usize, usize, usize),
    ) -> Self {
        U8s8 {
            a,
            za,
            b,
            zb,
            dims,
            ldb: dims.2,
        }
    }

    /// The same operands with `A` in another form (e.g. packed).
    pub(crate) fn with_a<'b, A2: ?Sized>(self, a: &'b A2) -> U8s8<'b, A2>
    where
        'a: 'b,
    {
        let U8s8 {
            za,
            b,
            zb,
            dims,
            ldb,
            ..
        } = self;
        U8s8 {
            a,
            za,
            b,
            zb,
            dims,
            ldb,
        }
    }
}

/// A backend's kernel on checked operands of non-empty shape, as a plain
/// function: `C` and its row stride after the operands.
pub(crate) type Kernel<A> = fn(U8s8<'_, A>, &mut [i32], usize);

/// The entry every backend's `gemm_u8s8` runs: checks the slices against
/// the shape ([`check_u8s8`]; `a_len` is how many values of `A` there
/// are), declines (`false`, `c` untouched) where the backend has no
/// `kernel` for this CPU and thread or `k` exceeds [`MAX_K`], and
/// otherwise runs `kernel` on non-empty shapes and returns `true`.
///
/// # Panics
/// As [`check_u8s8`].
pub(crate) fn run_u8s8<'a, 'c, A: ?Sized>(
    ops: U8s8<'a, A>,
    a_len: usize,
    c: &'c mut [i32],
    ldc: usize,
    kernel: Option<impl FnOnce(U8s8<'a, A>, &'c mut [i32], usize)>,
) -> bool {
    let (m, k, n) = ops.dims;
    check_u8s8(a_len, ops.za.len(), ops.b.len(), c.len(), (m, k, n), ldc);
    let Some(kernel) = kernel.filter(|_| k <= MAX_K) else {
        return false;
    };
    if m > 0 && n > 0 {
        kernel(ops, c, ldc);
    }
    true
}

/// A backend's requantizing kernel on checked operands: the sums of
/// `o`'s `m` rows requantized by the float forms into rows of bytes, the
/// first at the pointer, the next the stride further on each.
pub(crate) type RequantBytes =
    unsafe fn(U8s8<'_, PackedI8>, &[qport_core::arith::FloatRequant], *mut u8, usize);

/// The entry of a backend's requantizing GEMM (`gemm_requant_packed` of
/// the VNNI and AVX2 backends, behind [`crate::qgemm::gemm_u8s8_requant`]):
/// checks the operands (`n` is the block's width, `B`'s `k` rows of `n`
/// bytes lie `ldb` apart), declines (`false`, nothing written) where
/// `kernel` is `None`, `T` is not one byte or `k` exceeds
/// [`crate::int8::MAX_K`], and otherwise runs `kernel` into rows `row0..`
/// of the block.
///
/// # Panics
/// When `ldb < n`, a slice is shorter than its shape says, `rq` has fewer
/// than `m` entries or the block fewer than `row0 + m` rows.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_requant<T>(
    a: &PackedI8,
    za: &[i32],
    (b, ldb): (&[u8], usize),
    zb: i32,
    rq: &[qport_core::arith::FloatRequant],
    out: &mut crate::par::ColumnBlock<'_, T>,
    row0: usize,
    kernel: Option<RequantBytes>,
) -> bool {
    let (m, k, n) = (a.m, a.k, out.cols().len());
    assert!(ldb >= n, "rows of B {ldb} apart, {n} long");
    let b_len = if k == 0 { 0 } else { (k - 1) * ldb + n };
    assert!(za.len() >= m && b.len() >= b_len && rq.len() >= m);
    assert!(
        row0 + m <= out.rows(),
        "rows {row0}..{} of {}",
        row0 + m,
        out.rows()
    );
    let Some(kernel) = kernel.filter(|_| std::mem::size_of::<T>() == 1 && k <= MAX_K) else {
        return false;
    };
    if m == 0 || n == 0 {
        return true;
    }
    let (ptr, ldo) = out.raw_parts();
    let o = U8s8 {
        a,
        za,
        b,
        zb,
        dims: (m, k, n),
        ldb,
    };
    // SAFETY: row `row0` of the block is inside the matrix (checked
    // above); `T` is one byte; the kernel is handed out only where the CPU
    // runs it (the callers' contract); rows row0..row0 + m and the block's
    // columns are the block's alone (`ColumnBlock`), borrowed mutably here.
    unsafe { kernel(o, rq, ptr.add(row0 * ldo).cast::<u8>(), ldo) };
    true
}

/// Defines a backend's public `gemm_u8s8` (the common contract; its doc
/// comment from the caller) as [`run_u8s8`] with the backend's kernel: an
/// `Option` of a kernel on checked operands, evaluated on each call where
/// `target_arch` is `$arch` (elsewhere the backend never runs).
macro_rules! gemm_u8s8_entry {
    ($(#[$attr:meta])* on $arch:literal => $kernel:expr) => {
        $(#[$attr])*
        pub fn gemm_u8s8(
            a: &[i8],
            za: &[i32],
            b: &[u8],
            zb: i32,
            dims: (usize, usize, usize),
            c: &mut [i32],
            ldc: usize,
        ) -> bool {
            use $crate::int8::packed::{run_u8s8, U8s8};
            #[cfg(target_arch = $arch)]
            let kernel = $kernel;
            #[cfg(not(target_arch = $arch))]
            let kernel = None::<$crate::int8::packed::Kernel<[i8]>>;
            run_u8s8(U8s8::dense(a, za, b, zb, dims), a.len(), c, ldc, kernel)
        }
    };
}
pub(crate) use gemm_u8s8_entry;

/// The checks every backend's `gemm_u8s8` (the same signature in
/// `avx2q`, `vnni` and `arm`) passes.
#[cfg(test)]
pub(crate) mod backend_tests {
    use crate::igemm::{igemm, Operands};

    /// A backend's `gemm_u8s8`: `true` when it ran.
    pub(crate) type GemmU8s8 =
        fn(&[i8], &[i32], &[u8], i32, (usize, usize, usize), &mut [i32], usize) -> bool;

    /// The exact sums of `(A − za) · (B − zb)` ([`igemm`]) that every
    /// backend is held to, `m` rows with row stride `ldc` (padding 7).
    pub(crate) fn exact(
        (a, za): (&[i8], &[i32]),
        (b, zb): (&[u8], i32),
        dims: (usize, usize, usize),
        ldc: usize,
    ) -> Vec<i32> {
        let mut want = vec![7i32; dims.0 * ldc];
        igemm(
            Operands::row_major(a, za, b, zb, dims),
            &mut want,
            ldc,
            false,
        );
        want
    }

    /// Checks `gemm` against the exact sums of [`igemm`] with row stride
    /// `ldc`: equal where it ran (padding untouched), `c` untouched where it
    /// did not. Returns whether it ran.
    pub(crate) fn check(
        gemm: GemmU8s8,
        (a, za): (&[i8], &[i32]),
        (b, zb): (&[u8], i32),
        dims: (usize, usize, usize),
        ldc: usize,
    ) -> bool {
        let want = exact((a, za), (b, zb), dims, ldc);
        let mut got = vec![7i32; dims.0 * ldc];
        let ran = gemm(a, za, b, zb, dims, &mut got, ldc);
        if ran {
            assert_eq!(got, want);
        } else {
            assert!(got.iter().all(|&v| v == 7));
        }
        ran
    }

    /// `gemm` runs exactly where `available` says (and sums right), never
    /// under the generic table, and leaves `c` alone where it does not run.
    pub(crate) fn reports_whether_it_ran(gemm: GemmU8s8, available: fn() -> bool) {
        let mut c = [0i32; 1];
        let ran = gemm(&[2, 3], &[0], &[5, 7], 0, (1, 2, 1), &mut c, 1);
        assert_eq!(ran, available());
        if ran {
            assert_eq!(c[0], 31);
        } else {
            assert_eq!(c[0], 0);
        }
        // the portable path is forced inside with_generic_kernels
        let ran =
            crate::with_generic_kernels(|| gemm(&[2, 3], &[0], &[5, 7], 0, (1, 2, 1), &mut c, 1));
        assert!(!ran);
    }
}
