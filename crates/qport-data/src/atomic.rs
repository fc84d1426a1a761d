//! Atomic file writes: content goes to a temporary file in the target's
//! directory, is flushed to disk, then renamed over the target, so a reader
//! sees either the old file or the complete new one, never a partial write.
//! On any error the temporary file is removed.

use crate::error::{DataError, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to `path` atomically.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("qport-atomic-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let p = dir.join("hello.txt");
/// qport_data::atomic::write_atomic(&p, b"hello").unwrap();
/// assert_eq!(std::fs::read(&p).unwrap(), b"hello");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// Writes to `path` atomically through a buffered writer given to `fill`.
///
/// The target is replaced only if `fill` succeeds and the data reaches the
/// disk.
pub fn write_atomic_with<F>(path: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&mut BufWriter<File>) -> std::io::Result<()>,
{
    let (tmp, file) = create_temp(path)?;
    let result = (|| -> std::io::Result<()> {
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        let file = w.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(DataError::io(path, e));
    }
    Ok(())
}

/// Creates a fresh temporary file next to `path` (same directory, so the
/// final rename never crosses file systems).
fn create_temp(path: &Path) -> Result<(PathBuf, File)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            DataError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
            )
        })?;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(DataError::io(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory holding only `out.bin` with `old` in it; returns
    /// both paths.
    fn dir_with_old_file(tag: &str) -> (PathBuf, PathBuf) {
        let d =
            std::env::temp_dir().join(format!("qport-data-atomic-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let p = d.join("out.bin");
        fs::write(&p, b"old").unwrap();
        (d, p)
    }

    fn entries(d: &Path) -> Vec<std::ffi::OsString> {
        fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect()
    }

    #[test]
    fn replaces_existing_file_and_leaves_no_temp() {
        let (d, p) = dir_with_old_file("replace");
        write_atomic(&p, b"new content").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"new content");
        let names = entries(&d);
        assert_eq!(names.len(), 1, "{names:?}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn failed_fill_keeps_old_file_and_removes_temp() {
        let (d, p) = dir_with_old_file("fail");
        let err = write_atomic_with(&p, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("out.bin"), "{err}");
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(entries(&d).len(), 1);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn missing_directory_names_the_file() {
        let p = std::env::temp_dir().join("qport-no-such-dir-xyz/out.bin");
        let err = write_atomic(&p, b"x").unwrap_err();
        assert!(err.to_string().contains("qport-no-such-dir-xyz"), "{err}");
    }
}
