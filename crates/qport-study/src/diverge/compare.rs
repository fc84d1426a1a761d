//! Element-wise comparison of two tensors of one value: how many elements
//! differ and by how much, in the value's own units (LSBs for integers).

use qport_core::{DType, Element, Tensor};
use serde::Serialize;

/// How two versions of a value differ.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Diff {
    /// Elements compared.
    pub elements: usize,
    /// Elements that differ (two NaNs count as equal).
    pub differing: usize,
    /// Largest `|a − b|` over the differing elements, in the value's units:
    /// LSBs (integer steps) for an integer value; 0 when nothing differs,
    /// infinite when a NaN meets a number.
    pub max_diff: f64,
}

impl Diff {
    /// Share of differing elements, in `[0, 1]` (0 for an empty value).
    pub fn share(&self) -> f64 {
        qport_quant::ptq::fraction(self.differing, self.elements, 0.0)
    }

    /// True when no element differs.
    pub fn is_identical(&self) -> bool {
        self.differing == 0
    }

    /// Adds `other` (another output of the same node) to this one.
    pub(crate) fn merge(&mut self, other: Diff) {
        self.elements += other.elements;
        self.differing += other.differing;
        self.max_diff = self.max_diff.max(other.max_diff);
    }
}

fn diff_slices<T: Copy + PartialEq + Into<f64>>(a: &[T], b: &[T]) -> Diff {
    let mut d = Diff {
        elements: a.len(),
        ..Diff::default()
    };
    for (&x, &y) in a.iter().zip(b) {
        if x == y {
            continue;
        }
        let (x, y): (f64, f64) = (x.into(), y.into());
        if x.is_nan() && y.is_nan() {
            continue;
        }
        d.differing += 1;
        let gap = (x - y).abs();
        d.max_diff = d
            .max_diff
            .max(if gap.is_nan() { f64::INFINITY } else { gap });
    }
    d
}

/// Compares `a` with `b` element by element. Fails (with a description)
/// when their dtypes or shapes differ.
pub(crate) fn compare(a: &Tensor, b: &Tensor) -> Result<Diff, String> {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return Err(format!(
            "{} {:?} vs {} {:?}",
            a.dtype(),
            a.shape(),
            b.dtype(),
            b.shape()
        ));
    }
    let err = |e: qport_core::Error| e.to_string();
    fn typed<T: Element + Copy + PartialEq + Into<f64>>(
        a: &Tensor,
        b: &Tensor,
    ) -> Result<Diff, String> {
        let err = |e: qport_core::Error| e.to_string();
        Ok(diff_slices(
            a.as_slice::<T>().map_err(err)?,
            b.as_slice::<T>().map_err(err)?,
        ))
    }
    match a.dtype() {
        DType::U8 => typed::<u8>(a, b),
        DType::I8 => typed::<i8>(a, b),
        DType::I16 => typed::<i16>(a, b),
        DType::U16 => typed::<u16>(a, b),
        DType::I32 => typed::<i32>(a, b),
        DType::F32 => typed::<f32>(a, b),
        _ => {
            let wide = |t: &Tensor| {
                t.cast(DType::F64)
                    .and_then(|c| c.into_vec::<f64>())
                    .map_err(err)
            };
            Ok(diff_slices(&wide(a)?, &wide(b)?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_measures_differences() {
        let a = Tensor::from_vec(vec![4], vec![1u8, 2, 250, 7]).unwrap();
        let b = Tensor::from_vec(vec![4], vec![1u8, 5, 255, 7]).unwrap();
        let d = compare(&a, &b).unwrap();
        assert_eq!((d.elements, d.differing, d.max_diff), (4, 2, 5.0));
        assert_eq!(d.share(), 0.5);
        let f = Tensor::from_vec(vec![3], vec![f32::NAN, 0.0, 1.0]).unwrap();
        let g = Tensor::from_vec(vec![3], vec![f32::NAN, -0.0, f32::NAN]).unwrap();
        let d = compare(&f, &g).unwrap();
        assert_eq!((d.differing, d.max_diff), (1, f64::INFINITY));
        let s = Tensor::from_vec(vec![2, 2], vec![1u8, 2, 3, 4]).unwrap();
        assert!(compare(&a, &s).is_err());
    }
}
