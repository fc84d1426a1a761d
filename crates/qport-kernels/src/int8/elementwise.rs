//! The 8-bit elementwise loops of the quantized operators, over
//! [`QInt`]: quantization of `f32` ([`quantize`], and
//! [`quantize_rounding_into`] under the other rounding modes), dequantization
//! ([`dequantize`]), onnxruntime's same-shape `QLinearAdd` ([`add`]),
//! per-channel requantization of i32 accumulators ([`requantize`]) and
//! per-channel table lookups ([`lookup_planes`]).
//!
//! Each is one plain loop written so that the compiler vectorizes it
//! (rounding half to even by adding and subtracting `1.5·2^23`, clamping
//! before rounding), compiled again with AVX2 (and AVX-512 for
//! requantization and addition; the lookups have their own AVX-512 VBMI
//! body) enabled and chosen from the dispatch table
//! ([`crate::isa`]). The copies perform the same operations in the same
//! order (no fused multiply-adds are formed that the plain loop does not
//! spell out), so every table row gives the same bits; the tests hold
//! each row equal to the definitions.

use crate::igemm::QInt;
use qport_core::arith::{FloatRequant, Requantizer, Rounding};

#[cfg(target_arch = "x86_64")]
use crate::arch::x86_64::int8 as x86;

/// The pairs of `src` split: `even[i] = src[2i]` and `odd[i] = src[2i +
/// 1]` for every `i` below the shortest of `even`, `odd` and half of `src`
/// (a pooling window's column phases at stride 2), for any element type:
/// a byte shuffle for `u8` and `i8` where the dispatch table has AVX2, the
/// plain loop elsewhere; the same values.
///
/// ```
/// use qport_kernels::int8::elementwise::split_pairs;
/// let (mut e, mut o) = ([0u8; 3], [0u8; 3]);
/// split_pairs(&[1u8, 2, 3, 4, 5, 6, 7], &mut e, &mut o);
/// assert_eq!((e, o), ([1, 3, 5], [2, 4, 6]));
/// ```
pub fn split_pairs<T: Copy + 'static>(src: &[T], even: &mut [T], odd: &mut [T]) {
    let n = even.len().min(odd.len()).min(src.len() / 2);
    #[cfg(target_arch = "x86_64")]
    let done = if crate::isa().avx2()
        && [std::any::TypeId::of::<u8>(), std::any::TypeId::of::<i8>()]
            .contains(&std::any::TypeId::of::<T>())
    {
        // SAFETY: `T` is `u8` or `i8` (one byte, every bit pattern valid),
        // so the three slices are byte slices of their lengths; the CPU
        // has AVX2 (the dispatch table's x86-64 rows); `n` pairs are
        // readable and `n` bytes writable in each half.
        unsafe {
            x86::split_pairs_avx2(
                src.as_ptr().cast(),
                even.as_mut_ptr().cast(),
                odd.as_mut_ptr().cast(),
                n,
            )
        }
    } else {
        0
    };
    #[cfg(not(target_arch = "x86_64"))]
    let done = 0;
    for i in done..n {
        even[i] = src[2 * i];
        odd[i] = src[2 * i + 1];
    }
}

/// `1.5 · 2^23`: adding and subtracting it rounds an f32 of magnitude below
/// `2^22` to an integer, half to even.
const MAGIC: f32 = 12_582_912.0;

/// `clamp(round_half_even(x / scale) + zero)` to `T`'s range for every
/// element of `xs`: clamped to `[T::MIN − zero, T::MAX − zero]` before
/// rounding (equal, the bounds being integers; NaN gives `T::MIN`). `zero`
/// must lie in `T`'s range.
///
/// ```
/// use qport_kernels::int8::elementwise::quantize;
/// let q: Vec<u8> = quantize(&[0.25, 0.35, -9.0, f32::NAN], 0.1, 10);
/// assert_eq!(q, [12, 14, 0, 0]);
/// ```
pub fn quantize<T: QInt>(xs: &[f32], scale: f32, zero: i32) -> Vec<T> {
    let mut out = vec![T::truncate(0); xs.len()];
    quantize_into(xs, scale, zero, &mut out);
    out
}

/// [`quantize`] into `out` (`min(xs.len(), out.len())` elements written).
///
/// ```
/// use qport_kernels::int8::elementwise::quantize_into;
/// let mut q = [0i8; 3];
/// quantize_into(&[0.25, -0.35, 99.0], 0.1, 0, &mut q);
/// assert_eq!(q, [2, -4, 127]);
/// ```
pub fn quantize_into<T: QInt>(xs: &[f32], scale: f32, zero: i32, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx512() {
        // SAFETY: the dispatch table has an AVX-512 row only where the CPU
        // has AVX-512F + BW (and AVX2 + FMA: every x86-64 row).
        return unsafe { x86::quantize_avx512(xs, scale, zero, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        return unsafe { x86::quantize_avx2(xs, scale, zero, out) };
    }
    quantize_loop(xs, scale, zero, out)
}

/// `clamp(round(x / scale) + zero)` to `T`'s range for every element of
/// `xs` (`min(xs.len(), out.len())` elements written) under any rounding
/// `mode`: each element as [`qport_core::arith::quantize_f32`] computes
/// it (NaN gives `T::MIN`). `zero` must lie in `T`'s range (else the
/// definition runs element by element).
///
/// ```
/// use qport_core::arith::Rounding;
/// use qport_kernels::int8::elementwise::quantize_rounding_into;
/// let mut q = [0u8; 4];
/// quantize_rounding_into(&[0.25, -0.25, 0.35, f32::NAN], 0.1, 10, Rounding::HalfUp, &mut q);
/// assert_eq!(q, [13, 8, 14, 0]); // 2.5 up to 3, -2.5 up to -2
/// ```
pub fn quantize_rounding_into<T: QInt>(
    xs: &[f32],
    scale: f32,
    zero: i32,
    mode: Rounding,
    out: &mut [T],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        return unsafe { x86::quantize_rounding_avx2(xs, scale, zero, mode, out) };
    }
    quantize_rounding_loop(xs, scale, zero, mode, out)
}

/// [`quantize_rounding_into`]'s loops, one per mode. `round` in the
/// definition works on `f64(x / scale)`; here `y = x / scale` is first
/// clamped to the integers one past the output range (which leaves the
/// clamped result unchanged, rounding being monotone, and sends NaN to
/// the bottom), so `t = trunc(y)` fits in i32 and the fraction `y − t` is
/// exact in f32: the same comparisons on the same values, in f32 and i32
/// lanes.
#[inline(always)]
pub(crate) fn quantize_rounding_loop<T: QInt>(
    xs: &[f32],
    scale: f32,
    zero: i32,
    mode: Rounding,
    out: &mut [T],
) {
    if !(T::MIN..=T::MAX).contains(&zero) {
        for (o, &v) in out.iter_mut().zip(xs) {
            *o = T::truncate(qport_core::arith::quantize_f32(
                v,
                scale,
                zero,
                T::MIN,
                T::MAX,
                mode,
            ));
        }
        return;
    }
    let i = i32::from;
    match mode {
        Rounding::Floor => rounding_body(xs, scale, zero, out, |r, _| -i(r < 0.0)),
        Rounding::HalfUp => rounding_body(xs, scale, zero, out, |r, _| i(r >= 0.5) - i(r < -0.5)),
        Rounding::HalfAway => {
            rounding_body(xs, scale, zero, out, |r, _| i(r >= 0.5) - i(r <= -0.5))
        }
        Rounding::HalfEven => rounding_body(xs, scale, zero, out, |r, t| {
            let odd = t & 1 != 0;
            i((r > 0.5) | ((r == 0.5) & odd)) - i((r < -0.5) | ((r == -0.5) & odd))
        }),
    }
}

/// The loop of [`quantize_rounding_loop`] with the rounding step `adjust`
/// (from the fraction `r` and the truncated value `t`, the step to add).
#[inline(always)]
fn rounding_body<T: QInt>(
    xs: &[f32],
    scale: f32,
    zero: i32,
    out: &mut [T],
    adjust: impl Fn(f32, i32) -> i32,
) {
    // integers one past the range, exact in f32 (|zero| <= 255)
    let (lo, hi) = ((T::MIN - zero - 1) as f32, (T::MAX - zero + 1) as f32);
    for (o, &v) in out.iter_mut().zip(xs) {
        let y = (v / scale).max(lo).min(hi);
        // SAFETY: `max`/`min` leave no NaN and bound `y` to a few hundred,
        // so the truncation fits in i32; unlike `as`, it vectorizes.
        let t = unsafe { y.to_int_unchecked::<i32>() };
        let r = y - t as f32;
        *o = T::truncate((t + adjust(r, t) + zero).clamp(T::MIN, T::MAX));
    }
}

#[inline(always)]
pub(crate) fn quantize_loop<T: QInt>(xs: &[f32], scale: f32, zero: i32, out: &mut [T]) {
    let zero = zero.clamp(T::MIN, T::MAX);
    let (lo, hi) = ((T::MIN - zero) as f32, (T::MAX - zero) as f32);
    for (o, &v) in out.iter_mut().zip(xs) {
        let c = (v / scale).max(lo).min(hi);
        // SAFETY: `max`/`min` leave no NaN, and `c` lies within
        // ±(255 + |zero|) ≤ 510, far below 2^22, so the rounded value
        // converts exactly.
        *o = T::truncate(unsafe { ((c + MAGIC) - MAGIC).to_int_unchecked::<i32>() } + zero);
    }
}

/// `(x − zero)·scale` in f32 for every element (the difference is exact)
/// into `out` (`min(xs.len(), out.len())` elements written).
///
/// ```
/// use qport_kernels::int8::elementwise::dequantize;
/// let mut out = [0f32; 2];
/// dequantize(&[3u8, 5], 0.5, 4, &mut out);
/// assert_eq!(out, [-0.5, 0.5]);
/// ```
pub fn dequantize<T: QInt>(xs: &[T], scale: f32, zero: i32, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        return unsafe { x86::dequantize_avx2(xs, scale, zero, out) };
    }
    dequantize_loop(xs, scale, zero, out)
}

#[inline(always)]
pub(crate) fn dequantize_loop<T: QInt>(xs: &[T], scale: f32, zero: i32, out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(xs) {
        *o = (v.widen() - zero) as f32 * scale;
    }
}

/// The constants of onnxruntime's `QLinearAdd` formulation (MLAS on x86):
/// the input scales as ratios to the output scale, the zero points folded
/// into one constant, and the output range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AddParams {
    /// `a_scale / c_scale`.
    pub r_ac: f32,
    /// `b_scale / c_scale`.
    pub r_bc: f32,
    /// `c_zero − (r_ac·a_zero + r_bc·b_zero)` (the first product fused).
    pub fixed: f32,
    /// The smallest output value.
    pub lo: f32,
    /// The largest output value.
    pub hi: f32,
}

/// `out[i] = sat(round_half_even(a[i]·r_ac + (b[i]·r_bc + fixed)))` over
/// equal shapes (`min` of the three lengths): the fused multiply-adds
/// of onnxruntime's loop, clamped before rounding (equal, the bounds being
/// integers; NaN gives `lo`). `lo` and `hi` must be `T`'s range or
/// inside it.
///
/// ```
/// use qport_kernels::int8::elementwise::{add, AddParams};
/// let k = AddParams { r_ac: 0.5, r_bc: 0.5, fixed: 1.0, lo: 0.0, hi: 255.0 };
/// let mut out = [0u8; 2];
/// add(&[2u8, 255], &[4, 255], &k, &mut out);
/// assert_eq!(out, [4, 255]);
/// ```
pub fn add<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx512() {
        // SAFETY: the dispatch table has an AVX-512 row only where the CPU
        // has AVX-512F + BW (and AVX2 + FMA: `dispatch::detect`).
        return unsafe { x86::add_avx512(a, b, k, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        return unsafe { x86::add_avx2(a, b, k, out) };
    }
    add_loop(a, b, k, out)
}

#[inline(always)]
pub(crate) fn add_loop<T: QInt>(a: &[T], b: &[T], k: &AddParams, out: &mut [T]) {
    let (lo, hi) = (k.lo.max(T::MIN as f32), k.hi.min(T::MAX as f32));
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        let v = (x.widen() as f32).mul_add(k.r_ac, (y.widen() as f32).mul_add(k.r_bc, k.fixed));
        let c = v.max(lo).min(hi);
        // SAFETY: `max`/`min` leave no NaN and bound `c` to `T`'s range
        // (8-bit), so the rounded value converts exactly.
        *o = T::truncate(unsafe { ((c + MAGIC) - MAGIC).to_int_unchecked::<i32>() });
    }
}

/// Requantizes `acc` (`[channels, os]`, row-major) into `out` with one
/// requantizer per channel (`rq[c]` for row `c`), as
/// [`Requantizer::apply_slice_into`] does row by row.
pub fn requantize<T: QInt>(rq: &[Requantizer], acc: &[i32], os: usize, out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let isa = crate::isa();
        if isa.avx512() {
            // SAFETY: the dispatch table has an AVX-512 row only where the
            // CPU has AVX-512F + BW (`dispatch::detect`).
            return unsafe { x86::requantize_avx512(rq, acc, os, out) };
        }
        if isa.avx2() {
            // SAFETY: the dispatch table has an x86-64 row only where the
            // CPU has AVX2 + FMA (`dispatch::detect`).
            return unsafe { x86::requantize_avx2(rq, acc, os, out) };
        }
    }
    requantize_loop(rq, acc, os, out)
}

#[inline(always)]
pub(crate) fn requantize_loop<T: QInt>(rq: &[Requantizer], acc: &[i32], os: usize, out: &mut [T]) {
    for ((r, a), o) in rq
        .iter()
        .zip(acc.chunks_exact(os.max(1)))
        .zip(out.chunks_exact_mut(os.max(1)))
    {
        r.apply_slice_into(a, o, T::truncate);
    }
}

/// Requantizes `acc` (`[rows, forms.len()]`, row-major) into `out`
/// (`min(acc.len(), out.len())` elements written, whole rows), column
/// `j` of every row by `forms[j]`: a matrix product's requantization
/// with one requantizer per output column (a `QGemm` classifier head at
/// batch 1 is one row of a thousand columns). The bits of
/// [`FloatRequant::apply_slice_into`] element by element, i.e. of the
/// [`Requantizer`] each form came from; with AVX-512 sixteen columns at a
/// time, each lane with its own form.
///
/// ```
/// use qport_core::arith::{ArithProfile, Requantizer};
/// use qport_kernels::int8::elementwise::requantize_columns;
/// let p = ArithProfile::preset("f32-rne").unwrap();
/// let forms: Vec<_> = [0.5, 0.25]
///     .iter()
///     .map(|&m| Requantizer::new(0.0, m, 10, 0, 255, &p).float_form().unwrap())
///     .collect();
/// let mut out = [0u8; 4];
/// requantize_columns(&forms, &[8, 8, -40, 2], &mut out);
/// assert_eq!(out, [14, 12, 0, 10]); // 8·0.5 + 10, 8·0.25 + 10, clamped, 0.5 to even
/// ```
pub fn requantize_columns<T: QInt>(forms: &[FloatRequant], acc: &[i32], out: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx512() && std::mem::size_of::<T>() == 1 {
        // SAFETY: the dispatch table has an AVX-512 row only where the CPU
        // has AVX-512F + BW (`dispatch::detect`); `T` is one byte.
        return unsafe { x86::requantize_columns_avx512(forms, acc, out) };
    }
    requantize_columns_loop(forms, acc, out)
}

/// [`requantize_columns`] element by element (also the AVX-512 kernel's
/// fallback for the vectors whose bias addition overflows).
pub(crate) fn requantize_columns_loop<T: QInt>(forms: &[FloatRequant], acc: &[i32], out: &mut [T]) {
    let n = forms.len();
    if n == 0 {
        return;
    }
    for (a, o) in acc.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        for ((f, a), o) in forms.iter().zip(a.chunks(1)).zip(o.chunks_mut(1)) {
            f.apply_slice_into(a, o, T::truncate);
        }
    }
}

/// Per-channel table lookup (onnxruntime-free: qport's
/// `ai.qport:QLinearLookup`): plane `i` of `x` (`inner` elements each,
/// channel `i % channels`) through row `i % channels` of `table`
/// (`[channels, 256]`, indexed by `x − X::MIN`, i.e. 0 for the lowest
/// value), into `out` (the same layout as `x`). Whole planes are divided
/// between the intra-op threads (the same bytes on any count).
///
/// With AVX-512 VBMI each 64 inputs take two two-register byte permutes
/// and a blend (`vpermi2b`, entries 0–127 and 128–255); elsewhere a
/// plain indexed loop.
///
/// ```
/// use qport_kernels::int8::elementwise::lookup_planes;
/// // two channels of two elements: channel 0 negates, channel 1 adds 1
/// let mut table = vec![0i8; 2 * 256];
/// for v in 0..256usize {
///     let x = v as i32 - 128; // i8 value of entry v
///     table[v] = (-x).clamp(-128, 127) as i8;
///     table[256 + v] = (x + 1).clamp(-128, 127) as i8;
/// }
/// let mut out = [0i8; 4];
/// lookup_planes(&[5i8, -7, 5, 127], &table, 2, 2, &mut out);
/// assert_eq!(out, [-5, 7, 6, 127]);
/// ```
///
/// # Panics
/// When `table` has fewer than `channels · 256` entries, `out` is shorter
/// than `x`, or `x` is not whole planes of `inner` elements.
pub fn lookup_planes<X: QInt, Y: QInt>(
    x: &[X],
    table: &[Y],
    channels: usize,
    inner: usize,
    out: &mut [Y],
) {
    assert!(table.len() >= channels * 256 && out.len() >= x.len());
    if x.is_empty() {
        return;
    }
    assert!(
        channels > 0 && inner > 0 && x.len().is_multiple_of(inner),
        "lookup_planes: whole planes"
    );
    // (the index of value v is v − X::MIN: the byte itself for u8, the
    // byte with its top bit flipped for i8)
    let flip = if X::MIN < 0 { 0x80u8 } else { 0 };
    let (x, table) = (bytes(x), bytes(table));
    let out = &mut bytes_mut(out)[..x.len()];
    let work = x.len() * crate::par::STREAM_COST;
    // (the kernel chosen once per call, on the calling thread's row)
    let vbmi = vbmi();
    crate::par::split_mut(out, inner, work, |start, block| {
        for (k, o) in block.chunks_mut(inner).enumerate() {
            let i = start / inner + k;
            let row: &[u8; 256] = table[(i % channels) * 256..][..256]
                .try_into()
                .expect("rows of 256");
            lookup_row(&x[i * inner..][..inner], flip, row, o, vbmi);
        }
    });
}

/// True where [`lookup_row`] may run its AVX-512 VBMI body: an AVX-512
/// row of the dispatch table on a CPU with VBMI.
fn vbmi() -> bool {
    crate::isa().avx512() && crate::dispatch::has_vbmi()
}

/// `out[j] = row[x[j] ^ flip]`, on the VBMI body where `vbmi` (from
/// [`vbmi`]) says so, else with AVX2 gathers on an x86 row (1.4x the
/// plain loop's speed: EfficientNet-Lite0's 49 normalizations under
/// `QPORT_SIMD=avx2` 3.2 → 2.2 ms), else the plain loop.
fn lookup_row(x: &[u8], flip: u8, row: &[u8; 256], out: &mut [u8], vbmi: bool) {
    #[cfg(target_arch = "x86_64")]
    if vbmi {
        // SAFETY: `vbmi()` is true only on an AVX-512 row of the dispatch
        // table (AVX-512F + BW, `dispatch::detect`) with VBMI detected.
        return unsafe { x86::lookup_vbmi(x, flip, row, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the AVX2 rows and up have AVX2.
        return unsafe { x86::lookup_avx2(x, flip, row, out) };
    }
    let _ = vbmi;
    lookup_loop(x, flip, row, out)
}

/// The portable [`lookup_row`].
#[inline(always)]
pub(crate) fn lookup_loop(x: &[u8], flip: u8, row: &[u8; 256], out: &mut [u8]) {
    for (o, &v) in out.iter_mut().zip(x) {
        *o = row[usize::from(v ^ flip)];
    }
}

/// `acc[i] = max(acc[i], src[i])` for every `i` of the shorter slice (a
/// pooling window's rows and columns folded into its maximum): whole
/// 64-byte vectors and one masked vector where the dispatch table has
/// AVX-512 (a row of ResNet-50's pooled map, 56 or 112 bytes, is one or
/// two), 32-byte vectors and the last bytes one by one with AVX2, or the
/// plain loop; the same
/// values on every row (the maximum of two integers).
///
/// ```
/// use qport_kernels::int8::elementwise::max_assign;
/// let mut acc = [3u8, 200, 7];
/// max_assign(&mut acc, &[5, 100, 7, 255]);
/// assert_eq!(acc, [5, 200, 7]);
/// let mut acc = [-3i8, 100];
/// max_assign(&mut acc, &[-128, 101]);
/// assert_eq!(acc, [-3, 101]);
/// ```
pub fn max_assign<T: QInt>(acc: &mut [T], src: &[T]) {
    let n = acc.len().min(src.len());
    let (acc, src) = (&mut acc[..n], &src[..n]);
    #[cfg(target_arch = "x86_64")]
    {
        let isa = crate::isa();
        if isa.avx512() {
            // SAFETY: an AVX-512 row of the dispatch table has AVX-512F
            // and BW (`dispatch::detect`); `n` elements of one byte each
            // in both slices.
            unsafe {
                match (T::as_u8(src), T::as_i8(src)) {
                    (Some(s), _) => {
                        x86::max_bytes_avx512::<false>(bytes_mut(acc).as_mut_ptr(), s.as_ptr(), n)
                    }
                    (_, Some(s)) => x86::max_bytes_avx512::<true>(
                        bytes_mut(acc).as_mut_ptr(),
                        s.as_ptr().cast(),
                        n,
                    ),
                    _ => max_assign_loop(acc, src),
                }
            }
            return;
        }
        if isa.avx2() {
            // SAFETY: the AVX2 rows and up have AVX2; `n` elements of one
            // byte each in both slices.
            unsafe {
                let a = bytes_mut(acc).as_mut_ptr();
                match (T::as_u8(src), T::as_i8(src)) {
                    (Some(s), _) => x86::max_bytes_avx2::<false>(a, s.as_ptr(), n),
                    (_, Some(s)) => x86::max_bytes_avx2::<true>(a, s.as_ptr().cast(), n),
                    _ => max_assign_loop(acc, src),
                }
            }
            return;
        }
    }
    max_assign_loop(acc, src)
}

/// The window maxima along one row, `out[o] = max(row[s·o + j] for j <
/// k)` for every `o` of `out` (a pooling window's columns, the row already
/// holding the maxima of its rows and the padding), for one-byte `T`
/// where the dispatch table has AVX2 or AVX-512 and the stride `s` is 1
/// or 2: with AVX-512, 64 outputs a step at stride 1 (the `k` shifted
/// vectors' maxima), 32 at stride 2 (pairs read as 16-bit words, whose
/// low and high bytes are the even and odd columns); with AVX2, 32 a step
/// either way (rows of fewer than 32 outputs one by one). Returns
/// `false`, nothing written, elsewhere:
/// the caller takes its own loop (the maxima do not depend on the order
/// they are taken in, so both give the same values).
///
/// ```
/// use qport_kernels::int8::elementwise::window_max;
/// let row = [1u8, 9, 3, 4, 8, 2, 7];
/// let mut out = [0u8; 3];
/// if window_max(&row, (3, 2), &mut out) {
///     // windows 1 9 3, 3 4 8, 8 2 7
///     assert_eq!(out, [9, 8, 8]);
/// }
/// ```
///
/// # Panics
/// When `k` is 0, or `out` is not empty and `row` is shorter than
/// `s·(out.len() − 1) + k`.
pub fn window_max<T: QInt>(row: &[T], (k, s): (usize, usize), out: &mut [T]) -> bool {
    let n = out.len();
    assert!(k > 0, "an empty window");
    assert!(
        n == 0 || row.len() >= s * (n - 1) + k,
        "a row of {} for {n} windows of {k} at stride {s}",
        row.len()
    );
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx512() && (s == 1 || s == 2) {
        // SAFETY: an AVX-512 row has AVX-512F and BW; `row` holds every
        // column a window reads (asserted) and `out` `n` bytes (`T` is one
        // byte: `QInt` is u8 and i8).
        unsafe {
            let (src, dst) = (bytes(row).as_ptr(), bytes_mut(out).as_mut_ptr());
            match T::as_i8(row) {
                Some(_) => x86::window_max_avx512::<true>((src, row.len()), (k, s), dst, n),
                None => x86::window_max_avx512::<false>((src, row.len()), (k, s), dst, n),
            }
        }
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() && (s == 1 || s == 2) {
        // SAFETY: the AVX2 rows and up have AVX2; `row` holds every column
        // a window reads (asserted) and `out` `n` bytes (`T` is one byte).
        unsafe {
            let (src, dst) = (bytes(row).as_ptr(), bytes_mut(out).as_mut_ptr());
            match T::as_i8(row) {
                Some(_) => x86::window_max_avx2::<true>((src, row.len()), (k, s), dst, n),
                None => x86::window_max_avx2::<false>((src, row.len()), (k, s), dst, n),
            }
        }
        return true;
    }
    let _ = (row, s);
    false
}

/// The portable [`max_assign`] (on the widened values: `QInt` has no
/// order of its own).
#[inline(always)]
pub(crate) fn max_assign_loop<T: QInt>(acc: &mut [T], src: &[T]) {
    for (a, &s) in acc.iter_mut().zip(src) {
        if s.widen() > a.widen() {
            *a = s;
        }
    }
}

/// The bytes of a slice of one-byte [`QInt`]s.
fn bytes<T: QInt>(s: &[T]) -> &[u8] {
    assert_eq!(std::mem::size_of::<T>(), 1);
    // SAFETY: `QInt` is implemented for u8 and i8 only (asserted one
    // byte): the same memory, every byte a valid u8.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

/// [`bytes`], mutably.
fn bytes_mut<T: QInt>(s: &mut [T]) -> &mut [u8] {
    assert_eq!(std::mem::size_of::<T>(), 1);
    // SAFETY: as in `bytes`; every u8 written is a valid u8 or i8.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
}

#[cfg(test)]
#[path = "elementwise_tests.rs"]
mod tests;
