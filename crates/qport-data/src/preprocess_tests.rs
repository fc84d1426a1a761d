use super::apply::{center_crop, half_even, letterbox_geometry};
use super::*;
use crate::image::RgbImage;
use crate::image::{pad_right, resize_bicubic, resize_bilinear, to_chw};
use qport_core::Tensor;

/// A `w` x `h` image with varied pixel values.
fn pattern(w: usize, h: usize) -> RgbImage {
    let mut d = Vec::with_capacity(w * h * 3);
    for y in 0..h {
        for x in 0..w {
            d.push(((x * 7 + y * 3) % 256) as u8);
            d.push(((x * x + y * 11 + 5) % 256) as u8);
            d.push((255usize.wrapping_sub(x * 5 + y * 13) % 256) as u8);
        }
    }
    RgbImage::new(w, h, d).unwrap()
}

fn floats(t: &Tensor) -> &[f32] {
    t.as_slice::<f32>().unwrap()
}

#[test]
fn presets_give_their_shapes() {
    let img = pattern(500, 375);
    for (name, shape) in [
        ("imagenet", vec![1, 3, 224, 224]),
        ("effnet-lite", vec![1, 3, 224, 224]),
        ("ppocr", vec![1, 3, 48, 192]),
        ("yolo", vec![1, 3, 640, 640]),
    ] {
        let pp = Preprocess::from_preset(name).unwrap();
        assert_eq!(pp.target_shape(), Some(shape.clone()), "{name}");
        assert_eq!(pp.apply(&img).unwrap().shape(), &shape[..], "{name}");
    }
    let e = Preprocess::from_preset("resnet50").unwrap_err().to_string();
    assert!(
        e.contains("resnet50") && e.contains("imagenet, effnet-lite, ppocr, yolo"),
        "{e}"
    );
    assert_eq!(Preprocess::default().target_shape(), None);
}

#[test]
fn imagenet_is_resize_256_crop_224_normalise() {
    let img = pattern(500, 375);
    let pp = Preprocess::from_preset("imagenet").unwrap();
    // 500x375 -> shorter side 256 -> 341x256 (floor), then offsets
    // round((341 - 224) / 2) = round(58.5) = 58 (half to even), 16.
    let r = resize_bilinear(&img, 341, 256).unwrap();
    let cropped = center_crop(&r, 224, 224).unwrap();
    assert_eq!(cropped.pixel(0, 0), r.pixel(58, 16));
    let want = to_chw(&cropped, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]).unwrap();
    assert_eq!(floats(&pp.apply(&img).unwrap()), floats(&want));
}

#[test]
fn effnet_lite_resizes_bicubic_and_crops_87_5_percent() {
    let img = pattern(300, 400);
    let pp = Preprocess::from_preset("effnet-lite").unwrap();
    // round(224 / 0.875) = 256 on the shorter side: 256x341, crop 224.
    let r = resize_bicubic(&img, 256, 341).unwrap();
    let c = center_crop(&r, 224, 224).unwrap();
    let got = pp.apply(&img).unwrap();
    let v = floats(&got);
    let px = c.pixel(5, 7);
    for ch in 0..3 {
        let want = (px[ch] as f32 - 127.0) / 128.0;
        assert_eq!(v[(ch * 224 + 7) * 224 + 5], want);
    }
}

#[test]
fn ppocr_matches_the_demo_pipeline() {
    let pp = Preprocess::from_preset("ppocr").unwrap();
    for (w, h) in [(83, 20), (40, 48), (1000, 30), (10, 90)] {
        let img = pattern(w, h);
        let rw = (48 * w).div_ceil(h).clamp(1, 192);
        let r = resize_bilinear(&img, rw, 48).unwrap();
        let want = pad_right(&to_chw(&r, [0.5; 3], [0.5; 3]).unwrap(), 192).unwrap();
        let got = pp.apply(&img).unwrap();
        assert_eq!(got.shape(), &[1, 3, 48, 192]);
        assert_eq!(floats(&got), floats(&want), "{w}x{h}");
    }
}

#[test]
fn bgr_swaps_channels_and_nhwc_interleaves() {
    let img = RgbImage::new(2, 1, vec![10, 20, 30, 40, 50, 60]).unwrap();
    let base = Preprocess::default().with_override("scale=1").unwrap();
    let rgb = base.apply(&img).unwrap();
    assert_eq!(rgb.shape(), &[1, 3, 1, 2]);
    assert_eq!(floats(&rgb), &[10.0, 40.0, 20.0, 50.0, 30.0, 60.0]);
    let bgr = base.clone().with_override("color=bgr").unwrap();
    assert_eq!(
        floats(&bgr.apply(&img).unwrap()),
        &[30.0, 60.0, 20.0, 50.0, 10.0, 40.0]
    );
    let nhwc = base.clone().with_override("layout=nhwc").unwrap();
    let t = nhwc.apply(&img).unwrap();
    assert_eq!(t.shape(), &[1, 1, 2, 3]);
    assert_eq!(floats(&t), &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let both = nhwc
        .with_overrides(["color=BGR", "sub=10,20,30", "div=2"])
        .unwrap();
    assert_eq!(
        floats(&both.apply(&img).unwrap()),
        &[10.0, 0.0, -10.0, 25.0, 15.0, 5.0]
    );
}

#[test]
fn toml_preset_plus_overrides() {
    let text = r#"
        preset = "imagenet"
        resize = 288
        crop = "256x240"
        interpolation = "bicubic"
        mean = [0.5, 0.5, 0.5]
        std = 0.25
        layout = "nhwc"
    "#;
    let pp = Preprocess::from_toml_str(text, "spec.toml").unwrap();
    assert_eq!(pp.resize, Resize::Shorter(288));
    assert_eq!(
        pp.crop,
        Crop::Center {
            width: 256,
            height: 240
        }
    );
    assert_eq!(pp.interpolation, Filter::Bicubic);
    assert_eq!(pp.mean, Channels([0.5; 3]));
    assert_eq!(pp.std, Channels([0.25; 3]));
    assert_eq!(pp.scale, 255.0);
    assert_eq!(pp.target_shape(), Some(vec![1, 240, 256, 3]));
    let e = Preprocess::from_toml_str("sub = 127\ndiv = 128\n", "x.toml").unwrap();
    assert_eq!(
        (e.scale, e.mean, e.std),
        (1.0, Channels([127.0; 3]), Channels([128.0; 3]))
    );
}

#[test]
fn toml_errors_name_the_file_and_key() {
    let err = |text: &str| {
        Preprocess::from_toml_str(text, "spec.toml")
            .unwrap_err()
            .to_string()
    };
    let e = err("preset = \"imagenet\"\nsize = 3\n");
    assert!(e.contains("spec.toml") && e.contains("'size'"), "{e}");
    assert!(e.contains("valid keys: preset, resize"), "{e}");
    let e = err("preset = \"vgg\"\n");
    assert!(
        e.contains("spec.toml") && e.contains("valid presets"),
        "{e}"
    );
    let e = err("resize = \"big\"\n");
    assert!(
        e.contains("'resize'") && e.contains("big") && e.contains("WxH"),
        "{e}"
    );
    let e = err("crop = \"1.5:224\"\n");
    assert!(e.contains("outside (0, 1]"), "{e}");
    let e = err("mean = [1, 2]\n");
    assert!(e.contains("1 or 3 values"), "{e}");
    let e = err("std = 0\n");
    assert!(e.contains("std must be finite and non-zero"), "{e}");
    let e = err("sub = 1\nmean = 2\n");
    assert!(e.contains("conflict"), "{e}");
    let e = err("preset = \"effnet-lite\"\nresize = 300\n");
    assert!(e.contains("resize must be none"), "{e}");
    let e = err("color = true\n");
    assert!(e.contains("found boolean"), "{e}");
    let e = err("resize = \n");
    assert!(e.contains("not valid TOML"), "{e}");
}

#[test]
fn toml_file_round_trip_and_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pp.toml");
    std::fs::write(&p, "preset = \"ppocr\"\ncolor = \"bgr\"\n").unwrap();
    let pp = Preprocess::from_toml_file(&p).unwrap();
    assert_eq!(pp.color, ColorOrder::Bgr);
    assert_eq!(pp.pad, Pad::Right(192));
    let e = Preprocess::from_toml_file(&dir.path().join("nope.toml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope.toml"), "{e}");
}

#[test]
fn overrides_parse_and_report_errors() {
    let pp = Preprocess::from_preset("imagenet")
        .unwrap()
        .with_overrides(["resize=320x240", "crop=none", "pad=right:400"])
        .unwrap();
    assert_eq!(pp.target_shape(), Some(vec![1, 3, 240, 400]));
    // (override, every piece the error must name)
    let bad: [(&str, &[&str]); 4] = [
        ("colour=bgr", &["colour=bgr", "valid keys"]),
        ("bgr", &["expected key=value"]),
        ("layout=chw", &["nchw, nhwc"]),
        ("pad=right:100", &["narrower width 100"]),
    ];
    for (o, want) in bad {
        let e = pp.clone().with_override(o).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{o}: {e}");
        }
    }
    // preset= resets; the order of the others does not matter.
    let a = pp
        .clone()
        .with_overrides(["preset=effnet-lite", "crop=224", "resize=256"])
        .unwrap();
    assert_eq!(a.resize, Resize::Shorter(256));
    assert_eq!(a.interpolation, Filter::Bicubic);
    let mut b = Preprocess::default();
    b.set("resize", "height:32").unwrap();
    assert_eq!(
        b.resize,
        Resize::Height {
            height: 32,
            max_width: None
        }
    );
    assert!(b.set("resize", "height:32,max:3").is_err());
    assert!(b.set("crop", "87.5%:0").is_err());
    b.set("crop", "87.5%:200x100").unwrap();
    assert!(
        matches!(b.crop, Crop::Fraction { fraction, width: 200, height: 100 } if fraction == 0.875)
    );
}

#[test]
fn display_and_serde_round_trip() {
    for name in PRESETS {
        let pp = Preprocess::from_preset(name).unwrap();
        let text = pp.to_string();
        let back = Preprocess::default()
            .with_overrides(text.split(' '))
            .unwrap();
        assert_eq!(back, pp, "{text}");
        let toml_text = toml::to_string(&pp).unwrap();
        let back: Preprocess = toml::from_str(&toml_text).unwrap();
        assert_eq!(back, pp, "{toml_text}");
        let again = Preprocess::from_toml_str(&toml_text, "x").unwrap();
        assert_eq!(again, pp, "{toml_text}");
    }
    assert!(toml::from_str::<Preprocess>("colour = \"rgb\"").is_err());
    let partial: Preprocess = toml::from_str("crop = 224").unwrap();
    assert_eq!(partial.resize, Resize::None);
}

#[test]
fn crop_offsets_round_half_to_even() {
    assert_eq!([0, 1, 2, 3, 33, 35].map(half_even), [0, 0, 1, 2, 16, 18]);
    let img = pattern(9, 4);
    let c = center_crop(&img, 4, 4).unwrap(); // (9-4)/2 = 2.5 -> 2
    assert_eq!(c.pixel(0, 0), img.pixel(2, 0));
    let e = center_crop(&img, 10, 4).unwrap_err().to_string();
    assert!(e.contains("9x4") && e.contains("10x4"), "{e}");
}

#[test]
fn dynamic_sizes_and_errors() {
    let pp = Preprocess::default().with_override("resize=64").unwrap();
    assert_eq!(pp.target_shape(), None);
    assert_eq!(
        pp.apply(&pattern(100, 50)).unwrap().shape(),
        &[1, 3, 64, 128]
    );
    assert_eq!(
        pp.apply(&pattern(50, 101)).unwrap().shape(),
        &[1, 3, 129, 64]
    );
    let crop = Preprocess::default().with_override("crop=64").unwrap();
    let e = crop.apply(&pattern(32, 32)).unwrap_err().to_string();
    assert!(e.contains("smaller than the 64x64 crop"), "{e}");
    assert!(crop.apply(&RgbImage::new(0, 0, vec![]).unwrap()).is_err());
    let pad = Preprocess::default().with_override("pad=right:10").unwrap();
    assert_eq!(pad.apply(&pattern(8, 2)).unwrap().shape(), &[1, 3, 2, 10]);
    assert!(pad.apply(&pattern(11, 2)).is_err());
    let bad = Preprocess {
        scale: 0.0,
        ..Preprocess::default()
    };
    assert!(bad.apply(&pattern(2, 2)).is_err());
}

/// 114 / 255, the normalised letterbox grey.
const GREY: f32 = 114.0 / 255.0;

/// Channel `c`, row `y` of an NCHW `[1, 3, h, w]` tensor.
fn row(v: &[f32], c: usize, y: usize, h: usize, w: usize) -> &[f32] {
    &v[(c * h + y) * w..(c * h + y + 1) * w]
}

#[test]
fn letterbox_geometry_matches_the_ultralytics_formula() {
    // Ultralytics' LetterBox, written out as it computes it: float division,
    // Python's round (ties to even) on the scaled size, then
    // round(d / 2 - 0.1) padding before. `None` where a side rounds to 0
    // pixels, which OpenCV cannot resize to (qport keeps 1, below).
    let ultralytics = |w: usize, h: usize, bw: usize, bh: usize| {
        let r = (bh as f64 / h as f64).min(bw as f64 / w as f64);
        let nw = (w as f64 * r).round_ties_even() as usize;
        let nh = (h as f64 * r).round_ties_even() as usize;
        if nw == 0 || nh == 0 {
            return None;
        }
        let dw = (bw - nw) as f64 / 2.0;
        let dh = (bh - nh) as f64 / 2.0;
        let (left, right) = ((dw - 0.1).round_ties_even(), (dw + 0.1).round_ties_even());
        let (top, bottom) = ((dh - 0.1).round_ties_even(), (dh + 0.1).round_ties_even());
        assert_eq!(left + right, (bw - nw) as f64);
        assert_eq!(top + bottom, (bh - nh) as f64);
        Some((nw, nh, left as usize, top as usize))
    };
    let mut compared = 0;
    for (bw, bh) in [(640, 640), (320, 256), (7, 5)] {
        for w in (1..700).step_by(37) {
            for h in (1..700).step_by(41) {
                if let Some(want) = ultralytics(w, h, bw, bh) {
                    assert_eq!(
                        letterbox_geometry(w, h, bw, bh),
                        want,
                        "{w}x{h} in {bw}x{bh}"
                    );
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 800, "{compared}");
    // By hand: 500x375 -> r = 640/500 = 1.28 -> 640x480, 160 rows of
    // padding, 80 above. 5x2 in 10x1: r = 0.5, 2.5 rounds to 2 (half to
    // even), 8 columns of padding, 4 left; 7x2: 3.5 -> 4, 3 left.
    assert_eq!(letterbox_geometry(500, 375, 640, 640), (640, 480, 0, 80));
    assert_eq!(letterbox_geometry(5, 2, 10, 1), (2, 1, 4, 0));
    assert_eq!(letterbox_geometry(7, 2, 10, 1), (4, 1, 3, 0));
    // Odd padding: 1 before, 2 after (round(1.4), round(1.6)).
    assert_eq!(letterbox_geometry(6, 3, 6, 6), (6, 3, 0, 1));
    // A sliver keeps at least one pixel.
    assert_eq!(letterbox_geometry(1, 5000, 640, 640), (1, 640, 319, 0));
}

#[test]
fn yolo_letterbox_places_the_image_and_pads_with_114() {
    // 6x3 into 6x6 needs no resampling (r = 1): 3 rows of padding, 1
    // above and 2 below, every other pixel copied and divided by 255.
    let img = pattern(6, 3);
    let pp = Preprocess::from_preset("yolo")
        .unwrap()
        .with_override("resize=letterbox:6")
        .unwrap();
    assert_eq!(pp.target_shape(), Some(vec![1, 3, 6, 6]));
    let t = pp.apply(&img).unwrap();
    assert_eq!(t.shape(), &[1, 3, 6, 6]);
    let v = floats(&t);
    for c in 0..3 {
        for y in [0, 4, 5] {
            assert_eq!(row(v, c, y, 6, 6), &[GREY; 6], "channel {c} row {y}");
        }
        for y in 0..3 {
            for x in 0..6 {
                let want = img.pixel(x, y)[c] as f32 / 255.0;
                assert_eq!(v[(c * 6 + y + 1) * 6 + x], want, "{c} {x} {y}");
            }
        }
    }
    // 3x5 into 6x5 (r = 1): columns 0 and 4, 5 are padding.
    let tall = pattern(3, 5);
    let pp = pp.with_override("resize=letterbox:6x5").unwrap();
    let v = pp.apply(&tall).unwrap().as_slice::<f32>().unwrap().to_vec();
    for y in 0..5 {
        let r = row(&v, 1, y, 5, 6);
        assert_eq!([r[0], r[4], r[5]], [GREY; 3], "row {y}");
        for x in 0..3 {
            assert_eq!(r[x + 1], tall.pixel(x, y)[1] as f32 / 255.0);
        }
    }
}

#[test]
fn yolo_keeps_the_aspect_ratio_at_640() {
    // A flat 200x100 image: r = 3.2 -> 640x320, 160 rows above and below.
    // A constant image stays constant under the resize, so the content
    // rows hold exactly 50 / 255 and the rest 114 / 255.
    let img = RgbImage::new(200, 100, vec![50; 200 * 100 * 3]).unwrap();
    let t = Preprocess::from_preset("yolo")
        .unwrap()
        .apply(&img)
        .unwrap();
    assert_eq!(t.shape(), &[1, 3, 640, 640]);
    let v = floats(&t);
    let content = 50.0f32 / 255.0;
    for c in 0..3 {
        for y in 0..640 {
            let want = if (160..480).contains(&y) {
                content
            } else {
                GREY
            };
            assert!(row(v, c, y, 640, 640).iter().all(|&p| p == want), "{c} {y}");
        }
    }
    // A varied 500x375 image: the 640x480 bilinear resize, 80 rows down.
    let img = pattern(500, 375);
    let t = Preprocess::from_preset("yolo")
        .unwrap()
        .apply(&img)
        .unwrap();
    let v = floats(&t);
    let inner = resize_bilinear(&img, 640, 480).unwrap();
    for (x, y) in [(0, 0), (639, 0), (17, 240), (639, 479)] {
        assert_eq!(
            v[(2 * 640 + y + 80) * 640 + x],
            inner.pixel(x, y)[2] as f32 / 255.0
        );
    }
    assert_eq!(row(v, 0, 79, 640, 640), &[GREY; 640][..]);
    assert_eq!(row(v, 0, 560, 640, 640), &[GREY; 640][..]);
}

#[test]
fn letterbox_toml_overrides_and_errors() {
    let pp = Preprocess::from_toml_str(
        "preset = \"yolo\"\nresize = \"letterbox:320x256\"\n",
        "yolo.toml",
    )
    .unwrap();
    assert_eq!(
        pp.resize,
        Resize::Letterbox {
            width: 320,
            height: 256,
            fill: 114
        }
    );
    assert_eq!(pp.target_shape(), Some(vec![1, 3, 256, 320]));
    assert_eq!(
        pp.apply(&pattern(50, 40)).unwrap().shape(),
        &[1, 3, 256, 320]
    );
    let text = pp.to_string();
    assert!(text.contains("resize=letterbox:320x256,fill:114"), "{text}");
    let back = Preprocess::default()
        .with_overrides(text.split(' '))
        .unwrap();
    assert_eq!(back, pp);
    // fill: a 1x1 black image in a 1x3 box sits in the middle row.
    let black = RgbImage::new(1, 1, vec![0; 3]).unwrap();
    let zero = Preprocess::default()
        .with_overrides(["resize=letterbox:1x3,fill:0", "scale=1"])
        .unwrap();
    assert_eq!(floats(&zero.apply(&black).unwrap()), &[0.0; 9]);
    let fill = zero.with_override("resize=LetterBox:1x3, fill:7").unwrap();
    assert_eq!(
        floats(&fill.apply(&black).unwrap()),
        &[7.0, 0.0, 7.0, 7.0, 0.0, 7.0, 7.0, 0.0, 7.0]
    );
    for (bad, want) in [
        ("resize=letterbox:640,fill:300", "fill '300'"),
        ("resize=letterbox:640,pad:3", "'pad:3' is not fill:V"),
        ("resize=letterbox:0", "out of range"),
        ("resize=letterbox:", "letterbox:N|WxH"),
    ] {
        let e = Preprocess::default()
            .with_override(bad)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
    let e = Preprocess::from_toml_str("preset = \"yolo\"\npad = \"right:600\"\n", "y.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("narrower width 600"), "{e}");
}
