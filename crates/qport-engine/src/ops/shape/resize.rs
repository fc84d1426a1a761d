//! Resize (opsets 10 to 19+) and the deprecated Upsample.
//!
//! Follows the ONNX reference implementation: interpolation is separable, so
//! each resized axis is processed in turn with per-output-position taps
//! (source indices and weights). Nearest mode selects elements (any dtype);
//! linear and cubic interpolate in f64 and convert back (integers round half
//! to even and saturate). Coordinates are computed in f64 from the float
//! output width `scale * input_size`, as the reference does.

use super::{check_shape, dim, fill_map_indices, gather_or_fill, int_list, norm_axes, FILL};
use crate::error::{OpError, OpResult};
use crate::ops::{input, opt_input, BuildCtx, Op, Registry};
use qport_core::{DType, Tensor};
use qport_onnx::Node;

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[("Resize", build_resize), ("Upsample", build_upsample)],
    );
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    /// Resize-10 and Upsample: floor when upsampling, ceil when downsampling
    /// (onnxruntime's behaviour for the forms without `nearest_mode`).
    Simple,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Policy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Where the scales (and sizes, roi) come from.
#[derive(Debug, Clone)]
enum Form {
    /// Upsample-7: `scales` attribute.
    AttrScales(Vec<f32>),
    /// Upsample-9, Resize-10: `(X, scales)`.
    Input1Scales,
    /// Resize-11+: `(X, roi, scales, sizes)`.
    Full,
}

struct Resize {
    mode: Mode,
    coord: Coord,
    nearest: Nearest,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f32,
    antialias: bool,
    axes: Option<Vec<i64>>,
    policy: Policy,
    form: Form,
}

fn parse_mode(m: &str) -> OpResult<Mode> {
    match m {
        "nearest" => Ok(Mode::Nearest),
        "linear" | "bilinear" | "trilinear" => Ok(Mode::Linear),
        "cubic" | "bicubic" => Ok(Mode::Cubic),
        m => Err(OpError::invalid(format!("unknown mode '{m}'"))),
    }
}

/// `coordinate_transformation_mode` names (`None`: not supported).
const COORDS: [(&str, Option<Coord>); 7] = [
    ("half_pixel", Some(Coord::HalfPixel)),
    ("half_pixel_symmetric", Some(Coord::HalfPixelSymmetric)),
    ("pytorch_half_pixel", Some(Coord::PytorchHalfPixel)),
    ("align_corners", Some(Coord::AlignCorners)),
    ("asymmetric", Some(Coord::Asymmetric)),
    ("tf_crop_and_resize", Some(Coord::TfCropAndResize)),
    ("tf_half_pixel_for_nn", None),
];

/// `nearest_mode` names.
const NEAREST_MODES: [(&str, Nearest); 4] = [
    ("round_prefer_floor", Nearest::RoundPreferFloor),
    ("round_prefer_ceil", Nearest::RoundPreferCeil),
    ("floor", Nearest::Floor),
    ("ceil", Nearest::Ceil),
];

/// `keep_aspect_ratio_policy` names.
const POLICIES: [(&str, Policy); 3] = [
    ("stretch", Policy::Stretch),
    ("not_larger", Policy::NotLarger),
    ("not_smaller", Policy::NotSmaller),
];

/// The value `table` names by the string attribute `attr` (default
/// `default`); a name not in the table is invalid.
fn attr_choice<T: Copy>(n: &Node, attr: &str, default: &str, table: &[(&str, T)]) -> OpResult<T> {
    let m = n.attr_string(attr, default)?;
    table
        .iter()
        .find(|(name, _)| *name == m)
        .map(|&(_, v)| v)
        .ok_or_else(|| OpError::invalid(format!("unknown {attr} '{m}'")))
}

fn build_resize(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    let mode = parse_mode(&n.attr_string("mode", "nearest")?)?;
    if ctx.opset < 11 {
        if mode == Mode::Cubic {
            return Err(OpError::invalid("cubic mode needs opset 11"));
        }
        return Ok(Box::new(Resize::legacy(mode, Form::Input1Scales)));
    }
    let coord = attr_choice(n, "coordinate_transformation_mode", "half_pixel", &COORDS)?
        .ok_or_else(|| {
            OpError::unsupported("coordinate_transformation_mode tf_half_pixel_for_nn")
        })?;
    let nearest = attr_choice(n, "nearest_mode", "round_prefer_floor", &NEAREST_MODES)?;
    let policy = attr_choice(n, "keep_aspect_ratio_policy", "stretch", &POLICIES)?;
    Ok(Box::new(Resize {
        mode,
        coord,
        nearest,
        cubic_a: f64::from(n.attr_float("cubic_coeff_a", -0.75)?),
        exclude_outside: n.attr_int("exclude_outside", 0)? != 0,
        extrapolation: n.attr_float("extrapolation_value", 0.0)?,
        antialias: n.attr_int("antialias", 0)? != 0,
        axes: n.attr_ints("axes")?,
        policy,
        form: Form::Full,
    }))
}

fn build_upsample(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let mode = parse_mode(&ctx.node.attr_string("mode", "nearest")?)?;
    if mode == Mode::Cubic {
        return Err(OpError::invalid(
            "Upsample supports nearest and linear modes only",
        ));
    }
    let form = if ctx.opset < 9 {
        Form::AttrScales(
            ctx.node
                .attr_floats("scales")?
                .ok_or_else(|| OpError::invalid("attribute 'scales' is required"))?,
        )
    } else {
        Form::Input1Scales
    };
    Ok(Box::new(Resize::legacy(mode, form)))
}

/// The output of one Resize call, worked out from its inputs.
struct Geometry {
    /// The scale per axis (1 on the axes not resized).
    scale: Vec<f64>,
    /// The output shape.
    out: Vec<usize>,
    /// The resized axes.
    axes: Vec<usize>,
    /// `tf_crop_and_resize`'s region of interest: the starts of every
    /// axis, then the ends.
    roi: Option<Vec<f64>>,
}

impl Geometry {
    /// The region of interest `(start, end)` of axis `a`; `(0, 1)`, the
    /// whole axis, without one.
    fn roi(&self, a: usize) -> (f64, f64) {
        let r = self.scale.len();
        self.roi.as_ref().map_or((0.0, 1.0), |v| (v[a], v[r + a]))
    }
}

/// Refuses a `what` input with `got` entries where `want` are expected.
fn entry_count(what: &str, got: usize, want: usize) -> OpResult<()> {
    if got != want {
        return Err(OpError::invalid(format!(
            "{what} has {got} entries, expected {want}"
        )));
    }
    Ok(())
}

impl Resize {
    fn legacy(mode: Mode, form: Form) -> Resize {
        Resize {
            mode,
            coord: Coord::Asymmetric,
            nearest: Nearest::Simple,
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            antialias: false,
            axes: None,
            policy: Policy::Stretch,
            form,
        }
    }

    /// Per-axis scales and output sizes (full rank), the processed axes, and
    /// the full-rank roi when tf_crop_and_resize uses one.
    fn geometry(&self, x: &Tensor, inputs: &[Option<&Tensor>]) -> OpResult<Geometry> {
        let r = x.rank();
        let shape = x.shape();
        let axes = match &self.axes {
            Some(a) => norm_axes(a, r, "axis")?,
            None => (0..r).collect(),
        };
        let nonempty = |i: usize| opt_input(inputs, i).filter(|t| !t.is_empty());
        let (scales, sizes, roi) = match &self.form {
            Form::AttrScales(s) => (Some(s.clone()), None, None),
            Form::Input1Scales => (Some(input(inputs, 1)?.to_f32_vec()?), None, None),
            Form::Full => (
                nonempty(2).map(|t| t.to_f32_vec()).transpose()?,
                nonempty(3)
                    .map(|t| int_list(t, "input 3 (sizes)"))
                    .transpose()?,
                nonempty(1).map(|t| t.to_f32_vec()).transpose()?,
            ),
        };
        let mut scale = vec![1.0f64; r];
        let mut out: Vec<usize> = shape.to_vec();
        match (scales, sizes) {
            (Some(s), None) => {
                entry_count("scales", s.len(), axes.len())?;
                for (&a, &v) in axes.iter().zip(&s) {
                    if !(v.is_finite() && v > 0.0) {
                        return Err(OpError::invalid(format!("scale {v} must be > 0")));
                    }
                    scale[a] = f64::from(v);
                    let o = (shape[a] as f64 * scale[a]).floor();
                    if o > qport_core::shape::MAX_ELEMENTS as f64 {
                        return Err(OpError::invalid(format!(
                            "scale {v} gives an oversized output"
                        )));
                    }
                    out[a] = o as usize;
                }
            }
            (None, Some(z)) => {
                entry_count("sizes", z.len(), axes.len())?;
                for (&a, &v) in axes.iter().zip(&z) {
                    out[a] = dim(v, "size")?;
                    if shape[a] == 0 {
                        if out[a] != 0 {
                            return Err(OpError::invalid(format!(
                                "cannot resize the empty axis {a} to {}",
                                out[a]
                            )));
                        }
                    } else {
                        scale[a] = out[a] as f64 / shape[a] as f64;
                    }
                }
                if self.policy != Policy::Stretch && !axes.is_empty() {
                    let it = axes.iter().map(|&a| scale[a]);
                    let s = if self.policy == Policy::NotLarger {
                        it.fold(f64::INFINITY, f64::min)
                    } else {
                        it.fold(0.0, f64::max)
                    };
                    for &a in &axes {
                        scale[a] = s;
                        out[a] = (s * shape[a] as f64 + 0.5) as usize;
                    }
                }
            }
            (Some(_), Some(_)) => {
                return Err(OpError::invalid(
                    "only one of scales and sizes may be given",
                ))
            }
            (None, None) => return Err(OpError::invalid("one of scales and sizes is required")),
        }
        check_shape(&out)?;
        let roi = match (self.coord, roi) {
            (Coord::TfCropAndResize, Some(v)) => {
                entry_count("roi", v.len(), 2 * axes.len())?;
                let mut full: Vec<f64> = vec![0.0; r].into_iter().chain(vec![1.0; r]).collect();
                for (k, &a) in axes.iter().enumerate() {
                    full[a] = f64::from(v[k]);
                    full[r + a] = f64::from(v[axes.len() + k]);
                }
                Some(full)
            }
            (Coord::TfCropAndResize, None) => {
                return Err(OpError::invalid("tf_crop_and_resize needs the roi input"))
            }
            _ => None,
        };
        Ok(Geometry {
            scale,
            out,
            axes,
            roi,
        })
    }

    /// The source coordinate of output position `j` on an axis.
    fn coordinate(
        &self,
        j: usize,
        scale: f64,
        in_len: usize,
        out_len: usize,
        roi: (f64, f64),
    ) -> f64 {
        let j = j as f64;
        let inw = in_len as f64;
        let outw = scale * inw;
        match self.coord {
            Coord::HalfPixel => (j + 0.5) / scale - 0.5,
            Coord::HalfPixelSymmetric => {
                let adjustment = out_len as f64 / outw;
                let offset = inw / 2.0 * (1.0 - adjustment);
                offset + (j + 0.5) / scale - 0.5
            }
            Coord::PytorchHalfPixel => {
                if outw == 1.0 {
                    -0.5
                } else {
                    (j + 0.5) / scale - 0.5
                }
            }
            Coord::AlignCorners => {
                if outw == 1.0 {
                    0.0
                } else {
                    j * (inw - 1.0) / (outw - 1.0)
                }
            }
            Coord::Asymmetric => j / scale,
            Coord::TfCropAndResize => {
                let x = if outw == 1.0 {
                    (roi.1 - roi.0) * (inw - 1.0) / 2.0
                } else {
                    j * (roi.1 - roi.0) * (inw - 1.0) / (outw - 1.0)
                };
                x + roi.0 * (inw - 1.0)
            }
        }
    }

    fn nearest_index(&self, x: f64, scale: f64, in_len: usize) -> usize {
        let f = x.floor();
        let pick = if x == f {
            x
        } else {
            let r = x - f;
            match self.nearest {
                Nearest::RoundPreferFloor => {
                    if r <= 0.5 {
                        f
                    } else {
                        f + 1.0
                    }
                }
                Nearest::RoundPreferCeil => {
                    if r < 0.5 {
                        f
                    } else {
                        f + 1.0
                    }
                }
                Nearest::Floor => f,
                Nearest::Ceil => f + 1.0,
                Nearest::Simple => {
                    if scale < 1.0 {
                        f + 1.0
                    } else {
                        x.trunc()
                    }
                }
            }
        };
        pick.clamp(0.0, (in_len - 1) as f64) as usize
    }

    /// Weights of the taps `base + start + k` for a fractional offset
    /// `ratio` in (0, 1]; returns `start` and the weights.
    fn coeffs(&self, ratio: f64, scale: f64) -> (i64, Vec<f64>) {
        let a = self.cubic_a;
        let cubic = |x: f64| {
            let x = x.abs();
            let (x2, x3) = (x * x, x * x * x);
            if x <= 1.0 {
                (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
            } else if x < 2.0 {
                a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
            } else {
                0.0
            }
        };
        let normalized = |start: i64, f: &dyn Fn(f64) -> f64, s: f64| {
            let n = 2 - 2 * start;
            let w: Vec<f64> = (0..n)
                .map(|k| f(s * ((start + k) as f64 - ratio)))
                .collect();
            let sum: f64 = w.iter().sum();
            (start, w.into_iter().map(|v| v / sum).collect())
        };
        match (self.mode, self.antialias) {
            (Mode::Linear, false) => (0, vec![1.0 - ratio, ratio]),
            (Mode::Linear, true) => {
                let s = scale.clamp(1e-6, 1.0);
                let start = (-1.0 / s).floor() as i64 + 1;
                normalized(start, &|x: f64| (1.0 - x.abs()).clamp(0.0, 1.0), s)
            }
            (Mode::Cubic, false) => {
                let r = ratio;
                let q = 1.0 - ratio;
                (
                    -1,
                    vec![
                        ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                        ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                        ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                        ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
                    ],
                )
            }
            (Mode::Cubic, true) => {
                let s = scale.clamp(1e-6, 1.0);
                let start = (-2.0 / s).floor() as i64 + 1;
                normalized(start, &cubic, s)
            }
            (Mode::Nearest, _) => (0, vec![0.0, 1.0]),
        }
    }

    /// Taps of one axis: `n` (index, weight) pairs per output position, and
    /// which positions are extrapolated (tf_crop_and_resize).
    fn taps(
        &self,
        in_len: usize,
        out_len: usize,
        scale: f64,
        roi: (f64, f64),
    ) -> (usize, Vec<usize>, Vec<f64>, Vec<bool>) {
        let mut idx = vec![];
        let mut wts = vec![];
        let mut extra = vec![false; out_len];
        let mut n = 0;
        for (j, e) in extra.iter_mut().enumerate() {
            let x = self.coordinate(j, scale, in_len, out_len, roi);
            if self.coord == Coord::TfCropAndResize && (x < 0.0 || x > (in_len - 1) as f64) {
                *e = true;
            }
            let f = x.floor();
            let (base, ratio) = if x == f {
                (f as i64 - 1, 1.0)
            } else {
                (f as i64, x - f)
            };
            let (start, mut w) = self.coeffs(ratio, scale);
            n = w.len();
            let pos: Vec<i64> = (0..n as i64).map(|k| base + start + k).collect();
            if self.exclude_outside {
                for (p, wk) in pos.iter().zip(w.iter_mut()) {
                    if *p < 0 || *p >= in_len as i64 {
                        *wk = 0.0;
                    }
                }
                let sum: f64 = w.iter().sum();
                if sum != 0.0 {
                    w.iter_mut().for_each(|v| *v /= sum);
                }
            }
            idx.extend(pos.iter().map(|&p| p.clamp(0, in_len as i64 - 1) as usize));
            wts.extend(w);
        }
        (n, idx, wts, extra)
    }

    fn skip_axis(&self, scale: f64, in_len: usize, out_len: usize, roi: (f64, f64)) -> bool {
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
        close(scale, 1.0)
            && in_len == out_len
            && (self.coord != Coord::TfCropAndResize || (roi.0.abs() <= 1e-9 && close(roi.1, 1.0)))
    }

    fn run_nearest(&self, x: &Tensor, g: &Geometry) -> OpResult<Tensor> {
        let Geometry {
            scale, out, axes, ..
        } = g;
        let shape = x.shape();
        let r = shape.len();
        let st = qport_core::shape::strides(shape);
        let mut contrib: Vec<Vec<i64>> = (0..r)
            .map(|a| (0..shape[a]).map(|i| (i * st[a]) as i64).collect())
            .collect();
        for &a in axes {
            let rp = g.roi(a);
            if self.skip_axis(scale[a], shape[a], out[a], rp) {
                continue;
            }
            contrib[a] = (0..out[a])
                .map(|j| {
                    let xo = self.coordinate(j, scale[a], shape[a], out[a], rp);
                    if self.coord == Coord::TfCropAndResize
                        && (xo < 0.0 || xo > (shape[a] - 1) as f64)
                    {
                        FILL
                    } else {
                        (self.nearest_index(xo, scale[a], shape[a]) * st[a]) as i64
                    }
                })
                .collect();
        }
        let idx = fill_map_indices(out, &contrib);
        gather_or_fill(x, out.to_vec(), &idx, &Tensor::scalar(self.extrapolation))
    }

    fn run_interp(&self, x: &Tensor, g: &Geometry) -> OpResult<Tensor> {
        let Geometry {
            scale, out, axes, ..
        } = g;
        let dt = x.dtype();
        if matches!(dt, DType::Bool | DType::Str) {
            return Err(OpError::dtype("linear/cubic resize input", dt));
        }
        let mut shape = x.shape().to_vec();
        let mut data = x.cast(DType::F64)?.into_vec::<f64>()?;
        let ext = f64::from(self.extrapolation);
        for &a in axes {
            let rp = g.roi(a);
            let (in_len, out_len) = (shape[a], out[a]);
            if self.skip_axis(scale[a], in_len, out_len, rp) {
                continue;
            }
            let outer: usize = shape[..a].iter().product();
            let inner: usize = shape[a + 1..].iter().product();
            check_shape(&[outer, out_len, inner])?;
            let mut next = vec![0.0f64; outer * out_len * inner];
            if in_len > 0 && inner > 0 {
                let (n, idx, wts, extra) = self.taps(in_len, out_len, scale[a], rp);
                for o in 0..outer {
                    for j in 0..out_len {
                        let dst = &mut next[(o * out_len + j) * inner..][..inner];
                        if extra[j] {
                            dst.fill(ext);
                            continue;
                        }
                        for k in 0..n {
                            let w = wts[j * n + k];
                            let src = &data[(o * in_len + idx[j * n + k]) * inner..][..inner];
                            for (d, &s) in dst.iter_mut().zip(src) {
                                *d += w * s;
                            }
                        }
                    }
                }
            }
            data = next;
            shape[a] = out_len;
        }
        if dt.is_int() {
            data.iter_mut().for_each(|v| *v = v.round_ties_even());
        }
        Ok(Tensor::from_vec(shape, data)?.cast(dt)?)
    }
}

impl Op for Resize {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let g = self.geometry(x, inputs)?;
        let y = if self.mode == Mode::Nearest {
            self.run_nearest(x, &g)?
        } else {
            self.run_interp(x, &g)?
        };
        Ok(vec![y])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(mode: Mode, coord: Coord, x: &Tensor, scales: &[f32]) -> Vec<f32> {
        let mut op = Resize::legacy(mode, Form::AttrScales(scales.to_vec()));
        op.coord = coord;
        op.nearest = Nearest::RoundPreferFloor;
        op.eval(&[Some(x)])
            .unwrap()
            .remove(0)
            .into_vec::<f32>()
            .unwrap()
    }

    #[test]
    fn linear_half_pixel_upsample() {
        let x = Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap();
        assert_eq!(
            resize(Mode::Linear, Coord::HalfPixel, &x, &[2.0]),
            vec![1.0, 1.25, 1.75, 2.0]
        );
        assert_eq!(
            resize(Mode::Linear, Coord::AlignCorners, &x, &[1.5]),
            vec![1.0, 1.5, 2.0]
        );
        assert_eq!(
            resize(Mode::Nearest, Coord::Asymmetric, &x, &[2.0]),
            vec![1.0, 1.0, 2.0, 2.0]
        );
    }

    #[test]
    fn cubic_coefficients_sum_to_one() {
        let op = Resize {
            mode: Mode::Cubic,
            ..Resize::legacy(Mode::Cubic, Form::Input1Scales)
        };
        for r in [0.1, 0.5, 0.9, 1.0] {
            let (start, w) = op.coeffs(r, 1.0);
            assert_eq!(start, -1);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn bad_scales_are_errors() {
        let x = Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap();
        for s in [0.0f32, -1.0, f32::NAN, 1e30] {
            let op = Resize::legacy(Mode::Nearest, Form::AttrScales(vec![s]));
            assert!(op.eval(&[Some(&x)]).is_err());
        }
    }
}
