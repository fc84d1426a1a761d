//! Preprocessing specs: how an image becomes a model input tensor.
//!
//! A [`Preprocess`] runs, in order: resize ([`Resize`], with the
//! [`Filter`] in `interpolation`; a letterbox resize also pads to its
//! size with a grey byte), centre crop ([`Crop`]), conversion to
//! float with channel order ([`ColorOrder`]) and normalisation
//! `(x / scale - mean[c]) / std[c]` computed in f32 in that order (x the
//! 0..255 pixel value, `c` the output channel, so `mean`/`std` are given in
//! the output channel order), zero padding on the right ([`Pad`]), and
//! layout ([`Layout`]). The result is a float32 `[1, 3, H, W]` or
//! `[1, H, W, 3]` tensor.
//!
//! `scale = 255` with `mean`/`std` on the 0..1 scale is torchvision's
//! convention; `scale = 1` with `mean`/`std` on the 0..255 scale is the
//! `(x - a) / b` form, which the `sub` / `div` keys set directly.
//!
//! Specs come from a named preset ([`PRESETS`]), a TOML file naming a
//! preset plus overrides, or `key=value` overrides (the CLI form). Every
//! key takes the same text in all three places:
//!
//! | key | values |
//! |---|---|
//! | `preset` | `imagenet`, `effnet-lite`, `ppocr`, `yolo` (replaces the whole spec) |
//! | `resize` | `none`, `N` / `shorter:N`, `WxH`, `height:H[,max_width:W]`, `letterbox:N` / `letterbox:WxH[,fill:V]` |
//! | `interpolation` | `bilinear`, `bicubic` (Pillow-exact) |
//! | `crop` | `none`, `N`, `WxH`, `F:N` / `F:WxH` (`F` = `0.875` or `87.5%`) |
//! | `pad` | `none`, `right:W` |
//! | `color` | `rgb`, `bgr` |
//! | `layout` | `nchw`, `nhwc` |
//! | `scale` | a non-zero number (255 or 1) |
//! | `mean`, `std` | one number or three (`a,b,c`; TOML arrays too) |
//! | `sub`, `div` | like `mean`, `std`, and also set `scale = 1` |
//!
//! ```toml
//! preset = "imagenet"
//! resize = 288          # shorter side
//! crop = "256x256"
//! color = "bgr"
//! ```
//!
//! A YOLO model exported at 320x320 instead of 640x640 takes the `yolo`
//! preset with `resize = "letterbox:320"` (or `--pp resize=letterbox:320`).

use crate::error::{DataError, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

pub use crate::resample::Filter;
pub use fields::{Channels, ColorOrder, Crop, Layout, Pad, Resize, LETTERBOX_FILL};

#[path = "preprocess_apply.rs"]
mod apply;
#[path = "preprocess_fields.rs"]
mod fields;

/// The named presets, for [`Preprocess::from_preset`].
///
/// - `imagenet`: resize the shorter side to 256 (bilinear), centre crop 224,
///   RGB, `(x / 255 - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]`, NCHW.
/// - `effnet-lite`: bicubic, crop 87.5% to 224 (shorter side to 256, centre
///   crop 224), RGB, `(x - 127) / 128`, NCHW.
/// - `ppocr`: height 48 keeping the aspect ratio, width
///   `min(192, ceil(48 * w / h))`, bilinear, RGB, `(x / 255 - 0.5) / 0.5`,
///   zero-padded on the right to width 192, NCHW `[1, 3, 48, 192]`.
/// - `yolo`: Ultralytics YOLOv5/v8 exports: letterbox to 640x640
///   ([`Resize::Letterbox`]: scale `min(640 / h, 640 / w)` keeping the
///   aspect ratio, bilinear, centred padding with 114), RGB, `x / 255`,
///   NCHW `[1, 3, 640, 640]`. The resampling is Pillow's bilinear (see
///   [`crate::resample`]), which antialiases when shrinking; Ultralytics
///   resizes with OpenCV's `INTER_LINEAR`, which does not, so a shrunk
///   image's pixels differ slightly from Ultralytics' while the geometry
///   (size, placement, padding) is the same.
///
/// ```
/// use qport_data::preprocess::Preprocess;
/// let yolo = Preprocess::from_preset("yolo")?.with_override("resize=letterbox:320")?;
/// // A black 64x32 image: scaled by 5 to 320x160, 80 grey rows above it.
/// let black = qport_data::RgbImage::new(64, 32, vec![0; 64 * 32 * 3])?;
/// let t = yolo.apply(&black)?;
/// assert_eq!(t.shape(), &[1, 3, 320, 320]);
/// let v = t.as_slice::<f32>().unwrap();
/// assert_eq!(v[79 * 320], 114.0 / 255.0); // channel 0, row 79: padding
/// assert_eq!(v[80 * 320], 0.0); // row 80: the image
/// # Ok::<(), qport_data::DataError>(())
/// ```
pub const PRESETS: &[&str] = &["imagenet", "effnet-lite", "ppocr", "yolo"];

/// The keys a spec file or override may set.
pub const KEYS: &[&str] = &[
    "preset",
    "resize",
    "interpolation",
    "crop",
    "pad",
    "color",
    "layout",
    "scale",
    "mean",
    "std",
    "sub",
    "div",
];

/// A preprocessing spec; see the [module docs](self) for the steps and the
/// text form of each field.
///
/// The default spec keeps the image as decoded and gives `x / 255`, RGB,
/// NCHW. Serde reads and writes each field in its text form and rejects
/// unknown fields; missing fields take the default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Preprocess {
    /// How the image is resized.
    pub resize: Resize,
    /// The resampling filter for resizing (also for [`Crop::Fraction`]).
    pub interpolation: Filter,
    /// Which part of the resized image is kept.
    pub crop: Crop,
    /// Zero padding after normalisation.
    pub pad: Pad,
    /// Channel order of the output.
    pub color: ColorOrder,
    /// Memory layout of the output.
    pub layout: Layout,
    /// Pixel values (0..255) are divided by this first.
    pub scale: f32,
    /// Subtracted per output channel after scaling.
    pub mean: Channels,
    /// Divides per output channel after subtracting `mean`.
    pub std: Channels,
}

impl Default for Preprocess {
    fn default() -> Preprocess {
        Preprocess {
            resize: Resize::None,
            interpolation: Filter::Bilinear,
            crop: Crop::None,
            pad: Pad::None,
            color: ColorOrder::Rgb,
            layout: Layout::Nchw,
            scale: 255.0,
            mean: Channels([0.0; 3]),
            std: Channels([1.0; 3]),
        }
    }
}

fn spec_err(origin: impl Into<String>, reason: impl Into<String>) -> DataError {
    DataError::Spec {
        origin: origin.into(),
        reason: reason.into(),
    }
}

impl Preprocess {
    /// The named preset (one of [`PRESETS`]).
    ///
    /// ```
    /// use qport_data::preprocess::Preprocess;
    /// let pp = Preprocess::from_preset("imagenet")?.with_override("crop=240")?;
    /// assert_eq!(pp.target_shape(), Some(vec![1, 3, 240, 240]));
    /// let img = qport_data::RgbImage::new(320, 240, vec![128; 320 * 240 * 3])?;
    /// assert_eq!(pp.apply(&img)?.shape(), &[1, 3, 240, 240]);
    /// assert!(Preprocess::from_preset("resnet").is_err());
    /// # Ok::<(), qport_data::DataError>(())
    /// ```
    pub fn from_preset(name: &str) -> Result<Preprocess> {
        let base = Preprocess::default();
        let pp = match name.trim().to_ascii_lowercase().as_str() {
            "imagenet" => Preprocess {
                resize: Resize::Shorter(256),
                crop: Crop::Center {
                    width: 224,
                    height: 224,
                },
                mean: Channels([0.485, 0.456, 0.406]),
                std: Channels([0.229, 0.224, 0.225]),
                ..base
            },
            "effnet-lite" => Preprocess {
                interpolation: Filter::Bicubic,
                crop: Crop::Fraction {
                    fraction: 0.875,
                    width: 224,
                    height: 224,
                },
                scale: 1.0,
                mean: Channels([127.0; 3]),
                std: Channels([128.0; 3]),
                ..base
            },
            "ppocr" => Preprocess {
                resize: Resize::Height {
                    height: 48,
                    max_width: Some(192),
                },
                pad: Pad::Right(192),
                mean: Channels([0.5; 3]),
                std: Channels([0.5; 3]),
                ..base
            },
            "yolo" => Preprocess {
                resize: Resize::Letterbox {
                    width: 640,
                    height: 640,
                    fill: LETTERBOX_FILL,
                },
                ..base
            },
            _ => {
                return Err(spec_err(
                    format!("preset '{}'", name.trim()),
                    format!("unknown preset (valid presets: {})", PRESETS.join(", ")),
                ))
            }
        };
        Ok(pp)
    }

    /// Reads a TOML spec file: an optional `preset = "..."` and any of the
    /// other [`KEYS`] as overrides. Errors name the file.
    pub fn from_toml_file(path: &Path) -> Result<Preprocess> {
        let text = std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))?;
        Preprocess::from_toml_str(&text, &path.display().to_string())
    }

    /// Parses TOML spec text (see [`Preprocess::from_toml_file`]); `origin`
    /// names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Preprocess> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e| spec_err(origin, format!("not valid TOML: {e}")))?;
        let mut pp = match table.remove("preset") {
            None => Preprocess::default(),
            Some(toml::Value::String(name)) => Preprocess::from_preset(&name)
                .map_err(|e| spec_err(origin, format!("key 'preset': {}", reason_of(e))))?,
            Some(other) => {
                return Err(spec_err(
                    origin,
                    format!("key 'preset' must be a string, found {}", other.type_str()),
                ))
            }
        };
        for (a, b) in [
            ("sub", "scale"),
            ("sub", "mean"),
            ("div", "scale"),
            ("div", "std"),
        ] {
            if table.contains_key(a) && table.contains_key(b) {
                return Err(spec_err(
                    origin,
                    format!("keys '{a}' and '{b}' conflict: use sub/div or scale/mean/std"),
                ));
            }
        }
        for (key, value) in &table {
            let text =
                toml_text(value).map_err(|r| spec_err(origin, format!("key '{key}': {r}")))?;
            pp.set_text(key, &text)
                .map_err(|r| spec_err(origin, format!("key '{key}': {r}")))?;
        }
        pp.check().map_err(|r| spec_err(origin, r))?;
        Ok(pp)
    }

    /// Sets one key from its text form (`set("resize", "256")`). `preset`
    /// replaces the whole spec. Unknown keys and bad values are errors that
    /// list the valid choices. The combination is not checked here (a
    /// later key may fix it): call [`Preprocess::validate`], or use
    /// [`Preprocess::with_overrides`], which does.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        self.set_text(key, value)
            .map_err(|r| spec_err(format!("{key}={value}"), r))
    }

    /// The spec with one `key=value` override applied, then checked.
    pub fn with_override(self, key_value: &str) -> Result<Preprocess> {
        self.with_overrides([key_value])
    }

    /// The spec with `key=value` overrides applied in order (a
    /// `preset=...` among them resets everything set before it), then
    /// checked once, so the order of the others does not matter.
    pub fn with_overrides<I, S>(mut self, overrides: I) -> Result<Preprocess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut all = Vec::new();
        for kv in overrides {
            let kv = kv.as_ref();
            let origin = || format!("override '{kv}'");
            let (key, value) = kv.split_once('=').ok_or_else(|| {
                spec_err(
                    origin(),
                    format!("expected key=value (keys: {})", KEYS.join(", ")),
                )
            })?;
            self.set_text(key, value)
                .map_err(|r| spec_err(origin(), r))?;
            all.push(kv.to_string());
        }
        let origin = match &all[..] {
            [one] => format!("override '{one}'"),
            many => format!("overrides '{}'", many.join(" ")),
        };
        self.check().map_err(|r| spec_err(origin, r))?;
        Ok(self)
    }

    fn set_text(&mut self, key: &str, value: &str) -> std::result::Result<(), String> {
        let ctx = |r: String| format!("bad value '{}': {r}", value.trim());
        match key.trim() {
            "preset" => *self = Preprocess::from_preset(value).map_err(reason_of)?,
            "resize" => self.resize = value.parse().map_err(ctx)?,
            "interpolation" => self.interpolation = value.parse().map_err(ctx)?,
            "crop" => self.crop = value.parse().map_err(ctx)?,
            "pad" => self.pad = value.parse().map_err(ctx)?,
            "color" => self.color = value.parse().map_err(ctx)?,
            "layout" => self.layout = value.parse().map_err(ctx)?,
            "scale" => self.scale = fields::number(value).map_err(ctx)?,
            "mean" => self.mean = value.parse().map_err(ctx)?,
            "std" => self.std = value.parse().map_err(ctx)?,
            "sub" => {
                self.mean = value.parse().map_err(ctx)?;
                self.scale = 1.0;
            }
            "div" => {
                self.std = value.parse().map_err(ctx)?;
                self.scale = 1.0;
            }
            other => {
                return Err(format!(
                    "unknown key '{other}' (valid keys: {})",
                    KEYS.join(", ")
                ))
            }
        }
        Ok(())
    }

    /// Fails if the spec cannot work: a zero or non-finite `scale` or
    /// `std`, a non-finite `mean`, a crop fraction combined with a resize,
    /// a static output wider than the padding.
    pub fn validate(&self) -> Result<()> {
        self.check().map_err(DataError::Preprocess)
    }

    fn check(&self) -> std::result::Result<(), String> {
        if self.scale == 0.0 || !self.scale.is_finite() {
            return Err(format!(
                "scale must be finite and non-zero, got {}",
                self.scale
            ));
        }
        if let Some(s) = self.std.0.iter().find(|s| **s == 0.0 || !s.is_finite()) {
            return Err(format!("std must be finite and non-zero, got {s}"));
        }
        if let Some(m) = self.mean.0.iter().find(|m| !m.is_finite()) {
            return Err(format!("mean must be finite, got {m}"));
        }
        let sizes: Vec<usize> = match self.resize {
            Resize::None => vec![],
            Resize::Shorter(n) => vec![n],
            Resize::Exact { width, height } | Resize::Letterbox { width, height, .. } => {
                vec![width, height]
            }
            Resize::Height { height, max_width } => {
                std::iter::once(height).chain(max_width).collect()
            }
        };
        let crop_sizes = match self.crop {
            Crop::None => vec![],
            Crop::Center { width, height } => vec![width, height],
            Crop::Fraction {
                fraction,
                width,
                height,
            } => {
                if !(fraction > 0.0 && fraction <= 1.0) {
                    return Err(format!("crop fraction {fraction} is outside (0, 1]"));
                }
                vec![width, height]
            }
        };
        let pad_sizes = match self.pad {
            Pad::None => vec![],
            Pad::Right(w) => vec![w],
        };
        let max = fields::MAX_SIDE;
        if let Some(s) = sizes
            .iter()
            .chain(&crop_sizes)
            .chain(&pad_sizes)
            .find(|&&s| s == 0 || s > max)
        {
            return Err(format!("size {s} is out of range 1..={max}"));
        }
        if matches!(self.crop, Crop::Fraction { .. }) && self.resize != Resize::None {
            return Err(format!(
                "crop={} resizes the image itself, so resize must be none (got resize={}); \
                 or use crop=WxH after the resize",
                self.crop, self.resize
            ));
        }
        if let Pad::Right(pw) = self.pad {
            let widest = match (self.crop, self.resize) {
                (Crop::Center { width, .. } | Crop::Fraction { width, .. }, _) => Some(width),
                (Crop::None, Resize::Exact { width, .. } | Resize::Letterbox { width, .. }) => {
                    Some(width)
                }
                (
                    Crop::None,
                    Resize::Height {
                        max_width: Some(w), ..
                    },
                ) => Some(w),
                _ => None,
            };
            if let Some(w) = widest.filter(|&w| w > pw) {
                return Err(format!(
                    "images up to {w} pixels wide cannot be padded to the narrower width {pw}"
                ));
            }
        }
        Ok(())
    }

    /// The output shape when it does not depend on the image size:
    /// `[1, 3, H, W]` (NCHW) or `[1, H, W, 3]` (NHWC); `None` when it does.
    pub fn target_shape(&self) -> Option<Vec<usize>> {
        let fixed = match (self.crop, self.resize) {
            (Crop::Center { width, height } | Crop::Fraction { width, height, .. }, _) => {
                Some((width, height))
            }
            (
                Crop::None,
                Resize::Exact { width, height } | Resize::Letterbox { width, height, .. },
            ) => Some((width, height)),
            _ => None,
        };
        let (w, h) = match (fixed, self.pad, self.resize) {
            (Some((w, h)), Pad::None, _) => (w, h),
            (Some((_, h)), Pad::Right(pw), _) => (pw, h),
            (None, Pad::Right(pw), Resize::Height { height, .. }) => (pw, height),
            _ => return None,
        };
        Some(self.shape_of(w, h))
    }

    fn shape_of(&self, w: usize, h: usize) -> Vec<usize> {
        match self.layout {
            Layout::Nchw => vec![1, 3, h, w],
            Layout::Nhwc => vec![1, h, w, 3],
        }
    }
}

/// The reason text of a spec error, without its origin.
fn reason_of(e: DataError) -> String {
    match e {
        DataError::Spec { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// A TOML value in its text form (numbers and strings; arrays joined by commas).
fn toml_text(v: &toml::Value) -> std::result::Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::Integer(_) | toml::Value::Float(_) => toml_text(i),
                other => Err(format!(
                    "expected numbers in the array, found {}",
                    other.type_str()
                )),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(|v| v.join(",")),
        other => Err(format!(
            "expected a string or a number, found {}",
            other.type_str()
        )),
    }
}

impl fmt::Display for Preprocess {
    /// The spec as `key=value` overrides separated by spaces, which
    /// [`Preprocess::with_overrides`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "resize={} interpolation={} crop={} pad={} color={} layout={} scale={} mean={} std={}",
            self.resize,
            self.interpolation,
            self.crop,
            self.pad,
            self.color,
            self.layout,
            self.scale,
            self.mean,
            self.std
        )
    }
}

#[cfg(test)]
#[path = "preprocess_tests.rs"]
mod tests;
