//! Shape arithmetic: checked element counts, row-major strides, numpy
//! broadcasting and axis normalisation.

use crate::error::{Error, Result};

/// The largest element count qport will allocate for one tensor (2^34).
///
/// Models declaring larger tensors are refused with [`Error::TooLarge`]
/// before any allocation, so a malformed file cannot exhaust memory.
pub const MAX_ELEMENTS: u64 = 1 << 34;

/// Product of `shape`, refusing overflow and counts above [`MAX_ELEMENTS`].
///
/// ```
/// use qport_core::shape::checked_numel;
/// assert_eq!(checked_numel(&[2, 3, 4]).unwrap(), 24);
/// assert_eq!(checked_numel(&[]).unwrap(), 1);
/// assert!(checked_numel(&[1 << 20, 1 << 20]).is_err());
/// ```
pub fn checked_numel(shape: &[usize]) -> Result<usize> {
    // no allocation unless it fails: the planned arena calls this on
    // every step of a steady-state run
    numel_of(shape.iter().map(|&d| d as u64))
        .map_err(|reason| too_large(shape.iter().map(|&d| d as u64).collect(), reason))
}

/// Like [`checked_numel`] for declared (untrusted) 64-bit dimensions.
pub fn checked_numel_u64(shape: &[u64]) -> Result<usize> {
    numel_of(shape.iter().copied()).map_err(|reason| too_large(shape.to_vec(), reason))
}

/// The element count of `dims`, or why it is too large.
fn numel_of(dims: impl Iterator<Item = u64> + Clone) -> std::result::Result<usize, String> {
    let mut n: u64 = 1;
    for d in dims.clone() {
        n = n
            .checked_mul(d)
            .ok_or_else(|| "element count overflows 64 bits".to_string())?;
    }
    if dims.into_iter().any(|d| d == 0) {
        return Ok(0);
    }
    if n > MAX_ELEMENTS {
        return Err(format!("{n} elements exceeds the limit of {MAX_ELEMENTS}"));
    }
    Ok(n as usize)
}

fn too_large(shape: Vec<u64>, reason: String) -> Error {
    Error::TooLarge { shape, reason }
}

/// Row-major strides (in elements) of `shape`.
///
/// ```
/// assert_eq!(qport_core::shape::strides(&[2, 3, 4]), vec![12, 4, 1]);
/// ```
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The numpy broadcast of two shapes.
///
/// ```
/// use qport_core::shape::broadcast_shapes;
/// assert_eq!(broadcast_shapes(&[2, 1, 4], &[3, 1]).unwrap(), vec![2, 3, 4]);
/// assert!(broadcast_shapes(&[2], &[3]).is_err());
/// ```
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n {
            a[i + a.len() - n]
        } else {
            1
        };
        let db = if i + b.len() >= n {
            b[i + b.len() - n]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(Error::Broadcast {
                a: a.to_vec(),
                b: b.to_vec(),
            });
        };
    }
    Ok(out)
}

/// The numpy broadcast of any number of shapes.
pub fn broadcast_many(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let mut out: Vec<usize> = vec![];
    for s in shapes {
        out = broadcast_shapes(&out, s)?;
    }
    Ok(out)
}

/// Calls `f` with the offset `Σ idx[a]·strides[a]` of every index of
/// `dims`, in row-major order: the walk of a strided view. Nothing when an
/// extent is 0; once, with 0, when `dims` is empty.
///
/// ```
/// let mut seen = vec![];
/// qport_core::shape::for_each_strided_offset(&[2, 3], &[1, 2], |o| seen.push(o));
/// assert_eq!(seen, [0, 2, 4, 1, 3, 5]);
/// ```
pub fn for_each_strided_offset(dims: &[usize], strides: &[usize], mut f: impl FnMut(usize)) {
    let total: usize = dims.iter().product();
    if total == 0 {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    let mut off = 0usize;
    for _ in 0..total {
        f(off);
        for a in (0..dims.len()).rev() {
            idx[a] += 1;
            off += strides[a];
            if idx[a] < dims[a] {
                break;
            }
            off -= strides[a] * dims[a];
            idx[a] = 0;
        }
    }
}

/// For each element of `out_shape` (row-major), the flat index of the
/// element of a tensor of shape `in_shape` that broadcasts to it.
///
/// `in_shape` must broadcast to `out_shape` (see [`broadcast_shapes`]).
///
/// ```
/// use qport_core::shape::broadcast_index_map;
/// assert_eq!(broadcast_index_map(&[2, 1], &[2, 3]), vec![0, 0, 0, 1, 1, 1]);
/// ```
pub fn broadcast_index_map(in_shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let n = out_shape.len();
    let off = n - in_shape.len();
    let in_strides = strides(in_shape);
    // Effective stride per output axis: 0 where the input is broadcast.
    let eff: Vec<usize> = (0..n)
        .map(|i| {
            if i < off || in_shape[i - off] == 1 {
                0
            } else {
                in_strides[i - off]
            }
        })
        .collect();
    let mut out = Vec::with_capacity(out_shape.iter().product());
    for_each_strided_offset(out_shape, &eff, |o| out.push(o));
    out
}

/// Normalises a possibly negative ONNX axis against `rank`; `None` when out
/// of range.
///
/// ```
/// use qport_core::shape::normalize_axis;
/// assert_eq!(normalize_axis(-1, 4), Some(3));
/// assert_eq!(normalize_axis(4, 4), None);
/// ```
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn index_map_matches_naive(a in proptest::collection::vec(1usize..4, 0..4), b in proptest::collection::vec(1usize..4, 0..4)) {
            // make `a` broadcastable to `out` by replacing mismatches with 1
            let out = {
                let n = a.len().max(b.len());
                let mut o = vec![1; n];
                for i in 0..b.len() { o[n - b.len() + i] = b[i]; }
                o
            };
            let a: Vec<usize> = a.iter().enumerate().map(|(i, &d)| {
                let j = out.len() as isize - a.len() as isize + i as isize;
                if j >= 0 && out[j as usize] == d { d } else { 1 }
            }).collect();
            let map = broadcast_index_map(&a, &out);
            let st = strides(&a);
            let off = out.len() - a.len();
            for (flat, &got) in map.iter().enumerate() {
                let mut rem = flat;
                let mut want = 0;
                for ax in (0..out.len()).rev() {
                    let i = rem % out[ax];
                    rem /= out[ax];
                    if ax >= off && a[ax - off] != 1 { want += i * st[ax - off]; }
                }
                prop_assert_eq!(got, want);
            }
        }
    }
}
