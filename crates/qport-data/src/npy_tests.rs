use super::*;
use proptest::prelude::*;
use qport_core::f16;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// `np.save(f, np.arange(6, dtype='<f4').reshape(2, 3) / 2)` (numpy 2.4).
const NUMPY_F32_2X3: &str = "934e554d5059010076007b276465736372273a20273c6634272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028322c2033292c207d202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a000000000000003f0000803f0000c03f0000004000002040";

/// `np.lib.format.write_array(f, np.array([[1,-2],[3,4]], '<i2'), version=(3, 0))`.
const NUMPY_I16_V3: &str = "934e554d50590300740000007b276465736372273a20273c6932272c2027666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028322c2032292c207d20202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020202020200a0100feff03000400";

#[test]
fn reads_numpy_v1_file() {
    let t = decode(&unhex(NUMPY_F32_2X3)).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(
        t.as_slice::<f32>().unwrap(),
        &[0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    );
}

#[test]
fn writes_byte_identical_to_numpy() {
    let t = Tensor::from_vec(vec![2, 3], vec![0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5]).unwrap();
    assert_eq!(encode(&t).unwrap(), unhex(NUMPY_F32_2X3));
}

#[test]
fn reads_numpy_v3_file() {
    let t = decode(&unhex(NUMPY_I16_V3)).unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    assert_eq!(t.as_slice::<i16>().unwrap(), &[1, -2, 3, 4]);
}

#[test]
fn reads_v2_header_and_python2_long_dims() {
    let b = raw_npy(
        2,
        "{'descr': '<u2', 'fortran_order': False, 'shape': (2L,), }\n",
        &[1, 0, 2, 0],
    );
    let t = decode(&b).unwrap();
    assert_eq!(t.as_slice::<u16>().unwrap(), &[1, 2]);
}

#[test]
fn header_is_64_byte_aligned() {
    for shape in [vec![], vec![3], vec![1, 2, 3, 4, 5, 6, 7]] {
        let t = Tensor::zeros(DType::U8, shape).unwrap();
        let b = encode(&t).unwrap();
        let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hl) % 64, 0);
        assert_eq!(b[10 + hl - 1], b'\n');
    }
}

#[test]
fn scalar_and_empty_round_trip() {
    for t in [
        Tensor::scalar(-7i64),
        Tensor::zeros(DType::U8, vec![0, 4]).unwrap(),
        Tensor::from_vec(vec![3], vec![true, false, true]).unwrap(),
    ] {
        assert_eq!(decode(&encode(&t).unwrap()).unwrap(), t);
    }
}

fn err_of(b: &[u8]) -> String {
    decode(b).unwrap_err().to_string()
}

#[test]
fn refuses_fortran_order_big_endian_absurd_shapes_and_bad_lengths() {
    // (descr, fortran_order, shape, data, every piece the error must name)
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        &'static [u8],
        &'static [&'static str],
    );
    let cases: [Case; 6] = [
        (
            "<f4",
            "True",
            "(1,)",
            &[0; 4],
            &["Fortran-order", "ascontiguousarray"],
        ),
        (">f4", "False", "(1,)", &[0; 4], &["big-endian", ">f4"]),
        // Refused without allocating.
        (
            "<f4",
            "False",
            "(100000000000, 100000000000)",
            &[0; 16],
            &["too large"],
        ),
        ("<f8", "False", "(99999999999999999999,)", &[], &["64 bits"]),
        (
            "<f4",
            "False",
            "(4,)",
            &[0; 12],
            &["truncated data", "16 bytes"],
        ),
        ("<f4", "False", "(1,)", &[0; 5], &["1 unexpected bytes"]),
    ];
    for (descr, fortran, shape, data, want) in cases {
        let h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n");
        let e = err_of(&raw_npy(1, &h, data));
        for w in want {
            assert!(e.contains(w), "{h}: {e}");
        }
    }
    // A one-byte type has no byte order; '>' there is harmless.
    let b = raw_npy(
        1,
        "{'descr': '>i1', 'fortran_order': False, 'shape': (1,), }\n",
        &[255],
    );
    assert_eq!(decode(&b).unwrap().as_slice::<i8>().unwrap(), &[-1]);
}

#[test]
fn refuses_unsupported_and_malformed_headers() {
    let cases = [
        (
            "{'descr': '<U3', 'fortran_order': False, 'shape': (1,), }",
            "unsupported numpy dtype '<U3'",
        ),
        (
            "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
            "unsupported numpy dtype",
        ),
        (
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
            "structured",
        ),
        (
            "{'descr': '<f4', 'shape': (1,), }",
            "missing 'fortran_order'",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
            "negative",
        ),
        (
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
            "unknown key",
        ),
        ("not a dict", "expected '{'"),
    ];
    for (h, want) in cases {
        let e = err_of(&raw_npy(1, h, &[0; 4]));
        assert!(e.contains(want), "{h}: {e}");
    }
}

#[test]
fn refuses_non_npy_bytes() {
    assert!(err_of(b"").contains("empty file"));
    assert!(err_of(b"hello world, not numpy").contains("magic"));
    assert!(err_of(b"\x93NUMPY\x01").contains("truncated"));
    assert!(err_of(b"\x93NUMPY\x09\x00\x00\x00").contains("version 9.0"));
    let mut b = raw_npy(
        1,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n",
        &[0; 4],
    );
    b.truncate(20);
    assert!(err_of(&b).contains("truncated .npy header"));
}

#[test]
fn refuses_bf16_and_strings_on_write() {
    let t = Tensor::from_vec(vec![1], vec![qport_core::bf16::ONE]).unwrap();
    assert!(encode(&t).unwrap_err().to_string().contains("bfloat16"));
    let t = Tensor::from_vec(vec![1], vec!["a".to_string()]).unwrap();
    assert!(encode(&t).is_err());
}

#[test]
fn file_round_trip_and_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let p = dir.join("a.npy");
    let t = Tensor::from_vec(vec![2], vec![1.0f64, -2.0]).unwrap();
    write(&p, &t).unwrap();
    assert_eq!(read(&p).unwrap(), t);
    let e = read(&dir.join("missing.npy")).unwrap_err().to_string();
    assert!(e.contains("missing.npy"), "{e}");
    std::fs::write(&p, b"").unwrap();
    let e = read(&p).unwrap_err().to_string();
    assert!(e.contains("a.npy") && e.contains("empty"), "{e}");
}

/// Any tensor of a `.npy`-storable dtype with a small shape.
pub(crate) fn arb_tensor() -> impl Strategy<Value = Tensor> {
    let shape = proptest::collection::vec(0usize..4, 0..4);
    (shape, 0usize..12).prop_flat_map(|(shape, k)| {
        let n: usize = shape.iter().product();
        let s = shape.clone();
        macro_rules! arb {
            ($t:ty) => {
                proptest::collection::vec(any::<$t>(), n)
                    .prop_map(move |v| Tensor::from_vec(s.clone(), v).unwrap())
                    .boxed()
            };
        }
        match k {
            0 => arb!(f32),
            1 => arb!(f64),
            2 => proptest::collection::vec(any::<u16>(), n)
                .prop_map(move |v| {
                    Tensor::from_vec(s.clone(), v.into_iter().map(f16::from_bits).collect())
                        .unwrap()
                })
                .boxed(),
            3 => arb!(i8),
            4 => arb!(u8),
            5 => arb!(i16),
            6 => arb!(u16),
            7 => arb!(i32),
            8 => arb!(u32),
            9 => arb!(i64),
            10 => arb!(u64),
            _ => arb!(bool),
        }
    })
}

/// Bit-level equality (NaN payloads included).
pub(crate) fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape() && encode(a).unwrap() == encode(b).unwrap()
}

proptest! {
    #[test]
    fn npy_round_trip(t in arb_tensor()) {
        let back = decode(&encode(&t).unwrap()).unwrap();
        prop_assert_eq!(back.dtype(), t.dtype());
        prop_assert!(same_bits(&back, &t));
    }

    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&bytes);
        let _ = decode(&b);
    }
}
