//! numpy `.npz` archives: a zip of `.npy` members, stored (`np.savez`) or
//! deflated (`np.savez_compressed`). The key of each array is its member name
//! without the `.npy` suffix, as in numpy.
//!
//! Reading keeps the archive's member order, refuses members that are not
//! `.npy` arrays and duplicate keys, and bounds every member by its declared
//! size. Writing is deterministic (fixed timestamps, given order) and atomic.

use crate::atomic::write_atomic;
use crate::error::{DataError, Result};
use crate::npy;
use qport_core::Tensor;
use std::io::{Cursor, Read, Seek, Write};
use std::path::Path;
use zip::write::SimpleFileOptions;
use zip::CompressionMethod;

/// How `.npy` members are stored in a written archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// No compression, like `np.savez`.
    #[default]
    Stored,
    /// Deflate, like `np.savez_compressed`.
    Deflated,
}

/// Largest member (uncompressed) accepted when reading: the largest tensor
/// qport allocates at 8 bytes per element, plus room for the header.
const MAX_MEMBER_BYTES: u64 = qport_core::shape::MAX_ELEMENTS * 8 + npy::MAX_HEADER_LEN as u64 + 16;

/// Reads every array of an `.npz` file, in archive order.
pub fn read(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io(path, e))?;
    decode_named(&bytes, path)
}

/// Reads the array named `key` from an `.npz` file.
pub fn read_key(path: &Path, key: &str) -> Result<Tensor> {
    let arrays = read(path)?;
    let available: Vec<String> = arrays.iter().map(|(k, _)| k.clone()).collect();
    arrays
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, t)| t)
        .ok_or_else(|| DataError::MissingKey {
            path: path.to_path_buf(),
            key: key.to_string(),
            available,
        })
}

/// Decodes `.npz` bytes held in memory (errors name the file `<memory>`).
pub fn decode(bytes: &[u8]) -> Result<Vec<(String, Tensor)>> {
    decode_named(bytes, Path::new("<memory>"))
}

/// Writes `arrays` to an `.npz` file atomically, uncompressed (`np.savez`).
pub fn write(path: &Path, arrays: &[(String, Tensor)]) -> Result<()> {
    write_with(path, arrays, Compression::Stored)
}

/// Writes `arrays` to an `.npz` file atomically with the given compression.
pub fn write_with(
    path: &Path,
    arrays: &[(String, Tensor)],
    compression: Compression,
) -> Result<()> {
    let bytes = encode_named(arrays, compression, path)?;
    write_atomic(path, &bytes)
}

/// Encodes `arrays` as `.npz` bytes.
///
/// ```
/// use qport_core::Tensor;
/// use qport_data::npz;
/// let arrays = vec![("x".to_string(), Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap())];
/// let bytes = npz::encode(&arrays, npz::Compression::Deflated).unwrap();
/// assert_eq!(npz::decode(&bytes).unwrap(), arrays);
/// ```
pub fn encode(arrays: &[(String, Tensor)], compression: Compression) -> Result<Vec<u8>> {
    encode_named(arrays, compression, Path::new("<memory>"))
}

/// Opens `archive` (`len` bytes, read from `path`) as a `.npz` archive and
/// calls `read(key, member)` for each `.npy` member, in archive order;
/// refuses an empty file, members that are not `.npy` and duplicate names.
pub(crate) fn read_members<R: Read + Seek, T>(
    archive: R,
    len: u64,
    path: &Path,
    mut read: impl FnMut(&str, &mut zip::read::ZipFile<'_, R>) -> Result<T>,
) -> Result<Vec<(String, T)>> {
    let err = |reason: String| DataError::Npz {
        path: path.to_path_buf(),
        reason,
    };
    if len == 0 {
        return Err(err("empty file, not a .npz archive".into()));
    }
    let mut zip = zip::ZipArchive::new(archive)
        .map_err(|e| err(format!("not a valid .npz (zip) archive: {e}")))?;
    let mut out: Vec<(String, T)> = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut member = zip
            .by_index(i)
            .map_err(|e| err(format!("cannot open member {i}: {e}")))?;
        if member.is_dir() {
            continue;
        }
        let name = member.name().to_string();
        let Some(key) = name.strip_suffix(".npy").map(str::to_string) else {
            return Err(err(format!("member '{name}' is not a .npy array")));
        };
        if out.iter().any(|(k, _)| *k == key) {
            return Err(err(format!("duplicate array name '{key}'")));
        }
        let value = read(&key, &mut member)?;
        out.push((key, value));
    }
    Ok(out)
}

/// Reads (decompresses) at most `limit` bytes of the member `key`.
pub(crate) fn read_member(
    member: &mut impl Read,
    limit: u64,
    path: &Path,
    key: &str,
) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    member
        .take(limit)
        .read_to_end(&mut data)
        .map_err(|e| DataError::Npy {
            path: path.to_path_buf(),
            key: Some(key.to_string()),
            reason: format!("cannot decompress: {e}"),
        })?;
    Ok(data)
}

fn decode_named(bytes: &[u8], path: &Path) -> Result<Vec<(String, Tensor)>> {
    read_members(
        Cursor::new(bytes),
        bytes.len() as u64,
        path,
        |key, member| {
            let declared = member.size();
            if declared > MAX_MEMBER_BYTES {
                return Err(DataError::Npy {
                    path: path.to_path_buf(),
                    key: Some(key.to_string()),
                    reason: format!("declared size of {declared} bytes is too large"),
                });
            }
            let data = read_member(member, declared, path, key)?;
            npy::decode_named(&data, path, Some(key))
        },
    )
}

fn encode_named(
    arrays: &[(String, Tensor)],
    compression: Compression,
    path: &Path,
) -> Result<Vec<u8>> {
    let err = |reason: String| DataError::Npz {
        path: path.to_path_buf(),
        reason,
    };
    let method = match compression {
        Compression::Stored => CompressionMethod::Stored,
        Compression::Deflated => CompressionMethod::Deflated,
    };
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let mut seen = std::collections::HashSet::new();
    for (key, t) in arrays {
        if key.is_empty() {
            return Err(err("an array name is empty".into()));
        }
        if !seen.insert(key.as_str()) {
            return Err(err(format!("duplicate array name '{key}'")));
        }
        let bytes = npy::encode_named(t, path, Some(key))?;
        let opts = SimpleFileOptions::default()
            .compression_method(method)
            .large_file(bytes.len() as u64 >= u32::MAX as u64);
        zip.start_file(format!("{key}.npy"), opts)
            .map_err(|e| err(format!("array '{key}': {e}")))?;
        zip.write_all(&bytes)
            .map_err(|e| err(format!("array '{key}': {e}")))?;
    }
    let cursor = zip.finish().map_err(|e| err(e.to_string()))?;
    Ok(cursor.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::npy::tests::{arb_tensor, same_bits};
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn reads_numpy_savez_and_savez_compressed() {
        for hex in [NUMPY_SAVEZ, NUMPY_SAVEZ_COMPRESSED] {
            let arrays = decode(&unhex(hex)).unwrap();
            let keys: Vec<&str> = arrays.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(keys, ["x", "idx"]);
            assert_eq!(arrays[0].1.shape(), &[1, 3]);
            assert_eq!(arrays[0].1.as_slice::<f32>().unwrap(), &[0.5, -1.0, 2.0]);
            assert_eq!(arrays[1].1.as_slice::<i64>().unwrap(), &[7]);
        }
    }

    #[test]
    fn refuses_bad_archives() {
        assert!(decode(b"").unwrap_err().to_string().contains("empty file"));
        let e = decode(b"this is text, not a zip archive")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a valid .npz"), "{e}");
        // a zip whose member is not .npy
        let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
        z.start_file("notes.txt", SimpleFileOptions::default())
            .unwrap();
        z.write_all(b"hi").unwrap();
        let b = z.finish().unwrap().into_inner();
        assert!(decode(&b)
            .unwrap_err()
            .to_string()
            .contains("'notes.txt' is not a .npy"));
        // a member holding garbage names its key
        let mut z = zip::ZipWriter::new(Cursor::new(Vec::new()));
        z.start_file("w.npy", SimpleFileOptions::default()).unwrap();
        z.write_all(b"garbage").unwrap();
        let b = z.finish().unwrap().into_inner();
        let e = decode(&b).unwrap_err().to_string();
        assert!(e.contains("(array 'w')") && e.contains("magic"), "{e}");
        // truncated archive
        let good = unhex(NUMPY_SAVEZ);
        assert!(decode(&good[..good.len() / 2]).is_err());
    }

    #[test]
    fn refuses_duplicate_and_empty_names_on_write() {
        let t = Tensor::scalar(1u8);
        let dup = vec![("a".to_string(), t.clone()), ("a".to_string(), t.clone())];
        assert!(encode(&dup, Compression::Stored)
            .unwrap_err()
            .to_string()
            .contains("duplicate"));
        assert!(encode(&[(String::new(), t)], Compression::Stored).is_err());
    }

    #[test]
    fn file_round_trip_and_missing_key() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let p = dir.join("a.npz");
        let arrays = vec![
            (
                "logits".to_string(),
                Tensor::from_vec(vec![1, 2], vec![0.25f32, 0.75]).unwrap(),
            ),
            (
                "mask".to_string(),
                Tensor::from_vec(vec![2], vec![true, false]).unwrap(),
            ),
        ];
        write_with(&p, &arrays, Compression::Deflated).unwrap();
        assert_eq!(read(&p).unwrap(), arrays);
        assert_eq!(read_key(&p, "mask").unwrap(), arrays[1].1);
        let e = read_key(&p, "nope").unwrap_err().to_string();
        assert!(
            e.contains("no array named 'nope'") && e.contains("logits, mask"),
            "{e}"
        );
    }

    /// `np.savez(f, x=np.array([[0.5, -1, 2]], 'f4'), idx=np.array([7]))` (numpy 2.4).
    const NUMPY_SAVEZ: &str = include_str!("testdata/savez.hex");
    /// The same arrays through `np.savez_compressed`.
    const NUMPY_SAVEZ_COMPRESSED: &str = include_str!("testdata/savez_compressed.hex");

    proptest! {
        #[test]
        fn npz_round_trip(ts in proptest::collection::vec(arb_tensor(), 0..4), deflate in any::<bool>()) {
            let arrays: Vec<(String, Tensor)> =
                ts.into_iter().enumerate().map(|(i, t)| (format!("a{i}"), t)).collect();
            let c = if deflate { Compression::Deflated } else { Compression::Stored };
            let back = decode(&encode(&arrays, c).unwrap()).unwrap();
            prop_assert_eq!(back.len(), arrays.len());
            for ((k1, t1), (k2, t2)) in back.iter().zip(&arrays) {
                prop_assert_eq!(k1, k2);
                prop_assert!(same_bits(t1, t2));
            }
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode(&bytes);
        }
    }
}
