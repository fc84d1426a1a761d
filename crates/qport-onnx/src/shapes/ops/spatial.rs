//! Rules of the windowed and GEMM-class operators: convolutions, pools,
//! Resize/Upsample, DepthToSpace/SpaceToDepth, MatMul and Gemm.

use super::*;
use crate::shapes::window::{extent, AutoPad};

/// DepthToSpace (channels / b², spatial · b) or SpaceToDepth (the reverse).
pub(super) fn space_depth(c: &Ctx, to_space: bool) -> R {
    let x = c.shape(0)?;
    let b = c.int("blocksize", 0)?;
    if x.len() != 4 || b < 1 {
        return invalid(format!("needs rank 4 and blocksize >= 1, got {}", show(x)));
    }
    let b = b as u64;
    // multiply by `m`, or divide by it exactly
    let scale = |d: &Dim, m: u64, grow: bool| -> Result<Dim, Fail> {
        match known(d) {
            None => Ok(Dim::Unknown),
            Some(v) if grow => Ok(Dim::Known(v * m)),
            Some(v) if v % m == 0 => Ok(Dim::Known(v / m)),
            Some(v) => invalid(format!("{v} is not divisible by {m} (blocksize {b})")),
        }
    };
    let dims = vec![
        x[0].clone(),
        scale(&x[1], b * b, !to_space)?,
        scale(&x[2], b, to_space)?,
        scale(&x[3], b, to_space)?,
    ];
    c.one(c.dtype(0), dims)
}

/// The window attributes of a conv or pool node.
pub(super) struct Window {
    kernel: Vec<Option<u64>>,
    strides: Vec<u64>,
    dilations: Vec<u64>,
    pads: Vec<(u64, u64)>,
    auto_pad: String,
    ceil_mode: bool,
}

pub(super) fn positive_list(c: &Ctx, name: &str, n: usize) -> Result<Vec<u64>, Fail> {
    match c.ints(name)? {
        None => Ok(vec![1; n]),
        Some(v) if v.len() == n && v.iter().all(|&x| x >= 1) => {
            Ok(v.iter().map(|&x| x as u64).collect())
        }
        Some(v) => invalid(format!("{name} {v:?} must be {n} values >= 1")),
    }
}

impl Window {
    fn parse(c: &Ctx, kernel: Vec<Option<u64>>) -> Result<Window, Fail> {
        let n = kernel.len();
        let pads = match c.ints("pads")? {
            None => vec![(0, 0); n],
            Some(p) if p.len() == 2 * n && p.iter().all(|&x| x >= 0) => {
                (0..n).map(|i| (p[i] as u64, p[i + n] as u64)).collect()
            }
            Some(p) => return invalid(format!("pads {p:?} must be {} values >= 0", 2 * n)),
        };
        Ok(Window {
            strides: positive_list(c, "strides", n)?,
            dilations: positive_list(c, "dilations", n)?,
            pads,
            auto_pad: c.node.attr_string("auto_pad", "NOTSET")?,
            ceil_mode: c.int("ceil_mode", 0)? != 0,
            kernel,
        })
    }

    /// Output sizes along the spatial axes ([`super::super::window::extent`]).
    fn out(&self, input: &[Dim]) -> Result<Vec<Dim>, Fail> {
        let auto_pad = AutoPad::parse(&self.auto_pad).map_err(Fail::Invalid)?;
        let mut out = vec![];
        for (i, d) in input.iter().enumerate() {
            let (Some(x), Some(k)) = (known(d), self.kernel[i]) else {
                out.push(Dim::Unknown);
                continue;
            };
            let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let (pb, pe) = self.pads[i];
            let e = extent(
                n(x),
                n(k.max(1)),
                n(self.strides[i]),
                n(self.dilations[i]),
                (n(pb), n(pe)),
                auto_pad,
                self.ceil_mode,
            )
            .map_err(Fail::Invalid)?;
            out.push(Dim::Known(e.out as u64));
        }
        Ok(out)
    }
}

/// `[N, C, spatial...]` or, channels last, `[N, spatial..., C]`: (batch,
/// channels, spatial).
pub(super) fn split_layout(x: &[Dim], channels_last: bool) -> Result<(Dim, Dim, Vec<Dim>), Fail> {
    if x.len() < 3 {
        return invalid(format!("needs rank >= 3, input is {}", show(x)));
    }
    Ok(if channels_last {
        (
            x[0].clone(),
            x[x.len() - 1].clone(),
            x[1..x.len() - 1].to_vec(),
        )
    } else {
        (x[0].clone(), x[1].clone(), x[2..].to_vec())
    })
}

pub(super) fn join_layout(n: Dim, ch: Dim, sp: Vec<Dim>, channels_last: bool) -> Vec<Dim> {
    let mut v = vec![n];
    if channels_last {
        v.extend(sp);
        v.push(ch);
    } else {
        v.push(ch);
        v.extend(sp);
    }
    v
}

pub(super) fn conv(c: &Ctx, x: usize, w: usize, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, _, sp) = split_layout(c.shape(x)?, channels_last)?;
    let wd = c.shape(w)?;
    if wd.len() != sp.len() + 2 {
        return invalid(format!(
            "weight {} does not match the input's rank",
            show(wd)
        ));
    }
    let kernel = match c.ints("kernel_shape")? {
        Some(k) => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        None => wd[2..].iter().map(known).collect(),
    };
    let out = Window::parse(c, kernel)?.out(&sp)?;
    c.one(dtype, join_layout(n, wd[0].clone(), out, channels_last))
}

pub(super) fn conv_transpose(c: &Ctx) -> R {
    let (n, _, sp) = split_layout(c.shape(0)?, false)?;
    let wd = c.shape(1)?;
    if wd.len() != sp.len() + 2 {
        return invalid(format!(
            "weight {} does not match the input's rank",
            show(wd)
        ));
    }
    let group = c.int("group", 1)?.max(1) as u64;
    let m = known(&wd[1]).map_or(Dim::Unknown, |k| Dim::Known(k * group));
    if let Some(os) = c.ints("output_shape")? {
        let tail = &os[os.len().saturating_sub(sp.len())..];
        return c.one(c.dtype(0), join_layout(n, m, dims_of_value(tail)?, false));
    }
    let kernel: Vec<Option<u64>> = match c.ints("kernel_shape")? {
        Some(k) => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        None => wd[2..].iter().map(known).collect(),
    };
    let win = Window::parse(c, kernel)?;
    let opad = match c.ints("output_padding")? {
        Some(p) => p.iter().map(|&v| v.max(0) as u64).collect(),
        None => vec![0; sp.len()],
    };
    let mut out = vec![];
    for (i, d) in sp.iter().enumerate() {
        let (Some(x), Some(k)) = (known(d), win.kernel[i]) else {
            out.push(Dim::Unknown);
            continue;
        };
        let s = win.strides[i];
        let o = match win.auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => x * s,
            _ => {
                let (pb, pe) = if win.auto_pad == "VALID" {
                    (0, 0)
                } else {
                    win.pads[i]
                };
                let full = s * (x.max(1) - 1)
                    + opad.get(i).copied().unwrap_or(0)
                    + (k.max(1) - 1) * win.dilations[i]
                    + 1;
                match full.checked_sub(pb + pe) {
                    Some(o) => o,
                    None => return invalid("pads exceed the transposed convolution's output"),
                }
            }
        };
        out.push(Dim::Known(o));
    }
    c.one(c.dtype(0), join_layout(n, m, out, false))
}

pub(super) fn pool(c: &Ctx, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, ch, sp) = split_layout(c.shape(0)?, channels_last)?;
    let kernel: Vec<Option<u64>> = match c.ints("kernel_shape")? {
        Some(k) if k.len() == sp.len() => k.iter().map(|&v| u64::try_from(v).ok()).collect(),
        k => {
            return invalid(format!(
                "kernel_shape {k:?} does not match {} spatial axes",
                sp.len()
            ))
        }
    };
    let out = Window::parse(c, kernel)?.out(&sp)?;
    c.one(dtype, join_layout(n, ch, out, channels_last))
}

pub(super) fn global_pool(c: &Ctx, channels_last: bool, dtype: Option<DType>) -> R {
    let (n, ch, sp) = split_layout(c.shape(0)?, channels_last)?;
    c.one(
        dtype,
        join_layout(n, ch, vec![Dim::Known(1); sp.len()], channels_last),
    )
}

pub(super) fn merge_dims(a: &Dim, b: &Dim, what: &str) -> Result<Dim, Fail> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) if x != y => invalid(format!("{what}: {x} vs {y}")),
        (Dim::Known(_), _) => Ok(a.clone()),
        (_, Dim::Known(_)) => Ok(b.clone()),
        (Dim::Param(p), Dim::Param(q)) if p == q => Ok(a.clone()),
        _ => Ok(Dim::Unknown),
    }
}

pub(super) fn matmul(c: &Ctx, a: usize, b: usize, dtype: Option<DType>) -> R {
    let (x, y) = (c.shape(a)?, c.shape(b)?);
    if x.is_empty() || y.is_empty() {
        return invalid("MatMul operands must have rank >= 1");
    }
    let xm: Vec<Dim> = if x.len() == 1 {
        vec![Dim::Known(1), x[0].clone()]
    } else {
        x.to_vec()
    };
    let ym: Vec<Dim> = if y.len() == 1 {
        vec![y[0].clone(), Dim::Known(1)]
    } else {
        y.to_vec()
    };
    let (xr, yr) = (xm.len(), ym.len());
    merge_dims(
        &xm[xr - 1],
        &ym[yr - 2],
        &format!("inner dimensions of {} and {} differ", show(x), show(y)),
    )?;
    let mut out = broadcast(&xm[..xr - 2], &ym[..yr - 2]).map_err(Fail::Invalid)?;
    if x.len() > 1 {
        out.push(xm[xr - 2].clone());
    }
    if y.len() > 1 {
        out.push(ym[yr - 1].clone());
    }
    c.one(dtype, out)
}

pub(super) fn gemm(c: &Ctx, a: usize, b: usize, dtype: Option<DType>) -> R {
    let (x, y) = (c.shape(a)?, c.shape(b)?);
    if x.len() != 2 || y.len() != 2 {
        return invalid(format!(
            "Gemm needs rank-2 operands, got {} and {}",
            show(x),
            show(y)
        ));
    }
    let (m, k1) = if c.int("transA", 0)? != 0 {
        (&x[1], &x[0])
    } else {
        (&x[0], &x[1])
    };
    let (k2, n) = if c.int("transB", 0)? != 0 {
        (&y[1], &y[0])
    } else {
        (&y[0], &y[1])
    };
    merge_dims(k1, k2, "inner dimensions differ")?;
    c.one(dtype, vec![m.clone(), n.clone()])
}

pub(super) fn resize(c: &Ctx) -> R {
    let x = c.shape(0)?;
    let r = x.len();
    let op = c.node.op_type.as_str();
    let axes: Vec<usize> = match c.ints("axes")? {
        Some(a) if c.opset >= 18 => a
            .iter()
            .map(|&v| norm_axis(v, r))
            .collect::<Result<_, _>>()?,
        _ => (0..r).collect(),
    };
    let nonempty = |i: usize| {
        c.present(i)
            && c.ins
                .get(i)
                .copied()
                .flatten()
                .and_then(|v| v.shape.as_ref())
                .is_none_or(|s| product(s) != Dim::Known(0))
    };
    let mut dims = x.to_vec();
    let scales = if op == "Upsample" && c.opset < 9 {
        Some(c.node.attr_floats("scales")?.unwrap_or_default())
    } else if op == "Upsample" || c.opset < 11 {
        Some(c.floats(1)?)
    } else if nonempty(3) {
        None
    } else if nonempty(2) {
        Some(c.floats(2)?)
    } else {
        return invalid("neither scales nor sizes is given");
    };
    match scales {
        Some(s) => {
            if s.len() != axes.len() {
                return invalid(format!("{} scales for {} axes", s.len(), axes.len()));
            }
            for (&a, &v) in axes.iter().zip(&s) {
                if !(v.is_finite() && v > 0.0) {
                    return invalid(format!("scale {v} must be > 0"));
                }
                dims[a] = match known(&x[a]) {
                    Some(d) => Dim::Known((d as f64 * f64::from(v)).floor() as u64),
                    None if v == 1.0 => x[a].clone(),
                    None => Dim::Unknown,
                };
            }
        }
        None => {
            let sizes = c.value(3)?;
            if sizes.len() != axes.len() {
                return invalid(format!("{} sizes for {} axes", sizes.len(), axes.len()));
            }
            let sizes = dims_of_value(sizes)?;
            let policy = c.node.attr_string("keep_aspect_ratio_policy", "stretch")?;
            if policy == "stretch" || c.opset < 18 {
                for (&a, s) in axes.iter().zip(sizes) {
                    dims[a] = s;
                }
            } else {
                let ratios: Option<Vec<f64>> = axes
                    .iter()
                    .zip(&sizes)
                    .map(|(&a, s)| Some(known(s)? as f64 / known(&x[a])? as f64))
                    .collect();
                let Some(ratios) = ratios else {
                    return node_stop("keep_aspect_ratio_policy over dynamic dimensions");
                };
                let s = if policy == "not_larger" {
                    ratios.iter().copied().fold(f64::INFINITY, f64::min)
                } else {
                    ratios.iter().copied().fold(0.0, f64::max)
                };
                for &a in &axes {
                    let d = known(&x[a]).unwrap_or(0) as f64;
                    dims[a] = Dim::Known((s * d + 0.5) as u64);
                }
            }
        }
    }
    c.one(c.dtype(0), dims)
}
