//! Images: PNG decoding to [`RgbImage`] and the small preprocessing steps
//! the demo and simple pipelines need.
//!
//! - [`load_png`] / [`decode_png`]: 8-bit grayscale, RGB, RGBA, gray+alpha
//!   and palette PNGs (any bit depth) become RGB8. Gray is replicated to three
//!   channels, alpha is dropped (as Pillow's `convert("RGB")` does), palettes
//!   are expanded, 16-bit samples keep their high byte.
//! - [`resize_bilinear`]: Pillow's `Image.resize(size, Image.BILINEAR)`,
//!   reproduced exactly (see the function for the formula).
//! - [`rotate180`], [`to_chw`] (`(x / 255 - mean) / std` per channel, CHW
//!   float32) and [`pad_right`] (zero-pad a CHW tensor to a width).

use crate::error::{DataError, Result};
use qport_core::Tensor;
use std::io::Cursor;
use std::path::Path;

/// Largest image accepted, in pixels (2^28, e.g. 16384 x 16384).
pub const MAX_PIXELS: u64 = 1 << 28;

/// An 8-bit RGB image, rows top to bottom, pixels interleaved `RGBRGB...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    width: usize,
    height: usize,
    data: Vec<u8>,
}

impl RgbImage {
    /// An image from interleaved RGB bytes (`width * height * 3` of them).
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Result<RgbImage> {
        let need = width.checked_mul(height).and_then(|n| n.checked_mul(3));
        if need != Some(data.len()) {
            return Err(DataError::Preprocess(format!(
                "a {width}x{height} RGB image needs {} bytes, got {}",
                need.map(|n| n.to_string())
                    .unwrap_or_else(|| "too many".into()),
                data.len()
            )));
        }
        Ok(RgbImage {
            width,
            height,
            data,
        })
    }

    /// Width in pixels.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Height in pixels.
    pub fn height(&self) -> usize {
        self.height
    }

    /// The interleaved RGB bytes, row-major.
    pub fn as_bytes(&self) -> &[u8] {
        &self.data
    }

    /// The pixel at column `x`, row `y`.
    ///
    /// # Panics
    /// Panics when `(x, y)` is outside the image.
    pub fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        assert!(
            x < self.width && y < self.height,
            "pixel ({x}, {y}) outside the image"
        );
        let i = (y * self.width + x) * 3;
        [self.data[i], self.data[i + 1], self.data[i + 2]]
    }
}

/// Reads and decodes a PNG file to RGB8.
pub fn load_png(path: &Path) -> Result<RgbImage> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    decode_png(&bytes, path)
}

/// Decodes PNG bytes to RGB8; `name` is used in error messages.
pub fn decode_png(bytes: &[u8], name: &Path) -> Result<RgbImage> {
    let err = |reason: String| DataError::Image {
        path: name.to_path_buf(),
        reason,
    };
    if bytes.is_empty() {
        return Err(err("empty file, not a PNG image".into()));
    }
    if !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(err("not a PNG image (bad signature)".into()));
    }
    let mut decoder = png::Decoder::new(Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder
        .read_info()
        .map_err(|e| err(format!("corrupt PNG: {e}")))?;
    let (w, h) = reader.info().size();
    if w as u64 * h as u64 > MAX_PIXELS {
        return Err(err(format!(
            "image of {w}x{h} pixels exceeds the limit of {MAX_PIXELS} pixels"
        )));
    }
    let size = reader
        .output_buffer_size()
        .ok_or_else(|| err(format!("image of {w}x{h} pixels is too large")))?;
    let mut buf = vec![0u8; size];
    let frame = reader
        .next_frame(&mut buf)
        .map_err(|e| err(format!("corrupt PNG: {e}")))?;
    let (color, depth) = reader.output_color_type();
    if depth != png::BitDepth::Eight {
        return Err(err(format!("unexpected {depth:?} output after expansion")));
    }
    let channels = match color {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => return Err(err("palette was not expanded".into())),
    };
    let (w, h) = (frame.width as usize, frame.height as usize);
    let stride = frame.line_size;
    let mut out = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        let row = &buf[y * stride..y * stride + w * channels];
        for px in row.chunks_exact(channels) {
            match channels {
                1 | 2 => out.extend_from_slice(&[px[0], px[0], px[0]]),
                _ => out.extend_from_slice(&px[..3]),
            }
        }
    }
    RgbImage::new(w, h, out)
}

/// Fixed-point precision of the resampling weights (Pillow's `PRECISION_BITS`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// Per output index: first input index, and the fixed-point weights.
struct Coeffs {
    start: Vec<usize>,
    weights: Vec<Vec<i64>>,
}

/// Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for the bilinear
/// (triangle) filter, mapping `in_size` samples onto `out_size`.
fn coeffs(in_size: usize, out_size: usize) -> Coeffs {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filterscale; // bilinear support 1.0, widened when shrinking
    let mut start = Vec::with_capacity(out_size);
    let mut weights = Vec::with_capacity(out_size);
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        // `(int)` in C truncates toward zero, as `as i64` does.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let n = xmax.saturating_sub(xmin);
        // Multiply by the reciprocal as Pillow does: dividing by
        // `filterscale` rounds differently and moves some outputs by 1.
        let ss = 1.0 / filterscale;
        let mut w: Vec<f64> = (0..n)
            .map(|x| {
                let t = ((x + xmin) as f64 - center + 0.5) * ss;
                (1.0 - t.abs()).max(0.0)
            })
            .collect();
        let total: f64 = w.iter().sum();
        if total != 0.0 {
            w.iter_mut().for_each(|v| *v /= total);
        }
        let one = (1u64 << PRECISION_BITS) as f64;
        let fixed = w
            .iter()
            .map(|&v| {
                if v < 0.0 {
                    (-0.5 + v * one) as i64
                } else {
                    (0.5 + v * one) as i64
                }
            })
            .collect();
        start.push(xmin);
        weights.push(fixed);
    }
    Coeffs { start, weights }
}

/// Pillow's `clip8`: fixed-point sum to a byte.
fn clip8(v: i64) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Resizes to `width` x `height` exactly as Pillow's
/// `Image.resize((width, height), Image.BILINEAR)` does for RGB images.
///
/// Pillow resamples separably with a triangle filter, one axis after the
/// other, rounding the intermediate image to 8 bits. The horizontal pass
/// runs first unless the height shrinks by more than twice as many pixels
/// as the width (Pillow 13's rule; older Pillow always went horizontal
/// first, which differs by at most 1 in a few pixels for such sizes).
/// For an output index `i` along an axis
/// of input size `n` and output size `m`:
///
/// - `scale = n / m`, `fs = max(scale, 1)` (the filter widens when
///   shrinking, which antialiases), `support = fs`;
/// - `center = (i + 0.5) * scale`; the taps are the inputs
///   `j` in `[trunc(center - support + 0.5), trunc(center + support + 0.5))`
///   clipped to `[0, n)`;
/// - `w_j = max(0, 1 - |(j + 0.5 - center) / fs|)`, normalised to sum 1 and
///   converted to fixed point with 22 fractional bits (rounded half away
///   from zero);
/// - `out = clamp((2^21 + sum_j w_j * in_j) >> 22, 0, 255)`.
///
/// When upscaling this is ordinary half-pixel-centred bilinear
/// interpolation with edge clamping. An unchanged size returns a copy.
pub fn resize_bilinear(img: &RgbImage, width: usize, height: usize) -> Result<RgbImage> {
    if width == 0 || height == 0 {
        return Err(DataError::Preprocess(format!(
            "cannot resize to {width}x{height}: sizes must be positive"
        )));
    }
    if img.width == 0 || img.height == 0 {
        return Err(DataError::Preprocess(format!(
            "cannot resize an empty {}x{} image",
            img.width, img.height
        )));
    }
    if (width as u64) * (height as u64) > MAX_PIXELS {
        return Err(DataError::Preprocess(format!(
            "target size {width}x{height} exceeds the limit of {MAX_PIXELS} pixels"
        )));
    }
    // Pillow 13 runs the vertical pass first when the height shrinks by
    // more than twice as many pixels as the width does; earlier Pillow
    // versions always ran the horizontal pass first. The order matters
    // because the intermediate image is rounded to 8 bits.
    let (iw, ih) = (img.width as i64, img.height as i64);
    let dh = ih - height as i64;
    let vertical_first = dh > 0 && dh > (iw - width as i64) * 2;
    let out = if vertical_first {
        horizontal_pass(&vertical_pass(img, height)?, width)?
    } else {
        vertical_pass(&horizontal_pass(img, width)?, height)?
    };
    Ok(out)
}

/// Resamples each row to `width` (a copy when the width is unchanged).
fn horizontal_pass(img: &RgbImage, width: usize) -> Result<RgbImage> {
    if width == img.width {
        return Ok(img.clone());
    }
    let c = coeffs(img.width, width);
    let mut out = vec![0u8; width * img.height * 3];
    for y in 0..img.height {
        let row = &img.data[y * img.width * 3..(y + 1) * img.width * 3];
        for x in 0..width {
            for ch in 0..3 {
                let mut ss: i64 = 1 << (PRECISION_BITS - 1);
                for (k, &w) in c.weights[x].iter().enumerate() {
                    ss += row[(c.start[x] + k) * 3 + ch] as i64 * w;
                }
                out[(y * width + x) * 3 + ch] = clip8(ss);
            }
        }
    }
    RgbImage::new(width, img.height, out)
}

/// Resamples each column to `height` (a copy when the height is unchanged).
fn vertical_pass(img: &RgbImage, height: usize) -> Result<RgbImage> {
    if height == img.height {
        return Ok(img.clone());
    }
    let c = coeffs(img.height, height);
    let stride = img.width * 3;
    let mut out = vec![0u8; height * stride];
    for y in 0..height {
        for i in 0..stride {
            let mut ss: i64 = 1 << (PRECISION_BITS - 1);
            for (k, &w) in c.weights[y].iter().enumerate() {
                ss += img.data[(c.start[y] + k) * stride + i] as i64 * w;
            }
            out[y * stride + i] = clip8(ss);
        }
    }
    RgbImage::new(img.width, height, out)
}

/// Rotates by 180 degrees (the last pixel becomes the first).
pub fn rotate180(img: &RgbImage) -> RgbImage {
    let data: Vec<u8> = img
        .data
        .chunks_exact(3)
        .rev()
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    RgbImage {
        width: img.width,
        height: img.height,
        data,
    }
}

/// A float32 tensor `[3, height, width]` with `(x / 255 - mean[c]) / std[c]`
/// per channel, computed in f32 in that order (as numpy does on a float32
/// array). Fails if a `std` is zero or not finite.
pub fn to_chw(img: &RgbImage, mean: [f32; 3], std: [f32; 3]) -> Result<Tensor> {
    if let Some(s) = std.iter().find(|s| **s == 0.0 || !s.is_finite()) {
        return Err(DataError::Preprocess(format!(
            "std must be finite and non-zero, got {s}"
        )));
    }
    let (w, h) = (img.width, img.height);
    let mut out = vec![0f32; 3 * w * h];
    for (i, px) in img.data.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * w * h + i] = (px[c] as f32 / 255.0 - mean[c]) / std[c];
        }
    }
    Tensor::from_vec(vec![3, h, w], out).map_err(|e| DataError::Preprocess(e.to_string()))
}

/// Pads a float32 CHW tensor on the right with zeros to `width` columns.
/// Fails if the tensor is not rank 3 float32 or is already wider.
pub fn pad_right(chw: &Tensor, width: usize) -> Result<Tensor> {
    let (c, h, w) = match chw.shape() {
        &[c, h, w] => (c, h, w),
        s => {
            return Err(DataError::Preprocess(format!(
                "pad_right needs a [C, H, W] tensor, got shape {s:?}"
            )))
        }
    };
    if w > width {
        return Err(DataError::Preprocess(format!(
            "cannot pad width {w} to the smaller width {width}"
        )));
    }
    let src = chw
        .as_slice::<f32>()
        .map_err(|e| DataError::Preprocess(e.to_string()))?;
    let mut out = vec![0f32; c * h * width];
    for (row_in, row_out) in src
        .chunks_exact(w.max(1))
        .zip(out.chunks_exact_mut(width.max(1)))
    {
        if w > 0 {
            row_out[..w].copy_from_slice(row_in);
        }
    }
    Tensor::from_vec(vec![c, h, width], out).map_err(|e| DataError::Preprocess(e.to_string()))
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
