//! Exact, order-independent sums of `f64` values ([`ExactSum`]): the sum
//! is kept as a short list of non-overlapping `f64` terms whose
//! mathematical sum is exactly the sum of every value added, and read out
//! rounded once (to nearest, ties to even). The result is therefore a
//! function of the multiset of values only: any order, any split into
//! parts followed by [`ExactSum::merge`], gives the bit-identical value.
//! Studies sum per-sample statistics with it so that a study split into
//! shards and merged reproduces the unsharded result bit for bit, and so
//! that the order worker threads finish in never matters.
//!
//! ```
//! use qport_core::exact::ExactSum;
//! let xs = [1e16, 1.0, -1e16, 0.5, 1e-3];
//! let mut a = ExactSum::default();
//! xs.iter().for_each(|&x| a.add(x));
//! // split in two parts, added in another order, merged
//! let (mut p, mut q) = (ExactSum::default(), ExactSum::default());
//! xs[3..].iter().rev().for_each(|&x| p.add(x));
//! xs[..3].iter().for_each(|&x| q.add(x));
//! p.merge(&q);
//! // the exact sum, rounded once (1e16 + 1.0 alone would lose the 1.0)
//! assert_eq!(a.value(), 1.5 + 1e-3);
//! assert_eq!(p.value().to_bits(), a.value().to_bits());
//! ```

use serde::{Deserialize, Serialize};

/// An exact running sum of `f64` values (see the [module docs](self)).
/// Non-finite values are summed apart (`NaN` and infinities propagate as
/// in ordinary addition, independently of order).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExactSum {
    /// Non-overlapping finite terms, increasing in magnitude, whose exact
    /// sum is the sum of the finite values added.
    terms: Vec<f64>,
    /// Sum of the non-finite values added (0 when none); `None` in JSON
    /// stands for 0.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "special")]
    special: Option<f64>,
}

/// The non-finite part in JSON: `"NaN"`, `"inf"` or `"-inf"`.
mod special {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(x) if x.is_nan() => s.serialize_str("NaN"),
            Some(x) if *x > 0.0 => s.serialize_str("inf"),
            Some(_) => s.serialize_str("-inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        match s.as_deref() {
            None => Ok(None),
            Some("NaN") => Ok(Some(f64::NAN)),
            Some("inf") => Ok(Some(f64::INFINITY)),
            Some("-inf") => Ok(Some(f64::NEG_INFINITY)),
            Some(o) => Err(serde::de::Error::custom(format!(
                "expected \"NaN\", \"inf\" or \"-inf\", found \"{o}\""
            ))),
        }
    }
}

impl ExactSum {
    /// Adds `x`.
    pub fn add(&mut self, x: f64) {
        if !x.is_finite() {
            self.special = Some(self.special.map_or(x, |s| s + x));
            return;
        }
        let mut x = x;
        let mut kept = 0;
        for j in 0..self.terms.len() {
            let mut y = self.terms[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            if !hi.is_finite() {
                // the finite sum left f64's range: it is an infinity
                self.terms.clear();
                self.add(hi);
                return;
            }
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.terms[kept] = lo;
                kept += 1;
            }
            x = hi;
        }
        self.terms.truncate(kept);
        self.terms.push(x);
    }

    /// Adds every value `other` holds.
    pub fn merge(&mut self, other: &ExactSum) {
        for &t in &other.terms {
            self.add(t);
        }
        if let Some(s) = other.special {
            self.add(s);
        }
    }

    /// The sum, rounded once to the nearest `f64` (ties to even).
    pub fn value(&self) -> f64 {
        let t = &self.terms;
        let mut i = t.len();
        let mut hi = 0.0;
        let mut lo = 0.0;
        // from the largest term down, until the rounding error is not zero
        while i > 0 {
            i -= 1;
            let x = hi;
            let y = t[i];
            hi = x + y;
            lo = y - (hi - x);
            if lo != 0.0 {
                break;
            }
        }
        // the remaining terms may push a half-way case over
        if i > 0 && ((lo < 0.0 && t[i - 1] < 0.0) || (lo > 0.0 && t[i - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        match self.special {
            Some(s) => s + hi,
            None => hi,
        }
    }
}

/// Serde for an `f32` in JSON without a second rounding: written as the
/// `f64` it widens to (exact), read back and narrowed (exact); NaN as
/// `null` (JSON has no NaN). Reading an `f32` written in its own shortest
/// form would round the decimal twice (to `f64`, then to `f32`), which is
/// not always the value written. Use with `#[serde(with =
/// "qport_core::exact::f32_json")]`.
pub mod f32_json {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `x` (see the module docs).
    pub fn serialize<S: Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
        if x.is_nan() {
            s.serialize_none()
        } else {
            s.serialize_f64(f64::from(*x))
        }
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map_or(f32::NAN, |v| v as f32))
    }
}

/// Like [`f32_json`], for a list of `f32` values.
pub mod f32_vec_json {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes every value as [`super::f32_json`] does.
    pub fn serialize<S: Serializer>(v: &[f32], s: S) -> Result<S::Ok, S::Error> {
        let w: Vec<Option<f64>> = v
            .iter()
            .map(|x| (!x.is_nan()).then(|| f64::from(*x)))
            .collect();
        w.serialize(s)
    }

    /// Reads what [`serialize`] wrote.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
        let w: Vec<Option<f64>> = Vec::deserialize(d)?;
        Ok(w.into_iter()
            .map(|v| v.map_or(f32::NAN, |v| v as f32))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(xs: &[f64]) -> f64 {
        let mut s = ExactSum::default();
        xs.iter().for_each(|&x| s.add(x));
        s.value()
    }

    #[test]
    fn exact_where_naive_summation_is_not() {
        assert_eq!(sum(&[]), 0.0);
        assert_eq!(sum(&[0.1, 0.2, 0.3]), 0.6);
        // naive: 0.1 + 0.2 + 0.3 = 0.6000000000000001
        assert_ne!(0.1 + 0.2 + 0.3, 0.6);
        assert_eq!(sum(&[1e100, 1.0, -1e100]), 1.0);
        assert_eq!(sum(&[1.0; 10]), 10.0);
        // 2^53 + 1 + 1: the exact sum 2^53 + 2 is representable
        let big = 9_007_199_254_740_992.0;
        assert_eq!(sum(&[big, 1.0, 1.0]), big + 2.0);
        // half-way case broken by a tiny third term: rounds up
        assert_eq!(sum(&[big, 1.0, 1e-10]), big + 2.0);
        // exact half-way: ties to even (stays at 2^53)
        assert_eq!(sum(&[big, 1.0]), big);
    }

    #[test]
    fn order_and_split_independent() {
        let mut x = 987_654_321u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = (x >> 11) as f64 / (1u64 << 53) as f64;
            let e = (x % 80) as i32 - 40;
            if x.is_multiple_of(3) {
                -m * 2f64.powi(e)
            } else {
                m * 2f64.powi(e)
            }
        };
        let xs: Vec<f64> = (0..500).map(|_| next()).collect();
        let whole = sum(&xs);
        let mut rev = xs.clone();
        rev.reverse();
        assert_eq!(sum(&rev).to_bits(), whole.to_bits());
        for cut in [0, 1, 137, 499, 500] {
            let mut a = ExactSum::default();
            let mut b = ExactSum::default();
            xs[..cut].iter().for_each(|&v| a.add(v));
            xs[cut..].iter().for_each(|&v| b.add(v));
            a.merge(&b);
            assert_eq!(a.value().to_bits(), whole.to_bits(), "cut {cut}");
        }
    }

    #[test]
    fn f32_values_round_trip_through_json() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct T {
            #[serde(with = "f32_json")]
            x: f32,
            #[serde(with = "f32_vec_json")]
            v: Vec<f32>,
        }
        let mut bits = 0x3f80_0001u32;
        let mut v = vec![f32::MIN_POSITIVE, f32::MAX, -0.1, 1e-45, f32::NAN];
        for _ in 0..2000 {
            bits = bits.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
            let x = f32::from_bits(bits);
            if x.is_finite() {
                v.push(x);
            }
        }
        let t = T { x: 0.1, v };
        let back: T = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back.x.to_bits(), t.x.to_bits());
        assert_eq!(back.v.len(), t.v.len());
        for (a, b) in back.v.iter().zip(&t.v) {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
        }
    }

    #[test]
    fn non_finite_and_json() {
        let mut s = ExactSum::default();
        s.add(1.0);
        s.add(f64::INFINITY);
        assert_eq!(s.value(), f64::INFINITY);
        s.add(f64::NEG_INFINITY);
        assert!(s.value().is_nan());
        let mut t = ExactSum::default();
        t.add(0.1);
        t.add(1e20);
        let json = serde_json::to_string(&t).unwrap();
        let back: ExactSum = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"NaN\""), "{json}");
        let back: ExactSum = serde_json::from_str(&json).unwrap();
        assert!(back.value().is_nan());
    }
}
