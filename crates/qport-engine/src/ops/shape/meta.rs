//! Pass-through and metadata operators: Identity, Dropout (inference),
//! Shape and Size.

use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, opt_input, BuildCtx, Op, Registry};
use qport_core::Tensor;

pub(super) fn register(r: &mut Registry) {
    r.register_all(
        "",
        &[
            ("Identity", build_identity),
            ("Dropout", build_dropout),
            ("Shape", build_shape),
            ("Size", build_size),
        ],
    );
}

fn build_identity(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| Ok(vec![input(inputs, 0)?.clone()])))
}

fn build_dropout(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let want_mask = ctx.node.outputs.get(1).is_some_and(|s| !s.is_empty());
    let opset = ctx.opset;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        if opset >= 12 {
            if let Some(t) = opt_input(inputs, 2) {
                let training = t.to_i64_vec()?.first().copied().unwrap_or(0) != 0;
                let ratio = match opt_input(inputs, 1) {
                    Some(r) => r.to_f32_vec()?.first().copied().unwrap_or(0.5),
                    None => 0.5,
                };
                if training && ratio != 0.0 {
                    return Err(OpError::unsupported(
                        "training_mode=true with a non-zero ratio (random dropout)",
                    ));
                }
            }
        }
        let mut out = vec![x.clone()];
        if want_mask {
            let mask = if opset < 10 {
                Tensor::new(
                    x.shape().to_vec(),
                    Tensor::scalar(1u8)
                        .cast(x.dtype())?
                        .data()
                        .gather(&vec![0; x.len()]),
                )?
            } else {
                Tensor::from_vec(x.shape().to_vec(), vec![true; x.len()])?
            };
            out.push(mask);
        }
        Ok(out)
    }))
}

fn build_shape(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let start = ctx.node.attr_int("start", 0)?;
    let end = ctx.opt_int("end")?;
    Ok(fn_op(move |inputs| {
        let x = input(inputs, 0)?;
        let r = x.rank() as i64;
        let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let s = clamp(start);
        let e = clamp(end.unwrap_or(r));
        let dims: Vec<i64> = if s < e {
            x.shape()[s..e].iter().map(|&d| d as i64).collect()
        } else {
            vec![]
        };
        Ok(vec![Tensor::from_vec(vec![dims.len()], dims)?])
    }))
}

fn build_size(_ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    Ok(fn_op(|inputs| {
        let x = input(inputs, 0)?;
        Ok(vec![Tensor::scalar(x.len() as i64)])
    }))
}
