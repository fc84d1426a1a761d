//! Images: PNG and JPEG decoding to [`RgbImage`] and the small
//! preprocessing steps the demo and simple pipelines need.
//!
//! - [`load_image`] / [`decode_image`]: PNG or JPEG, told apart by their
//!   magic bytes (never by the file extension).
//! - [`load_png`] / [`decode_png`]: 8-bit grayscale, RGB, RGBA, gray+alpha
//!   and palette PNGs (any bit depth) become RGB8. Gray is replicated to three
//!   channels, alpha is dropped (as Pillow's `convert("RGB")` does), palettes
//!   are expanded, 16-bit samples keep their high byte.
//! - [`crate::jpeg::decode_jpeg`]: baseline and progressive
//!   JPEG, grayscale, YCbCr and CMYK/YCCK (see [`crate::jpeg`]).
//! - [`resize_bilinear`] / [`resize_bicubic`]: Pillow's `Image.resize`,
//!   reproduced exactly (see [`crate::resample`]).
//! - [`rotate180`], [`to_chw`] (`(x / 255 - mean) / std` per channel, CHW
//!   float32) and [`pad_right`] (zero-pad a CHW tensor to a width).

use crate::error::{DataError, Result};
use qport_core::Tensor;
use std::io::Cursor;
use std::path::Path;

pub use crate::jpeg::decode_jpeg;
pub use crate::resample::{resize_bicubic, resize_bilinear};

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

/// Reads and decodes a PNG or JPEG file to RGB8 (see [`decode_image`]).
///
/// Errors name `path`: a missing or unreadable file, an unknown format, a
/// corrupt or truncated image.
pub fn load_image(path: &Path) -> Result<RgbImage> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    decode_image(&bytes, path)
}

/// Decodes PNG or JPEG bytes to RGB8, choosing the decoder by the magic
/// bytes (`\x89PNG\r\n\x1a\n` or `FF D8 FF`); `name` is used in errors.
pub fn decode_image(bytes: &[u8], name: &Path) -> Result<RgbImage> {
    if bytes.starts_with(PNG_MAGIC) {
        decode_png(bytes, name)
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        decode_jpeg(bytes, name)
    } else {
        Err(DataError::Image {
            path: name.to_path_buf(),
            reason: if bytes.is_empty() {
                "empty file, not an image".into()
            } else {
                "not a PNG or JPEG image (unrecognised signature)".into()
            },
        })
    }
}

/// Reads and decodes a PNG file to RGB8.
pub fn load_png(path: &Path) -> Result<RgbImage> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    decode_png(&bytes, path)
}

/// The PNG signature.
const PNG_MAGIC: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A decoder's error for the image `name`, from its reason.
pub(crate) fn image_error(name: &Path) -> impl Fn(String) -> DataError + '_ {
    move |reason| DataError::Image {
        path: name.to_path_buf(),
        reason,
    }
}

/// Refuses empty `bytes` (naming `format`) and bytes that do not start with
/// `magic` (with `bad` as the reason).
pub(crate) fn check_magic(
    bytes: &[u8],
    format: &str,
    magic: &[u8],
    bad: &str,
) -> std::result::Result<(), String> {
    if bytes.is_empty() {
        return Err(format!("empty file, not a {format} image"));
    }
    if !bytes.starts_with(magic) {
        return Err(bad.into());
    }
    Ok(())
}

/// Decodes PNG bytes to RGB8; `name` is used in error messages.
pub fn decode_png(bytes: &[u8], name: &Path) -> Result<RgbImage> {
    let err = image_error(name);
    check_magic(bytes, "PNG", PNG_MAGIC, "not a PNG image (bad signature)").map_err(&err)?;
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
