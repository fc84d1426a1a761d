use super::*;
use crate::{npy, npz};
use std::fs;

fn png_bytes(w: u32, h: u32, fill: u8) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().unwrap();
        wr.write_image_data(&vec![fill; (w * h * 3) as usize])
            .unwrap();
    }
    out
}

fn input(shape: &[i64]) -> Vec<InputSpec> {
    vec![InputSpec::new("x", Some(shape.to_vec()))]
}

fn raw() -> Option<Preprocess> {
    Some(Preprocess::default())
}

#[test]
fn image_folder_is_recursive_sorted_and_filtered() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("a/c")).unwrap();
    fs::create_dir_all(d.join(".cache")).unwrap();
    fs::write(d.join("a/b.png"), png_bytes(4, 3, 10)).unwrap();
    fs::write(d.join("a/c/d.JPG"), include_bytes!("testdata/rgb.jpg")).unwrap();
    fs::write(d.join("z.jpeg"), include_bytes!("testdata/gray.jpg")).unwrap();
    fs::write(d.join("B.Png"), png_bytes(2, 2, 200)).unwrap();
    fs::write(d.join(".hidden.png"), b"junk").unwrap();
    fs::write(d.join(".cache/x.png"), b"junk").unwrap();
    fs::write(d.join("notes.txt"), b"not an image").unwrap();
    fs::write(d.join("jpg"), b"no extension").unwrap();
    let ds = Dataset::open(d, &input(&[1, 3, -1, -1]), raw()).unwrap();
    let rel: Vec<String> = ds
        .image_files()
        .unwrap()
        .iter()
        .map(|p| p.strip_prefix(d).unwrap().display().to_string())
        .collect();
    assert_eq!(rel, ["B.Png", "a/b.png", "a/c/d.JPG", "z.jpeg"]);
    assert_eq!(ds.len(), 4);
    let samples: Vec<Sample> = ds.samples().collect::<Result<_>>().unwrap();
    assert_eq!(samples[0].inputs[0].1.shape(), &[1, 3, 2, 2]);
    assert_eq!(samples[1].inputs[0].1.shape(), &[1, 3, 3, 4]);
    assert_eq!(samples[2].inputs[0].1.shape(), &[1, 3, 12, 16]);
    assert_eq!(
        samples[0].inputs[0].1.as_slice::<f32>().unwrap()[0],
        200.0 / 255.0
    );
    assert!(samples[3].origin.ends_with("z.jpeg"));
    // A single image file is a one-sample dataset.
    let one = Dataset::open(&d.join("a/b.png"), &input(&[1, 3, 3, 4]), raw()).unwrap();
    assert_eq!(one.len(), 1);
}

#[test]
fn image_folder_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("sub")).unwrap();
    fs::write(d.join("sub/readme.md"), b"x").unwrap();
    let e = Dataset::open(d, &input(&[1, 3, 8, 8]), raw())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no images (.png, .jpg, .jpeg) found under"),
        "{e}"
    );
    assert!(e.contains(&d.display().to_string()), "{e}");
    fs::write(d.join("sub/a.png"), png_bytes(16, 12, 5)).unwrap();
    // Refused at open: (inputs, preprocessing, every piece the error must name).
    let two = vec![InputSpec::new("a", None), InputSpec::new("b", None)];
    let ints = vec![InputSpec::new("ids", None).with_dtype(DType::I64)];
    let imagenet = Preprocess::from_preset("imagenet").ok();
    let cases: [(Vec<InputSpec>, Option<Preprocess>, &[&str]); 4] = [
        (
            input(&[1, 3, 8, 8]),
            None,
            &["preprocessing spec", "imagenet"],
        ),
        (two, raw(), &["one input", "a, b"]),
        (ints, raw(), &["dtype mismatch"]),
        // Static target shape checked at open.
        (
            input(&[1, 3, 299, 299]),
            imagenet,
            &["[1, 3, 299, 299]", "[1, 3, 224, 224]"],
        ),
    ];
    for (inputs, pp, want) in cases {
        let e = Dataset::open(d, &inputs, pp).unwrap_err().to_string();
        for w in want {
            assert!(e.contains(w), "{e}");
        }
    }
    // Dynamic target shape: the wrong-sized image fails when read, by name.
    let ds = Dataset::open(d, &input(&[1, 3, 8, 8]), raw()).unwrap();
    let e = ds.get(0).unwrap_err().to_string();
    assert!(
        e.contains("a.png") && e.contains("[1, 3, 8, 8]") && e.contains("[1, 3, 12, 16]"),
        "{e}"
    );
    // A corrupt image fails when read, by name.
    fs::write(
        d.join("sub/b.jpg"),
        &include_bytes!("testdata/rgb.jpg")[..50],
    )
    .unwrap();
    let ds = Dataset::open(d, &input(&[1, 3, -1, -1]), raw()).unwrap();
    assert!(ds.get(0).is_ok());
    let e = ds.get(1).unwrap_err().to_string();
    assert!(e.contains("b.jpg"), "{e}");
    let e = Dataset::open(&d.join("nothing"), &input(&[1]), raw())
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing"), "{e}");
    fs::write(d.join("data.csv"), b"1,2").unwrap();
    let e = Dataset::open(&d.join("data.csv"), &input(&[1]), raw())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a dataset"), "{e}");
}

fn seq(shape: Vec<usize>) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(
        shape,
        (0..n).map(|i| i as f32 * 0.5 - 3.0).collect::<Vec<f32>>(),
    )
    .unwrap()
}

#[test]
fn npy_streams_the_same_values_as_npy_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.npy");
    npy::write(&p, &seq(vec![5, 2, 3])).unwrap();
    let whole = npy::read(&p).unwrap();
    let all = whole.as_slice::<f32>().unwrap();
    let ds = Dataset::open(&p, &input(&[-1, 2, 3]), None).unwrap();
    assert_eq!(ds.len(), 5);
    let batches: Vec<Batch> = ds.batches(2).collect::<Result<_>>().unwrap();
    assert_eq!(
        batches.iter().map(|b| b.samples.len()).collect::<Vec<_>>(),
        [2, 2, 1]
    );
    assert_eq!(batches[2].start, 4);
    for (i, s) in batches.iter().flat_map(|b| &b.samples).enumerate() {
        let (name, t) = &s.inputs[0];
        assert_eq!((name.as_str(), s.index), ("x", i));
        assert_eq!(t.shape(), &[1, 2, 3]);
        assert_eq!(t.as_slice::<f32>().unwrap(), &all[i * 6..(i + 1) * 6]);
        assert_eq!(s.origin, format!("{}[{i}]", p.display()));
    }
    assert_eq!(ds.get(3).unwrap(), batches[1].samples[1]);
    assert_eq!(ds.batches(0).count(), 5);
    // Rows that already carry the batch axis are used as they are.
    let ds = Dataset::open(&p, &input(&[2, 3]), None).unwrap();
    assert_eq!(ds.get(0).unwrap().inputs[0].1.shape(), &[2, 3]);
    let e = Dataset::open(&p, &input(&[1, 3, 3]), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.npy") && e.contains("[1, 3, 3]") && e.contains("[5, 2, 3]"),
        "{e}"
    );
    let mut r = RowReader::open_npy(&p).unwrap();
    assert_eq!(
        (r.len(), r.row_shape(), r.dtype()),
        (5, &[2usize, 3][..], DType::F32)
    );
    assert!(r.read_row(5).is_err());
}

#[test]
fn npy_file_problems_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.npy");
    let mut t = seq(vec![4, 3]);
    let v = t.as_mut_slice::<f32>().unwrap();
    v[7] = f32::NAN;
    v[8] = f32::INFINITY;
    npy::write(&p, &t).unwrap();
    let ds = Dataset::open(&p, &input(&[1, 3]), None).unwrap();
    assert!(ds.get(0).is_ok() && ds.get(1).is_ok());
    let e = ds.get(2).unwrap_err();
    assert!(
        matches!(
            e,
            DataError::NonFinite {
                index: Some(2),
                count: 2,
                total: 3,
                ..
            }
        ),
        "{e}"
    );
    let e = e.to_string();
    assert!(
        e.contains("bad.npy") && e.contains("sample 2") && e.contains("'x'"),
        "{e}"
    );
    // Integer data for a float input is refused; for an integer input cast.
    let q = dir.path().join("ints.npy");
    npy::write(
        &q,
        &Tensor::from_vec(vec![2, 2], vec![1i32, 2, 3, 4]).unwrap(),
    )
    .unwrap();
    let e = Dataset::open(&q, &input(&[1, 2]), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ints.npy") && e.contains("float") && e.contains("int32"),
        "{e}"
    );
    let ids = vec![InputSpec::new("ids", Some(vec![1, 2])).with_dtype(DType::I64)];
    let s = Dataset::open(&q, &ids, None).unwrap().get(1).unwrap();
    assert_eq!(s.inputs[0].1.as_slice::<i64>().unwrap(), &[3, 4]);
    // float64 data is converted for a float32 input.
    let f = dir.path().join("f64.npy");
    npy::write(
        &f,
        &Tensor::from_vec(vec![1, 2], vec![0.5f64, 1e300]).unwrap(),
    )
    .unwrap();
    let e = Dataset::open(&f, &input(&[1, 2]), None)
        .unwrap()
        .get(0)
        .unwrap_err();
    assert!(matches!(e, DataError::NonFinite { count: 1, .. }), "{e}");
    // Truncated files fail at open.
    let bytes = fs::read(&p).unwrap();
    fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
    let e = Dataset::open(&p, &input(&[1, 3]), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.npy") && e.contains("truncated"), "{e}");
    let two = vec![InputSpec::new("a", None), InputSpec::new("b", None)];
    let e = Dataset::open(&q, &two, None).unwrap_err().to_string();
    assert!(e.contains("one input") && e.contains(".npz"), "{e}");
}

#[test]
fn npz_stored_and_compressed_give_the_same_samples() {
    let dir = tempfile::tempdir().unwrap();
    let arrays = vec![
        (
            "mask".to_string(),
            Tensor::from_vec(vec![3, 2], vec![1i64, 0, 1, 1, 0, 0]).unwrap(),
        ),
        ("image".to_string(), seq(vec![3, 1, 4])),
    ];
    let inputs = vec![
        InputSpec::new("image", Some(vec![-1, 1, 4])),
        InputSpec::new("mask", Some(vec![1, 2])).with_dtype(DType::I64),
    ];
    let mut seen = Vec::new();
    for c in [npz::Compression::Stored, npz::Compression::Deflated] {
        let p = dir.path().join(format!("{c:?}.npz"));
        npz::write_with(&p, &arrays, c).unwrap();
        let ds = Dataset::open(&p, &inputs, None).unwrap();
        assert_eq!(ds.len(), 3);
        let s: Vec<Sample> = ds.samples().collect::<Result<_>>().unwrap();
        assert_eq!(s[1].inputs[0].0, "image");
        assert_eq!(
            s[1].inputs[0].1.as_slice::<f32>().unwrap(),
            &[-1.0, -0.5, 0.0, 0.5]
        );
        assert_eq!(s[2].inputs[1].1.as_slice::<i64>().unwrap(), &[0, 0]);
        seen.push(s.into_iter().map(|s| s.inputs).collect::<Vec<_>>());
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn npz_key_and_count_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("d.npz");
    let arrays = vec![
        ("input".to_string(), seq(vec![3, 2])),
        ("labels".to_string(), seq(vec![2, 1])),
    ];
    npz::write(&p, &arrays).unwrap();
    let inputs = vec![InputSpec::new("input", None), InputSpec::new("mask", None)];
    let e = Dataset::open(&p, &inputs, None).unwrap_err().to_string();
    assert!(
        e.contains("d.npz") && e.contains("missing arrays for inputs: mask"),
        "{e}"
    );
    assert!(e.contains("match no input: labels"), "{e}");
    let inputs = vec![
        InputSpec::new("input", None),
        InputSpec::new("labels", None),
    ];
    let e = Dataset::open(&p, &inputs, None).unwrap_err().to_string();
    assert!(
        e.contains("number of samples") && e.contains("'input' 3, 'labels' 2"),
        "{e}"
    );
}

#[test]
fn synthetic_is_deterministic() {
    let inputs = vec![
        InputSpec::new("x", Some(vec![-1, 3, 4, 4])),
        InputSpec::new("ids", Some(vec![1, 5])).with_dtype(DType::I64),
        InputSpec::new("h", Some(vec![2])).with_dtype(DType::F16),
    ];
    let a = Dataset::synthetic(&inputs, 4, 7).unwrap();
    let b = Dataset::synthetic(&inputs, 4, 7).unwrap();
    let sa: Vec<Sample> = a.samples().collect::<Result<_>>().unwrap();
    let sb: Vec<Sample> = b.batches(3).flat_map(|b| b.unwrap().samples).collect();
    assert_eq!(sa, sb);
    assert_eq!(a.get(2).unwrap(), sa[2]);
    assert_ne!(sa[0].inputs, sa[1].inputs);
    let x = &sa[0].inputs[0].1;
    assert_eq!(x.shape(), &[1, 3, 4, 4]);
    assert!(x
        .as_slice::<f32>()
        .unwrap()
        .iter()
        .all(|v| (-1.0..1.0).contains(v)));
    assert!(sa[0].inputs[1]
        .1
        .as_slice::<i64>()
        .unwrap()
        .iter()
        .all(|v| *v == 0 || *v == 1));
    assert_eq!(sa[0].inputs[2].1.dtype(), DType::F16);
    let c = Dataset::synthetic(&inputs, 4, 8).unwrap();
    assert_ne!(c.get(0).unwrap().inputs, sa[0].inputs);
    let e = Dataset::synthetic(&input(&[1, 3, -1, -1]), 1, 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("dynamic"), "{e}");
    assert!(Dataset::synthetic(&[InputSpec::new("x", None)], 1, 0).is_err());
    assert!(a.get(4).is_err());
}
