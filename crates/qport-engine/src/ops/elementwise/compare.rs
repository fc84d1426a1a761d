//! Comparison operators (Equal, Greater, GreaterOrEqual, Less,
//! LessOrEqual), producing bool tensors, and Where.

use super::broadcast::{match_pair, register_binary, same_dtype, select_broadcast, zip_tensor};
use crate::error::{OpError, OpResult};
use crate::ops::{fn_op, input, Registry};
use qport_core::{DType, Tensor};
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy)]
enum Cmp {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

impl Cmp {
    /// Whether `a (op) b` holds, given `a.partial_cmp(b)` (`None`: a NaN
    /// operand, for which every comparison is false).
    #[inline(always)]
    fn holds(self, o: Option<Ordering>) -> bool {
        use Ordering::{Equal, Greater, Less};
        match self {
            Cmp::Eq => o == Some(Equal),
            Cmp::Gt => o == Some(Greater),
            Cmp::Ge => matches!(o, Some(Greater | Equal)),
            Cmp::Lt => o == Some(Less),
            Cmp::Le => matches!(o, Some(Less | Equal)),
        }
    }
}

fn compare(k: Cmp, a: &Tensor, b: &Tensor, bsh: &[usize]) -> OpResult<Tensor> {
    let dt = same_dtype(a, b, ("A", "B"))?;
    if dt == DType::Str && !matches!(k, Cmp::Eq) {
        return Err(OpError::dtype("ordering comparison input", dt));
    }
    let ash = a.shape();
    match_pair!(a.data(), b.data(), x, y => zip_tensor(x, ash, y, bsh, |p, q| k.holds(p.partial_cmp(q)));
        [F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64, Bool, Str];
        Err(OpError::dtype("input", dt)))
}

/// `condition ? X : Y`, all three broadcast together.
pub(crate) fn where_op(c: &Tensor, x: &Tensor, y: &Tensor) -> OpResult<Tensor> {
    let cv = c.as_slice::<bool>().map_err(|_| {
        OpError::invalid(format!(
            "input 0 (condition) must be bool, got {}",
            c.dtype()
        ))
    })?;
    let dt = same_dtype(x, y, ("X", "Y"))?;
    let (cs, xs, ys) = (c.shape(), x.shape(), y.shape());
    match_pair!(x.data(), y.data(), p, q => {
            let (shape, v) = select_broadcast(cv, cs, p, xs, q, ys)?;
            Ok(Tensor::from_vec(shape, v)?)
        };
        [F32, F64, F16, BF16, I8, U8, I16, U16, I32, U32, I64, U64, Bool, Str];
        Err(OpError::dtype("input", dt)))
}

/// Registers the comparison operators and Where.
pub(crate) fn register(r: &mut Registry) {
    register_binary!(r, compare;
        "Equal" => Cmp::Eq,
        "Greater" => Cmp::Gt,
        "GreaterOrEqual" => Cmp::Ge,
        "Less" => Cmp::Lt,
        "LessOrEqual" => Cmp::Le,
    );
    r.register("Where", |_| {
        Ok(fn_op(|inputs| {
            Ok(vec![where_op(
                input(inputs, 0)?,
                input(inputs, 1)?,
                input(inputs, 2)?,
            )?])
        }))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_broadcasts_strings_and_compare_handles_nan() {
        let c = Tensor::from_vec(vec![2, 1], vec![true, false]).unwrap();
        let x = Tensor::from_vec(vec![2], vec!["a".to_string(), "b".to_string()]).unwrap();
        let y = Tensor::scalar("z".to_string());
        let r = where_op(&c, &x, &y).unwrap();
        assert_eq!(r.shape(), &[2, 2]);
        assert_eq!(r.as_slice::<String>().unwrap(), &["a", "b", "z", "z"]);
        let a = Tensor::from_vec(vec![2], vec![f32::NAN, 1.0]).unwrap();
        let b = Tensor::scalar(1.0f32);
        let r = compare(Cmp::Ge, &a, &b, &[]).unwrap();
        assert_eq!(r.as_slice::<bool>().unwrap(), &[false, true]);
    }
}
