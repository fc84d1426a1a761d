//! BatchNormalization (inference and training forms), InstanceNormalization
//! and LRN.

use super::{check_len, ncd, read_real, real_tensor, with_real, Real};
use crate::error::{OpError, OpResult};
use crate::ops::{input, BuildCtx, Op, Registry};
use qport_core::Tensor;
use qport_kernels::gemm::GemmScalar;

pub(crate) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("BatchNormalization", build_batchnorm),
            ("InstanceNormalization", build_instancenorm),
            ("LRN", build_lrn),
        ],
    );
}

struct BatchNorm {
    epsilon: f32,
    momentum: f32,
    training: bool,
}

fn build_batchnorm(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    if ctx.opset < 9 && n.attr_int("spatial", 1)? == 0 {
        return Err(OpError::unsupported(
            "BatchNormalization with spatial=0 (per-element statistics, opset < 9)",
        ));
    }
    Ok(Box::new(BatchNorm {
        epsilon: n.attr_float("epsilon", 1e-5)?,
        momentum: n.attr_float("momentum", 0.9)?,
        training: ctx.opset >= 14 && n.attr_int("training_mode", 0)? != 0,
    }))
}

impl Op for BatchNorm {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let x = input(inputs, 0)?;
        let p: Vec<&Tensor> = (1..5).map(|i| input(inputs, i)).collect::<OpResult<_>>()?;
        with_real!(x.dtype(), "input 0 (X)", T => self.run::<T>(x, &p))
    }
}

const BN_NAMES: [&str; 4] = [
    "input 1 (scale)",
    "input 2 (B)",
    "input 3 (input_mean)",
    "input 4 (input_var)",
];

/// The inference BatchNormalization as `y = x·s + b` per channel, with
/// `s = scale / sqrt(var + eps)` and `b = B − mean·s`, as onnxruntime folds
/// it (shared with the QDQ lowering, which tabulates it).
pub(crate) fn bn_fold<T: Real>(
    scale: &[T],
    bias: &[T],
    mean: &[T],
    var: &[T],
    eps: T,
) -> (Vec<T>, Vec<T>) {
    let s: Vec<T> = (0..scale.len())
        .map(|ch| scale[ch] / (var[ch] + eps).sqrt())
        .collect();
    let b: Vec<T> = (0..scale.len())
        .map(|ch| bias[ch] - mean[ch] * s[ch])
        .collect();
    (s, b)
}

/// One element of the folded BatchNormalization (a multiply, then an add).
#[inline(always)]
pub(crate) fn bn_apply<T: Real>(v: T, s: T, b: T) -> T {
    v * s + b
}

impl BatchNorm {
    fn run<T: Real>(&self, x: &Tensor, p: &[&Tensor]) -> OpResult<Vec<Tensor>> {
        let (n, c, d) = ncd(x)?;
        for (t, name) in p.iter().zip(BN_NAMES) {
            check_len(t, c, name)?;
        }
        let scale = read_real::<T>(p[0], BN_NAMES[0])?;
        let bias = read_real::<T>(p[1], BN_NAMES[1])?;
        let mean_in = read_real::<T>(p[2], BN_NAMES[2])?;
        let var_in = read_real::<T>(p[3], BN_NAMES[3])?;
        let xv = read_real::<T>(x, "input 0 (X)")?;
        let eps = T::from_f64(self.epsilon as f64);
        let (mean, var): (Vec<T>, Vec<T>) = if self.training {
            // batch statistics over N and the spatial axes (population variance)
            let count = (n * d) as f64;
            (0..c)
                .map(|ch| {
                    let xs: &[T] = &xv;
                    let vals = || (0..n).flat_map(move |i| xs[(i * c + ch) * d..][..d].iter());
                    let m = vals().map(|v| v.to_f64()).sum::<f64>() / count;
                    let v = vals().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / count;
                    (T::from_f64(m), T::from_f64(v))
                })
                .unzip()
        } else {
            (mean_in.to_vec(), var_in.to_vec())
        };
        let (s, b) = bn_fold(&scale, &bias, &mean, &var, eps);
        let mut y = Vec::with_capacity(xv.len());
        if d > 0 {
            for (i, plane) in xv.chunks_exact(d).enumerate() {
                let (sc, bc) = (s[i % c], b[i % c]);
                y.extend(plane.iter().map(|&v| bn_apply(v, sc, bc)));
            }
        }
        let mut outs = vec![real_tensor(x.shape().to_vec(), y, x.dtype())?];
        if self.training {
            let mom = T::from_f64(self.momentum as f64);
            let one = T::ONE;
            let run_mean: Vec<T> = (0..c)
                .map(|ch| mean_in[ch] * mom + mean[ch] * (one - mom))
                .collect();
            let run_var: Vec<T> = (0..c)
                .map(|ch| var_in[ch] * mom + var[ch] * (one - mom))
                .collect();
            outs.push(real_tensor(vec![c], run_mean, p[2].dtype())?);
            outs.push(real_tensor(vec![c], run_var, p[3].dtype())?);
        }
        Ok(outs)
    }
}

fn build_instancenorm(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let eps = ctx.node.attr_float("epsilon", 1e-5)? as f64;
    Ok(crate::ops::fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let scale = input(inputs, 1)?;
        let bias = input(inputs, 2)?;
        with_real!(x.dtype(), "input 0 (X)", T => {
            let (_, c, d) = ncd(x)?;
            check_len(scale, c, "input 1 (scale)")?;
            check_len(bias, c, "input 2 (B)")?;
            let sv = read_real::<T>(scale, "input 1 (scale)")?;
            let bv = read_real::<T>(bias, "input 2 (B)")?;
            let mut y = read_real::<T>(x, "input 0 (X)")?.into_owned();
            if d > 0 {
                for (i, plane) in y.chunks_exact_mut(d).enumerate() {
                    let ch = i % c;
                    let m = plane.iter().map(|v| v.to_f64()).sum::<f64>() / d as f64;
                    let var = plane.iter().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / d as f64;
                    let k = sv[ch].to_f64() / (var + eps).sqrt();
                    let (mt, kt) = (T::from_f64(m), T::from_f64(k));
                    plane.iter_mut().for_each(|v| *v = (*v - mt) * kt + bv[ch]);
                }
            }
            Ok(vec![real_tensor(x.shape().to_vec(), y, x.dtype())?])
        })
    }))
}

fn build_lrn(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let n = ctx.node;
    let size = n.req_int("size")?;
    if !(1..=1 << 20).contains(&size) {
        return Err(OpError::invalid(format!(
            "attribute size is {size}, expected at least 1"
        )));
    }
    let size = size as usize;
    let alpha = n.attr_float("alpha", 1e-4)? as f64;
    let beta = n.attr_float("beta", 0.75)? as f64;
    let bias = n.attr_float("bias", 1.0)? as f64;
    Ok(crate::ops::fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        with_real!(x.dtype(), "input 0 (X)", T => {
            let (n, c, d) = ncd(x)?;
            let xv = read_real::<T>(x, "input 0 (X)")?;
            let mut y = vec![T::ZERO; xv.len()];
            let (before, after) = ((size - 1) / 2, size.div_ceil(2) - 1);
            for b in 0..n {
                for ch in 0..c {
                    let lo = ch.saturating_sub(before);
                    let hi = (ch + after).min(c.saturating_sub(1));
                    for i in 0..d {
                        let sq: f64 = (lo..=hi)
                            .map(|k| xv[(b * c + k) * d + i].to_f64().powi(2))
                            .sum();
                        let at = (b * c + ch) * d + i;
                        let den = (bias + alpha / size as f64 * sq).powf(beta);
                        y[at] = T::from_f64(xv[at].to_f64() / den);
                    }
                }
            }
            Ok(vec![real_tensor(x.shape().to_vec(), y, x.dtype())?])
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batchnorm_folds_like_onnxruntime() {
        let bn = BatchNorm {
            epsilon: 1e-5,
            momentum: 0.9,
            training: false,
        };
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let t = |v: Vec<f32>| Tensor::from_vec(vec![2], v).unwrap();
        let p = [
            t(vec![1.0, 2.0]),
            t(vec![0.0, 1.0]),
            t(vec![1.5, 3.5]),
            t(vec![0.25, 0.25]),
        ];
        let refs: Vec<&Tensor> = p.iter().collect();
        let y = bn.run::<f32>(&x, &refs).unwrap();
        let v = y[0].as_slice::<f32>().unwrap();
        let want = [-1.0f32, 1.0, -1.0, 3.0];
        for (a, b) in v.iter().zip(want) {
            assert!((a - b).abs() < 1e-4, "{v:?}");
        }
    }
}
