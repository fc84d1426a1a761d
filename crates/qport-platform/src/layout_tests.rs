//! Documented examples and hand-checked descriptors.

use super::*;
use crate::Registry;

fn plat(n: &str) -> Platform {
    Registry::builtin().get(n).unwrap().clone()
}

/// [`TensorDescriptor::image`] from DDR, with padding, on platform `p`.
fn ddr_image(
    name: &str,
    format: ImageFormat,
    shape: &[u64],
    p: &str,
) -> Result<TensorDescriptor, PlatformError> {
    TensorDescriptor::image(name, format, shape, InputSource::Ddr, &plat(p), false)
}

#[test]
fn documented_u16_featuremap_example_on_every_nash_platform() {
    // vt.md §Runtime tensor descriptor: U16 [1,3,212,212] -> [301056,100352,448,2].
    for n in ["j6e", "j6m", "j6b", "j6h", "j6p", "s6p"] {
        let d =
            TensorDescriptor::featuremap("x", TensorType::U16, &[1, 3, 212, 212], &plat(n), false)
                .unwrap();
        assert_eq!(d.stride, vec![301056, 100352, 448, 2], "{n}");
        assert_eq!(d.aligned_shape, vec![1, 3, 224, 224], "{n}");
        assert_eq!(d.aligned_byte_size, 301056, "{n}");
        assert_eq!(d.valid_shape, vec![1, 3, 212, 212]);
    }
}

#[test]
fn documented_nv12_example_on_32_byte_platforms() {
    // vt.md: S100 Y 220x220 -> [49280,224,1,1], UV [24640,224,2,1]; align 32.
    for n in ["j6e", "j6m", "j6b"] {
        for src in [InputSource::Ddr, InputSource::Pyramid, InputSource::Resizer] {
            let (y, uv) = TensorDescriptor::nv12("img", 1, 220, 220, src, &plat(n), false).unwrap();
            let (y, uv) = (
                y.resolve(&[1, 220, 220, 1]).unwrap(),
                uv.resolve(&[1, 110, 110, 2]).unwrap(),
            );
            assert_eq!(y.stride, vec![49280, 224, 1, 1], "{n} {src:?}");
            assert_eq!(uv.stride, vec![24640, 224, 2, 1], "{n} {src:?}");
            assert_eq!(y.aligned_shape, vec![1, 220, 224, 1]);
            assert_eq!(uv.aligned_shape, vec![1, 110, 112, 2]);
            assert_eq!((y.aligned_byte_size, uv.aligned_byte_size), (49280, 24640));
        }
    }
}

#[test]
fn nv12_on_64_byte_platforms() {
    // Row 220 -> 256 with 64-byte alignment (seed §stride: 64 B on J6H/P/S6P).
    for n in ["j6h", "j6p", "s6p"] {
        let (y, uv) =
            TensorDescriptor::nv12("img", 1, 220, 220, InputSource::Ddr, &plat(n), false).unwrap();
        assert_eq!(y.stride, vec![56320, 256, 1, 1], "{n}");
        assert_eq!(uv.stride, vec![28160, 256, 2, 1], "{n}");
        assert_eq!((y.aligned_byte_size, uv.aligned_byte_size), (56320, 28160));
    }
}

#[test]
fn dynamic_sources_carry_minus_one() {
    let p = plat("j6p");
    let (y, uv) =
        TensorDescriptor::nv12("img", 1, 220, 220, InputSource::Pyramid, &p, false).unwrap();
    // vt.md: separate y and uv inputs with strides [-1,-1,1,1] and [-1,-1,2,1].
    assert_eq!(y.stride, vec![-1, -1, 1, 1]);
    assert_eq!(uv.stride, vec![-1, -1, 2, 1]);
    assert_eq!(y.aligned_byte_size, -1);
    assert_eq!(y.valid_shape, vec![1, 220, 220, 1]);
    assert!(y.is_dynamic());
    let (y, _) =
        TensorDescriptor::nv12("img", 1, 220, 220, InputSource::Resizer, &p, false).unwrap();
    assert_eq!(y.valid_shape, vec![1, -1, -1, 1]);
    // Resolved from another actual size: 100x64 -> row 64, stride[0] 6400.
    let r = y.resolve(&[1, 100, 64, 1]).unwrap();
    assert_eq!(
        (r.stride.clone(), r.aligned_byte_size),
        (vec![6400, 64, 1, 1], 6400)
    );
    assert!(!r.is_dynamic());
    // Static entries must agree: batch and channels are fixed.
    assert!(matches!(
        y.resolve(&[2, 100, 64, 1]),
        Err(PlatformError::BadShape { .. })
    ));
    assert!(matches!(
        y.resolve(&[1, 100, 64]),
        Err(PlatformError::BadShape { .. })
    ));
}

#[test]
fn odd_nv12_is_an_error_naming_the_tensor() {
    let e = TensorDescriptor::nv12("cam0", 1, 221, 220, InputSource::Ddr, &plat("j6e"), false)
        .unwrap_err();
    assert_eq!(
        e,
        PlatformError::OddNv12 {
            tensor: "cam0".into(),
            height: 221,
            width: 220
        }
    );
    assert!(e.to_string().contains("cam0"));
    assert!(
        TensorDescriptor::nv12("cam0", 1, 220, 3, InputSource::Ddr, &plat("j6e"), false).is_err()
    );
}

#[test]
fn other_image_types_hand_checked() {
    // RGB NHWC 100x100 on j6b: row 300 -> 320 (32 B), stride[0] 32000.
    let d = ddr_image("rgb", ImageFormat::Rgb, &[1, 100, 100, 3], "j6b").unwrap();
    assert_eq!(d.stride, vec![32000, 320, 3, 1]);
    assert_eq!(d.aligned_shape, vec![1, 100, 107, 3]);
    assert_eq!(d.aligned_byte_size, 32000);
    // BGR / YUV444 on j6h: row 300 -> 320 (64 B).
    for f in [ImageFormat::Bgr, ImageFormat::Yuv444] {
        let d = ddr_image("i", f, &[2, 10, 100, 3], "j6h").unwrap();
        assert_eq!(d.stride, vec![3200, 320, 3, 1]);
        assert_eq!(d.aligned_byte_size, 6400);
    }
    // Gray (Y) may have odd sizes: 7x33 on j6m -> row 64.
    let d = ddr_image("g", ImageFormat::Y, &[1, 7, 33, 1], "j6m").unwrap();
    assert_eq!(d.stride, vec![448, 64, 1, 1]);
    // Wrong channel count or rank.
    let e = ddr_image("g", ImageFormat::Rgb, &[1, 7, 33, 1], "j6m");
    assert!(matches!(e, Err(PlatformError::BadShape { .. })));
    let e = ddr_image("g", ImageFormat::Y, &[7, 33], "j6m");
    assert!(matches!(e, Err(PlatformError::BadShape { .. })));
}

#[test]
fn featuremaps_round_to_the_memory_unit() {
    // S8 [1,1]: the batch axis is not padded, C to 16 -> 16 B, then rounded
    // up to the platform's minimum memory unit.
    for (n, unit) in [("j6e", 64), ("j6b", 128), ("j6p", 256)] {
        let d =
            TensorDescriptor::featuremap("t", TensorType::S8, &[1, 1], &plat(n), false).unwrap();
        assert_eq!(
            (
                d.aligned_shape.clone(),
                d.stride.clone(),
                d.aligned_byte_size
            ),
            (vec![1, 16], vec![16, 1], unit),
            "{n}"
        );
    }
}

#[test]
fn no_padding_and_hosts_are_dense() {
    for n in ["j6e", "j6p", "x86-avx2", "arm-neon", "gpu", "pcie-npu"] {
        let d = TensorDescriptor::featuremap(
            "x",
            TensorType::U16,
            &[1, 3, 212, 212],
            &plat(n),
            n.starts_with('j'),
        )
        .unwrap();
        assert_eq!(d.stride, vec![269664, 89888, 424, 2], "{n}");
        assert_eq!(d.aligned_shape, d.valid_shape);
        assert_eq!(d.aligned_byte_size, 269664);
    }
    let (y, _) =
        TensorDescriptor::nv12("i", 1, 220, 220, InputSource::Ddr, &plat("j6p"), true).unwrap();
    assert_eq!(y.stride, vec![48400, 220, 1, 1]);
}

#[test]
fn dtype_mapping() {
    assert_eq!(
        TensorType::from_dtype(qport_core::DType::U16),
        Some(TensorType::U16)
    );
    assert_eq!(
        TensorType::from_dtype(qport_core::DType::I32),
        Some(TensorType::S32)
    );
    assert_eq!(TensorType::from_dtype(qport_core::DType::Str), None);
}

#[test]
fn overflow_is_an_error_not_a_panic() {
    let e = TensorDescriptor::featuremap(
        "big",
        TensorType::F64,
        &[u64::MAX / 2, 4, 4],
        &plat("j6p"),
        false,
    );
    assert!(matches!(e, Err(PlatformError::Overflow { .. })));
}

#[test]
fn every_platform_image_type_and_source_hand_checked() {
    // One 4x10 image (NV12: 2x5 UV). Row bytes: Y/gray 10, UV 10, 3-channel 30;
    // aligned to 32 B (J6E/M/B), 64 B (J6H/P/S6P), 1 (hosts: dense).
    let r = Registry::builtin();
    for p in &r.platforms {
        let align = p.image_stride_align;
        let row = |bytes: i64| {
            if align == 1 {
                bytes
            } else {
                ((bytes + align as i64 - 1) / align as i64) * align as i64
            }
        };
        let expect_align = match p.name.as_str() {
            "j6e" | "j6m" | "j6b" => 32,
            "j6h" | "j6p" | "s6p" => 64,
            _ => 1,
        };
        assert_eq!(align, expect_align, "{}", p.name);
        let cases: [(ImageFormat, [u64; 4], i64); 6] = [
            (ImageFormat::Nv12Y, [1, 4, 10, 1], 10),
            (ImageFormat::Nv12Uv, [1, 2, 5, 2], 10),
            (ImageFormat::Y, [1, 4, 10, 1], 10),
            (ImageFormat::Rgb, [1, 4, 10, 3], 30),
            (ImageFormat::Bgr, [1, 4, 10, 3], 30),
            (ImageFormat::Yuv444, [1, 4, 10, 3], 30),
        ];
        for (f, shape, row_bytes) in cases {
            let c = shape[3] as i64;
            let want = vec![row(row_bytes) * shape[1] as i64, row(row_bytes), c, 1];
            for src in [InputSource::Ddr, InputSource::Pyramid, InputSource::Resizer] {
                let d = TensorDescriptor::image("i", f, &shape, src, p, false).unwrap();
                if src == InputSource::Ddr {
                    assert!(!d.is_dynamic());
                } else {
                    assert_eq!(
                        (d.stride.clone(), d.aligned_byte_size),
                        (vec![-1, -1, c, 1], -1)
                    );
                }
                let d = d.resolve(&shape).unwrap();
                assert_eq!(d.stride, want, "{} {f:?} {src:?}", p.name);
                assert_eq!(d.aligned_byte_size, want[0], "{} {f:?} {src:?}", p.name);
            }
        }
    }
}

#[test]
fn malformed_descriptor_is_an_error_not_a_panic() {
    let (y, _) =
        TensorDescriptor::nv12("in", 1, 4, 4, InputSource::Pyramid, &plat("j6p"), false).unwrap();
    let mut bad = y.clone();
    bad.stride = vec![-1, 1];
    assert!(matches!(
        bad.resolve(&[1, 4, 4, 1]),
        Err(PlatformError::BadShape { .. })
    ));
}
