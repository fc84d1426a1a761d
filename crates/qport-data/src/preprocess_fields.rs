//! The field types of a [`Preprocess`](super::Preprocess) spec and their
//! text forms.
//!
//! Every field has one text form, used alike in TOML files, in
//! `key=value` overrides and when a spec is serialized, so a spec printed
//! by qport can be pasted back in. Parsing is case-insensitive and ignores
//! surrounding whitespace.

use crate::resample::Filter;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Largest size accepted in a spec (pixels along one side).
pub(super) const MAX_SIDE: usize = 1 << 16;

/// How the image is resized before cropping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "String")]
pub enum Resize {
    /// Keep the decoded size. Text: `none`.
    #[default]
    None,
    /// Scale so the shorter side is `N`, keeping the aspect ratio; the longer
    /// side becomes `floor(N * long / short)` (torchvision's `Resize(N)`).
    /// Text: `N` or `shorter:N`.
    Shorter(usize),
    /// Scale to exactly `width` x `height`. Text: `WxH`.
    Exact {
        /// Output width.
        width: usize,
        /// Output height.
        height: usize,
    },
    /// Scale to `height`, with width `ceil(height * w / h)` clamped to
    /// `[1, max_width]` (PP-OCR's text-line resize). Text: `height:H` or
    /// `height:H,max_width:W`.
    Height {
        /// Output height.
        height: usize,
        /// Upper bound on the output width.
        max_width: Option<usize>,
    },
    /// Ultralytics' `LetterBox` (YOLOv5/v8 exports): scale by
    /// `r = min(height / h, width / w)` to `round(w * r)` x `round(h * r)`
    /// (Python's round, half to even; at least 1 pixel), keeping the aspect
    /// ratio, then pad to exactly `width` x `height` with the byte `fill` in
    /// every channel, centred: with `d` padding pixels along an axis, the
    /// top (left) side gets `round(d / 2 - 0.1)` = `floor(d / 2)` and the
    /// bottom (right) side the rest, `round(d / 2 + 0.1)`. The padding is
    /// part of the image, so it is normalised like every other pixel. Text:
    /// `letterbox:N` (square), `letterbox:WxH`, optionally followed by
    /// `,fill:V` (0..=255, default [`LETTERBOX_FILL`]).
    Letterbox {
        /// Output width.
        width: usize,
        /// Output height.
        height: usize,
        /// The padding value of every channel (0..255 pixel scale).
        fill: u8,
    },
}

/// The padding value of a letterbox resize when the text gives none:
/// Ultralytics' grey `(114, 114, 114)`.
pub const LETTERBOX_FILL: u8 = 114;

/// Which part of the resized image is kept.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "String")]
pub enum Crop {
    /// Keep everything. Text: `none`.
    #[default]
    None,
    /// The centred `width` x `height` window. Text: `N` (square) or `WxH`.
    Center {
        /// Window width.
        width: usize,
        /// Window height.
        height: usize,
    },
    /// The "crop percentage" form: resize (with the spec's interpolation)
    /// so the shorter side is `round(min(width, height) / fraction)`, then
    /// take the centred `width` x `height` window. `0.875:224` resizes the
    /// shorter side to 256 and crops 224. Replaces `resize`, which must then
    /// be `none`. Text: `F:N` or `F:WxH`, `F` a fraction (`0.875`) or a
    /// percentage (`87.5%`).
    Fraction {
        /// Share of the resized shorter side kept, in `(0, 1]`.
        fraction: f64,
        /// Window width.
        width: usize,
        /// Window height.
        height: usize,
    },
}

/// Zero padding added after normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "String")]
pub enum Pad {
    /// No padding. Text: `none`.
    #[default]
    None,
    /// Pad on the right with zeros to this width (an image wider than this
    /// is an error). Text: `right:W`.
    Right(usize),
}

/// Channel order of the model input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "String")]
pub enum ColorOrder {
    /// Red, green, blue. Text: `rgb`.
    #[default]
    Rgb,
    /// Blue, green, red (OpenCV / Caffe models). Text: `bgr`.
    Bgr,
}

/// Memory layout of the model input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "String")]
pub enum Layout {
    /// `[1, C, H, W]`. Text: `nchw`.
    #[default]
    Nchw,
    /// `[1, H, W, C]`. Text: `nhwc`.
    Nhwc,
}

/// One value per output channel. Text: one number (used for all three) or
/// three separated by commas; TOML also takes an array.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TextValue", into = "Vec<f32>")]
pub struct Channels(pub [f32; 3]);

/// A TOML / JSON value read as text, so files and overrides share one parser.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum TextValue {
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<f64>),
}

impl TextValue {
    pub(super) fn into_text(self) -> String {
        match self {
            TextValue::Int(i) => i.to_string(),
            TextValue::Float(f) => f.to_string(),
            TextValue::Str(s) => s,
            TextValue::List(v) => v
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

macro_rules! text_form {
    ($($t:ty),*) => {$(
        impl TryFrom<TextValue> for $t {
            type Error = String;
            fn try_from(v: TextValue) -> Result<Self, String> {
                v.into_text().parse()
            }
        }
        impl From<$t> for String {
            fn from(v: $t) -> String {
                v.to_string()
            }
        }
    )*};
}
text_form!(Resize, Crop, Pad, ColorOrder, Layout);

impl TryFrom<TextValue> for Channels {
    type Error = String;
    fn try_from(v: TextValue) -> Result<Self, String> {
        v.into_text().parse()
    }
}

impl From<Channels> for Vec<f32> {
    fn from(c: Channels) -> Vec<f32> {
        c.0.to_vec()
    }
}

/// A positive size, at most [`MAX_SIDE`].
fn side(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_SIDE).contains(&n) => Ok(n),
        Ok(n) => Err(format!("size {n} is out of range 1..={MAX_SIDE}")),
        Err(_) => Err(format!("'{s}' is not a positive whole number")),
    }
}

/// `WxH` as (width, height).
fn wxh(s: &str) -> Option<Result<(usize, usize), String>> {
    let (w, h) = s.split_once('x')?;
    Some(side(w).and_then(|w| Ok((w, side(h)?))))
}

/// `N` (square) or `WxH`.
fn square_or_wxh(s: &str) -> Result<(usize, usize), String> {
    wxh(s).unwrap_or_else(|| side(s).map(|n| (n, n)))
}

fn lower(s: &str) -> String {
    s.trim().to_ascii_lowercase()
}

impl FromStr for Resize {
    type Err = String;
    fn from_str(s: &str) -> Result<Resize, String> {
        let t = lower(s);
        let bad = |why: String| {
            format!(
                "{why}; expected none, N or shorter:N, WxH, height:H[,max_width:W], \
                 or letterbox:N|WxH[,fill:V]"
            )
        };
        if t == "none" {
            return Ok(Resize::None);
        }
        if let Some(rest) = t.strip_prefix("letterbox:") {
            let (size, fill) = match rest.split_once(',') {
                Some((size, f)) => {
                    let f = f.trim();
                    let v = f
                        .strip_prefix("fill:")
                        .ok_or_else(|| bad(format!("'{f}' is not fill:V")))?;
                    let v = v.trim().parse::<u8>().map_err(|_| {
                        bad(format!("fill '{}' is not a whole number 0..=255", v.trim()))
                    })?;
                    (size, v)
                }
                None => (rest, LETTERBOX_FILL),
            };
            let (width, height) = square_or_wxh(size).map_err(bad)?;
            return Ok(Resize::Letterbox {
                width,
                height,
                fill,
            });
        }
        if let Some(rest) = t.strip_prefix("height:") {
            let (h, max) = match rest.split_once(',') {
                Some((h, m)) => {
                    let m = m
                        .trim()
                        .strip_prefix("max_width:")
                        .ok_or_else(|| bad(format!("'{}' is not max_width:W", m.trim())))?;
                    (h, Some(side(m).map_err(bad)?))
                }
                None => (rest, None),
            };
            return Ok(Resize::Height {
                height: side(h).map_err(bad)?,
                max_width: max,
            });
        }
        if let Some(n) = t.strip_prefix("shorter:") {
            return side(n).map(Resize::Shorter).map_err(bad);
        }
        if let Some(r) = wxh(&t) {
            let (width, height) = r.map_err(bad)?;
            return Ok(Resize::Exact { width, height });
        }
        side(&t).map(Resize::Shorter).map_err(bad)
    }
}

impl fmt::Display for Resize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resize::None => f.write_str("none"),
            Resize::Shorter(n) => write!(f, "shorter:{n}"),
            Resize::Exact { width, height } => write!(f, "{width}x{height}"),
            Resize::Height {
                height,
                max_width: None,
            } => write!(f, "height:{height}"),
            Resize::Height {
                height,
                max_width: Some(w),
            } => write!(f, "height:{height},max_width:{w}"),
            Resize::Letterbox {
                width,
                height,
                fill,
            } => write!(f, "letterbox:{width}x{height},fill:{fill}"),
        }
    }
}

impl FromStr for Crop {
    type Err = String;
    fn from_str(s: &str) -> Result<Crop, String> {
        let t = lower(s);
        let bad = |why: String| {
            format!("{why}; expected none, N, WxH, F:N or F:WxH (F like 0.875 or 87.5%)")
        };
        if t == "none" {
            return Ok(Crop::None);
        }
        if let Some((f, size)) = t.split_once(':') {
            let f = f.trim();
            let fraction = match f.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
                None => f.parse::<f64>(),
            }
            .map_err(|_| bad(format!("'{f}' is not a fraction")))?;
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(bad(format!("crop fraction {f} is outside (0, 1]")));
            }
            let (width, height) = square_or_wxh(size).map_err(bad)?;
            return Ok(Crop::Fraction {
                fraction,
                width,
                height,
            });
        }
        let (width, height) = square_or_wxh(&t).map_err(bad)?;
        Ok(Crop::Center { width, height })
    }
}

impl fmt::Display for Crop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Crop::None => f.write_str("none"),
            Crop::Center { width, height } => write!(f, "{width}x{height}"),
            Crop::Fraction {
                fraction,
                width,
                height,
            } => write!(f, "{fraction}:{width}x{height}"),
        }
    }
}

impl FromStr for Pad {
    type Err = String;
    fn from_str(s: &str) -> Result<Pad, String> {
        let t = lower(s);
        if t == "none" {
            return Ok(Pad::None);
        }
        match t.strip_prefix("right:") {
            Some(w) => side(w).map(Pad::Right),
            None => Err(format!("'{}' is not none or right:W", s.trim())),
        }
        .map_err(|e| format!("{e}; expected none or right:W"))
    }
}

impl fmt::Display for Pad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pad::None => f.write_str("none"),
            Pad::Right(w) => write!(f, "right:{w}"),
        }
    }
}

/// Parses one of `names` (case-insensitive) into the matching value.
fn choice<T: Copy>(s: &str, options: &[(&str, T)]) -> Result<T, String> {
    let t = lower(s);
    options
        .iter()
        .find(|(n, _)| *n == t)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            format!("'{}' is not one of: {}", s.trim(), names.join(", "))
        })
}

/// `FromStr` (case-insensitive, through [`choice`]) and `Display` of a
/// fieldless enum, both from one table of its spellings.
macro_rules! spelled {
    ($t:ident { $($v:ident => $n:literal),+ $(,)? }) => {
        impl FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<$t, String> {
                choice(s, &[$(($n, $t::$v)),+])
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self {
                    $($t::$v => $n),+
                })
            }
        }
    };
}

spelled!(ColorOrder { Rgb => "rgb", Bgr => "bgr" });
spelled!(Layout { Nchw => "nchw", Nhwc => "nhwc" });
spelled!(Filter { Bilinear => "bilinear", Bicubic => "bicubic" });

/// A finite number.
pub(super) fn number(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("'{}' is not a finite number", s.trim())),
    }
}

impl FromStr for Channels {
    type Err = String;
    fn from_str(s: &str) -> Result<Channels, String> {
        let t = s.trim().trim_start_matches('[').trim_end_matches(']');
        let v: Vec<f32> = t.split(',').map(number).collect::<Result<_, _>>()?;
        match v[..] {
            [a] => Ok(Channels([a; 3])),
            [a, b, c] => Ok(Channels([a, b, c])),
            _ => Err(format!(
                "expected 1 or 3 values (one per channel), got {}",
                v.len()
            )),
        }
    }
}

impl fmt::Display for Channels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c] = self.0;
        write!(f, "{a},{b},{c}")
    }
}
