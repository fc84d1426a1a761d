use super::*;

fn encode_png(
    w: u32,
    h: u32,
    color: png::ColorType,
    depth: png::BitDepth,
    data: &[u8],
    palette: Option<(&[u8], Option<&[u8]>)>,
) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(color);
        enc.set_depth(depth);
        if let Some((pal, trns)) = palette {
            enc.set_palette(pal.to_vec());
            if let Some(t) = trns {
                enc.set_trns(t.to_vec());
            }
        }
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(data).unwrap();
    }
    out
}

fn name() -> &'static Path {
    Path::new("test.png")
}

#[test]
fn decodes_every_color_type_to_rgb8() {
    use png::{BitDepth as D, ColorType as C};
    let rgb = encode_png(2, 1, C::Rgb, D::Eight, &[1, 2, 3, 4, 5, 6], None);
    assert_eq!(
        decode_png(&rgb, name()).unwrap().as_bytes(),
        &[1, 2, 3, 4, 5, 6]
    );
    let gray = encode_png(2, 1, C::Grayscale, D::Eight, &[10, 200], None);
    assert_eq!(
        decode_png(&gray, name()).unwrap().as_bytes(),
        &[10, 10, 10, 200, 200, 200]
    );
    let ga = encode_png(1, 1, C::GrayscaleAlpha, D::Eight, &[77, 0], None);
    assert_eq!(decode_png(&ga, name()).unwrap().as_bytes(), &[77, 77, 77]);
    let rgba = encode_png(1, 2, C::Rgba, D::Eight, &[1, 2, 3, 0, 4, 5, 6, 255], None);
    let img = decode_png(&rgba, name()).unwrap();
    assert_eq!((img.width(), img.height()), (1, 2));
    assert_eq!(img.as_bytes(), &[1, 2, 3, 4, 5, 6]);
    let pal = [9, 8, 7, 100, 110, 120];
    let idx = encode_png(3, 1, C::Indexed, D::Eight, &[1, 0, 1], Some((&pal, None)));
    assert_eq!(
        decode_png(&idx, name()).unwrap().as_bytes(),
        &[100, 110, 120, 9, 8, 7, 100, 110, 120]
    );
    let idx_t = encode_png(1, 1, C::Indexed, D::Eight, &[0], Some((&pal, Some(&[0]))));
    assert_eq!(decode_png(&idx_t, name()).unwrap().as_bytes(), &[9, 8, 7]);
    // 16-bit keeps the high byte
    let g16 = encode_png(
        2,
        1,
        C::Grayscale,
        D::Sixteen,
        &[0x12, 0x34, 0xff, 0xff],
        None,
    );
    assert_eq!(
        decode_png(&g16, name()).unwrap().as_bytes(),
        &[0x12, 0x12, 0x12, 255, 255, 255]
    );
    // 1-bit gray expands to 0/255
    let g1 = encode_png(3, 1, C::Grayscale, D::One, &[0b1010_0000], None);
    assert_eq!(
        decode_png(&g1, name()).unwrap().as_bytes(),
        &[255, 255, 255, 0, 0, 0, 255, 255, 255]
    );
}

#[test]
fn bad_files_give_clear_errors() {
    let e = decode_png(b"", name()).unwrap_err().to_string();
    assert!(e.contains("test.png") && e.contains("empty"), "{e}");
    let e = decode_png(b"hello, I am text", name())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a PNG"), "{e}");
    let good = encode_png(
        4,
        4,
        png::ColorType::Rgb,
        png::BitDepth::Eight,
        &[7; 48],
        None,
    );
    for cut in [10, 30, good.len() - 14] {
        let e = decode_png(&good[..cut], name()).unwrap_err().to_string();
        assert!(
            e.contains("corrupt PNG") || e.contains("test.png"),
            "{cut}: {e}"
        );
    }
    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 20] ^= 0xff; // inside IDAT: CRC or zlib check fails
    assert!(decode_png(&flipped, name()).is_err());
    let e = load_png(Path::new("/no/such/dir/x.png"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/no/such/dir/x.png"), "{e}");
}

#[test]
fn decodes_bundled_demo_crop() {
    let bytes = include_bytes!("../../../assets/demo/line_00_0deg.png");
    let img = decode_png(bytes, Path::new("line_00_0deg.png")).unwrap();
    assert_eq!((img.width(), img.height()), (83, 20));
}

/// The 7x5 test pattern also produced in Python for `testdata/pil_bilinear.txt`.
fn pattern() -> RgbImage {
    let (w, h) = (7i32, 5i32);
    let mut d = vec![];
    for y in 0..h {
        for x in 0..w {
            d.push((x * 37 + y * 11).rem_euclid(256) as u8);
            d.push((x * x * 13 + y * 53 + 7).rem_euclid(256) as u8);
            d.push((255 - x * 29 - y * 31).rem_euclid(256) as u8);
        }
    }
    RgbImage::new(7, 5, d).unwrap()
}

/// Checks `resize` against lines `W H hex(np.asarray(im.resize((W, H), filter)))`
/// made with Pillow 13 from [`pattern`].
fn check_against_pillow(table: &str, resize: fn(&RgbImage, usize, usize) -> Result<RgbImage>) {
    let img = pattern();
    for line in table.lines() {
        let mut it = line.split(' ');
        let w: usize = it.next().unwrap().parse().unwrap();
        let h: usize = it.next().unwrap().parse().unwrap();
        let hex = it.next().unwrap();
        let want: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let got = resize(&img, w, h).unwrap();
        assert_eq!(got.as_bytes(), &want[..], "{w}x{h}");
    }
}

#[test]
fn resize_matches_pillow_exactly() {
    check_against_pillow(include_str!("testdata/pil_bilinear.txt"), resize_bilinear);
}

#[test]
fn resize_bicubic_matches_pillow_exactly() {
    check_against_pillow(include_str!("testdata/pil_bicubic.txt"), resize_bicubic);
}

#[test]
fn resize_identity_and_constant() {
    let img = pattern();
    assert_eq!(resize_bilinear(&img, 7, 5).unwrap(), img);
    let flat = RgbImage::new(3, 2, vec![42; 18]).unwrap();
    let r = resize_bilinear(&flat, 11, 7).unwrap();
    assert!(r.as_bytes().iter().all(|&v| v == 42));
    assert!(resize_bilinear(&img, 0, 3).is_err());
    assert!(resize_bilinear(&RgbImage::new(0, 0, vec![]).unwrap(), 3, 3).is_err());
}

#[test]
fn rotate180_reverses_pixels() {
    let img = pattern();
    let r = rotate180(&img);
    assert_eq!(r.pixel(0, 0), img.pixel(6, 4));
    assert_eq!(r.pixel(6, 4), img.pixel(0, 0));
    assert_eq!(r.pixel(2, 1), img.pixel(4, 3));
    assert_eq!(rotate180(&r), img);
}

#[test]
fn to_chw_normalises_per_channel() {
    let img = RgbImage::new(2, 1, vec![0, 255, 51, 255, 0, 102]).unwrap();
    let t = to_chw(&img, [0.5; 3], [0.5; 3]).unwrap();
    assert_eq!(t.shape(), &[3, 1, 2]);
    let v = t.as_slice::<f32>().unwrap();
    assert_eq!(v[0], -1.0);
    assert_eq!(v[1], 1.0);
    assert_eq!(v[2], 1.0);
    assert_eq!(v[3], -1.0);
    assert!((v[4] - (0.2f32 - 0.5) / 0.5).abs() < 1e-7);
    assert!(to_chw(&img, [0.0; 3], [1.0, 0.0, 1.0]).is_err());
}

#[test]
fn pad_right_zero_fills() {
    let t = Tensor::from_vec(vec![1, 2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let p = pad_right(&t, 3).unwrap();
    assert_eq!(p.shape(), &[1, 2, 3]);
    assert_eq!(
        p.as_slice::<f32>().unwrap(),
        &[1.0, 2.0, 0.0, 3.0, 4.0, 0.0]
    );
    assert!(pad_right(&t, 1).is_err());
    assert!(pad_right(&Tensor::scalar(1.0f32), 3).is_err());
}

#[test]
fn rgb_image_checks_length() {
    assert!(RgbImage::new(2, 2, vec![0; 11]).is_err());
    assert!(RgbImage::new(usize::MAX, 2, vec![]).is_err());
}
