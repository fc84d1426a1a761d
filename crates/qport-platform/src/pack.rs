//! Pack / unpack: dense tensor bytes to a padded runtime buffer laid out by a
//! [`TensorDescriptor`] (padding zero-filled) and back.
//!
//! Both directions need a resolved descriptor (no `-1`); resolve dynamic ones
//! with [`TensorDescriptor::resolve`] first. Every offset is checked against
//! `alignedByteSize` before anything is written, so packing never writes at or
//! beyond it and no user input can make it panic.

use crate::{PlatformError, TensorDescriptor};

/// Checked geometry of a resolved descriptor.
struct Geometry {
    shape: Vec<usize>,
    stride: Vec<usize>,
    elem: usize,
    dense: usize,
    padded: usize,
}

fn geometry(d: &TensorDescriptor) -> Result<Geometry, PlatformError> {
    if d.is_dynamic() {
        return Err(PlatformError::Unresolved {
            tensor: d.name.clone(),
        });
    }
    let ovf = || PlatformError::Overflow {
        tensor: d.name.clone(),
    };
    let u = |v: i64| usize::try_from(v).map_err(|_| ovf());
    let shape = d
        .valid_shape
        .iter()
        .map(|&v| u(v))
        .collect::<Result<Vec<_>, _>>()?;
    let stride = d
        .stride
        .iter()
        .map(|&v| u(v))
        .collect::<Result<Vec<_>, _>>()?;
    let elem = usize::try_from(d.kind.elem_size()).map_err(|_| ovf())?;
    let padded = u(d.aligned_byte_size)?;
    if stride.len() != shape.len() {
        return Err(PlatformError::BadShape {
            tensor: d.name.clone(),
            shape: d.valid_shape.clone(),
            reason: format!("stride {:?} has a different rank", d.stride),
        });
    }
    let dense = shape
        .iter()
        .try_fold(elem, |a, &x| a.checked_mul(x))
        .ok_or_else(ovf)?;
    if dense > 0 {
        // Offset one past the last valid element must fit in alignedByteSize.
        let mut end = elem;
        for (&n, &s) in shape.iter().zip(&stride) {
            end = (n - 1)
                .checked_mul(s)
                .and_then(|x| x.checked_add(end))
                .ok_or_else(ovf)?;
        }
        if end > padded {
            return Err(PlatformError::BufferSize {
                tensor: d.name.clone(),
                what: "descriptor (alignedByteSize smaller than its strides reach)",
                got: padded as u64,
                expected: end as u64,
            });
        }
    }
    Ok(Geometry {
        shape,
        stride,
        elem,
        dense,
        padded,
    })
}

/// Calls `f(dense_offset, padded_offset, len)` for each contiguous run of the
/// valid data, innermost axis first merged when its stride equals the element size.
fn for_each_run(g: &Geometry, mut f: impl FnMut(usize, usize, usize)) {
    if g.dense == 0 {
        return;
    }
    let r = g.shape.len();
    if r == 0 {
        f(0, 0, g.elem);
        return;
    }
    let contiguous = g.stride[r - 1] == g.elem;
    let (outer, run_elems) = if contiguous {
        (r - 1, g.shape[r - 1])
    } else {
        (r, 1)
    };
    let run = run_elems * g.elem;
    let mut idx = vec![0usize; outer];
    let mut dense = 0usize;
    loop {
        let padded: usize = idx.iter().zip(&g.stride).map(|(&i, &s)| i * s).sum();
        f(dense, padded, run);
        dense += run;
        // Odometer increment over the outer axes.
        let mut ax = outer;
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < g.shape[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}

/// Which way [`transfer`] copies: dense to padded ([`pack`]) or back ([`unpack`]).
#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Pack,
    Unpack,
}

/// Copies the valid runs of `src` between the dense and the padded layout,
/// after checking `src`'s length (exact for dense input, at least the padded
/// size for a runtime buffer).
fn transfer(d: &TensorDescriptor, src: &[u8], dir: Direction) -> Result<Vec<u8>, PlatformError> {
    let g = geometry(d)?;
    let (what, expected, fits, out_len) = match dir {
        Direction::Pack => ("dense input", g.dense, src.len() == g.dense, g.padded),
        Direction::Unpack => ("padded output", g.padded, src.len() >= g.padded, g.dense),
    };
    if !fits {
        return Err(PlatformError::BufferSize {
            tensor: d.name.clone(),
            what,
            got: src.len() as u64,
            expected: expected as u64,
        });
    }
    let mut out = vec![0u8; out_len];
    for_each_run(&g, |s, p, n| match dir {
        Direction::Pack => out[p..p + n].copy_from_slice(&src[s..s + n]),
        Direction::Unpack => out[s..s + n].copy_from_slice(&src[p..p + n]),
    });
    Ok(out)
}

/// Builds a runtime buffer of `alignedByteSize` bytes from the dense tensor
/// bytes `dense` (row-major over `validShape`); padding is zero.
pub fn pack(d: &TensorDescriptor, dense: &[u8]) -> Result<Vec<u8>, PlatformError> {
    transfer(d, dense, Direction::Pack)
}

/// Extracts the valid data of a runtime buffer (at least `alignedByteSize`
/// bytes are not required; only the bytes the strides reach) into dense bytes.
pub fn unpack(d: &TensorDescriptor, buffer: &[u8]) -> Result<Vec<u8>, PlatformError> {
    transfer(d, buffer, Direction::Unpack)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{InputSource, Registry, TensorType};
    use proptest::prelude::*;

    #[test]
    fn nv12_plane_packs_rows_at_aligned_stride() {
        let r = Registry::builtin();
        let (y, _) = TensorDescriptor::nv12(
            "in",
            1,
            2,
            4,
            InputSource::Ddr,
            r.get("j6m").unwrap(),
            false,
        )
        .unwrap();
        let b = pack(&y, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[..4], &[1, 2, 3, 4]);
        assert!(b[4..32].iter().all(|&x| x == 0));
        assert_eq!(&b[32..36], &[5, 6, 7, 8]);
        assert_eq!(unpack(&y, &b).unwrap(), vec![1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn wrong_sizes_and_dynamic_are_errors() {
        let r = Registry::builtin();
        let p = r.get("j6p").unwrap();
        let d = TensorDescriptor::featuremap("t", TensorType::S8, &[2, 3], p, false).unwrap();
        assert!(matches!(
            pack(&d, &[0; 5]),
            Err(PlatformError::BufferSize { .. })
        ));
        assert!(matches!(
            unpack(&d, &[0; 5]),
            Err(PlatformError::BufferSize { .. })
        ));
        let (y, _) = TensorDescriptor::nv12("in", 1, 4, 4, InputSource::Pyramid, p, false).unwrap();
        assert!(matches!(
            pack(&y, &[0; 16]),
            Err(PlatformError::Unresolved { .. })
        ));
        let mut bad = d.clone();
        bad.aligned_byte_size = 3;
        assert!(matches!(
            pack(&bad, &[0; 6]),
            Err(PlatformError::BufferSize { .. })
        ));
    }

    #[test]
    fn rgb_to_nv12_packs_and_unpacks() {
        use crate::{rgb_to_nv12, Bt601Range, ChannelOrder};
        let p = Registry::builtin().get("j6h").unwrap().clone();
        let rgb: Vec<u8> = (0..4 * 6 * 3).map(|i| (i * 7) as u8).collect();
        let (y, uv) =
            rgb_to_nv12("img", &rgb, 1, 4, 6, ChannelOrder::Rgb, Bt601Range::Limited).unwrap();
        let (dy, duv) =
            TensorDescriptor::nv12("img", 1, 4, 6, InputSource::Ddr, &p, false).unwrap();
        let (by, buv) = (pack(&dy, &y).unwrap(), pack(&duv, &uv).unwrap());
        assert_eq!((by.len(), buv.len()), (256, 128));
        assert_eq!(
            (unpack(&dy, &by).unwrap(), unpack(&duv, &buv).unwrap()),
            (y, uv)
        );
    }

    fn shape_strategy() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec(1u64..7, 1..=5)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn roundtrip_every_platform_and_dtype(shape in shape_strategy(), seed in any::<u64>()) {
            let r = Registry::builtin();
            for p in &r.platforms {
                for ty in TensorType::ALL {
                    for no_padding in [false, true] {
                        let d = TensorDescriptor::featuremap("t", ty, &shape, p, no_padding).unwrap();
                        let n = d.dense_byte_size().unwrap() as usize;
                        let x: Vec<u8> = (0..n).map(|i| (seed.wrapping_mul(i as u64 + 1) >> 7) as u8 | 1).collect();
                        let b = pack(&d, &x).unwrap();
                        prop_assert_eq!(b.len() as i64, d.aligned_byte_size);
                        // Padding is zero: nonzero bytes are exactly the valid ones.
                        prop_assert_eq!(b.iter().filter(|&&v| v != 0).count(), n);
                        prop_assert_eq!(unpack(&d, &b).unwrap(), x.clone());
                        if no_padding {
                            prop_assert_eq!(b, x);
                        }
                    }
                }
            }
        }

        #[test]
        fn user_strides_never_write_past_aligned_byte_size(shape in shape_strategy(), k in 0usize..5, delta in -64i64..64) {
            let p = Registry::builtin().get("j6e").unwrap().clone();
            let mut d = TensorDescriptor::featuremap("t", TensorType::U16, &shape, &p, false).unwrap();
            let k = k % d.stride.len();
            d.stride[k] = (d.stride[k] + delta).max(0);
            let x = vec![7u8; d.dense_byte_size().unwrap() as usize];
            if let Ok(b) = pack(&d, &x) {
                prop_assert_eq!(b.len() as i64, d.aligned_byte_size);
            }
        }

        #[test]
        fn roundtrip_images(n in 1u64..3, h in 1u64..20, w in 1u64..40, src in 0usize..3) {
            let r = Registry::builtin();
            let source = [InputSource::Ddr, InputSource::Pyramid, InputSource::Resizer][src];
            for p in &r.platforms {
                let (y, uv) = TensorDescriptor::nv12("in", n, 2 * h, 2 * w, source, p, false).unwrap();
                for (d, shape) in [(y, [n, 2 * h, 2 * w, 1]), (uv, [n, h, w, 2])] {
                    let d = d.resolve(&shape).unwrap();
                    let len = d.dense_byte_size().unwrap() as usize;
                    let x: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
                    let b = pack(&d, &x).unwrap();
                    prop_assert_eq!(b.len() as i64, d.aligned_byte_size);
                    prop_assert_eq!(d.stride[1] % p.image_stride_align as i64, 0);
                    prop_assert_eq!(unpack(&d, &b).unwrap(), x);
                }
            }
        }
    }
}
