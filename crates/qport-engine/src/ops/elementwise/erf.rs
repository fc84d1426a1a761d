//! The error function, from the `libm` crate (a pure-Rust port of musl's
//! libm), computed in f64 so f32 callers get a correctly rounded result in
//! practice.

/// `erf(x)` in f64.
pub(crate) fn erf(x: f64) -> f64 {
    libm::erf(x)
}

#[cfg(test)]
mod tests {
    use super::erf;

    #[test]
    fn erf_matches_reference_values() {
        // Reference values from the series definition (15+ digits).
        let cases = [
            (0.0, 0.0),
            (1e-10, 1.1283791670955126e-10),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (1.5, 0.9661051464753108),
            (2.0, 0.9953222650189527),
            (3.0, 0.9999779095030014),
            (-0.7, -0.6778011938374184),
            (10.0, 1.0),
        ];
        for (x, want) in cases {
            let got = erf(x);
            assert!(
                (got - want).abs() <= 1e-15 * want.abs().max(1e-300),
                "erf({x}) = {got}, want {want}"
            );
        }
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
    }
}
