//! Sliding-window attributes shared by convolutions and pools: kernel
//! shape, strides, dilations, pads and `auto_pad`, and the output size and
//! padding they give along each axis.

use crate::error::{OpError, OpResult};
use qport_onnx::Node;

/// The largest kernel size, stride, dilation or pad accepted (2^24). Far
/// beyond any real network, it keeps every window computation within 64-bit
/// arithmetic for tensors of up to [`qport_core::shape::MAX_ELEMENTS`].
pub(crate) const MAX_PARAM: i64 = 1 << 24;

/// The `auto_pad` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// Output `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

/// The raw window attributes of a node, validated per axis later when the
/// number of spatial axes is known.
#[derive(Clone, Debug)]
pub(crate) struct WindowAttrs {
    pub auto_pad: AutoPad,
    pub kernel_shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
}

impl WindowAttrs {
    /// Reads `auto_pad`, `kernel_shape`, `strides`, `dilations` and `pads`.
    pub fn parse(node: &Node) -> OpResult<Self> {
        let auto_pad = match node.attr_string("auto_pad", "NOTSET")?.as_str() {
            "NOTSET" | "" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => {
                return Err(OpError::invalid(format!(
                "attribute auto_pad is '{other}', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"
            )))
            }
        };
        Ok(WindowAttrs {
            auto_pad,
            kernel_shape: node.attr_ints("kernel_shape")?,
            strides: node.attr_ints("strides")?,
            dilations: node.attr_ints("dilations")?,
            pads: node.attr_ints("pads")?,
        })
    }

    /// `kernel_shape` for `rank` spatial axes (each at least 1), if given.
    pub fn kernel(&self, rank: usize) -> OpResult<Option<Vec<usize>>> {
        self.kernel_shape
            .as_ref()
            .map(|k| positive(k, rank, "kernel_shape"))
            .transpose()
    }

    /// `strides` for `rank` spatial axes (default 1).
    pub fn strides(&self, rank: usize) -> OpResult<Vec<usize>> {
        match &self.strides {
            Some(s) => positive(s, rank, "strides"),
            None => Ok(vec![1; rank]),
        }
    }

    /// `dilations` for `rank` spatial axes (default 1).
    pub fn dilations(&self, rank: usize) -> OpResult<Vec<usize>> {
        match &self.dilations {
            Some(s) => positive(s, rank, "dilations"),
            None => Ok(vec![1; rank]),
        }
    }

    /// Explicit `pads` as (begin, end) per axis (default 0). Ignored by the
    /// caller when `auto_pad` is not NOTSET.
    pub fn pads(&self, rank: usize) -> OpResult<Vec<(usize, usize)>> {
        match &self.pads {
            None => Ok(vec![(0, 0); rank]),
            Some(p) => {
                if p.len() != 2 * rank {
                    return Err(OpError::invalid(format!(
                        "attribute pads has {} values, expected {} (begin and end for {rank} spatial axes)",
                        p.len(),
                        2 * rank
                    )));
                }
                if let Some(v) = p.iter().find(|&&v| !(0..=MAX_PARAM).contains(&v)) {
                    return Err(OpError::invalid(format!(
                        "attribute pads holds {v}, expected values in 0..={MAX_PARAM}"
                    )));
                }
                Ok((0..rank)
                    .map(|i| (p[i] as usize, p[rank + i] as usize))
                    .collect())
            }
        }
    }

    /// The output size and padding of every spatial axis for a convolution
    /// or pool over `input` with `kernel` (see [`window`]).
    pub fn windows(
        &self,
        input: &[usize],
        kernel: &[usize],
        ceil_mode: bool,
    ) -> OpResult<Vec<Window>> {
        let r = input.len();
        let strides = self.strides(r)?;
        let dilations = self.dilations(r)?;
        let pads = self.pads(r)?;
        (0..r)
            .map(|a| {
                window(
                    input[a],
                    kernel[a],
                    strides[a],
                    dilations[a],
                    pads[a],
                    self.auto_pad,
                    ceil_mode,
                )
                .map_err(|e| OpError::invalid(format!("spatial axis {a}: {e}")))
            })
            .collect()
    }
}

fn positive(v: &[i64], rank: usize, what: &str) -> OpResult<Vec<usize>> {
    if v.len() != rank {
        return Err(OpError::invalid(format!(
            "attribute {what} has {} values, expected {rank} (one per spatial axis)",
            v.len()
        )));
    }
    v.iter()
        .map(|&x| {
            if (1..=MAX_PARAM).contains(&x) {
                Ok(x as usize)
            } else {
                Err(OpError::invalid(format!(
                    "attribute {what} holds {x}, expected values in 1..={MAX_PARAM}"
                )))
            }
        })
        .collect()
}

/// One spatial axis of a sliding window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// Output positions.
    pub out: usize,
    /// Padding before the input.
    pub pad_begin: usize,
    /// Padding after the input.
    pub pad_end: usize,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Kernel taps.
    pub kernel: usize,
}

/// Output size and padding along one axis (onnxruntime's rules):
/// `SAME_*` give `ceil(in / stride)` outputs with the needed padding split
/// evenly (odd extra at the end for UPPER, at the start for LOWER); `VALID`
/// pads nothing; explicit pads give `floor` (or `ceil` with `ceil_mode`,
/// dropping a last window that would start in the end padding).
pub(crate) fn window(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pads: (usize, usize),
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> OpResult<Window> {
    let span = (kernel - 1)
        .checked_mul(dilation)
        .and_then(|v| v.checked_add(1))
        .ok_or_else(|| OpError::invalid("kernel span overflows"))?;
    let (pb, pe) = match auto_pad {
        AutoPad::NotSet => pads,
        AutoPad::Valid => (0, 0),
        AutoPad::SameUpper | AutoPad::SameLower => {
            let target = input.div_ceil(stride);
            let needed = (target.saturating_sub(1) * stride + span).saturating_sub(input);
            if auto_pad == AutoPad::SameUpper {
                (needed / 2, needed - needed / 2)
            } else {
                (needed - needed / 2, needed / 2)
            }
        }
    };
    let padded = input + pb + pe;
    if padded < span {
        return Err(OpError::invalid(format!(
            "input size {input} with pads ({pb}, {pe}) is smaller than the kernel span {span}"
        )));
    }
    let num = padded - span;
    let mut out = num / stride + 1;
    if ceil_mode && auto_pad == AutoPad::NotSet {
        out = num.div_ceil(stride) + 1;
        if (out - 1) * stride >= input + pb {
            out -= 1;
        }
    }
    Ok(Window {
        out,
        pad_begin: pb,
        pad_end: pe,
        stride,
        dilation,
        kernel,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_and_ceil_rules() {
        // 5 wide, kernel 3, stride 2: SAME gives 3 outputs, 2 pad split 1/1
        let w = window(5, 3, 2, 1, (0, 0), AutoPad::SameUpper, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (3, 1, 1));
        // 4 wide, kernel 2, stride 1: 1 pad, at the end (UPPER) / start (LOWER)
        let w = window(4, 2, 1, 1, (0, 0), AutoPad::SameUpper, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (4, 0, 1));
        let w = window(4, 2, 1, 1, (0, 0), AutoPad::SameLower, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (4, 1, 0));
        // ceil mode: 4 wide, k3 s2 -> floor 1, ceil 2
        assert_eq!(
            window(4, 3, 2, 1, (0, 0), AutoPad::NotSet, false)
                .unwrap()
                .out,
            1
        );
        assert_eq!(
            window(4, 3, 2, 1, (0, 0), AutoPad::NotSet, true)
                .unwrap()
                .out,
            2
        );
        // ceil mode never starts a window in the end padding
        let w = window(2, 1, 2, 1, (0, 1), AutoPad::NotSet, true).unwrap();
        assert_eq!(w.out, 1);
        assert!(window(2, 5, 1, 1, (0, 0), AutoPad::NotSet, false).is_err());
    }
}
