//! Comparison metrics between two numeric outputs: cosine similarity,
//! absolute and relative differences, SQNR, top-k helpers and the rows of
//! an array along one axis.

/// Cosine similarity of two vectors, computed in f64. Two all-zero vectors
/// are identical (1.0); one zero vector against a non-zero one gives 0.0.
///
/// ```
/// let c = qport_core::metrics::cosine(&[1.0, 2.0], &[2.0, 4.0]);
/// assert!((c - 1.0).abs() < 1e-12);
/// ```
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (x as f64, y as f64);
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    cosine_of_sums(dot, na, nb)
}

/// The cosine similarity of two vectors from their dot product `dot` and
/// squared norms `na`, `nb` (for callers that accumulate these with other
/// statistics in one pass), with [`cosine`]'s conventions for zero
/// vectors.
///
/// ```
/// assert_eq!(qport_core::metrics::cosine_of_sums(0.0, 0.0, 0.0), 1.0);
/// assert_eq!(qport_core::metrics::cosine_of_sums(0.0, 1.0, 0.0), 0.0);
/// ```
pub fn cosine_of_sums(dot: f64, na: f64, nb: f64) -> f64 {
    if na == 0.0 && nb == 0.0 {
        return 1.0;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

/// Largest absolute element-wise difference (NaN if either side has NaN at
/// the same position where the other does not).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    let mut m = 0f32;
    for (&x, &y) in a.iter().zip(b) {
        if x.is_nan() != y.is_nan() {
            return f32::NAN;
        }
        if x.is_nan() || x == y {
            continue;
        }
        m = m.max((x - y).abs());
    }
    m
}

/// Largest absolute value (0 for an empty slice).
pub fn max_abs(a: &[f32]) -> f32 {
    a.iter().fold(0f32, |m, &x| m.max(x.abs()))
}

/// Signal-to-quantization-noise ratio in dB of `test` against `reference`
/// (infinite when identical).
pub fn sqnr_db(reference: &[f32], test: &[f32]) -> f64 {
    let (mut s, mut n) = (0f64, 0f64);
    for (&r, &t) in reference.iter().zip(test) {
        s += (r as f64).powi(2);
        n += (r as f64 - t as f64).powi(2);
    }
    if n == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (s / n).log10()
}

/// Index of the largest element (first one on ties); `None` when empty.
///
/// ```
/// assert_eq!(qport_core::metrics::argmax(&[0.1, 0.7, 0.7]), Some(1));
/// ```
pub fn argmax(a: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &x) in a.iter().enumerate() {
        match best {
            Some((_, b)) if x.partial_cmp(&b) != Some(std::cmp::Ordering::Greater) => {}
            _ => best = Some((i, x)),
        }
    }
    best.map(|(i, _)| i)
}

/// Indices of the `k` largest elements, largest first (ties by lower index).
pub fn top_k(a: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..a.len()).collect();
    idx.sort_by(|&i, &j| a[j].total_cmp(&a[i]).then(i.cmp(&j)));
    idx.truncate(k);
    idx
}

/// The 1-D slices ("rows") of a row-major array of `shape` along `axis`,
/// copied, in row-major order of the other axes: `[N, C]` along axis 1
/// gives the `N` rows of `C` values. Empty for an axis the shape lacks or
/// a slice shorter than `shape` says.
///
/// ```
/// let rows = qport_core::metrics::lanes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], 0);
/// assert_eq!(rows, vec![vec![1.0, 4.0], vec![2.0, 5.0], vec![3.0, 6.0]]);
/// ```
pub fn lanes(a: &[f32], shape: &[usize], axis: usize) -> Vec<Vec<f32>> {
    if axis >= shape.len() || shape.iter().product::<usize>() > a.len() {
        return vec![];
    }
    let len = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let outer: usize = shape[..axis].iter().product();
    let mut rows = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let base = o * len * inner + i;
            rows.push((0..len).map(|k| a[base + k * inner]).collect());
        }
    }
    rows
}

/// Numerically stable softmax in f64, returned as f32.
pub fn softmax(a: &[f32]) -> Vec<f32> {
    let m = a.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x)) as f64;
    let e: Vec<f64> = a.iter().map(|&x| (x as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|&x| (x / s) as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_basic() {
        assert_eq!(max_abs_diff(&[1.0, 2.0], &[1.5, 2.0]), 0.5);
        assert_eq!(top_k(&[0.1, 0.9, 0.5], 2), vec![1, 2]);
        assert!(sqnr_db(&[1.0], &[1.0]).is_infinite());
        assert_eq!(cosine(&[0.0], &[0.0]), 1.0);
        assert_eq!(argmax(&[]), None);
        let s = softmax(&[1.0, 1.0]);
        assert!((s[0] - 0.5).abs() < 1e-7);
    }
}
