//! Deployment tensor descriptors: `validShape`, `tensorType`, `stride[]` (bytes),
//! `alignedShape` and `alignedByteSize` of one model input or output on one
//! platform (vt.md §Runtime tensor descriptor).
//!
//! # Rules and assumptions
//!
//! * **Images** (NV12 Y and UV planes, Y/gray, RGB/BGR/YUV444) use the runtime
//!   shape `[N, H, W, C]` (Y: C=1, UV: `[N, H/2, W/2, 2]`), one byte per
//!   element. Strides are the documented dynamic-stride rule: the innermost two
//!   strides are `[C, 1]`, the others are filled from the innermost,
//!   `stride[i] = ALIGN(stride[i+1] * dim[i+1])`, with ALIGN the platform's image
//!   stride alignment (32 B on J6E/M/B, 64 B on J6H/P/S6P; seed §stride, padding,
//!   and aligned byte size). This reproduces the S100 example Y 220x220 ->
//!   `[49280,224,1,1]`, UV `[24640,224,2,1]`. Assumption: the same alignment
//!   applies to every image type, not only NV12 (seed: "the stride alignment
//!   requirement of image input differs"). `alignedByteSize = stride[0]*N`, not
//!   rounded to the minimum memory unit (that unit is for non-image tensors).
//! * **pyramid** sources have dynamic stride and **resizer** sources dynamic
//!   shape and stride (seed §pyramid / resizer Input Differences): their
//!   descriptors carry `-1` and `alignedByteSize = -1`; [`TensorDescriptor::resolve`]
//!   fills them from the actual shape with the rule above.
//! * **Featuremaps** (dense element tensors). The public rule is not fully
//!   known. Assumption: the two innermost axes (the only axis for rank 1; only
//!   the last for rank 2, whose first axis is the batch) are padded to a multiple of the platform's `featuremap_align_elems` (16 on nash),
//!   other strides are dense over the padded shape, and `alignedByteSize` is
//!   rounded up to the platform's minimum memory unit. This reproduces the
//!   documented U16 `[1,3,212,212]` -> `[301056,100352,448,2]` (H and W padded
//!   to 224). The multiple is platform data and so overridable.
//! * **no_padding** (`input_no_padding` / `output_no_padding`): dense strides,
//!   `alignedShape = validShape`, `alignedByteSize` = the plain byte size.

use crate::{Platform, PlatformError, QuantInfo};
use serde::{Deserialize, Serialize};

/// Element type of a featuremap (non-image) tensor (vt.md §Runtime tensor descriptor).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum TensorType {
    S8,
    U8,
    S16,
    U16,
    F16,
    S32,
    U32,
    F32,
    S64,
    F64,
}

impl TensorType {
    /// All featuremap element types.
    pub const ALL: [TensorType; 10] = [
        Self::S8,
        Self::U8,
        Self::S16,
        Self::U16,
        Self::F16,
        Self::S32,
        Self::U32,
        Self::F32,
        Self::S64,
        Self::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> u64 {
        match self {
            Self::S8 | Self::U8 => 1,
            Self::S16 | Self::U16 | Self::F16 => 2,
            Self::S32 | Self::U32 | Self::F32 => 4,
            Self::S64 | Self::F64 => 8,
        }
    }

    /// The runtime type holding a tensor of `dtype`, if there is one.
    pub fn from_dtype(dtype: qport_core::DType) -> Option<Self> {
        use qport_core::DType as D;
        Some(match dtype {
            D::I8 => Self::S8,
            D::U8 | D::Bool => Self::U8,
            D::I16 => Self::S16,
            D::U16 => Self::U16,
            D::F16 => Self::F16,
            D::I32 => Self::S32,
            D::U32 => Self::U32,
            D::F32 => Self::F32,
            D::I64 => Self::S64,
            D::F64 => Self::F64,
            _ => return None,
        })
    }
}

/// An image plane or image layout, all `[N, H, W, C]` of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImageFormat {
    /// NV12 luma plane, C = 1.
    Nv12Y,
    /// NV12 interleaved chroma plane, `[N, H/2, W/2, 2]`.
    Nv12Uv,
    /// Gray / Y only, C = 1.
    Y,
    /// RGB NHWC, C = 3.
    Rgb,
    /// BGR NHWC, C = 3.
    Bgr,
    /// YUV444 NHWC, C = 3.
    Yuv444,
}

impl ImageFormat {
    /// Channels (innermost dimension).
    pub fn channels(self) -> u64 {
        match self {
            Self::Nv12Y | Self::Y => 1,
            Self::Nv12Uv => 2,
            Self::Rgb | Self::Bgr | Self::Yuv444 => 3,
        }
    }
}

/// What a tensor holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TensorKind {
    /// A featuremap of one element type.
    Featuremap(TensorType),
    /// An image plane.
    Image(ImageFormat),
}

impl TensorKind {
    /// Bytes per element.
    pub fn elem_size(self) -> u64 {
        match self {
            Self::Featuremap(t) => t.size(),
            Self::Image(_) => 1,
        }
    }

    /// The runtime descriptor's tensor type name (`S8`, `F32`, `NV12_Y`,
    /// ...).
    ///
    /// ```
    /// use qport_platform::layout::{ImageFormat, TensorKind, TensorType};
    /// assert_eq!(TensorKind::Featuremap(TensorType::S16).type_name(), "S16");
    /// assert_eq!(TensorKind::Image(ImageFormat::Nv12Uv).type_name(), "NV12_UV");
    /// ```
    pub fn type_name(self) -> &'static str {
        match self {
            Self::Featuremap(t) => match t {
                TensorType::S8 => "S8",
                TensorType::U8 => "U8",
                TensorType::S16 => "S16",
                TensorType::U16 => "U16",
                TensorType::F16 => "F16",
                TensorType::S32 => "S32",
                TensorType::U32 => "U32",
                TensorType::F32 => "F32",
                TensorType::S64 => "S64",
                TensorType::F64 => "F64",
            },
            Self::Image(f) => match f {
                ImageFormat::Nv12Y => "NV12_Y",
                ImageFormat::Nv12Uv => "NV12_UV",
                ImageFormat::Y => "Y",
                ImageFormat::Rgb => "RGB",
                ImageFormat::Bgr => "BGR",
                ImageFormat::Yuv444 => "YUV444",
            },
        }
    }
}

/// Where an input comes from (vt.md §hb_compile YAML `input_source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum InputSource {
    /// Plain memory: static shape and stride.
    Ddr,
    /// Image pyramid: dynamic stride.
    Pyramid,
    /// Resizer: dynamic shape and stride.
    Resizer,
}

impl InputSource {
    /// The name used in configs, reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ddr => "ddr",
            Self::Pyramid => "pyramid",
            Self::Resizer => "resizer",
        }
    }
}

/// One tensor's deployment layout. `-1` marks dynamic entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TensorDescriptor {
    /// Tensor name.
    pub name: String,
    /// Type of the tensor.
    pub kind: TensorKind,
    /// Source of the tensor.
    pub source: InputSource,
    /// Dense (unpadded) layout requested.
    pub no_padding: bool,
    /// Valid shape (`-1`: dynamic dimension).
    pub valid_shape: Vec<i64>,
    /// Shape including padding (`-1`: dynamic).
    pub aligned_shape: Vec<i64>,
    /// Strides in bytes (`-1`: dynamic).
    pub stride: Vec<i64>,
    /// Bytes to allocate (`-1`: dynamic, allocate `stride[0]*dim[0]`).
    pub aligned_byte_size: i64,
    /// Alignment used when resolving dynamic strides.
    pub stride_align: u64,
    /// Name of the platform the layout was computed for.
    pub platform: String,
    /// Quantization info (`quantiType`, scales, zero points, `quantizeAxis`).
    #[serde(default)]
    pub quant: Option<QuantInfo>,
}

fn ovf(name: &str) -> PlatformError {
    PlatformError::Overflow {
        tensor: name.to_string(),
    }
}

fn round_up(x: u64, m: u64, name: &str) -> Result<u64, PlatformError> {
    let m = m.max(1);
    x.div_ceil(m).checked_mul(m).ok_or_else(|| ovf(name))
}

fn to_i64(v: u64, name: &str) -> Result<i64, PlatformError> {
    i64::try_from(v).map_err(|_| ovf(name))
}

fn dense_strides(shape: &[u64], elem: u64, name: &str) -> Result<Vec<u64>, PlatformError> {
    let mut s = vec![elem; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1]
            .checked_mul(shape[i + 1])
            .ok_or_else(|| ovf(name))?;
    }
    Ok(s)
}

fn total(shape: &[u64], elem: u64, name: &str) -> Result<u64, PlatformError> {
    shape
        .iter()
        .try_fold(elem, |a, &d| a.checked_mul(d))
        .ok_or_else(|| ovf(name))
}

fn ivec(v: &[u64], name: &str) -> Result<Vec<i64>, PlatformError> {
    v.iter().map(|&x| to_i64(x, name)).collect()
}

impl TensorDescriptor {
    /// Descriptor of a featuremap tensor (always `ddr`).
    pub fn featuremap(
        name: &str,
        ty: TensorType,
        valid_shape: &[u64],
        platform: &Platform,
        no_padding: bool,
    ) -> Result<Self, PlatformError> {
        let elem = ty.size();
        let mut aligned = valid_shape.to_vec();
        if !no_padding {
            // the two innermost axes, never the batch axis of a rank >= 2 tensor
            let r = aligned.len();
            let first = if r >= 2 { (r - 2).max(1) } else { 0 };
            for d in aligned.iter_mut().skip(first) {
                *d = round_up(*d, platform.featuremap_align_elems, name)?;
            }
        }
        let stride = dense_strides(&aligned, elem, name)?;
        let bytes = total(&aligned, elem, name)?;
        let bytes = if no_padding {
            bytes
        } else {
            round_up(bytes, platform.min_memory_unit, name)?
        };
        Ok(Self {
            name: name.to_string(),
            kind: TensorKind::Featuremap(ty),
            source: InputSource::Ddr,
            no_padding,
            valid_shape: ivec(valid_shape, name)?,
            aligned_shape: ivec(&aligned, name)?,
            stride: ivec(&stride, name)?,
            aligned_byte_size: to_i64(bytes, name)?,
            stride_align: platform.featuremap_align_elems,
            platform: platform.name.clone(),
            quant: None,
        })
    }

    /// Descriptor of one image plane of valid shape `[N, H, W, C]`. Dynamic
    /// sources give `-1` strides (and, for `resizer`, `-1` H and W).
    pub fn image(
        name: &str,
        format: ImageFormat,
        valid_shape: &[u64],
        source: InputSource,
        platform: &Platform,
        no_padding: bool,
    ) -> Result<Self, PlatformError> {
        let c = format.channels();
        if valid_shape.len() != 4 || valid_shape[3] != c {
            return Err(PlatformError::BadShape {
                tensor: name.to_string(),
                shape: valid_shape.iter().map(|&d| d as i64).collect(),
                reason: format!("{format:?} needs [N, H, W, {c}]"),
            });
        }
        let align = if no_padding {
            1
        } else {
            platform.image_stride_align.max(1)
        };
        let mut d = Self {
            name: name.to_string(),
            kind: TensorKind::Image(format),
            source,
            no_padding,
            valid_shape: ivec(valid_shape, name)?,
            aligned_shape: vec![-1; 4],
            stride: vec![-1, -1, to_i64(c, name)?, 1],
            aligned_byte_size: -1,
            stride_align: align,
            platform: platform.name.clone(),
            quant: None,
        };
        match source {
            InputSource::Ddr => d = d.resolve(valid_shape)?,
            InputSource::Pyramid => {
                d.aligned_shape = vec![d.valid_shape[0], d.valid_shape[1], -1, d.valid_shape[3]]
            }
            InputSource::Resizer => {
                d.valid_shape = vec![d.valid_shape[0], -1, -1, d.valid_shape[3]];
                d.aligned_shape = d.valid_shape.clone();
            }
        }
        Ok(d)
    }

    /// NV12 input of `n` images `h`x`w` as separate Y and UV planes
    /// (vt.md: "NV12 on S100/S600 = separate y and uv inputs"). H and W must be even.
    pub fn nv12(
        name: &str,
        n: u64,
        h: u64,
        w: u64,
        source: InputSource,
        platform: &Platform,
        no_padding: bool,
    ) -> Result<(Self, Self), PlatformError> {
        if !h.is_multiple_of(2) || !w.is_multiple_of(2) {
            return Err(PlatformError::OddNv12 {
                tensor: name.to_string(),
                height: h,
                width: w,
            });
        }
        let y = Self::image(
            &format!("{name}_y"),
            ImageFormat::Nv12Y,
            &[n, h, w, 1],
            source,
            platform,
            no_padding,
        )?;
        let uv = Self::image(
            &format!("{name}_uv"),
            ImageFormat::Nv12Uv,
            &[n, h / 2, w / 2, 2],
            source,
            platform,
            no_padding,
        )?;
        Ok((y, uv))
    }

    /// The same descriptor with quantization info attached.
    pub fn with_quant(mut self, quant: QuantInfo) -> Self {
        self.quant = Some(quant);
        self
    }

    /// Whether any stride or the byte size is still dynamic.
    pub fn is_dynamic(&self) -> bool {
        self.aligned_byte_size < 0
            || self.stride.iter().any(|&s| s < 0)
            || self.valid_shape.iter().any(|&d| d < 0)
    }

    /// Fills dynamic entries from the actual shape: `stride[i] = ALIGN(stride[i+1]*dim[i+1])`
    /// for every `-1` stride, `alignedByteSize = stride[0]*dim[0]` (vt.md §Runtime tensor
    /// descriptor). Static entries must agree with `actual`.
    pub fn resolve(&self, actual: &[u64]) -> Result<Self, PlatformError> {
        let name = &self.name;
        let bad = |reason: String| PlatformError::BadShape {
            tensor: name.clone(),
            shape: actual.iter().map(|&d| d as i64).collect(),
            reason,
        };
        if self.stride.len() != self.valid_shape.len()
            || self.aligned_shape.len() != self.valid_shape.len()
        {
            return Err(bad(format!(
                "descriptor stride {:?} and valid shape {:?} differ in rank",
                self.stride, self.valid_shape
            )));
        }
        if actual.len() != self.valid_shape.len() {
            return Err(bad(format!(
                "rank differs from valid shape {:?}",
                self.valid_shape
            )));
        }
        for (&v, &a) in self.valid_shape.iter().zip(actual) {
            if v >= 0 && v as u64 != a {
                return Err(bad(format!(
                    "does not match valid shape {:?}",
                    self.valid_shape
                )));
            }
        }
        if !self.is_dynamic() {
            return Ok(self.clone());
        }
        let r = actual.len();
        let mut stride = vec![0u64; r];
        for i in (0..r).rev() {
            stride[i] = if self.stride[i] >= 0 {
                self.stride[i] as u64
            } else if i + 1 == r {
                self.kind.elem_size()
            } else {
                let raw = stride[i + 1]
                    .checked_mul(actual[i + 1])
                    .ok_or_else(|| ovf(name))?;
                round_up(raw, self.stride_align, name)?
            };
        }
        let bytes = match (stride.first(), actual.first()) {
            (Some(&s), Some(&d)) => s.checked_mul(d).ok_or_else(|| ovf(name))?,
            _ => self.kind.elem_size(),
        };
        let mut aligned = actual.to_vec();
        if let (TensorKind::Image(f), true) = (self.kind, r == 4) {
            // Padded W = row stride / C bytes, rounded up when the row
            // alignment is not a multiple of C (RGB); H and N are unpadded.
            aligned[2] = stride[1].div_ceil(f.channels());
        }
        Ok(Self {
            valid_shape: ivec(actual, name)?,
            aligned_shape: ivec(&aligned, name)?,
            stride: ivec(&stride, name)?,
            aligned_byte_size: to_i64(bytes, name)?,
            ..self.clone()
        })
    }

    /// Bytes of the dense (unpadded) tensor; error while dynamic.
    pub fn dense_byte_size(&self) -> Result<u64, PlatformError> {
        if self.is_dynamic() {
            return Err(PlatformError::Unresolved {
                tensor: self.name.clone(),
            });
        }
        let shape: Vec<u64> = self.valid_shape.iter().map(|&d| d as u64).collect();
        total(&shape, self.kind.elem_size(), &self.name)
    }
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
