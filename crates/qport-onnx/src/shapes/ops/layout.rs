//! Rules of the data-movement operators: Reshape, Squeeze, Unsqueeze,
//! Concat, Split, Slice, Gather and Pad.

use super::*;
use spatial::merge_dims;

pub(super) fn reshape(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let target = c.value(1)?;
    let allowzero = c.int("allowzero", 0)? != 0;
    let mut dims = vec![];
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        dims.push(match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                Dim::Unknown
            }
            0 if !allowzero => match x.get(i) {
                Some(d) => d.clone(),
                None => return invalid(format!("shape {target:?} copies axis {i} of {}", show(x))),
            },
            t if t >= 0 => Dim::Known(t as u64),
            _ => return invalid(format!("shape {target:?} is not a valid Reshape target")),
        });
    }
    let total = product(x);
    let rest = product(
        &dims
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != infer)
            .map(|(_, d)| d.clone())
            .collect::<Vec<_>>(),
    );
    match (infer, known(&total), known(&rest)) {
        (Some(i), Some(t), Some(r)) => {
            if r == 0 || t % r != 0 {
                return invalid(format!("cannot reshape {} to {target:?}", show(x)));
            }
            dims[i] = Dim::Known(t / r);
        }
        (None, Some(t), Some(r)) if t != r => {
            return invalid(format!(
                "cannot reshape {} ({t} elements) to {target:?} ({r})",
                show(x)
            ))
        }
        _ => {}
    }
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value: c.value(0).ok().map(<[i64]>::to_vec),
    }])
}

pub(super) fn squeeze(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let dims = match c.axes(13, 1)? {
        Some(axes) => {
            let axes = axes
                .iter()
                .map(|&a| norm_axis(a, x.len()))
                .collect::<Result<Vec<_>, _>>()?;
            for &a in &axes {
                if matches!(x[a], Dim::Known(k) if k != 1) {
                    return invalid(format!("cannot squeeze axis {a} of {}", show(x)));
                }
            }
            x.iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, d)| d.clone())
                .collect()
        }
        None if x.iter().all(|d| known(d).is_some()) => {
            x.iter().filter(|d| **d != Dim::Known(1)).cloned().collect()
        }
        None => return node_stop("no axes, and which dimensions are 1 is not known"),
    };
    c.same(0, c.dtype(0)).map(|mut o| {
        o[0].dims = Some(dims);
        o
    })
}

pub(super) fn unsqueeze(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let Some(axes) = c.axes(13, 1)? else {
        return invalid("Unsqueeze needs axes");
    };
    let r = x.len() + axes.len();
    let mut axes = axes
        .iter()
        .map(|&a| norm_axis(a, r))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    let mut rest = x.iter();
    let dims = (0..r)
        .map(|i| {
            if axes.binary_search(&i).is_ok() {
                Dim::Known(1)
            } else {
                rest.next().cloned().unwrap_or(Dim::Unknown)
            }
        })
        .collect();
    c.same(0, c.dtype(0)).map(|mut o| {
        o[0].dims = Some(dims);
        o
    })
}

pub(super) fn concat(c: &Ctx, inputs: &[usize], dtype: Option<DType>) -> R {
    let first = c.shape(*inputs.first().ok_or(Fail::Invalid("no inputs".into()))?)?;
    let a = norm_axis(c.int("axis", 0)?, first.len())?;
    let mut out = first.to_vec();
    let mut value: Option<Vec<i64>> = Some(vec![]);
    for (k, &i) in inputs.iter().enumerate() {
        let s = c.shape(i)?;
        if s.len() != first.len() {
            return invalid(format!("inputs of rank {} and {}", first.len(), s.len()));
        }
        for (j, d) in s.iter().enumerate() {
            if j == a {
                if k > 0 {
                    out[a] = match (known(&out[a]), known(d)) {
                        (Some(p), Some(q)) => Dim::Known(p + q),
                        _ => Dim::Unknown,
                    };
                }
            } else {
                out[j] = merge_dims(
                    &out[j],
                    d,
                    &format!(
                        "inputs differ in dimension {j} ({} vs {})",
                        show(first),
                        show(s)
                    ),
                )?;
            }
        }
        value = match (value, c.value(i).ok()) {
            (Some(mut v), Some(x)) => {
                v.extend_from_slice(x);
                Some(v)
            }
            _ => None,
        };
    }
    Ok(vec![Out {
        dtype,
        dims: Some(out),
        value: value.filter(|_| first.len() == 1),
    }])
}

pub(super) fn split(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let a = norm_axis(c.int("axis", 0)?, x.len())?;
    let n_out = c.node.outputs.len().max(1);
    let sizes: Option<Vec<i64>> = if c.opset >= 13 {
        if c.present(1) {
            Some(c.value(1)?.to_vec())
        } else {
            None
        }
    } else {
        c.ints("split")?
    };
    let parts: Vec<Dim> = match (sizes, known(&x[a])) {
        (Some(s), d) => {
            let sum: i64 = s.iter().sum();
            if s.len() != n_out || s.iter().any(|&v| v < 0) || d.is_some_and(|d| d as i64 != sum) {
                return invalid(format!(
                    "split {s:?} does not divide {} into {n_out} parts",
                    show(x)
                ));
            }
            s.iter().map(|&v| Dim::Known(v as u64)).collect()
        }
        (None, Some(d)) => {
            let n = n_out as u64;
            if c.opset >= 18 && c.node.attr("num_outputs").is_some() {
                let chunk = d.div_ceil(n);
                let last = d.checked_sub(chunk * (n - 1)).ok_or_else(|| {
                    Fail::Invalid(format!("cannot split {d} into {n} chunks of {chunk}"))
                })?;
                (0..n)
                    .map(|i| Dim::Known(if i + 1 == n { last } else { chunk }))
                    .collect()
            } else if d % n == 0 {
                vec![Dim::Known(d / n); n_out]
            } else {
                return invalid(format!("cannot split {d} into {n} equal parts"));
            }
        }
        (None, None) => vec![Dim::Unknown; n_out],
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut dims = x.to_vec();
            dims[a] = p;
            Out {
                dtype: c.dtype(0),
                dims: Some(dims),
                value: None,
            }
        })
        .collect())
}

pub(super) fn slice(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let (starts, ends, axes, steps) = if c.opset < 10 {
        (
            c.ints("starts")?.unwrap_or_default(),
            c.ints("ends")?.unwrap_or_default(),
            c.ints("axes")?,
            None,
        )
    } else {
        let opt = |i: usize| -> Result<Option<Vec<i64>>, Fail> {
            if c.present(i) {
                Ok(Some(c.value(i)?.to_vec()))
            } else {
                Ok(None)
            }
        };
        (c.value(1)?.to_vec(), c.value(2)?.to_vec(), opt(3)?, opt(4)?)
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return invalid("starts, ends, axes and steps differ in length");
    }
    let mut dims = x.to_vec();
    let mut ranges = vec![];
    for k in 0..starts.len() {
        let a = norm_axis(axes[k], x.len())?;
        let step = steps[k];
        if step == 0 {
            return invalid("a step is 0");
        }
        let Some(d) = known(&x[a]) else {
            dims[a] = Dim::Unknown;
            continue;
        };
        let d = d as i64;
        let clamp = |v: i64, lo: i64, hi: i64| {
            let v = if v < 0 { v + d } else { v };
            v.clamp(lo, hi)
        };
        let (s, e) = if step > 0 {
            (clamp(starts[k], 0, d), clamp(ends[k], 0, d))
        } else {
            (clamp(starts[k], 0, d - 1), clamp(ends[k], -1, d - 1))
        };
        let len = if step > 0 {
            ceil_div((e - s).max(0), step)
        } else {
            ceil_div((s - e).max(0), -step)
        };
        dims[a] = Dim::Known(len as u64);
        ranges.push((a, s, step, len));
    }
    let value = match (c.value(0).ok(), x.len(), ranges.as_slice()) {
        (Some(v), 1, [(0, s, step, len)]) => {
            Some((0..*len).map(|i| v[(s + i * step) as usize]).collect())
        }
        _ => None,
    };
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value,
    }])
}

/// `ceil(a / b)` for `a >= 0`, `b > 0`.
pub(super) fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

pub(super) fn gather(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let idx = c.shape(1)?;
    let a = norm_axis(c.int("axis", 0)?, x.len())?;
    let mut dims = x[..a].to_vec();
    dims.extend_from_slice(idx);
    dims.extend_from_slice(&x[a + 1..]);
    let value = match (c.value(0).ok(), c.value(1).ok(), x.len()) {
        (Some(v), Some(ix), 1) => ix
            .iter()
            .map(|&i| {
                let i = if i < 0 { i + v.len() as i64 } else { i };
                usize::try_from(i).ok().and_then(|i| v.get(i).copied())
            })
            .collect(),
        _ => None,
    };
    Ok(vec![Out {
        dtype: c.dtype(0),
        dims: Some(dims),
        value,
    }])
}

pub(super) fn pad(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let pads = if c.opset < 11 {
        c.ints("pads")?.unwrap_or_default()
    } else {
        c.value(1)?.to_vec()
    };
    let axes: Vec<usize> = if c.opset >= 18 && c.present(3) {
        c.value(3)?
            .iter()
            .map(|&a| norm_axis(a, x.len()))
            .collect::<Result<_, _>>()?
    } else {
        (0..x.len()).collect()
    };
    let n = axes.len();
    if pads.len() != 2 * n {
        return invalid(format!("{} pads for {n} axes", pads.len()));
    }
    let mut dims = x.to_vec();
    for (k, &a) in axes.iter().enumerate() {
        if let Some(d) = known(&x[a]) {
            let v = d as i64 + pads[k] + pads[k + n];
            if v < 0 {
                return invalid(format!("pads {pads:?} remove more than axis {a} holds"));
            }
            dims[a] = Dim::Known(v as u64);
        } else if pads[k] + pads[k + n] != 0 {
            dims[a] = Dim::Unknown;
        }
    }
    c.one(c.dtype(0), dims)
}
