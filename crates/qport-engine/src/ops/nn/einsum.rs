//! Einsum.
//!
//! The equation is parsed once at build time. Evaluation works on labelled
//! dense tensors: repeated labels within an operand become a diagonal,
//! size-1 axes broadcast, labels that nothing later needs are summed out
//! early, and operands are contracted pairwise, left to right, as one
//! batched GEMM per pair (`[batch, left, inner] x [batch, inner, right]`).
//! The survivor is summed and transposed to the output labels.

use super::read_real;
use crate::error::{OpError, OpResult};
use crate::ops::{BuildCtx, Op, Registry};
use qport_core::shape::checked_numel;
use qport_core::{DType, Element, Tensor};
use qport_kernels::gemm::{gemm, GemmScalar, MatRef};

pub(crate) fn register(r: &mut Registry) {
    r.register("Einsum", build);
}

/// One term of the equation: letters, with the ellipsis position if any.
#[derive(Clone, Debug, PartialEq)]
struct Term {
    letters: Vec<char>,
    /// Index into `letters` where `...` stands, if present.
    ellipsis: Option<usize>,
}

fn parse_term(s: &str) -> OpResult<Term> {
    let mut letters = vec![];
    let mut ellipsis = None;
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if ellipsis.is_some() {
                return Err(OpError::invalid(format!(
                    "einsum term '{s}' has more than one ellipsis"
                )));
            }
            ellipsis = Some(letters.len());
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_ascii_alphabetic() {
            return Err(OpError::invalid(format!(
                "einsum term '{s}' contains '{c}'; expected letters and '...'"
            )));
        }
        letters.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Ok(Term { letters, ellipsis })
}

struct Einsum {
    inputs: Vec<Term>,
    output: Option<Term>,
}

fn build(ctx: &BuildCtx) -> OpResult<Box<dyn Op>> {
    let eq: String = ctx
        .node
        .attr_string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let inputs = lhs
        .split(',')
        .map(parse_term)
        .collect::<OpResult<Vec<_>>>()?;
    let output = rhs.map(parse_term).transpose()?;
    if let Some(o) = &output {
        for (i, c) in o.letters.iter().enumerate() {
            if o.letters[..i].contains(c) {
                return Err(OpError::invalid(format!(
                    "einsum output repeats label '{c}'"
                )));
            }
            if !inputs.iter().any(|t| t.letters.contains(c)) {
                return Err(OpError::invalid(format!(
                    "einsum output label '{c}' appears in no input"
                )));
            }
        }
    }
    Ok(Box::new(Einsum { inputs, output }))
}

/// Labels: letters by code point, ellipsis axes as `ELLIPSIS + position`
/// counted in the broadcast ellipsis shape.
const ELLIPSIS: u32 = 1 << 16;

/// A dense row-major tensor whose axes are named by labels.
#[derive(Clone, Debug)]
struct Labelled<T> {
    data: Vec<T>,
    dims: Vec<usize>,
    labels: Vec<u32>,
}

/// Copies the strided view (`dims`, `strides` over `src`) into a new
/// row-major vector.
fn gather<T: Copy>(src: &[T], dims: &[usize], strides: &[usize]) -> Vec<T> {
    let mut out = Vec::with_capacity(dims.iter().product());
    qport_core::shape::for_each_strided_offset(dims, strides, |o| out.push(src[o]));
    out
}

impl<T: GemmScalar> Labelled<T> {
    fn strides(&self) -> Vec<usize> {
        qport_core::shape::strides(&self.dims)
    }

    /// Merges repeated labels into their diagonal.
    fn diagonals(self) -> OpResult<Self> {
        let mut dims = self.dims.clone();
        let mut strides = self.strides();
        let mut labels = self.labels.clone();
        let mut changed = false;
        let mut i = 0;
        while i < labels.len() {
            if let Some(j) = (i + 1..labels.len()).find(|&j| labels[j] == labels[i]) {
                if dims[i] != dims[j] {
                    return Err(OpError::invalid(format!(
                        "einsum repeated label has sizes {} and {}",
                        dims[i], dims[j]
                    )));
                }
                strides[i] += strides[j];
                dims.remove(j);
                strides.remove(j);
                labels.remove(j);
                changed = true;
            } else {
                i += 1;
            }
        }
        if !changed {
            return Ok(self);
        }
        let data = gather(&self.data, &dims, &strides);
        Ok(Labelled { data, dims, labels })
    }

    /// Broadcasts size-1 axes to `size(label)`.
    fn broadcast(self, size: impl Fn(u32) -> usize) -> OpResult<Self> {
        if self
            .labels
            .iter()
            .zip(&self.dims)
            .all(|(&l, &d)| size(l) == d)
        {
            return Ok(self);
        }
        let mut strides = self.strides();
        let dims: Vec<usize> = self
            .labels
            .iter()
            .zip(&self.dims)
            .zip(strides.iter_mut())
            .map(|((&l, &d), s)| {
                if d != size(l) {
                    *s = 0;
                }
                size(l)
            })
            .collect();
        checked_numel(&dims)?;
        let data = gather(&self.data, &dims, &strides);
        Ok(Labelled {
            data,
            dims,
            labels: self.labels,
        })
    }

    /// Reorders axes to `order` (a permutation of the labels).
    fn permute(self, order: &[u32]) -> Self {
        if order == self.labels.as_slice() {
            return self;
        }
        let st = self.strides();
        let pos: Vec<usize> = order
            .iter()
            .map(|l| self.labels.iter().position(|x| x == l).unwrap_or(0))
            .collect();
        let dims: Vec<usize> = pos.iter().map(|&p| self.dims[p]).collect();
        let strides: Vec<usize> = pos.iter().map(|&p| st[p]).collect();
        Labelled {
            data: gather(&self.data, &dims, &strides),
            dims,
            labels: order.to_vec(),
        }
    }

    /// Sums out every label not satisfying `keep`.
    fn sum_except(self, keep: impl Fn(u32) -> bool) -> Self {
        if self.labels.iter().all(|&l| keep(l)) {
            return self;
        }
        let kept: Vec<u32> = self.labels.iter().copied().filter(|&l| keep(l)).collect();
        let summed: Vec<u32> = self.labels.iter().copied().filter(|&l| !keep(l)).collect();
        let order: Vec<u32> = kept.iter().chain(&summed).copied().collect();
        let p = self.permute(&order);
        let n_kept = kept.len();
        let dims = p.dims[..n_kept].to_vec();
        let inner: usize = p.dims[n_kept..].iter().product();
        let outer: usize = dims.iter().product();
        let data = if inner == 0 {
            vec![T::ZERO; outer]
        } else {
            p.data
                .chunks_exact(inner)
                .map(|c| c.iter().fold(T::ZERO, |s, &v| s.add(v)))
                .collect()
        };
        Labelled {
            data,
            dims,
            labels: kept,
        }
    }
}

/// Contracts `a` and `b`, keeping the labels in `keep` (plus labels of only
/// one side, which the caller has already reduced to those kept).
fn contract<T: GemmScalar>(
    a: Labelled<T>,
    b: Labelled<T>,
    keep: &dyn Fn(u32) -> bool,
) -> OpResult<Labelled<T>> {
    let in_b = |l: &u32| b.labels.contains(l);
    let batch: Vec<u32> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && keep(*l))
        .collect();
    let inner: Vec<u32> = a
        .labels
        .iter()
        .copied()
        .filter(|l| in_b(l) && !keep(*l))
        .collect();
    let left: Vec<u32> = a.labels.iter().copied().filter(|l| !in_b(l)).collect();
    let right: Vec<u32> = b
        .labels
        .iter()
        .copied()
        .filter(|l| !a.labels.contains(l))
        .collect();
    let size = |l: &u32| {
        let p = a.labels.iter().position(|x| x == l);
        match p {
            Some(p) => a.dims[p],
            None => b.dims[b.labels.iter().position(|x| x == l).unwrap_or(0)],
        }
    };
    let out_labels: Vec<u32> = batch.iter().chain(&left).chain(&right).copied().collect();
    let dims: Vec<usize> = out_labels.iter().map(size).collect();
    checked_numel(&dims)?;
    let prod = |ls: &[u32]| ls.iter().map(size).product::<usize>();
    let (nb, m, k, n) = (prod(&batch), prod(&left), prod(&inner), prod(&right));
    let a_order: Vec<u32> = batch.iter().chain(&left).chain(&inner).copied().collect();
    let b_order: Vec<u32> = batch.iter().chain(&inner).chain(&right).copied().collect();
    let a = a.permute(&a_order);
    let b = b.permute(&b_order);
    let mut y = vec![T::ZERO; nb * m * n];
    if m * n > 0 {
        for (i, yb) in y.chunks_exact_mut(m * n).enumerate() {
            gemm(
                m,
                n,
                k,
                T::ONE,
                MatRef::new(&a.data[i * m * k..][..m * k], k),
                MatRef::new(&b.data[i * k * n..][..k * n], n),
                T::ZERO,
                yb,
                n,
            );
        }
    }
    Ok(Labelled {
        data: y,
        dims,
        labels: out_labels,
    })
}

/// The labels of an evaluation: per operand, of the output, and the size
/// of every label.
struct Resolved {
    operands: Vec<Vec<u32>>,
    output: Vec<u32>,
    sizes: Vec<(u32, usize)>,
}

impl Einsum {
    /// Labels of every operand (checked against the ranks), the output
    /// labels, and the size of every label.
    fn resolve(&self, shapes: &[&[usize]]) -> OpResult<Resolved> {
        if shapes.len() != self.inputs.len() {
            return Err(OpError::invalid(format!(
                "einsum equation has {} operands but the node has {} inputs",
                self.inputs.len(),
                shapes.len()
            )));
        }
        let mut ell_rank = 0;
        for (i, (t, s)) in self.inputs.iter().zip(shapes).enumerate() {
            let nl = t.letters.len();
            if (t.ellipsis.is_none() && s.len() != nl) || s.len() < nl {
                return Err(OpError::invalid(format!(
                    "einsum operand {i} has rank {} but its term has {nl} labels",
                    s.len()
                )));
            }
            ell_rank = ell_rank.max(s.len() - nl);
        }
        let ell_labels = |er: usize| (ell_rank - er..ell_rank).map(|p| ELLIPSIS + p as u32);
        let mut labels = vec![];
        let mut sizes: Vec<(u32, usize)> = vec![];
        for (t, s) in self.inputs.iter().zip(shapes) {
            let er = s.len() - t.letters.len();
            let mut ls: Vec<u32> = t.letters.iter().map(|&c| c as u32).collect();
            if let Some(p) = t.ellipsis {
                ls.splice(p..p, ell_labels(er));
            }
            for (&l, &d) in ls.iter().zip(s.iter()) {
                match sizes.iter_mut().find(|(x, _)| *x == l) {
                    None => sizes.push((l, d)),
                    Some((_, have)) if *have == d || d == 1 => {}
                    Some((_, have)) if *have == 1 => *have = d,
                    Some((_, have)) => {
                        return Err(OpError::invalid(format!(
                            "einsum label {} has sizes {have} and {d}",
                            label_name(l)
                        )))
                    }
                }
            }
            labels.push(ls);
        }
        let output: Vec<u32> = match &self.output {
            Some(o) => {
                let mut ls: Vec<u32> = o.letters.iter().map(|&c| c as u32).collect();
                if let Some(p) = o.ellipsis {
                    ls.splice(p..p, ell_labels(ell_rank));
                }
                ls
            }
            None => {
                let mut once: Vec<char> = self
                    .inputs
                    .iter()
                    .flat_map(|t| t.letters.iter().copied())
                    .filter(|c| {
                        self.inputs
                            .iter()
                            .map(|t| t.letters.iter().filter(|x| *x == c).count())
                            .sum::<usize>()
                            == 1
                    })
                    .collect();
                once.sort_unstable();
                ell_labels(ell_rank)
                    .chain(once.iter().map(|&c| c as u32))
                    .collect()
            }
        };
        Ok(Resolved {
            operands: labels,
            output,
            sizes,
        })
    }

    fn compute<T: GemmScalar>(
        &self,
        operands: Vec<(Vec<T>, Vec<usize>)>,
    ) -> OpResult<(Vec<T>, Vec<usize>)> {
        let shapes: Vec<&[usize]> = operands.iter().map(|(_, s)| s.as_slice()).collect();
        let Resolved {
            operands: labels,
            output,
            sizes,
        } = self.resolve(&shapes)?;
        let size = |l: u32| sizes.iter().find(|(x, _)| *x == l).map_or(1, |(_, d)| *d);
        let mut ts = Vec::with_capacity(operands.len());
        for ((data, dims), ls) in operands.into_iter().zip(labels) {
            let t = Labelled {
                data,
                dims,
                labels: ls,
            };
            ts.push(t.diagonals()?.broadcast(size)?);
        }
        // labels still needed by operands from `i` on, or by the output
        let needed_from = |i: usize| -> Vec<u32> {
            ts[i.min(ts.len())..]
                .iter()
                .flat_map(|t| t.labels.iter().copied())
                .chain(output.iter().copied())
                .collect()
        };
        let mut acc = ts[0].clone();
        for (i, next) in ts.iter().enumerate().skip(1) {
            let later = needed_from(i);
            acc = acc.sum_except(|l| later.contains(&l));
            let after = needed_from(i + 1);
            let acc_labels = acc.labels.clone();
            let b = next
                .clone()
                .sum_except(|l| after.contains(&l) || acc_labels.contains(&l));
            acc = contract(acc, b, &|l| after.contains(&l))?;
        }
        let acc = acc.sum_except(|l| output.contains(&l)).permute(&output);
        Ok((acc.data, acc.dims))
    }
}

fn label_name(l: u32) -> String {
    if l >= ELLIPSIS {
        format!("... axis {}", l - ELLIPSIS)
    } else {
        char::from_u32(l).map_or("?".into(), |c| format!("'{c}'"))
    }
}

fn typed<T: GemmScalar + Element>(e: &Einsum, inputs: &[&Tensor]) -> OpResult<Tensor> {
    let ops = inputs
        .iter()
        .map(|t| Ok((t.as_slice::<T>()?.to_vec(), t.shape().to_vec())))
        .collect::<OpResult<Vec<_>>>()?;
    let (y, dims) = e.compute(ops)?;
    Ok(Tensor::from_vec(dims, y)?)
}

impl Op for Einsum {
    fn eval(&self, inputs: &[Option<&Tensor>]) -> OpResult<Vec<Tensor>> {
        let ts: Vec<&Tensor> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| t.ok_or_else(|| OpError::invalid(format!("input {i} is missing"))))
            .collect::<OpResult<_>>()?;
        let Some(first) = ts.first() else {
            return Err(OpError::invalid("einsum needs at least one input"));
        };
        let dt = first.dtype();
        if let Some(t) = ts.iter().find(|t| t.dtype() != dt) {
            return Err(OpError::invalid(format!(
                "einsum inputs mix dtypes {dt} and {}",
                t.dtype()
            )));
        }
        let y = match dt {
            DType::F32 => typed::<f32>(self, &ts)?,
            DType::F64 => typed::<f64>(self, &ts)?,
            DType::F16 | DType::BF16 => {
                let ops = ts
                    .iter()
                    .map(|t| {
                        Ok((
                            read_real::<f32>(t, "input")?.into_owned(),
                            t.shape().to_vec(),
                        ))
                    })
                    .collect::<OpResult<Vec<_>>>()?;
                let (y, dims) = self.compute(ops)?;
                Tensor::from_vec(dims, y)?.cast(dt)?
            }
            DType::I32 => typed::<i32>(self, &ts)?,
            DType::I64 => typed::<i64>(self, &ts)?,
            DType::U32 => typed::<u32>(self, &ts)?,
            DType::U64 => typed::<u64>(self, &ts)?,
            d => return Err(OpError::dtype("input 0", d)),
        };
        Ok(vec![y])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn einsum(eq: &str, ops: Vec<(Vec<i64>, Vec<usize>)>) -> (Vec<i64>, Vec<usize>) {
        let (l, r) = match eq.split_once("->") {
            Some((l, r)) => (l, Some(r)),
            None => (eq, None),
        };
        let e = Einsum {
            inputs: l.split(',').map(|t| parse_term(t).unwrap()).collect(),
            output: r.map(|t| parse_term(t).unwrap()),
        };
        e.compute(ops).unwrap()
    }

    #[test]
    fn common_forms() {
        let m = |r, c| ((0..(r * c) as i64).collect::<Vec<_>>(), vec![r, c]);
        // transpose, row sums, trace, implicit matmul, outer product
        assert_eq!(
            einsum("ij->ji", vec![m(2, 3)]),
            (vec![0, 3, 1, 4, 2, 5], vec![3, 2])
        );
        assert_eq!(einsum("ij->i", vec![m(2, 3)]), (vec![3, 12], vec![2]));
        assert_eq!(einsum("ii", vec![m(3, 3)]), (vec![12], vec![]));
        assert_eq!(
            einsum("ij,jk", vec![m(2, 2), m(2, 2)]),
            (vec![2, 3, 6, 11], vec![2, 2])
        );
        assert_eq!(
            einsum(
                "i,j->ij",
                vec![(vec![1, 2], vec![2]), (vec![3, 4], vec![2])]
            ),
            (vec![3, 4, 6, 8], vec![2, 2])
        );
        // batched diagonal with ellipsis
        let (d, s) = einsum(
            "...ii->...i",
            vec![(vec![1, 2, 3, 4, 5, 6, 7, 8], vec![2, 2, 2])],
        );
        assert_eq!((d, s), (vec![1, 4, 5, 8], vec![2, 2]));
        // three operands: sum of a_i b_i c_i
        let v = |x: Vec<i64>| (x, vec![2]);
        assert_eq!(
            einsum("i,i,i->", vec![v(vec![1, 2]), v(vec![3, 4]), v(vec![5, 6])]),
            (vec![63], vec![])
        );
    }
}
