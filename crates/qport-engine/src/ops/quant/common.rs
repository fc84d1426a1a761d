//! Shared pieces of the quantized operators: quantized element types,
//! round-half-to-even quantization and requantization, reading scales and
//! zero points, and the per-tensor / per-axis / blocked parameter layout.

use crate::error::{OpError, OpResult};
use qport_core::{bf16, f16, DType, Tensor, TensorData, I2, I4, U2, U4};

/// The integer grid a quantized tensor is stored on (the quantizer calls
/// accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Grid {
    U8,
    I8,
    U16,
    I16,
    U4,
    I4,
    U2,
    I2,
}

impl Grid {
    /// The quantized type stored as `dtype`, if it is one.
    pub(crate) fn from_dtype(dtype: DType) -> Option<Grid> {
        match dtype {
            DType::U8 => Some(Grid::U8),
            DType::I8 => Some(Grid::I8),
            DType::U16 => Some(Grid::U16),
            DType::I16 => Some(Grid::I16),
            DType::U4 => Some(Grid::U4),
            DType::I4 => Some(Grid::I4),
            DType::U2 => Some(Grid::U2),
            DType::I2 => Some(Grid::I2),
            _ => None,
        }
    }

    /// The 8-bit quantized type of `dtype` (u8 or i8 only).
    pub(crate) fn of8(what: &str, dtype: DType) -> OpResult<Grid> {
        match dtype {
            DType::U8 => Ok(Grid::U8),
            DType::I8 => Ok(Grid::I8),
            d => Err(OpError::dtype(what, d)),
        }
    }

    /// Smallest representable value.
    pub(crate) fn min(self) -> i32 {
        match self {
            Grid::U8 | Grid::U16 | Grid::U4 | Grid::U2 => 0,
            Grid::I8 => -128,
            Grid::I16 => -32768,
            Grid::I4 => -8,
            Grid::I2 => -2,
        }
    }

    /// Largest representable value.
    pub(crate) fn max(self) -> i32 {
        match self {
            Grid::U8 => 255,
            Grid::I8 => 127,
            Grid::U16 => 65535,
            Grid::I16 => 32767,
            Grid::U4 => 15,
            Grid::I4 => 7,
            Grid::U2 => 3,
            Grid::I2 => 1,
        }
    }

    /// Packs values already saturated to this type's range.
    pub(crate) fn pack(self, v: Vec<i32>) -> TensorData {
        // the sub-byte types keep the low bits (the values are in range)
        macro_rules! sub_byte {
            ($t:ident) => {
                TensorData::$t(
                    v.into_iter()
                        .map(|x| $t::wrapping_from_i64(x as i64))
                        .collect(),
                )
            };
        }
        match self {
            Grid::U8 => TensorData::U8(v.into_iter().map(|x| x as u8).collect()),
            Grid::I8 => TensorData::I8(v.into_iter().map(|x| x as i8).collect()),
            Grid::U16 => TensorData::U16(v.into_iter().map(|x| x as u16).collect()),
            Grid::I16 => TensorData::I16(v.into_iter().map(|x| x as i16).collect()),
            Grid::U4 => sub_byte!(U4),
            Grid::I4 => sub_byte!(I4),
            Grid::U2 => sub_byte!(U2),
            Grid::I2 => sub_byte!(I2),
        }
    }
}

/// `x` rounded half to even, as `f32::round_ties_even` but written with an
/// integer conversion: the `std` function is a library call on baseline
/// x86-64 (no SSE4.1) and this is the innermost step of every
/// (re)quantization. NaN and values of magnitude >= 2^23 come back as they
/// are (already integral).
#[inline]
pub(crate) fn round_half_even(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x;
    }
    let t = x as i32;
    let r = x - t as f32; // exact, in (-1, 1)
    let odd = t & 1 != 0;
    // non-short-circuit: no data-dependent branches in requantization loops
    let up = (r > 0.5) | ((r == 0.5) & odd);
    let down = (r < -0.5) | ((r == -0.5) & odd);
    (t + i32::from(up) - i32::from(down)) as f32
}

/// Dequantizes one stored integer as `DequantizeLinear` does: the exact
/// difference to the zero point, times the scale, in f32.
#[inline(always)]
pub(crate) fn dequantize(v: i32, zero: i32, scale: f32) -> f32 {
    (v as i64 - zero as i64) as f32 * scale
}

/// Quantizes one value the way ONNX `QuantizeLinear` and onnxruntime's MLAS
/// do: `saturate(round_half_even(x / scale) + zero_point)`, computed in f32.
/// NaN maps to the type's minimum (as onnxruntime's clamp does).
#[inline]
pub(crate) fn quantize(x: f32, scale: f32, zero: i32, q: Grid) -> i32 {
    saturate_rounded(round_half_even(x / scale), zero, q)
}

/// `clamp(r + zero)` for an already-rounded float `r`; NaN gives the minimum.
#[inline]
pub(crate) fn saturate_rounded(r: f32, zero: i32, q: Grid) -> i32 {
    if r.is_nan() {
        return q.min();
    }
    let v = r + zero as f32;
    v.clamp(q.min() as f32, q.max() as f32) as i32
}

/// Runs `$body` with `$a` / `$b` bound to the u8/i8 slices of two tensors;
/// any other type is an error naming the input (`$na` or `$nb`).
macro_rules! with_q8_pair {
    ($ta:expr, $tb:expr, $na:literal, $nb:literal, |$a:ident, $b:ident| $body:expr) => {
        match ($ta.data(), $tb.data()) {
            (TensorData::U8($a), TensorData::U8($b)) => $body,
            (TensorData::U8($a), TensorData::I8($b)) => $body,
            (TensorData::I8($a), TensorData::U8($b)) => $body,
            (TensorData::I8($a), TensorData::I8($b)) => $body,
            (TensorData::U8(_) | TensorData::I8(_), _) => {
                return Err(OpError::dtype($nb, $tb.dtype()))
            }
            _ => return Err(OpError::dtype($na, $ta.dtype())),
        }
    };
}
pub(crate) use with_q8_pair;

/// Values of a float tensor (f32, f16, bf16, f64) as f32; integer tensors
/// are converted too (scales may be int32 from opset 23), and so are
/// float8e8m0 power-of-two scales (opset 25).
pub(crate) fn f32_values(t: &Tensor, what: &str) -> OpResult<Vec<f32>> {
    match t.data() {
        TensorData::F32(v) => Ok(v.clone()),
        TensorData::F16(v) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        TensorData::BF16(v) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        TensorData::F64(v) => Ok(v.iter().map(|&x| x as f32).collect()),
        TensorData::I32(v) => Ok(v.iter().map(|&x| x as f32).collect()),
        TensorData::F8E8M0(v) => Ok(v.iter().map(|x| x.to_f32()).collect()),
        _ => Err(OpError::dtype(what, t.dtype())),
    }
}

/// Values of an integer tensor (2/4/8/16/32-bit) as i32.
pub(crate) fn i32_values(t: &Tensor, what: &str) -> OpResult<Vec<i32>> {
    match t.data() {
        TensorData::U8(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        TensorData::I8(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        TensorData::U16(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        TensorData::I16(v) => Ok(v.iter().map(|&x| x as i32).collect()),
        TensorData::I32(v) => Ok(v.clone()),
        TensorData::U4(v) => Ok(v.iter().map(|x| x.get() as i32).collect()),
        TensorData::I4(v) => Ok(v.iter().map(|x| x.get() as i32).collect()),
        TensorData::U2(v) => Ok(v.iter().map(|x| x.get() as i32).collect()),
        TensorData::I2(v) => Ok(v.iter().map(|x| x.get() as i32).collect()),
        _ => Err(OpError::dtype(what, t.dtype())),
    }
}

/// The single value of a one-element float tensor (a per-tensor scale).
pub(crate) fn scalar_f32(t: &Tensor, what: &str) -> OpResult<f32> {
    if let Some(v) = one_f32(t) {
        return Ok(v);
    }
    single(f32_values(t, what)?, t, what)
}

/// The value of a one-element `f32` tensor, read in place (`None` for any
/// other tensor: the general readers handle it).
pub(crate) fn one_f32(t: &Tensor) -> Option<f32> {
    match t.as_slice::<f32>() {
        Ok([v]) => Some(*v),
        _ => None,
    }
}

/// The value of a one-element `u8`, `i8` or `i32` tensor as `i32`, read in
/// place (`None` for any other tensor).
pub(crate) fn one_i32(t: &Tensor) -> Option<i32> {
    match t.data() {
        TensorData::U8(v) if v.len() == 1 => Some(v[0] as i32),
        TensorData::I8(v) if v.len() == 1 => Some(v[0] as i32),
        TensorData::I32(v) if v.len() == 1 => Some(v[0]),
        _ => None,
    }
}

/// The single value of an optional one-element integer tensor (a per-tensor
/// zero point); 0 when absent.
pub(crate) fn scalar_zero(t: Option<&Tensor>, what: &str) -> OpResult<i32> {
    let Some(t) = t else { return Ok(0) };
    if let Some(v) = one_i32(t) {
        return Ok(v);
    }
    single(i32_values(t, what)?, t, what)
}

/// The one value `v` read from `t` holds; more or fewer are refused.
fn single<T: Copy>(v: Vec<T>, t: &Tensor, what: &str) -> OpResult<T> {
    if v.len() != 1 {
        return Err(OpError::invalid(format!(
            "{what} must be a scalar (per-tensor), got shape {:?}",
            t.shape()
        )));
    }
    Ok(v[0])
}

/// Scales or zero points that are a scalar or a vector of length `n` (e.g.
/// one per output channel), expanded to length `n`.
pub(crate) fn per_channel<T: Copy>(
    v: Vec<T>,
    shape: &[usize],
    n: usize,
    what: &str,
) -> OpResult<Vec<T>> {
    if v.len() == 1 {
        return Ok(vec![v[0]; n]);
    }
    if shape.len() == 1 && v.len() == n {
        return Ok(v);
    }
    Err(OpError::invalid(format!(
        "{what} must be a scalar or have {n} elements, got shape {shape:?}"
    )))
}

/// Per-output-channel weight zero points (`w_zero_point`: absent, one
/// value, or one per channel), expanded to `c_out` values.
pub(crate) fn weight_zero_points(t: Option<&Tensor>, c_out: usize) -> OpResult<Vec<i32>> {
    match t {
        Some(t) => per_channel(
            i32_values(t, "w_zero_point")?,
            t.shape(),
            c_out,
            "w_zero_point",
        ),
        None => Ok(vec![0; c_out]),
    }
}

/// Converts f32 results to the float dtype `to` (f32, f16, bf16, f64).
pub(crate) fn pack_float(v: Vec<f32>, to: DType) -> OpResult<TensorData> {
    Ok(match to {
        DType::F32 => TensorData::F32(v),
        DType::F16 => TensorData::F16(v.into_iter().map(f16::from_f32).collect()),
        DType::BF16 => TensorData::BF16(v.into_iter().map(bf16::from_f32).collect()),
        DType::F64 => TensorData::F64(v.into_iter().map(|x| x as f64).collect()),
        d => return Err(OpError::dtype("output", d)),
    })
}

/// How a scale / zero-point tensor maps onto the elements of the tensor it
/// quantizes (ONNX `QuantizeLinear` / `DequantizeLinear`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One parameter for every element.
    PerTensor,
    /// One parameter per index along an axis of extent `dim`; `inner` is the
    /// product of the dimensions after the axis.
    PerAxis { dim: usize, inner: usize },
    /// One parameter per block of `block` consecutive indices along an axis
    /// of extent `dim`; the parameter tensor has `ceil(dim / block)` there.
    Blocked {
        dim: usize,
        inner: usize,
        block: usize,
        blocks: usize,
    },
}

impl Layout {
    /// Works out the layout from the shapes and the `axis` / `block_size`
    /// attributes, validating the parameter shape.
    pub(crate) fn new(
        x: &[usize],
        param: &[usize],
        axis: i64,
        block_size: i64,
    ) -> OpResult<Layout> {
        let numel: usize = param.iter().product();
        if block_size < 0 {
            return Err(OpError::invalid(format!(
                "block_size must be >= 0, got {block_size}"
            )));
        }
        if block_size == 0 && numel == 1 && param.len() <= 1 {
            return Ok(Layout::PerTensor);
        }
        let ax = qport_core::shape::normalize_axis(axis, x.len()).ok_or_else(|| {
            OpError::invalid(format!(
                "axis {axis} is out of range for input of rank {}",
                x.len()
            ))
        })?;
        let dim = x[ax];
        let inner: usize = x[ax + 1..].iter().product();
        if block_size == 0 {
            if param.len() != 1 || param[0] != dim {
                return Err(OpError::invalid(format!(
                    "scale shape {param:?} is neither a scalar nor a vector of length {dim} (input dimension {ax})"
                )));
            }
            return Ok(Layout::PerAxis { dim, inner });
        }
        let block = block_size as usize;
        let blocks = dim.div_ceil(block);
        let ok = param.len() == x.len()
            && param
                .iter()
                .zip(x)
                .enumerate()
                .all(|(i, (&p, &d))| if i == ax { p == blocks } else { p == d });
        if !ok {
            return Err(OpError::invalid(format!(
                "blocked quantization with block_size {block} on axis {ax} of input {x:?} needs scale shape with {blocks} on that axis and the input's dimensions elsewhere, got {param:?}"
            )));
        }
        Ok(Layout::Blocked {
            dim,
            inner,
            block,
            blocks,
        })
    }

    /// The parameter index for flat element index `i`.
    #[inline]
    pub(crate) fn index(&self, i: usize) -> usize {
        match *self {
            Layout::PerTensor => 0,
            Layout::PerAxis { dim, inner } => (i / inner) % dim,
            Layout::Blocked {
                dim,
                inner,
                block,
                blocks,
            } => {
                let within = i % inner;
                let a = (i / inner) % dim;
                let outer = i / (inner * dim);
                (outer * blocks + a / block) * inner + within
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// onnxruntime's requantization written out: `saturate(round_half_even(
    /// f32(acc) · multiplier) + zero_point)`, the product in f32.
    fn ort_requantize(acc: i32, multiplier: f32, zero: i32, q: Grid) -> i32 {
        saturate_rounded(round_half_even(acc as f32 * multiplier), zero, q)
    }

    /// The default profile's prepared requantizer (what every quantized
    /// GEMM and convolution runs) is onnxruntime's formula bit for bit, on
    /// single values and on slices, over 8- and 16-bit outputs.
    #[test]
    fn default_profile_requantizes_as_onnxruntime() {
        use qport_core::arith::{ArithProfile, Requantizer};
        let p = ArithProfile::onnxruntime();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let specials = [0.5f32, 1.0, f32::NAN, f32::INFINITY, 0.0, -0.25, 1e-9, 3e4];
        for case in 0..4000 {
            let q = [Grid::U8, Grid::I8, Grid::U16, Grid::I16][case % 4];
            let zero = q.min() + (next() % (q.max() - q.min() + 1) as u64) as i32;
            let (a, b, c) = (next() as u32, next() as u32, next() as u32);
            let mult = if case % 10 == 0 {
                specials[case / 10 % specials.len()]
            } else {
                (a % 100_000) as f32 * 1e-7 + (b % 7) as f32 * 0.5
            };
            let accs: Vec<i32> = (0..9)
                .map(|i| match (c as usize + i) % 4 {
                    0 => next() as i32,
                    1 => (next() % 2_000_001) as i32 - 1_000_000,
                    _ => (next() % 4001) as i32 - 2000,
                })
                .collect();
            let rq = Requantizer::new(
                0.0,
                p.gemm_multiplier(&[mult], &[]),
                zero,
                q.min(),
                q.max(),
                p,
            );
            let mut slice = vec![0i32; accs.len()];
            rq.apply_slice(&accs, &mut slice);
            for (&acc, &s) in accs.iter().zip(&slice) {
                let want = ort_requantize(acc, mult, zero, q);
                assert_eq!(
                    rq.apply(i64::from(acc)),
                    want,
                    "acc {acc} mult {mult} zero {zero} {q:?}"
                );
                assert_eq!(s, want, "slice: acc {acc} mult {mult} zero {zero} {q:?}");
            }
        }
    }

    #[test]
    fn rounds_half_to_even_and_saturates() {
        assert_eq!(ort_requantize(5, 0.5, 0, Grid::I8), 2);
        assert_eq!(ort_requantize(7, 0.5, 0, Grid::I8), 4);
        assert_eq!(ort_requantize(-1000, 1.0, 0, Grid::I16), -1000);
        let q = Grid::U8;
        assert_eq!(quantize(0.5, 1.0, 0, q), 0);
        assert_eq!(quantize(1.5, 1.0, 0, q), 2);
        assert_eq!(quantize(2.5, 1.0, 0, q), 2);
        assert_eq!(quantize(-2.5, 1.0, 128, q), 126);
        assert_eq!(quantize(1000.0, 1.0, 128, q), 255);
        assert_eq!(quantize(-1000.0, 1.0, 128, q), 0);
        assert_eq!(quantize(f32::NAN, 1.0, 128, q), 0);
        assert_eq!(quantize(-3.5, 1.0, 0, Grid::I8), -4);
        assert_eq!(quantize(20.0, 1.0, 0, Grid::I4), 7);
        assert_eq!(quantize(-20.0, 1.0, 0, Grid::I4), -8);
        assert_eq!(quantize(2.5, 1.0, 0, Grid::U2), 2);
        assert_eq!(quantize(-2.5, 1.0, 0, Grid::I2), -2);
        assert_eq!(quantize(9.0, 1.0, 1, Grid::U2), 3);
        let p = Grid::I4.pack(vec![-8, 7]);
        assert_eq!(
            Tensor::new(vec![2], p).unwrap().to_i64_vec().unwrap(),
            vec![-8, 7]
        );
    }

    #[test]
    fn layouts() {
        assert_eq!(Layout::new(&[2, 3], &[], 1, 0).unwrap(), Layout::PerTensor);
        assert_eq!(Layout::new(&[2, 3], &[1], 1, 0).unwrap(), Layout::PerTensor);
        let l = Layout::new(&[2, 3, 2], &[3], 1, 0).unwrap();
        let idx: Vec<usize> = (0..12).map(|i| l.index(i)).collect();
        assert_eq!(idx, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]);
        assert!(Layout::new(&[2, 3], &[2], 1, 0).is_err());
        assert!(Layout::new(&[2, 3], &[3], 2, 0).is_err());
        // x [2, 5] blocked along axis 1 by 2 -> scale [2, 3]
        let l = Layout::new(&[2, 5], &[2, 3], 1, 2).unwrap();
        let idx: Vec<usize> = (0..10).map(|i| l.index(i)).collect();
        assert_eq!(idx, [0, 0, 1, 1, 2, 3, 3, 4, 4, 5]);
        assert!(Layout::new(&[2, 5], &[2, 2], 1, 2).is_err());
    }
}

#[cfg(test)]
mod round_tests {
    use super::round_half_even;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn round_half_even_matches_std(
            x in prop_oneof![
                any::<f32>(),
                (-1e4f32..1e4),
                (-4096i32..4096).prop_map(|k| k as f32 / 2.0),
                Just(0.49999997f32), Just(-0.49999997f32), Just(8_388_607.5f32),
            ],
        ) {
            let (a, b) = (round_half_even(x), x.round_ties_even());
            prop_assert!(a == b || (a.is_nan() && b.is_nan()), "{x}: {a} vs {b}");
        }
    }
}

/// An operator prepared at build time for the inputs it usually gets
/// (constant weights and quantization parameters), which declines others.
pub(crate) trait Prepared: Send + Sync {
    /// Evaluates into `outputs[0]`, reusing its storage; `false` (nothing
    /// written) for inputs the prepared path does not take.
    fn run_reusing(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<bool>;
}

/// A [`Prepared`] operator with the general one behind it, for the inputs
/// the prepared one declines (such as 16-bit activations).
pub(crate) struct WithFallback<P> {
    pub(crate) prepared: P,
    pub(crate) general: Box<dyn crate::ops::Op>,
}

impl<P: Prepared> crate::ops::Op for WithFallback<P> {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let mut out = [None];
        if self.prepared.run_reusing(inputs, &mut out)? {
            let [y] = out;
            return Ok(vec![y.expect("a prepared run writes its output")]);
        }
        self.general.eval(inputs)
    }

    /// The prepared path writes into the storage of its previous output
    /// (no allocation when the input shapes repeat).
    fn eval_into(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<()> {
        if self.prepared.run_reusing(inputs, outputs)? {
            return Ok(());
        }
        self.general.eval_into(inputs, outputs)
    }
}
