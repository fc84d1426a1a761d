//! Single-precision matrix multiply with a constant left operand packed
//! once ([`PackedA`]) and a per-row bias and [`Activation`] applied while
//! each output tile is in registers: the step of a convolution as GEMM,
//! `Y [M, N] = act(W [M, K] x X [K, N] + b)`.
//!
//! The sum over `k` runs in blocks of `k_block` terms (all `k` in one
//! block when `k_block` is 0 or at least `k`): each block's partial sum
//! starts from zero and is added to the sum of the blocks before it, one
//! rounded addition per block, as onnxruntime's SGEMM (MLAS) blocks its
//! `K` dimension; [`ort_k_block`] gives its block for a product.
//!
//! On AVX-512F and on AVX2+FMA the product runs in this module's own
//! kernel (one generic body, `arch::x86_64::pgemm` on x86-64, per level
//! its tile): rows of `A` in tiles of 8 (AVX-512) or 6 (AVX2), read from
//! `A` packed once in panels of 32 or 24 rows; columns of `B` in panels of
//! two vectors (32 or 16, copied into a contiguous buffer once per
//! panel); or, for a narrow `B`, vectors along the rows of `C` (a panel
//! of `A` by up to 14 or 3 columns). Each block of each output element is
//! one sequence of fused multiply-adds in order of increasing `k`, then
//! bias, then activation, then a single store: the arithmetic of MLAS's
//! FMA kernels, element for element, so both levels give the same bits.
//! Elsewhere it runs [`crate::gemm::gemm`] per block of `k` (accumulating
//! into `C`) on blocks of columns, followed by the epilogue on the block
//! while it is in cache; with [`crate::force_generic`] (or inside
//! [`crate::with_generic_kernels`]) that is the scalar reference: each
//! element summed in order of increasing `k` with separate multiplies and
//! adds, then the bias, then the activation.

use crate::activation::Activation;
#[cfg(target_arch = "x86_64")]
use crate::arch::x86_64::pgemm as x86;
use crate::dispatch::{level, Level};
use crate::gemm::{gemm, MatRef};

/// The tile geometry of one SIMD level's kernels (see
/// `arch::x86_64::pgemm`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Geom {
    /// Rows per tile of the kernel for a wide `B` (divides `mt`).
    pub(crate) mr: usize,
    /// Columns per panel of the right operand (two vectors).
    pub(crate) nr: usize,
    /// Rows per panel of the packed left operand, and per tile of the
    /// transposed kernel (narrow `B`: vectors run along the rows of `C`).
    pub(crate) mt: usize,
    /// Columns of `C` per tile of the transposed kernel, at most.
    pub(crate) nt: usize,
    /// The transposed tile's rate of fused multiply-adds relative to the
    /// wide tile's, per used lane (measured).
    pub(crate) t_rate: f64,
}

/// AVX-512F: 8 x 32 tiles, panels of 32 rows, transposed tiles 32 x 14
/// (16 and 28 accumulators of 32 registers).
pub(crate) const AVX512: Geom = Geom {
    mr: 8,
    nr: 32,
    mt: 32,
    nt: 14,
    t_rate: 1.0,
};

/// AVX2 + FMA: 6 x 16 tiles, panels of 24 rows, transposed tiles 24 x 3
/// (12 and 9 accumulators of 16 registers: at 24 x 4 the three vectors of
/// `A` and a broadcast leave no register free, and the compiler spills an
/// accumulator on every step). With fewer accumulators and more loads per
/// multiply-add the transposed tile is the slower one: on ResNet-50 (Zen
/// 4) the wide order won at 14 x 14 (196 columns, 94 % of the lanes) and
/// lost at 7 x 7 (49 columns, 77 %).
pub(crate) const AVX2: Geom = Geom {
    mr: 6,
    nr: 16,
    mt: 24,
    nt: 3,
    t_rate: 0.88,
};

/// The geometry `level`'s kernels pack for, if it has its own kernels.
fn geom_of(level: Level) -> Option<Geom> {
    match level {
        Level::Avx512 => Some(AVX512),
        Level::Avx2 => Some(AVX2),
        Level::Generic => None,
    }
}

/// A constant `m x k` left operand (given row-major), held once: in
/// panels of the level's `mt` rows where the AVX-512 or AVX2 kernels will
/// run (both orientations read that one layout), else as given.
#[derive(Clone, Debug)]
pub struct PackedA {
    pub(crate) m: usize,
    pub(crate) k: usize,
    /// The matrix as given; empty when packed in panels.
    rows: Vec<f32>,
    /// Panel `q`, column `p`, row `r` at `(q * k + p) * mt + r`; rows past
    /// `m` are zero. Empty at the generic level.
    pub(crate) panels: Vec<f32>,
    /// Rows per panel (0 when not packed in panels).
    pub(crate) mt: usize,
    pub(crate) level: Level,
    /// Address of the slice packed (see [`PackedA::is_packing_of`]).
    source: usize,
}

impl PackedA {
    /// Packs the row-major `m x k` matrix `a`.
    ///
    /// # Panics
    /// Panics if `a` holds fewer than `m * k` elements.
    pub fn new(a: &[f32], m: usize, k: usize) -> PackedA {
        Self::at(level(), a, m, k)
    }

    pub(crate) fn at(level: Level, a: &[f32], m: usize, k: usize) -> PackedA {
        let n = m.checked_mul(k).expect("PackedA: m * k overflows");
        assert!(a.len() >= n, "PackedA: {} elements, needs {n}", a.len());
        let a = &a[..n];
        let mt = geom_of(level).map_or(0, |g| g.mt);
        let (rows, panels) = if mt > 0 {
            (vec![], pack_panels(a, m, k, mt))
        } else {
            (a.to_vec(), vec![])
        };
        PackedA {
            m,
            k,
            rows,
            panels,
            mt,
            level,
            source: a.as_ptr() as usize,
        }
    }

    /// Rows (`m`).
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns (`k`).
    pub fn cols(&self) -> usize {
        self.k
    }

    /// Element `(i, p)`.
    pub(crate) fn at_ip(&self, i: usize, p: usize) -> f32 {
        if self.panels.is_empty() {
            self.rows[i * self.k + p]
        } else {
            let mt = self.mt;
            self.panels[((i / mt) * self.k + p) * mt + i % mt]
        }
    }

    /// The matrix as given (row-major `m x k`): borrowed where it is held
    /// that way, else unpacked into a new vector.
    ///
    /// ```
    /// use qport_kernels::pgemm::PackedA;
    /// let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// assert_eq!(&*PackedA::new(&a, 2, 3).row_major(), &a[..]);
    /// ```
    pub fn row_major(&self) -> std::borrow::Cow<'_, [f32]> {
        if self.panels.is_empty() {
            return std::borrow::Cow::Borrowed(&self.rows);
        }
        let (m, k) = (self.m, self.k);
        let mut out = Vec::with_capacity(m * k);
        for i in 0..m {
            out.extend((0..k).map(|p| self.at_ip(i, p)));
        }
        std::borrow::Cow::Owned(out)
    }

    /// A cheap check that `a` is the matrix this was packed from: the same
    /// storage (address and length) it was built from, holding the same
    /// values at a sample of positions. Meant for operators that pack a
    /// constant once and are then called with that same constant.
    pub fn is_packing_of(&self, a: &[f32]) -> bool {
        let n = self.m * self.k;
        if a.as_ptr() as usize != self.source || a.len() != n {
            return false;
        }
        let step = (n / 16).max(1);
        (0..n)
            .step_by(step)
            .chain(n.checked_sub(1))
            .all(|i| a[i].to_bits() == self.at_ip(i / self.k, i % self.k).to_bits())
    }
}

/// The row-major `m x k` matrix `a` in panels of `width` rows: panel `q`,
/// column `p`, row `r` at `(q * k + p) * width + r`, rows past `m` zero.
fn pack_panels(a: &[f32], m: usize, k: usize, width: usize) -> Vec<f32> {
    let mut p = vec![0.0f32; m.div_ceil(width) * k * width];
    for i in 0..m {
        let (q, r) = (i / width, i % width);
        for (pp, &v) in a[i * k..][..k].iter().enumerate() {
            p[(q * k + pp) * width + r] = v;
        }
    }
    p
}

/// The operands of one [`gemm_bias_act`] but `C`'s storage, checked
/// against it; the AVX-512 kernel takes them as they are.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    pub(crate) a: &'a PackedA,
    pub(crate) b: &'a [f32],
    pub(crate) ldb: usize,
    pub(crate) n: usize,
    pub(crate) bias: Option<&'a [f32]>,
    /// An `m x n` matrix added after the bias, with its leading dimension.
    pub(crate) addend: Option<(&'a [f32], usize)>,
    pub(crate) act: Activation,
    pub(crate) ldc: usize,
    /// Terms per block of the sum over `k`, at least 1.
    pub(crate) kc: usize,
}

impl<'a> Call<'a> {
    /// The operands of [`gemm_bias_act`] writing `c`, checked.
    ///
    /// # Panics
    /// As [`gemm_bias_act`].
    #[allow(clippy::too_many_arguments)]
    fn checked(
        a: &'a PackedA,
        b: &'a [f32],
        ldb: usize,
        n: usize,
        bias: Option<&'a [f32]>,
        addend: Option<(&'a [f32], usize)>,
        act: Activation,
        c: &[f32],
        ldc: usize,
        k_block: usize,
    ) -> Call<'a> {
        let kc = if k_block == 0 { a.k } else { k_block.min(a.k) };
        let call = Call {
            a,
            b,
            ldb,
            n,
            bias,
            addend,
            act,
            ldc,
            kc: kc.max(1),
        };
        let (m, k) = (a.m, a.k);
        if m == 0 || n == 0 {
            return call;
        }
        assert!(ldb >= n && ldc >= n, "gemm_bias_act: leading dimension < n");
        if k > 0 {
            assert!(
                b.len() >= (k - 1) * ldb + n,
                "gemm_bias_act: B has {} elements, too short",
                b.len()
            );
        }
        assert!(
            c.len() >= (m - 1) * ldc + n,
            "gemm_bias_act: C has {} elements, too short",
            c.len()
        );
        if let Some(bias) = bias {
            assert!(bias.len() >= m, "gemm_bias_act: bias too short");
        }
        if let Some((r, ldr)) = addend {
            assert!(ldr >= n, "gemm_bias_act: addend leading dimension < n");
            assert!(
                r.len() >= (m - 1) * ldr + n,
                "gemm_bias_act: addend has {} elements, too short",
                r.len()
            );
        }
        call
    }
}

/// `C[i][j] = act(sum over p of A[i][p] * B[p][j] + bias[i])` for `i <
/// a.rows()`, `j < n`, with `B` row-major `k x n` (leading dimension `ldb`)
/// and `C` row-major (leading dimension `ldc`; every element in the `m x n`
/// view is overwritten), the sum in blocks of `k_block` terms (0: one
/// block; see the [module docs](self)). `scratch` is reused between calls.
///
/// # Panics
/// Panics if a slice is too short for its view or a leading dimension is
/// smaller than `n`.
#[allow(clippy::too_many_arguments)]
pub fn gemm_bias_act(
    a: &PackedA,
    b: &[f32],
    ldb: usize,
    n: usize,
    bias: Option<&[f32]>,
    act: Activation,
    c: &mut [f32],
    ldc: usize,
    k_block: usize,
    scratch: &mut Vec<f32>,
) {
    gemm_bias_add_act(a, b, ldb, n, bias, None, act, c, ldc, k_block, scratch)
}

/// [`gemm_bias_act`] with an `m x n` matrix `addend` (row-major, its
/// leading dimension given with it) added after the bias and before the
/// activation: `C[i][j] = act((sum + bias[i]) + R[i][j])`, each addition
/// rounded as the separate operations round (a Conv, then an Add, then
/// the activation: the same bits).
///
/// ```
/// use qport_kernels::activation::Activation;
/// use qport_kernels::pgemm::{gemm_bias_add_act, PackedA};
/// // [1 2] x [[1], [1]] + 0.5 + (-4), then Relu
/// let a = PackedA::new(&[1.0, 2.0], 1, 2);
/// let mut c = [9.0f32];
/// let r = [-4.0f32];
/// gemm_bias_add_act(&a, &[1.0, 1.0], 1, 1, Some(&[0.5]), Some((&r, 1)),
///     Activation::Relu, &mut c, 1, 0, &mut vec![]);
/// assert_eq!(c, [0.0]);
/// ```
///
/// # Panics
/// As [`gemm_bias_act`], and if `addend` is too short for its view.
#[allow(clippy::too_many_arguments)]
// (the scratch grows on x86-64 only; elsewhere a slice would do)
#[cfg_attr(not(target_arch = "x86_64"), allow(clippy::ptr_arg))]
pub fn gemm_bias_add_act(
    a: &PackedA,
    b: &[f32],
    ldb: usize,
    n: usize,
    bias: Option<&[f32]>,
    addend: Option<(&[f32], usize)>,
    act: Activation,
    c: &mut [f32],
    ldc: usize,
    k_block: usize,
    scratch: &mut Vec<f32>,
) {
    let call = Call::checked(a, b, ldb, n, bias, addend, act, c, ldc, k_block);
    if a.m == 0 || n == 0 {
        return;
    }
    // A packed for AVX-512 runs there only; A packed for AVX2 runs on
    // either SIMD level (the AVX-512 rows have AVX2 + FMA).
    #[cfg(target_arch = "x86_64")]
    if a.level != Level::Generic
        && (a.level == level() || (a.level == Level::Avx2 && level() == Level::Avx512))
    {
        let (lvl, g) = (a.level, x86::geom(a.level));
        let work = a.m * a.k * n;
        if crate::par::threads() > 1 && work >= crate::par::MIN_WORK {
            let cp = crate::par::SendPtr(c.as_mut_ptr());
            if x86::goes_transposed(&call, g) {
                // a narrow B: blocks of rows (whole panels of mt) on the
                // intra-op threads, every C element as on one thread
                crate::par::split(a.m.div_ceil(g.mt), 1, work, |q0, q1| {
                    THREAD_SCRATCH.with(|s| {
                        // SAFETY: the CPU supports `lvl`; panels q0..q1
                        // write only their own rows of the checked C view.
                        unsafe {
                            x86::transposed(lvl, &call, { cp }.0, &mut s.borrow_mut(), q0..q1)
                        };
                    });
                });
                return;
            }
            // blocks of columns (whole panels) on the intra-op threads,
            // each with its own packing scratch; every C element is still
            // one thread's sequence of fused multiply-adds
            crate::par::split(n, g.nr, work, |j0, j1| {
                THREAD_SCRATCH.with(|s| {
                    let mut s = s.borrow_mut();
                    // SAFETY: the CPU supports `lvl`; columns j0..j1 of
                    // the checked views, disjoint from other blocks' columns.
                    unsafe {
                        let block = Call {
                            b: &b[j0..],
                            n: j1 - j0,
                            addend: call.addend.map(|(r, ldr)| (&r[j0..], ldr)),
                            ..call
                        };
                        x86::run(lvl, &block, { cp }.0.add(j0), &mut s)
                    };
                });
            });
            return;
        }
        // SAFETY: the CPU supports `lvl` (the level was detected, and an
        // AVX-512 row has AVX2 + FMA); the views were checked.
        unsafe { x86::run(lvl, &call, c.as_mut_ptr(), scratch) };
        return;
    }
    // (a matrix packed for AVX-512 run by another level, as under
    // `with_generic_kernels`, is unpacked for the call)
    let rows = a.row_major();
    // blocks of columns small enough that the block of C is still in cache
    // for the epilogue
    let nb = ((1usize << 16) / a.m.max(1)).clamp(64, 4096);
    let mut j0 = 0;
    while j0 < n {
        let nc = nb.min(n - j0);
        // each block of k added to C (the first one written)
        let mut p0 = 0;
        loop {
            let p1 = a.k.min(p0 + call.kc);
            gemm(
                a.m,
                nc,
                p1 - p0,
                1.0,
                MatRef::new(&rows[p0.min(rows.len())..], a.k.max(1)),
                MatRef::new(&b[(p0 * ldb + j0).min(b.len())..], ldb),
                if p0 == 0 { 0.0 } else { 1.0 },
                &mut c[j0..],
                ldc,
            );
            if p1 >= a.k {
                break;
            }
            p0 = p1;
        }
        let r = addend.map(|(r, ldr)| (&r[j0..], ldr));
        epilogue(a.m, nc, bias, r, act, &mut c[j0..], ldc);
        j0 += nc;
    }
}

/// One image of a 2-D ungrouped convolution as [`gemm_bias_add_act`] of
/// its packed weight `a` (`M x C·KH·KW`: the weight tensor's rows) and the
/// column matrix of `image` (`[C, H, W]`, `C` = `c_in`) under geometry
/// `g`, without that matrix: each input channel is copied once into a
/// zero-padded plane split into the column stride's phases, and each step
/// of the sum reads its columns from there. `out` is `[M, OH·OW]`
/// (overwritten), `addend` (added after the bias, before `act`) the same
/// shape. Each element is the sequence of operations of
/// [`gemm_bias_add_act`] on the column matrix with the same `k_block`
/// (that of [`crate::im2col::im2col`] followed by it), so the same bits.
///
/// Runs where the packed GEMM has its own kernels (AVX-512F, AVX2 + FMA;
/// `a` packed for the running level), with the output rows divided
/// between the intra-op threads; returns `false`, having written
/// nothing, elsewhere and for geometries without two spatial axes or with
/// negative padding.
///
/// ```
/// use qport_kernels::activation::Activation;
/// use qport_kernels::im2col::{im2col, ConvGeometry};
/// use qport_kernels::pgemm::{conv2d_bias_add_act, gemm_bias_act, PackedA};
/// // 2 input channels 4 x 5, 3 filters 3 x 3, stride 1, padding 1
/// let g = ConvGeometry::new_2d([4, 5], [3, 3], [4, 5], [1, 1], [1, 1], [1, 1]);
/// let x: Vec<f32> = (0..40).map(|i| (i % 7) as f32 - 3.0).collect();
/// let w: Vec<f32> = (0..54).map(|i| (i % 5) as f32 * 0.25 - 0.5).collect();
/// let a = PackedA::new(&w, 3, 18);
/// let mut direct = vec![0.0f32; 60];
/// if conv2d_bias_add_act(&a, &g, 2, &x, None, None, Activation::Relu, &mut direct, 0, &mut vec![]) {
///     let mut col = vec![0.0f32; 18 * 20];
///     im2col(&g, 2, &x, 0.0, &mut col);
///     let mut y = vec![0.0f32; 60];
///     gemm_bias_act(&a, &col, 20, 20, None, Activation::Relu, &mut y, 20, 0, &mut vec![]);
///     assert_eq!(direct, y);
/// }
/// ```
///
/// # Panics
/// Panics if `a` has other than `c_in * KH * KW` columns or a slice is
/// too short for its view.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(target_arch = "x86_64"), allow(clippy::ptr_arg, unused_variables))]
pub fn conv2d_bias_add_act(
    a: &PackedA,
    g: &crate::im2col::ConvGeometry,
    c_in: usize,
    image: &[f32],
    bias: Option<&[f32]>,
    addend: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
    k_block: usize,
    scratch: &mut Vec<f32>,
) -> bool {
    let Some(geo) = crate::f32::depthwise::Geo::new(g) else {
        return false;
    };
    assert_eq!(
        a.k,
        c_in * geo.kh * geo.kw,
        "conv2d_bias_add_act: the weight has {} columns, the geometry {} x {} x {}",
        a.k,
        c_in,
        geo.kh,
        geo.kw
    );
    let (m, n) = (a.m, geo.oh * geo.ow);
    assert!(
        image.len() >= c_in * geo.h * geo.w,
        "conv2d_bias_add_act: image too short"
    );
    assert!(out.len() >= m * n, "conv2d_bias_add_act: out too short");
    if let Some(b) = bias {
        assert!(b.len() >= m, "conv2d_bias_add_act: bias too short");
    }
    if let Some(r) = addend {
        assert!(r.len() >= m * n, "conv2d_bias_add_act: addend too short");
    }
    #[cfg(target_arch = "x86_64")]
    if a.level != Level::Generic
        && (a.level == level() || (a.level == Level::Avx2 && level() == Level::Avx512))
    {
        if m == 0 || n == 0 {
            return true;
        }
        let call = Call {
            a,
            b: &[],
            ldb: n,
            n,
            bias,
            addend: addend.map(|r| (r, n)),
            act,
            ldc: n,
            kc: (if k_block == 0 { a.k } else { k_block.min(a.k) }).max(1),
        };
        let conv = x86::ConvB { image, c_in, geo };
        // SAFETY: the CPU supports `a.level` (detected, and an AVX-512 row
        // has AVX2 + FMA); views checked above.
        unsafe { x86::conv_wide(a.level, &call, &conv, out.as_mut_ptr(), scratch) };
        return true;
    }
    false
}

/// The block of the sum over `K` in onnxruntime's single-threaded SGEMM
/// (MLAS `MlasSgemmOperation`, and its convolution `MlasConvOperation`,
/// which steps the same way) for a product with `n` output columns and
/// inner dimension `k`: blocks of 128, widened while `n` is small (the
/// column stride halves from 128 while above 16 and its half still covers
/// `n`, and the `K` block doubles each time) and never split when `n >=
/// k`.
///
/// ```
/// use qport_kernels::pgemm::ort_k_block;
/// assert_eq!(ort_k_block(672, 144), 128); // two blocks: 128 + 16
/// assert_eq!(ort_k_block(168, 576), 128);
/// assert_eq!(ort_k_block(40, 576), 256);
/// assert!(ort_k_block(2688, 72) >= 72); // one block
/// ```
pub fn ort_k_block(n: usize, k: usize) -> usize {
    let (mut stride_n, mut stride_k) = (128usize, 128usize);
    if n >= k {
        // (the column stride doubles here; only the K block matters)
        while stride_k / 2 >= k.max(1) {
            stride_k /= 2;
        }
    } else {
        while stride_n > 16 && stride_n / 2 >= n {
            stride_k *= 2;
            stride_n /= 2;
        }
    }
    stride_k
}

thread_local! {
    /// Packing scratch of a column block run on an intra-op thread.
    static THREAD_SCRATCH: std::cell::RefCell<Vec<f32>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn epilogue(
    m: usize,
    n: usize,
    bias: Option<&[f32]>,
    addend: Option<(&[f32], usize)>,
    act: Activation,
    c: &mut [f32],
    ldc: usize,
) {
    if let Some((r, ldr)) = addend {
        // (no bias: nothing added before the addend, as without one)
        for i in 0..m {
            let row = c[i * ldc..][..n].iter_mut().zip(&r[i * ldr..][..n]);
            match bias {
                Some(b) => row.for_each(|(v, &x)| *v = act.apply((*v + b[i]) + x)),
                None => row.for_each(|(v, &x)| *v = act.apply(*v + x)),
            }
        }
        return;
    }
    if bias.is_none() && act == Activation::Identity {
        return;
    }
    for i in 0..m {
        act.bias_apply(&mut c[i * ldc..][..n], bias.map_or(0.0, |b| b[i]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;
    use proptest::prelude::*;

    /// Deterministic `A [m, k]`, `B [k, n]` and bias `[m]` of mixed signs.
    fn operands(m: usize, k: usize, n: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let a = (0..m * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect();
        let b = (0..k * n)
            .map(|i| ((i * 53 % 89) as f32 - 44.0) / 13.0)
            .collect();
        let bias = (0..m).map(|i| i as f32 / 7.0).collect();
        (a, b, bias)
    }

    #[test]
    fn intra_op_threads_give_bit_identical_outputs() {
        let _g = crate::test_lock();
        // above par::MIN_WORK; n not a multiple of the column panels; a
        // padded leading dimension for C; then a narrow B (the transposed
        // order, split by panels of rows)
        for (m, k, n, ldc) in [(40, 150, 700, 705), (200, 300, 9, 11)] {
            let (a, b, bias) = operands(m, k, n);
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let pa = PackedA::at(lvl, &a, m, k);
                let run = |t: usize| {
                    crate::par::set_threads(t);
                    let mut c = vec![f32::NAN; (m - 1) * ldc + n];
                    gemm_bias_act(
                        &pa,
                        &b,
                        n,
                        n,
                        Some(&bias),
                        Activation::Relu,
                        &mut c,
                        ldc,
                        0,
                        &mut Vec::new(),
                    );
                    crate::par::set_threads(1);
                    c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                let one = run(1);
                assert_eq!(run(2), one, "{lvl:?} {m}x{k}x{n}");
                assert_eq!(run(3), one, "{lvl:?} {m}x{k}x{n}");
            }
        }
    }

    /// Every level holds the matrix once (panels of its `mt` rows on
    /// AVX-512 and AVX2, row-major at the generic level) and gives it back
    /// as given; the packing check sees a changed value.
    #[test]
    fn packing_holds_the_matrix_once_at_every_level() {
        for (m, k) in [(1, 1), (5, 3), (40, 17), (64, 9)] {
            let (a, _, _) = operands(m, k, 1);
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                let pa = PackedA::at(lvl, &a, m, k);
                assert_eq!(&*pa.row_major(), &a[..], "{lvl:?} {m}x{k}");
                let held = pa.rows.len() + pa.panels.len();
                assert_eq!(
                    held,
                    match geom_of(lvl) {
                        Some(g) => m.div_ceil(g.mt) * g.mt * k,
                        None => m * k,
                    }
                );
                assert!(pa.is_packing_of(&a));
                assert!(!pa.is_packing_of(&a.clone()), "another address");
                let mut changed = a.clone();
                let pc = PackedA::at(lvl, &changed, m, k);
                changed[m * k - 1] += 1.0;
                assert!(!pc.is_packing_of(&changed), "a changed value");
            }
        }
    }

    /// On AVX-512 and on AVX2 every element is, per block of `k_block`
    /// terms, one sequence of fused multiply-adds from zero, the blocks
    /// added in order, then the bias: MLAS's arithmetic, bit for bit, in
    /// both orientations of each level's kernel.
    #[test]
    fn simd_levels_sum_blocks_of_k_as_mlas_does() {
        let mut ran = 0;
        for lvl in [Level::Avx2, Level::Avx512] {
            if !supported(lvl) || level() == Level::Generic {
                eprintln!("{lvl:?}: not run, not supported by this CPU");
                continue;
            }
            let g = geom_of(lvl).unwrap();
            // wide B; narrow B (transposed: m fills panels of mt better),
            // with a column count that is not a multiple of nt
            for (m, k, n, transposed) in [
                (11, 300, 45, false),
                (2 * g.mt, 300, 5, true),
                (g.mt - 1, 130, 3 * g.nt + 1, true),
                (g.mt, 260, 3 * g.nt - 1, true),
            ] {
                check_blocks(lvl, m, k, n, transposed);
                ran += 1;
            }
        }
        if cfg!(target_arch = "x86_64") && supported(Level::Avx2) {
            assert!(ran >= 3);
        }
    }

    /// The addend is added after the bias and before the activation,
    /// each rounded as a separate Add would round it: the same bits as
    /// the product with its bias, then `act(c + r)`, at every level, in
    /// both orientations, with and without bias, over threads.
    #[test]
    fn addend_gives_the_bits_of_a_separate_add() {
        let _g = crate::test_lock();
        // wide; narrow (transposed); a k of zero; both orders above
        // par::MIN_WORK (split over the threads)
        for (m, k, n) in [
            (13, 40, 37),
            (50, 70, 6),
            (7, 0, 5),
            (40, 150, 90),
            (200, 300, 9),
        ] {
            assert!(m * k * n < crate::par::MIN_WORK || m * k * n >= 2 * crate::par::MIN_WORK);
            let (a, b, bias) = operands(m, k, n);
            let (ldr, ldc) = (n + 3, n + 1);
            // an addend of mixed signs, with zeros of both signs
            let r: Vec<f32> = (0..m * ldr)
                .map(|i| match i % 7 {
                    0 => -0.0,
                    1 => 0.0,
                    v => (v as f32 - 3.5) * 1.7,
                })
                .collect();
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let pa = PackedA::at(lvl, &a, m, k);
                for bias in [Some(&bias[..]), None] {
                    for act in [
                        Activation::Relu,
                        Activation::Identity,
                        Activation::HardSwish,
                    ] {
                        for t in [1, 2] {
                            crate::par::set_threads(t);
                            let mut want = vec![f32::NAN; m * ldc];
                            let id = Activation::Identity;
                            let mut s = vec![];
                            gemm_bias_act(&pa, &b, n, n, bias, id, &mut want, ldc, 0, &mut s);
                            for i in 0..m {
                                for j in 0..n {
                                    let v = &mut want[i * ldc + j];
                                    *v = act.apply(*v + r[i * ldr + j]);
                                }
                            }
                            let mut got = vec![f32::NAN; m * ldc];
                            let rr = Some((&r[..], ldr));
                            gemm_bias_add_act(
                                &pa, &b, n, n, bias, rr, act, &mut got, ldc, 0, &mut s,
                            );
                            crate::par::set_threads(1);
                            let bits =
                                |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(&got), bits(&want), "{lvl:?} {m}x{k}x{n} {act:?} t{t}");
                        }
                    }
                }
            }
        }
    }

    fn check_blocks(lvl: Level, m: usize, k: usize, n: usize, transposed: bool) {
        let (a, b, bias) = operands(m, k, n);
        let pa = PackedA::at(lvl, &a, m, k);
        #[cfg(target_arch = "x86_64")]
        {
            let act = Activation::Identity;
            let c = vec![0.0; m * n];
            let call = Call::checked(&pa, &b, n, n, Some(&bias), None, act, &c, n, 0);
            let t = x86::goes_transposed(&call, x86::geom(lvl));
            assert_eq!(t, transposed, "{lvl:?} {m}x{k}x{n}: the orientation meant");
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = transposed;
        for kb in [0, 1, 7, 128, 256, 300, 1000] {
            let mut c = vec![f32::NAN; m * n];
            let act = Activation::Identity;
            gemm_bias_act(&pa, &b, n, n, Some(&bias), act, &mut c, n, kb, &mut vec![]);
            let block = if kb == 0 { k } else { kb };
            for i in 0..m {
                for j in 0..n {
                    let mut total: Option<f32> = None;
                    for p0 in (0..k).step_by(block) {
                        let part = (p0..k.min(p0 + block))
                            .fold(0.0f32, |s, p| a[i * k + p].mul_add(b[p * n + j], s));
                        total = Some(total.map_or(part, |t| t + part));
                    }
                    let want = total.unwrap() + bias[i];
                    let got = c[i * n + j];
                    assert_eq!(got.to_bits(), want.to_bits(), "{lvl:?} kb {kb} ({i}, {j})");
                }
            }
        }
    }

    /// A convolution's operands: geometry, image, packed-weight rows, bias
    /// and addend, from a seed.
    #[allow(clippy::type_complexity)]
    fn conv_case(
        (h, w, c_in, m): (usize, usize, usize, usize),
        (kh, kw, sh, sw, dh, dw): (usize, usize, usize, usize, usize, usize),
        (pt, pl, eb, er): (isize, isize, usize, usize),
        seed: u64,
    ) -> (
        crate::im2col::ConvGeometry,
        Vec<f32>,
        Vec<f32>,
        Vec<f32>,
        Vec<f32>,
    ) {
        let out = |i: usize, k: usize, s: usize, d: usize, p: isize, e: usize| {
            (i + p as usize + e).saturating_sub((k - 1) * d + 1) / s + 1
        };
        let output = [out(h, kh, sh, dh, pt, eb), out(w, kw, sw, dw, pl, er)];
        let g = crate::im2col::ConvGeometry::new_2d(
            [h, w],
            [kh, kw],
            output,
            [sh, sw],
            [dh, dw],
            [pt, pl],
        );
        let mut s = seed | 1;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        let n = output[0] * output[1];
        let x = (0..c_in * h * w).map(|_| rnd()).collect();
        let wt = (0..m * c_in * kh * kw).map(|_| rnd()).collect();
        let bias = (0..m).map(|_| rnd()).collect();
        let r = (0..m * n).map(|_| rnd()).collect();
        (g, x, wt, bias, r)
    }

    /// A convolution's image, weight rows, bias and addend.
    type ConvOps<'a> = (&'a [f32], &'a [f32], Option<&'a [f32]>, Option<&'a [f32]>);

    /// [`conv2d_bias_add_act`] at `lvl` against im2col and
    /// [`gemm_bias_add_act`] at the same level, bit for bit; `false` when
    /// the level has no planes body (it must then write nothing).
    #[allow(clippy::too_many_arguments)]
    fn conv_matches_im2col(
        lvl: Level,
        g: &crate::im2col::ConvGeometry,
        c_in: usize,
        m: usize,
        (x, wt, bias, r): ConvOps,
        act: Activation,
        kb: usize,
    ) -> bool {
        let k = wt.len() / m;
        let n = g.output_size();
        let pa = PackedA::at(lvl, wt, m, k);
        let mut col = vec![f32::NAN; k * n];
        crate::im2col::im2col(g, c_in, x, 0.0, &mut col);
        let mut want = vec![f32::NAN; m * n];
        let ra = r.map(|r| (r, n));
        gemm_bias_add_act(
            &pa,
            &col,
            n,
            n,
            bias,
            ra,
            act,
            &mut want,
            n,
            kb,
            &mut vec![],
        );
        let mut got = vec![f32::NAN; m * n];
        let ran = conv2d_bias_add_act(&pa, g, c_in, x, bias, r, act, &mut got, kb, &mut vec![]);
        if !ran {
            assert!(
                got.iter().all(|v| v.is_nan()),
                "{lvl:?}: wrote while declining"
            );
            return false;
        }
        for (i, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{lvl:?} at {i}: {a} vs {b} ({g:?}, kb {kb})"
            );
        }
        true
    }

    /// The planes body over its threads: the bits of one thread.
    #[test]
    fn conv_planes_split_over_threads_bit_identical() {
        let _g = crate::test_lock();
        let dims = (40, 45, 3, 20);
        let (g, x, wt, bias, r) = conv_case(dims, (7, 7, 2, 2, 1, 1), (3, 3, 0, 1), 7);
        for lvl in [Level::Avx2, Level::Avx512] {
            if !supported(lvl) || !cfg!(target_arch = "x86_64") {
                continue;
            }
            let pa = PackedA::at(lvl, &wt, 20, 3 * 49);
            let run = |t: usize| {
                crate::par::set_threads(t);
                let mut y = vec![f32::NAN; 20 * g.output_size()];
                let act = Activation::Relu;
                let ran = conv2d_bias_add_act(
                    &pa,
                    &g,
                    3,
                    &x,
                    Some(&bias),
                    Some(&r),
                    act,
                    &mut y,
                    128,
                    &mut vec![],
                );
                crate::par::set_threads(1);
                assert!(ran);
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let one = run(1);
            assert_eq!(run(2), one, "{lvl:?}");
            assert_eq!(run(3), one, "{lvl:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        #[test]
        fn fast_matches_reference(
            m in 1usize..70, n in 1usize..80, k in 0usize..50, pad in 0usize..3,
            with_bias: bool, act_i in 0usize..5, seed: u64, kb in 0usize..20,
        ) {
            let mut s = seed | 1;
            let mut rnd = move || {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            };
            let act = [
                Activation::Identity,
                Activation::Relu,
                Activation::Clip { lo: -0.3, hi: 0.4 },
                Activation::LeakyRelu(0.2),
                Activation::HardSwish,
            ][act_i];
            let (ldb, ldc) = (n + pad, n + 2 * pad);
            let a: Vec<f32> = (0..m * k).map(|_| rnd()).collect();
            let b: Vec<f32> = (0..k * ldb).map(|_| rnd()).collect();
            let bias: Vec<f32> = (0..m).map(|_| rnd()).collect();
            let bias = with_bias.then_some(&bias[..]);
            let mut want = vec![f32::NAN; m * ldc];
            let pa = PackedA::at(Level::Generic, &a, m, k);
            // the scalar reference: the generic path
            let reference = |pa: &PackedA, b: &[f32], bias, act, c: &mut [f32]| {
                crate::with_generic_kernels(|| {
                    gemm_bias_act(pa, b, ldb, n, bias, act, c, ldc, kb, &mut vec![])
                })
            };
            reference(&pa, &b, bias, act, &mut want);
            // magnitudes for the bound
            let aa: Vec<f32> = a.iter().map(|v| v.abs()).collect();
            let ba: Vec<f32> = b.iter().map(|v| v.abs()).collect();
            let mut mag = vec![0.0; m * ldc];
            reference(&PackedA::at(Level::Generic, &aa, m, k), &ba, None,
                Activation::Identity, &mut mag);
            for lvl in [Level::Avx2, Level::Avx512] {
                if !supported(lvl) || level() == Level::Generic {
                    continue;
                }
                let pa = PackedA::at(lvl, &a, m, k);
                let mut got = vec![f32::NAN; m * ldc];
                gemm_bias_act(&pa, &b, ldb, n, bias, act, &mut got, ldc, kb, &mut vec![]);
                for i in 0..m {
                    for j in 0..ldc {
                        let (g, w) = (got[i * ldc + j], want[i * ldc + j]);
                        if j >= n {
                            prop_assert!(g.is_nan(), "wrote outside the view");
                            continue;
                        }
                        let tol = 1e-6 * (mag[i * ldc + j] + bias.map_or(0.0, |b| b[i].abs())) + 1e-30;
                        prop_assert!((g - w).abs() <= tol, "{:?} ({}, {}): {} vs {}", lvl, i, j, g, w);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(160))]
        /// The planes body on any 2-D geometry (strides 1–3, dilations,
        /// padding, kernels up to 7 x 7, rows up to 70 outputs wide) at
        /// every level, with or without bias and addend: the bits of
        /// im2col and the GEMM; the generic level declines.
        #[test]
        fn conv_planes_match_im2col_then_gemm(
            hw in (1usize..24, 1usize..70), cm in (1usize..5, 1usize..20),
            k in (1usize..8, 1usize..8), s in (1usize..4, 1usize..4),
            d in (1usize..3, 1usize..3), p in (0isize..4, 0isize..4), e in (0usize..3, 0usize..3),
            kb in prop_oneof![Just(0usize), 1usize..40], act_i in 0usize..4,
            with_bias: bool, with_addend: bool, seed: u64,
        ) {
            let (c_in, m) = cm;
            let (g, x, wt, bias, r) = conv_case(
                (hw.0, hw.1, c_in, m), (k.0, k.1, s.0, s.1, d.0, d.1), (p.0, p.1, e.0, e.1), seed);
            let act = [
                Activation::Identity,
                Activation::Relu,
                Activation::Clip { lo: -0.3, hi: 0.4 },
                Activation::HardSwish,
            ][act_i];
            let ops = (&x[..], &wt[..], with_bias.then_some(&bias[..]), with_addend.then_some(&r[..]));
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let ran = conv_matches_im2col(lvl, &g, c_in, m, ops, act, kb);
                prop_assert_eq!(ran, lvl != Level::Generic && cfg!(target_arch = "x86_64"));
            }
        }
    }
}
