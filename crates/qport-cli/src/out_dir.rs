//! `--out DIR` and `--force`, shared by every command that writes files
//! (`quantize`, `agree`, `diverge`, `bench`): `--out` is always a
//! directory, and it is checked before any work so a long study never
//! computes a result it cannot write.
//!
//! The rules: a missing directory is created (with its parents) when the
//! results are written, and its nearest existing ancestor must be a
//! writable directory; an existing `--out` must be a writable directory;
//! an existing **non-empty** `--out` is refused unless `--force` is given
//! (then the command's own files are replaced and nothing else is
//! touched). Writability is probed by creating and removing a temporary
//! file. Every refusal is an input error (exit 2).
//!
//! An output **file** (`run --output OUT.npz`) follows the same rules for
//! its directory: [`check_file`] refuses a path that is a directory or
//! whose directory cannot be created or written, and [`create_parent`]
//! creates the missing directories just before the (atomic) write.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// `--out DIR` (required) and `--force`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutDirArg {
    /// Output directory (created if missing; refused when it exists and is
    /// not empty, unless --force).
    #[arg(long, short, value_name = "DIR")]
    pub out: PathBuf,
    /// Write into a non-empty --out directory, replacing the command's own
    /// files there (other files are left alone).
    #[arg(long)]
    pub force: bool,
}

/// `--out DIR` (optional) and `--force`.
#[derive(Debug, Clone, clap::Args)]
pub struct OptOutDirArg {
    /// Also write the JSON document into this directory (created if
    /// missing; refused when it exists and is not empty, unless --force).
    #[arg(long, short, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Write into a non-empty --out directory, replacing the command's own
    /// files there (other files are left alone).
    #[arg(long, requires = "out")]
    pub force: bool,
}

impl OutDirArg {
    /// Checks `--out` up front (see the module docs); `files` are the names
    /// the command will write, for the message.
    pub fn check(&self, files: &[&str]) -> Result<&Path> {
        check(&self.out, self.force, files)?;
        Ok(&self.out)
    }
}

impl OptOutDirArg {
    /// Checks `--out` up front when given.
    pub fn check(&self, files: &[&str]) -> Result<Option<&Path>> {
        match &self.out {
            Some(d) => {
                check(d, self.force, files)?;
                Ok(Some(d))
            }
            None => Ok(None),
        }
    }
}

/// Checks that `dir` can receive `files`: see the module docs.
pub fn check(dir: &Path, force: bool, files: &[&str]) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => bail!(
            "--out '{}' is a file; --out names a directory (the command writes {} into it)",
            dir.display(),
            files.join(", ")
        ),
        Ok(_) => {
            let non_empty = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read --out directory '{}'", dir.display()))?
                .next()
                .is_some();
            if non_empty && !force {
                bail!(
                    "--out '{}' exists and is not empty; give --force to replace {} there, \
                     or choose another directory",
                    dir.display(),
                    files.join(", ")
                );
            }
            probe(dir, dir)
        }
        // missing, or a path through a file (`file/sub`)
        Err(_) => {
            let ancestor = existing_ancestor(dir);
            if !ancestor.is_dir() {
                bail!(
                    "cannot create --out '{}': '{}' is not a directory",
                    dir.display(),
                    ancestor.display()
                );
            }
            probe(dir, &ancestor)
        }
    }
}

/// The nearest ancestor of `dir` that exists (`.` for a relative path
/// whose every component is missing).
fn existing_ancestor(dir: &Path) -> PathBuf {
    let mut a = dir;
    while let Some(p) = a.parent() {
        let p = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        if std::fs::symlink_metadata(p).is_ok() {
            return p.to_path_buf();
        }
        a = p;
    }
    PathBuf::from(".")
}

/// Creates and removes a temporary file in `at` (the directory or the
/// ancestor it will be created in).
fn probe(dir: &Path, at: &Path) -> Result<()> {
    tempfile::Builder::new()
        .prefix(".qport-probe")
        .tempfile_in(at)
        .map(drop)
        .with_context(|| {
            if dir == at {
                format!("cannot write into --out '{}'", dir.display())
            } else {
                format!(
                    "cannot create --out '{}': '{}' is not writable",
                    dir.display(),
                    at.display()
                )
            }
        })
}

/// Checks the output file `path` given as `flag` before any work: it is
/// not a directory, and its directory exists as a writable directory or
/// can be created (its nearest existing ancestor is a writable directory).
/// An existing file is replaced when written.
pub fn check_file(path: &Path, flag: &str) -> Result<()> {
    if path.is_dir() {
        bail!(
            "{flag} '{}' is a directory; {flag} names a file",
            path.display()
        );
    }
    let dir = parent(path);
    let at = if dir.is_dir() {
        dir.to_path_buf()
    } else {
        let a = existing_ancestor(&dir);
        if !a.is_dir() {
            bail!(
                "cannot create the directory of {flag} '{}': '{}' is not a directory",
                path.display(),
                a.display()
            );
        }
        a
    };
    tempfile::Builder::new()
        .prefix(".qport-probe")
        .tempfile_in(&at)
        .map(drop)
        .with_context(|| {
            format!(
                "cannot write {flag} '{}': '{}' is not writable",
                path.display(),
                at.display()
            )
        })
}

/// Creates the missing directories above the output file `path`.
pub fn create_parent(path: &Path) -> Result<()> {
    let dir = parent(path);
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create output directory '{}'", dir.display()))
}

/// The directory `path` is written in (`.` for a bare file name).
fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates `dir` (and parents) and writes `bytes` to `dir/name` atomically;
/// returns the file's path.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create output directory '{}'", dir.display()))?;
    let path = dir.join(name);
    qport_data::atomic::write_atomic(&path, bytes)
        .with_context(|| format!("cannot write '{}'", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_empty_full_and_file_outs() {
        let t = tempfile::tempdir().unwrap();
        let missing = t.path().join("a/b");
        check(&missing, false, &["x.json"]).unwrap();
        assert!(!missing.exists(), "the check creates nothing");
        let empty = t.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        check(&empty, false, &["x.json"]).unwrap();
        std::fs::write(empty.join("old"), b"1").unwrap();
        let e = check(&empty, false, &["x.json"]).unwrap_err().to_string();
        assert!(e.contains("not empty") && e.contains("--force"), "{e}");
        check(&empty, true, &["x.json"]).unwrap();
        let file = empty.join("old");
        let e = check(&file, true, &["x.json"]).unwrap_err().to_string();
        assert!(e.contains("is a file"), "{e}");
        let e = check(&file.join("sub"), true, &["x.json"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not a directory"), "{e}");
        let names: Vec<_> = std::fs::read_dir(&empty).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "no probe file is left behind");
    }

    #[test]
    fn output_files_in_missing_directories_are_accepted_and_created() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("a/b/out.npz");
        check_file(&f, "--output").unwrap();
        assert!(!t.path().join("a").exists(), "the check creates nothing");
        create_parent(&f).unwrap();
        assert!(t.path().join("a/b").is_dir());
        let e = check_file(t.path(), "--output").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let file = t.path().join("x.txt");
        std::fs::write(&file, b"1").unwrap();
        let e = check_file(&file.join("sub/out.npz"), "--output")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is not a directory") && e.contains("x.txt"),
            "{e}"
        );
        let names: Vec<_> = std::fs::read_dir(t.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 2, "no probe file is left behind");
    }

    #[test]
    fn write_creates_the_directory() {
        let t = tempfile::tempdir().unwrap();
        let p = write(&t.path().join("new"), "r.json", b"{}\n").unwrap();
        assert_eq!(std::fs::read(p).unwrap(), b"{}\n");
    }
}
