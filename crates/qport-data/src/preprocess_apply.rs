//! Running a [`Preprocess`] spec on an image: resize (or letterbox),
//! crop, normalise, pad, lay out.

use super::{ColorOrder, Crop, Filter, Layout, Pad, Preprocess, Resize};
use crate::error::{DataError, Result};
use crate::image::{RgbImage, MAX_PIXELS};
use crate::resample::resize;
use qport_core::Tensor;
use std::borrow::Cow;

impl Preprocess {
    /// Runs the spec on an image, giving a float32 `[1, 3, H, W]` or
    /// `[1, H, W, 3]` tensor. Fails on an empty image, an image smaller
    /// than the crop, or one wider than the padding.
    pub fn apply(&self, img: &RgbImage) -> Result<Tensor> {
        self.validate()?;
        let img = self.resize_and_crop(img)?;
        let (w, h) = (img.width(), img.height());
        let ow = match self.pad {
            Pad::None => w,
            Pad::Right(pw) if w <= pw => pw,
            Pad::Right(pw) => {
                return Err(DataError::Preprocess(format!(
                    "image is {w} pixels wide after resizing, wider than the padding width {pw}"
                )))
            }
        };
        let order = match self.color {
            ColorOrder::Rgb => [0, 1, 2],
            ColorOrder::Bgr => [2, 1, 0],
        };
        let (mean, std, scale) = (self.mean.0, self.std.0, self.scale);
        let mut out = vec![0f32; 3 * h * ow];
        for (i, px) in img.as_bytes().chunks_exact(3).enumerate() {
            let (y, x) = (i / w, i % w);
            for c in 0..3 {
                let v = (px[order[c]] as f32 / scale - mean[c]) / std[c];
                let at = match self.layout {
                    Layout::Nchw => (c * h + y) * ow + x,
                    Layout::Nhwc => (y * ow + x) * 3 + c,
                };
                out[at] = v;
            }
        }
        Tensor::from_vec(self.shape_of(ow, h), out)
            .map_err(|e| DataError::Preprocess(e.to_string()))
    }

    /// The resize and crop steps alone.
    pub fn resize_and_crop(&self, img: &RgbImage) -> Result<RgbImage> {
        let (w, h) = (img.width(), img.height());
        if w == 0 || h == 0 {
            return Err(DataError::Preprocess(format!("image is empty ({w}x{h})")));
        }
        let f = self.interpolation;
        let resized: Cow<RgbImage> = match self.resize {
            Resize::None => Cow::Borrowed(img),
            Resize::Shorter(n) => Cow::Owned(resize_shorter(img, n, f)?),
            Resize::Exact { width, height } => Cow::Owned(resize(img, width, height, f)?),
            Resize::Height { height, max_width } => {
                let rw = (height as u64).saturating_mul(w as u64).div_ceil(h as u64);
                let rw = rw.clamp(1, max_width.map_or(u64::MAX, |m| m as u64));
                let rw = usize::try_from(rw).unwrap_or(usize::MAX);
                Cow::Owned(resize(img, rw, height, f)?)
            }
            Resize::Letterbox {
                width,
                height,
                fill,
            } => Cow::Owned(letterbox(img, width, height, fill, f)?),
        };
        match self.crop {
            Crop::None => Ok(resized.into_owned()),
            Crop::Center { width, height } => center_crop(&resized, width, height),
            Crop::Fraction {
                fraction,
                width,
                height,
            } => {
                let side = (width.min(height) as f64 / fraction).round() as usize;
                center_crop(&resize_shorter(&resized, side, f)?, width, height)
            }
        }
    }
}

/// Resizes so the shorter side is `n`; the longer becomes
/// `floor(n * long / short)` (at least 1), as torchvision's `Resize(n)`.
pub(super) fn resize_shorter(img: &RgbImage, n: usize, f: Filter) -> Result<RgbImage> {
    let (w, h) = (img.width() as u64, img.height() as u64);
    let long = |a: u64, b: u64| {
        usize::try_from(((n as u64).saturating_mul(a) / b).max(1)).unwrap_or(usize::MAX)
    };
    let (nw, nh) = if w <= h {
        (n, long(h, w))
    } else {
        (long(w, h), n)
    };
    resize(img, nw, nh, f)
}

/// Where a letterbox puts a `w` x `h` image in a `bw` x `bh` box, as
/// Ultralytics' `LetterBox` computes it: the resized size
/// `(round(w * r), round(h * r))` with `r = min(bh / h, bw / w)` in f64 and
/// Python's round (half to even), clamped to `1..=box`, and the left and
/// top padding. Ultralytics pads `round(d / 2 - 0.1)` before and
/// `round(d / 2 + 0.1)` after for `d` padding pixels; `d / 2` is a whole
/// or a half number, so that is `floor(d / 2)` before and the rest after.
/// Returns `(width, height, left, top)`.
pub(super) fn letterbox_geometry(
    w: usize,
    h: usize,
    bw: usize,
    bh: usize,
) -> (usize, usize, usize, usize) {
    let r = (bh as f64 / h as f64).min(bw as f64 / w as f64);
    let side = |n: usize, max: usize| ((n as f64 * r).round_ties_even() as usize).clamp(1, max);
    let (nw, nh) = (side(w, bw), side(h, bh));
    (nw, nh, (bw - nw) / 2, (bh - nh) / 2)
}

/// The letterbox resize ([`Resize::Letterbox`]): the image resized with
/// `f` to fit `bw` x `bh` keeping its aspect ratio
/// ([`letterbox_geometry`]), centred on a canvas of the byte `fill`.
pub(super) fn letterbox(
    img: &RgbImage,
    bw: usize,
    bh: usize,
    fill: u8,
    f: Filter,
) -> Result<RgbImage> {
    if (bw as u64) * (bh as u64) > MAX_PIXELS {
        return Err(DataError::Preprocess(format!(
            "letterbox size {bw}x{bh} exceeds the limit of {MAX_PIXELS} pixels"
        )));
    }
    let (nw, nh, left, top) = letterbox_geometry(img.width(), img.height(), bw, bh);
    let inner = resize(img, nw, nh, f)?;
    let mut out = vec![fill; bw * bh * 3];
    for (y, row) in inner.as_bytes().chunks_exact(nw * 3).enumerate() {
        let at = ((top + y) * bw + left) * 3;
        out[at..at + nw * 3].copy_from_slice(row);
    }
    RgbImage::new(bw, bh, out)
}

/// `round(d / 2)` with Python's round-half-to-even, as torchvision's
/// `center_crop` computes its offsets.
pub(super) fn half_even(d: usize) -> usize {
    let k = d / 2;
    if d % 2 == 1 && k % 2 == 1 {
        k + 1
    } else {
        k
    }
}

/// The centred `cw` x `ch` window (offsets as torchvision's `center_crop`).
pub(super) fn center_crop(img: &RgbImage, cw: usize, ch: usize) -> Result<RgbImage> {
    let (w, h) = (img.width(), img.height());
    if w < cw || h < ch {
        return Err(DataError::Preprocess(format!(
            "image is {w}x{h} after resizing, smaller than the {cw}x{ch} crop"
        )));
    }
    let (x0, y0) = (half_even(w - cw), half_even(h - ch));
    let src = img.as_bytes();
    let mut out = Vec::with_capacity(cw * ch * 3);
    for y in y0..y0 + ch {
        let row = (y * w + x0) * 3;
        out.extend_from_slice(&src[row..row + cw * 3]);
    }
    RgbImage::new(cw, ch, out)
}
