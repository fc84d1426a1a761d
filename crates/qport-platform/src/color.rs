//! RGB/BGR → NV12 conversion with the ITU-R BT.601 matrix.
//!
//! Input is dense interleaved NHWC bytes (`[N, H, W, 3]`); output is the dense
//! Y plane `[N, H, W]` and the interleaved UV (Cb, Cr) plane `[N, H/2, W/2, 2]`,
//! ready for [`crate::pack()`] with the NV12 descriptors. Chroma is subsampled by
//! averaging the 2x2 block (computed in `f64` before rounding). Values are
//! rounded half away from zero and clamped to 0..=255.
//!
//! Full range (JFIF), with R, G, B in 0..=255:
//! ```text
//! Y  =  0.299    R + 0.587    G + 0.114    B
//! Cb = -0.168736 R - 0.331264 G + 0.5      B + 128
//! Cr =  0.5      R - 0.418688 G - 0.081312 B + 128
//! ```
//! Limited ("studio", Y 16..=235, C 16..=240):
//! ```text
//! Y  = 16  + ( 65.481 R + 128.553 G +  24.966 B) / 255
//! Cb = 128 + (-37.797 R -  74.203 G + 112.0   B) / 255
//! Cr = 128 + (112.0   R -  93.786 G -  18.214 B) / 255
//! ```

use crate::PlatformError;
use serde::{Deserialize, Serialize};

/// BT.601 quantization range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bt601Range {
    /// Y, Cb, Cr in 0..=255 (JFIF).
    Full,
    /// Y in 16..=235, Cb/Cr in 16..=240.
    Limited,
}

/// Channel order of the interleaved input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelOrder {
    /// R, G, B.
    Rgb,
    /// B, G, R.
    Bgr,
}

/// Y, Cb, Cr of one pixel, unrounded.
fn ycbcr(r: f64, g: f64, b: f64, range: Bt601Range) -> [f64; 3] {
    match range {
        Bt601Range::Full => [
            0.299 * r + 0.587 * g + 0.114 * b,
            -0.168736 * r - 0.331264 * g + 0.5 * b + 128.0,
            0.5 * r - 0.418688 * g - 0.081312 * b + 128.0,
        ],
        Bt601Range::Limited => [
            16.0 + (65.481 * r + 128.553 * g + 24.966 * b) / 255.0,
            128.0 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255.0,
            128.0 + (112.0 * r - 93.786 * g - 18.214 * b) / 255.0,
        ],
    }
}

fn to_u8(v: f64) -> u8 {
    v.round().clamp(0.0, 255.0) as u8
}

/// Converts dense NHWC RGB/BGR bytes of `n` images `h`x`w` to dense NV12
/// planes `(y, uv)`. `tensor` names the input in errors.
pub fn rgb_to_nv12(
    tensor: &str,
    pixels: &[u8],
    n: usize,
    h: usize,
    w: usize,
    order: ChannelOrder,
    range: Bt601Range,
) -> Result<(Vec<u8>, Vec<u8>), PlatformError> {
    if !h.is_multiple_of(2) || !w.is_multiple_of(2) {
        return Err(PlatformError::OddNv12 {
            tensor: tensor.to_string(),
            height: h as u64,
            width: w as u64,
        });
    }
    let expected = n
        .checked_mul(h)
        .and_then(|x| x.checked_mul(w))
        .and_then(|x| x.checked_mul(3));
    let expected = expected.ok_or_else(|| PlatformError::Overflow {
        tensor: tensor.to_string(),
    })?;
    if pixels.len() != expected {
        return Err(PlatformError::BufferSize {
            tensor: tensor.to_string(),
            what: "RGB input",
            got: pixels.len() as u64,
            expected: expected as u64,
        });
    }
    let px = |img: usize, row: usize, col: usize| -> [f64; 3] {
        let o = ((img * h + row) * w + col) * 3;
        let (a, g, c) = (pixels[o] as f64, pixels[o + 1] as f64, pixels[o + 2] as f64);
        match order {
            ChannelOrder::Rgb => [a, g, c],
            ChannelOrder::Bgr => [c, g, a],
        }
    };
    let mut y = Vec::with_capacity(n * h * w);
    let mut uv = Vec::with_capacity(n * h * w / 2);
    for img in 0..n {
        for row in 0..h {
            for col in 0..w {
                let [r, g, b] = px(img, row, col);
                y.push(to_u8(ycbcr(r, g, b, range)[0]));
            }
        }
        for row in (0..h).step_by(2) {
            for col in (0..w).step_by(2) {
                let (mut cb, mut cr) = (0.0, 0.0);
                for (dr, dc) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
                    let [r, g, b] = px(img, row + dr, col + dc);
                    let [_, u, v] = ycbcr(r, g, b, range);
                    cb += u;
                    cr += v;
                }
                uv.push(to_u8(cb / 4.0));
                uv.push(to_u8(cr / 4.0));
            }
        }
    }
    Ok((y, uv))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solid(rgb: [u8; 3], h: usize, w: usize) -> Vec<u8> {
        (0..h * w).flat_map(|_| rgb).collect()
    }

    #[test]
    fn white_black_and_red_hand_checked() {
        use Bt601Range::{Full, Limited};
        let cases = [
            ([255, 255, 255], Full, 255, [128, 128]),
            ([0, 0, 0], Full, 0, [128, 128]),
            ([255, 255, 255], Limited, 235, [128, 128]),
            ([0, 0, 0], Limited, 16, [128, 128]),
            // Full red: Y 76.245, Cb 84.97, Cr 255.5 -> clamped.
            ([255, 0, 0], Full, 76, [85, 255]),
            // Limited red: Y 81.48, Cb 90.20, Cr 240.
            ([255, 0, 0], Limited, 81, [90, 240]),
        ];
        for (rgb, range, ey, euv) in cases {
            let (y, uv) =
                rgb_to_nv12("t", &solid(rgb, 2, 4), 1, 2, 4, ChannelOrder::Rgb, range).unwrap();
            assert_eq!(y, vec![ey; 8], "{rgb:?} {range:?}");
            assert_eq!(uv, [euv, euv].concat(), "{rgb:?} {range:?}");
        }
    }

    #[test]
    fn bgr_swaps_channels_and_chroma_averages_blocks() {
        let rgb = solid([10, 200, 30], 2, 2);
        let bgr = solid([30, 200, 10], 2, 2);
        let a = rgb_to_nv12("t", &rgb, 1, 2, 2, ChannelOrder::Rgb, Bt601Range::Full).unwrap();
        let b = rgb_to_nv12("t", &bgr, 1, 2, 2, ChannelOrder::Bgr, Bt601Range::Full).unwrap();
        assert_eq!(a, b);
        // Half white, half black block: Cb/Cr stay 128, Y per pixel.
        let px = [[255u8; 3], [0; 3], [0; 3], [255; 3]].concat();
        let (y, uv) = rgb_to_nv12("t", &px, 1, 2, 2, ChannelOrder::Rgb, Bt601Range::Full).unwrap();
        assert_eq!((y, uv), (vec![255, 0, 0, 255], vec![128, 128]));
    }

    #[test]
    fn bad_input_is_an_error() {
        let e =
            rgb_to_nv12("cam", &[0; 9], 1, 1, 3, ChannelOrder::Rgb, Bt601Range::Full).unwrap_err();
        assert!(matches!(e, PlatformError::OddNv12 { .. }) && e.to_string().contains("cam"));
        let e = rgb_to_nv12(
            "cam",
            &[0; 11],
            1,
            2,
            2,
            ChannelOrder::Rgb,
            Bt601Range::Full,
        )
        .unwrap_err();
        assert!(matches!(e, PlatformError::BufferSize { .. }));
    }
}
