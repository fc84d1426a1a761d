//! The output size and padding of a sliding window (convolutions and
//! pools) along one axis, as onnxruntime computes them: the one rule both
//! static shape inference and the engine's operators use.

/// The `auto_pad` attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    /// Explicit `pads`.
    NotSet,
    /// Output `ceil(in / stride)`, extra padding at the end.
    SameUpper,
    /// Output `ceil(in / stride)`, extra padding at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

impl AutoPad {
    /// Parses the attribute's value (`""` is `NOTSET`).
    pub fn parse(s: &str) -> Result<AutoPad, String> {
        Ok(match s {
            "NOTSET" | "" => AutoPad::NotSet,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            "VALID" => AutoPad::Valid,
            other => {
                return Err(format!(
                "attribute auto_pad is '{other}', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"
            ))
            }
        })
    }
}

/// One spatial axis of a sliding window: its output positions, the padding
/// actually applied, and the kernel taps, stride and dilation it was
/// computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
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
/// dropping a last window that would start in the end padding). `kernel`,
/// `stride` and `dilation` must be at least 1.
///
/// ```
/// use qport_onnx::shapes::window::{extent, AutoPad};
/// // 4 wide, kernel 3, stride 2: floor gives 1 output, ceil_mode 2
/// assert_eq!(extent(4, 3, 2, 1, (0, 0), AutoPad::NotSet, false).unwrap().out, 1);
/// assert_eq!(extent(4, 3, 2, 1, (0, 0), AutoPad::NotSet, true).unwrap().out, 2);
/// assert_eq!(extent(7, 3, 2, 1, (0, 0), AutoPad::SameUpper, false).unwrap().out, 4);
/// ```
pub fn extent(
    input: usize,
    kernel: usize,
    stride: usize,
    dilation: usize,
    pads: (usize, usize),
    auto_pad: AutoPad,
    ceil_mode: bool,
) -> Result<Extent, String> {
    let span = kernel
        .saturating_sub(1)
        .checked_mul(dilation)
        .and_then(|v| v.checked_add(1))
        .ok_or("kernel span overflows")?;
    let stride = stride.max(1);
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
        return Err(format!(
            "input size {input} with pads ({pb}, {pe}) is smaller than the kernel span {span}"
        ));
    }
    let num = padded - span;
    let mut out = num / stride + 1;
    if ceil_mode && auto_pad == AutoPad::NotSet {
        out = num.div_ceil(stride) + 1;
        if (out - 1) * stride >= input + pb {
            out -= 1;
        }
    }
    Ok(Extent {
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
        let w = extent(5, 3, 2, 1, (0, 0), AutoPad::SameUpper, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (3, 1, 1));
        // 4 wide, kernel 2, stride 1: 1 pad, at the end (UPPER) / start (LOWER)
        let w = extent(4, 2, 1, 1, (0, 0), AutoPad::SameUpper, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (4, 0, 1));
        let w = extent(4, 2, 1, 1, (0, 0), AutoPad::SameLower, false).unwrap();
        assert_eq!((w.out, w.pad_begin, w.pad_end), (4, 1, 0));
        // ceil mode: 4 wide, k3 s2 -> floor 1, ceil 2
        assert_eq!(
            extent(4, 3, 2, 1, (0, 0), AutoPad::NotSet, false)
                .unwrap()
                .out,
            1
        );
        assert_eq!(
            extent(4, 3, 2, 1, (0, 0), AutoPad::NotSet, true)
                .unwrap()
                .out,
            2
        );
        // ceil mode never starts a window in the end padding
        let w = extent(2, 1, 2, 1, (0, 1), AutoPad::NotSet, true).unwrap();
        assert_eq!(w.out, 1);
        assert!(extent(2, 5, 1, 1, (0, 0), AutoPad::NotSet, false).is_err());
    }
}
