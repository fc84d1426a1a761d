//! JPEG decoding to [`RgbImage`].
//!
//! Baseline, extended and progressive JPEG (and lossless grayscale) decode
//! through the `jpeg-decoder` crate; the result is converted to RGB8 the way
//! Pillow's `Image.open(p).convert("RGB")` does:
//!
//! - grayscale is replicated to three channels; 16-bit grayscale (lossless
//!   JPEG) keeps the high byte, as 16-bit PNGs do;
//! - YCbCr becomes RGB in the decoder;
//! - CMYK and YCCK follow Adobe's inverted polarity (as Pillow assumes for
//!   every four-channel JPEG) and become RGB with Pillow's formula
//!   `R = (255 - K) - round((255 - K) * C / 255)` (likewise G from M, B
//!   from Y).
//!
//! EXIF orientation is ignored, as `Image.open` ignores it. The inverse DCT
//! and chroma upsampling are not libjpeg's, so pixels may differ from
//! Pillow's by a few levels; everything after decoding (resize, crop,
//! normalisation) is exact.

use crate::error::Result;
use crate::image::{check_magic, image_error, RgbImage, MAX_PIXELS};
use jpeg_decoder::{Decoder, PixelFormat};
use std::io::Cursor;
use std::path::Path;

/// Decodes JPEG bytes to RGB8; `name` is used in error messages.
pub fn decode_jpeg(bytes: &[u8], name: &Path) -> Result<RgbImage> {
    let err = image_error(name);
    check_magic(
        bytes,
        "JPEG",
        &[0xff, 0xd8],
        "not a JPEG image (missing the FF D8 start marker)",
    )
    .map_err(&err)?;
    // A decoder bug must not take the process down on a hostile file: a
    // panic inside it becomes an error naming the file.
    let decoded = std::panic::catch_unwind(|| decode_raw(bytes))
        .map_err(|_| err("corrupt JPEG: the decoder failed on this file".into()))?
        .map_err(&err)?;
    let (w, h, format, pixels) = decoded;
    let n = w * h;
    let mut out = Vec::with_capacity(n * 3);
    match format {
        PixelFormat::L8 => {
            for &v in pixels.iter().take(n) {
                out.extend_from_slice(&[v, v, v]);
            }
        }
        PixelFormat::L16 => {
            for px in pixels.chunks_exact(2).take(n) {
                let v = (u16::from_ne_bytes([px[0], px[1]]) >> 8) as u8;
                out.extend_from_slice(&[v, v, v]);
            }
        }
        PixelFormat::RGB24 => out.extend_from_slice(pixels.get(..n * 3).unwrap_or(&[])),
        PixelFormat::CMYK32 => {
            for px in pixels.chunks_exact(4).take(n) {
                out.extend_from_slice(&cmyk_to_rgb([px[0], px[1], px[2], px[3]]));
            }
        }
    }
    if out.len() != n * 3 {
        return Err(err(format!(
            "corrupt JPEG: decoder returned {} bytes for a {w}x{h} {format:?} image",
            pixels.len()
        )));
    }
    RgbImage::new(w, h, out)
}

/// Runs the decoder: width, height, pixel format and the raw pixels.
fn decode_raw(bytes: &[u8]) -> std::result::Result<(usize, usize, PixelFormat, Vec<u8>), String> {
    let mut dec = Decoder::new(Cursor::new(bytes));
    dec.read_info().map_err(|e| describe(&e))?;
    let info = dec
        .info()
        .ok_or_else(|| "corrupt JPEG: no frame header".to_string())?;
    let (w, h) = (info.width as usize, info.height as usize);
    if w == 0 || h == 0 {
        return Err(format!("corrupt JPEG: empty {w}x{h} frame"));
    }
    if (w as u64) * (h as u64) > MAX_PIXELS {
        return Err(format!(
            "image of {w}x{h} pixels exceeds the limit of {MAX_PIXELS} pixels"
        ));
    }
    dec.set_max_decoding_buffer_size((MAX_PIXELS * 4) as usize);
    let pixels = dec.decode().map_err(|e| describe(&e))?;
    Ok((w, h, info.pixel_format, pixels))
}

/// A decoder error as a message; truncation is called out by name.
fn describe(e: &jpeg_decoder::Error) -> String {
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    if lower.contains("eof") || lower.contains("end of file") || lower.contains("unexpected end") {
        format!("truncated JPEG: {text}")
    } else {
        format!("corrupt JPEG: {text}")
    }
}

/// `a * b / 255` rounded to nearest, in integers (Pillow's `MULDIV255`).
fn muldiv255(a: u32, b: u32) -> u32 {
    let t = a * b + 128;
    ((t >> 8) + t) >> 8
}

/// Pillow's `cmyk2rgb` for one pixel of true (non-inverted) CMYK.
fn cmyk_to_rgb([c, m, y, k]: [u8; 4]) -> [u8; 3] {
    let nk = 255 - k as u32;
    let ch = |v: u8| (nk - muldiv255(v as u32, nk)) as u8;
    [ch(c), ch(m), ch(y)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::decode_image;

    const GRAY: &[u8] = include_bytes!("testdata/gray.jpg");
    const RGB: &[u8] = include_bytes!("testdata/rgb.jpg");
    const CMYK: &[u8] = include_bytes!("testdata/cmyk.jpg");
    const PROGRESSIVE: &[u8] = include_bytes!("testdata/progressive.jpg");

    /// Pixels Pillow decoded (`np.asarray(Image.open(p).convert("RGB"))`),
    /// one hex line per file in `testdata/pil_jpeg.txt`: `name W H hex`.
    fn pillow(name: &str) -> (usize, usize, Vec<u8>) {
        let line = include_str!("testdata/pil_jpeg.txt")
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .expect("reference line");
        let f: Vec<&str> = line.split(' ').collect();
        let hex = f[3];
        let px = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        (f[1].parse().unwrap(), f[2].parse().unwrap(), px)
    }

    fn max_diff(a: &[u8], b: &[u8]) -> u8 {
        a.iter().zip(b).map(|(x, y)| x.abs_diff(*y)).max().unwrap()
    }

    #[test]
    fn matches_pillow_within_a_few_levels() {
        for (name, bytes, tol) in [
            ("gray.jpg", GRAY, 1),
            ("rgb.jpg", RGB, 4),
            ("cmyk.jpg", CMYK, 2),
            ("progressive.jpg", PROGRESSIVE, 4),
        ] {
            let img = decode_image(bytes, Path::new(name)).unwrap();
            let (w, h, want) = pillow(name);
            assert_eq!((img.width(), img.height()), (w, h), "{name}");
            let d = max_diff(img.as_bytes(), &want);
            assert!(d <= tol, "{name}: max difference {d}");
        }
    }

    #[test]
    fn grayscale_is_replicated() {
        let img = decode_jpeg(GRAY, Path::new("gray.jpg")).unwrap();
        assert!(img
            .as_bytes()
            .chunks(3)
            .all(|p| p[0] == p[1] && p[1] == p[2]));
    }

    #[test]
    fn cmyk_formula_matches_pillow() {
        assert_eq!(cmyk_to_rgb([0, 0, 0, 0]), [255, 255, 255]);
        assert_eq!(cmyk_to_rgb([255, 255, 255, 0]), [0, 0, 0]);
        assert_eq!(cmyk_to_rgb([0, 0, 0, 255]), [0, 0, 0]);
        // nk = 155; 155 - round(100 * 155 / 255) = 155 - 61
        assert_eq!(cmyk_to_rgb([100, 0, 255, 100]), [94, 155, 0]);
    }

    #[test]
    fn corrupt_and_truncated_files_are_errors() {
        let name = Path::new("broken.jpg");
        let e = decode_jpeg(b"", name).unwrap_err().to_string();
        assert!(e.contains("broken.jpg") && e.contains("empty"), "{e}");
        let e = decode_jpeg(b"GIF89a", name).unwrap_err().to_string();
        assert!(e.contains("not a JPEG"), "{e}");
        for cut in [3, 20, 100, RGB.len() / 2, RGB.len() - 2] {
            let r = decode_jpeg(&RGB[..cut], name);
            // A cut inside the entropy-coded data may still decode (the
            // decoder pads missing data); a cut in the headers may not.
            if let Err(e) = r {
                let e = e.to_string();
                assert!(e.contains("broken.jpg"), "{cut}: {e}");
            }
        }
        assert!(decode_jpeg(&RGB[..100], name).is_err());
        let mut bad = RGB.to_vec();
        for b in bad.iter_mut().skip(2).take(200) {
            *b = 0xff;
        }
        let e = decode_jpeg(&bad, name).unwrap_err().to_string();
        assert!(e.contains("broken.jpg"), "{e}");
    }
}
