//! Arrays read one row at a time: the slices along the first axis of a
//! `.npy` file, or of the arrays in an `.npz` archive, without loading the
//! whole array.
//!
//! [`RowReader::open_npy`] reads only the header up front and then seeks to
//! each row. [`RowReader::open_npz`] does the same for members stored
//! uncompressed (`np.savez`), whose bytes lie contiguously in the archive.
//! Deflated members (`np.savez_compressed`) cannot be seeked into, so each
//! is decompressed once, whole, into memory when the archive is opened.
//!
//! Rows are returned in the array's own dtype; the file is opened lazily
//! on the first read and kept open until the reader is dropped.

use crate::error::{DataError, Result};
use crate::npy::{self, Prefix};
use crate::npz;
use qport_core::{DType, Tensor};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A rank >= 1 array in a file, read one row (first-axis slice) at a time.
#[derive(Debug)]
pub struct RowReader {
    path: PathBuf,
    key: Option<String>,
    dtype: DType,
    shape: Vec<usize>,
    row_bytes: usize,
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// Data at `start` in the file at `path`, opened on first use.
    File { start: u64, file: Option<File> },
    /// A decompressed member's data bytes.
    Memory(Arc<Vec<u8>>),
}

impl Clone for RowReader {
    /// A reader of the same rows with its own file handle (opened lazily).
    fn clone(&self) -> RowReader {
        RowReader {
            path: self.path.clone(),
            key: self.key.clone(),
            dtype: self.dtype,
            shape: self.shape.clone(),
            row_bytes: self.row_bytes,
            source: match &self.source {
                Source::File { start, .. } => Source::File {
                    start: *start,
                    file: None,
                },
                Source::Memory(m) => Source::Memory(Arc::clone(m)),
            },
        }
    }
}

impl RowReader {
    /// Opens a `.npy` file, reading only its header. Fails if the file is
    /// not a valid `.npy` array, is rank 0, or its size does not match the
    /// header.
    pub fn open_npy(path: &Path) -> Result<RowReader> {
        let mut f = File::open(path).map_err(|e| DataError::io(path, e))?;
        let file_len = f.metadata().map_err(|e| DataError::io(path, e))?.len();
        let p = npy::read_prefix(&mut f, path, None)?;
        p.check_data_len(
            (file_len as u128).saturating_sub(p.data_offset as u128),
            path,
            None,
        )?;
        let source = Source::File {
            start: p.data_offset as u64,
            file: Some(f),
        };
        RowReader::new(path, None, &p, source)
    }

    /// Opens every array of an `.npz` archive, in archive order, keyed by
    /// member name without `.npy`. Stored members are read row by row from
    /// the file; deflated ones are decompressed into memory now.
    pub fn open_npz(path: &Path) -> Result<Vec<(String, RowReader)>> {
        let f = File::open(path).map_err(|e| DataError::io(path, e))?;
        let file_len = f.metadata().map_err(|e| DataError::io(path, e))?.len();
        npz::read_members(f, file_len, path, |key, member| {
            let size = member.size();
            if member.compression() == zip::CompressionMethod::Stored {
                let start = member.data_start();
                if start.saturating_add(size) > file_len {
                    return Err(DataError::Npz {
                        path: path.to_path_buf(),
                        reason: format!(
                            "member '{}' extends past the end of the file",
                            member.name()
                        ),
                    });
                }
                let p = npy::read_prefix(member, path, Some(key))?;
                p.check_data_len(
                    (size as u128).saturating_sub(p.data_offset as u128),
                    path,
                    Some(key),
                )?;
                let source = Source::File {
                    start: start + p.data_offset as u64,
                    file: None,
                };
                RowReader::new(path, Some(key), &p, source)
            } else {
                let p = npy::read_prefix(member, path, Some(key))?;
                let need = p.data_len();
                let data = npz::read_member(member, (need as u64).saturating_add(1), path, key)?;
                p.check_data_len(data.len() as u128, path, Some(key))?;
                RowReader::new(path, Some(key), &p, Source::Memory(Arc::new(data)))
            }
        })
    }

    fn new(path: &Path, key: Option<&str>, p: &Prefix, source: Source) -> Result<RowReader> {
        let shape: Vec<usize> = p.shape.iter().map(|&d| d as usize).collect();
        if shape.is_empty() {
            return Err(DataError::Npy {
                path: path.to_path_buf(),
                key: key.map(str::to_string),
                reason: "a 0-d (scalar) array has no samples; the first axis must count samples"
                    .into(),
            });
        }
        // With zero rows the header's element count says nothing about a
        // row's size, so bound it separately.
        let row_elems =
            qport_core::shape::checked_numel(&shape[1..]).map_err(|e| DataError::Npy {
                path: path.to_path_buf(),
                key: key.map(str::to_string),
                reason: format!("row shape {:?}: {e}", &shape[1..]),
            })?;
        Ok(RowReader {
            path: path.to_path_buf(),
            key: key.map(str::to_string),
            dtype: p.dtype,
            row_bytes: row_elems * p.dtype.size_of(),
            shape,
            source,
        })
    }

    /// Number of rows (the first dimension).
    pub fn len(&self) -> usize {
        self.shape[0]
    }

    /// True when the array has no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element type of the stored array.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape of one row (the array's shape without the first axis).
    pub fn row_shape(&self) -> &[usize] {
        &self.shape[1..]
    }

    /// The file read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `.npz` key, for an archive member.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Reads row `index` as a tensor of shape [`RowReader::row_shape`].
    pub fn read_row(&mut self, index: usize) -> Result<Tensor> {
        let err = |reason: String| DataError::Npy {
            path: self.path.clone(),
            key: self.key.clone(),
            reason,
        };
        if index >= self.len() {
            return Err(err(format!(
                "row {index} is out of range (the array has {} rows)",
                self.len()
            )));
        }
        let offset = index as u64 * self.row_bytes as u64;
        let data = match &mut self.source {
            Source::Memory(m) => {
                let at = offset as usize;
                npy::decode_data(self.dtype, &m[at..at + self.row_bytes])
            }
            Source::File { start, file } => {
                let f = match file {
                    Some(f) => f,
                    None => file
                        .insert(File::open(&self.path).map_err(|e| DataError::io(&self.path, e))?),
                };
                let mut buf = vec![0u8; self.row_bytes];
                f.seek(SeekFrom::Start(*start + offset))
                    .and_then(|_| f.read_exact(&mut buf))
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::UnexpectedEof => {
                            err(format!("truncated data: row {index} is cut short (the file changed since it was opened?)"))
                        }
                        _ => DataError::io(&self.path, e),
                    })?;
                npy::decode_data(self.dtype, &buf)
            }
        };
        Tensor::new(self.shape[1..].to_vec(), data).map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{npy, npz};

    fn arrays() -> Vec<(String, Tensor)> {
        let a = Tensor::from_vec(vec![3, 2], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![7u8, 8]).unwrap();
        vec![("a".to_string(), a), ("b".to_string(), b)]
    }

    #[test]
    fn stored_members_stay_on_disk_and_deflated_are_loaded() {
        let dir = tempfile::tempdir().unwrap();
        for (c, on_disk) in [
            (npz::Compression::Stored, true),
            (npz::Compression::Deflated, false),
        ] {
            let p = dir.path().join("d.npz");
            npz::write_with(&p, &arrays(), c).unwrap();
            let mut readers = RowReader::open_npz(&p).unwrap();
            assert_eq!(readers.len(), 2);
            let (key, a) = &mut readers[0];
            assert_eq!((key.as_str(), a.key()), ("a", Some("a")));
            assert_eq!(matches!(a.source, Source::File { .. }), on_disk, "{c:?}");
            assert_eq!(
                a.read_row(2).unwrap().as_slice::<f32>().unwrap(),
                &[5.0, 6.0]
            );
            let mut b = readers[1].1.clone();
            assert_eq!(b.row_shape(), &[] as &[usize]);
            assert_eq!(b.read_row(1).unwrap().as_slice::<u8>().unwrap(), &[8]);
        }
    }

    #[test]
    fn scalars_and_bad_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.npy");
        npy::write(&p, &Tensor::scalar(1.0f32)).unwrap();
        let e = RowReader::open_npy(&p).unwrap_err().to_string();
        assert!(e.contains("s.npy") && e.contains("0-d"), "{e}");
        std::fs::write(&p, b"\x93NUMPY\x01\x00\x10").unwrap();
        let e = RowReader::open_npy(&p).unwrap_err().to_string();
        assert!(e.contains("s.npy") && e.contains("truncated"), "{e}");
        let huge = npy::raw_npy(
            1,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 1099511627776, 1099511627776), }",
            &[],
        );
        std::fs::write(&p, huge).unwrap();
        let e = RowReader::open_npy(&p).unwrap_err().to_string();
        assert!(e.contains("row shape"), "{e}");
        std::fs::write(&p, b"").unwrap();
        assert!(RowReader::open_npy(&p).is_err());
        assert!(RowReader::open_npz(&p).is_err());
        std::fs::write(&p, b"PK\x03\x04 not really").unwrap();
        let e = RowReader::open_npz(&p).unwrap_err().to_string();
        assert!(e.contains("not a valid .npz"), "{e}");
    }
}
