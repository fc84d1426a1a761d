//! Class labels of evaluation samples, for accuracy (rather than agreement
//! with FP32).
//!
//! A label spec ([`LabelSpec::parse`]) is one of:
//!
//! - `FILE.txt`: one class index per line, in sample order (blank lines
//!   and lines starting with `#` are skipped);
//! - `FILE.npy`: an integer array with one class index per sample (any
//!   shape; read flat, in C order);
//! - `folders`: the samples are an image folder whose first-level
//!   subfolders are named by class index (`0/`, `1/`, ...);
//! - `folders:NAME,NAME,...`: the same with the subfolder names listed in
//!   class-index order (`folders:0,180` for a classifier whose class 0 is
//!   text at 0° and class 1 text at 180°).
//!
//! [`Labels::load`] reads them against a [`Dataset`]: a file's count must
//! equal the number of label rows the caller expects (one per sample for
//! a batch-1 classifier), folder labels need an image dataset whose every
//! image lies in a named class folder.
//!
//! ```
//! use qport_data::labels::LabelSpec;
//! assert_eq!(
//!     LabelSpec::parse("folders:0,180").unwrap(),
//!     LabelSpec::Folders(Some(vec!["0".into(), "180".into()]))
//! );
//! assert!(LabelSpec::parse("folders:").is_err());
//! ```

use crate::dataset::Dataset;
use crate::error::{DataError, Result};
use std::path::{Path, PathBuf};

/// Where the labels come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelSpec {
    /// A `.txt` or `.npy` file of class indices in sample order.
    File(PathBuf),
    /// Class folders of an image dataset: named by index (`None`), or
    /// the names in class-index order.
    Folders(Option<Vec<String>>),
}

fn label_err(path: &Path, reason: impl Into<String>) -> DataError {
    DataError::Dataset {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

impl LabelSpec {
    /// Parses a spec (see the [module docs](self)).
    pub fn parse(s: &str) -> Result<LabelSpec> {
        let bad = |why: &str| {
            label_err(
                Path::new(s),
                format!(
                    "{why}; --labels takes FILE.txt, FILE.npy, folders or folders:NAME,NAME,..."
                ),
            )
        };
        if s == "folders" {
            return Ok(LabelSpec::Folders(None));
        }
        if let Some(list) = s.strip_prefix("folders:") {
            let names: Vec<String> = list.split(',').map(|n| n.trim().to_string()).collect();
            if names.iter().any(String::is_empty) {
                return Err(bad("an empty class folder name"));
            }
            for (i, n) in names.iter().enumerate() {
                if names[..i].contains(n) {
                    return Err(bad(&format!("class folder '{n}' is listed twice")));
                }
            }
            return Ok(LabelSpec::Folders(Some(names)));
        }
        let p = PathBuf::from(s);
        match p.extension().and_then(|e| e.to_str()) {
            Some("txt") | Some("npy") => Ok(LabelSpec::File(p)),
            _ => Err(bad("not a label spec")),
        }
    }
}

/// Class labels, one per label row, in sample order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// The class index of every label row.
    pub classes: Vec<usize>,
    /// Where they came from, for reports (`labels.txt`, `class folders
    /// 0,180 of data/`).
    pub source: String,
}

impl Labels {
    /// Reads `spec` for the samples of `data`.
    pub fn load(spec: &LabelSpec, data: &Dataset) -> Result<Labels> {
        match spec {
            LabelSpec::File(p) => {
                let classes = read_file(p)?;
                Ok(Labels {
                    classes,
                    source: p.display().to_string(),
                })
            }
            LabelSpec::Folders(names) => folders(names.as_deref(), data),
        }
    }

    /// Number of label rows.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    /// True without labels.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }
}

fn read_file(p: &Path) -> Result<Vec<usize>> {
    let as_class = |v: i128, at: String| -> Result<usize> {
        usize::try_from(v).map_err(|_| label_err(p, format!("{at}: class index {v} is negative")))
    };
    if p.extension().and_then(|e| e.to_str()) == Some("npy") {
        let t = crate::npy::read(p)?;
        if !t.dtype().is_int() {
            return Err(label_err(
                p,
                format!("labels must be integers, the array holds {}", t.dtype()),
            ));
        }
        let v = t.to_i64_vec().map_err(|e| label_err(p, e.to_string()))?;
        return v
            .iter()
            .enumerate()
            .map(|(i, &x)| as_class(i128::from(x), format!("element {i}")))
            .collect();
    }
    let text = std::fs::read_to_string(p).map_err(|e| DataError::io(p, e))?;
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let v: i128 = t.parse().map_err(|_| {
            label_err(
                p,
                format!(
                    "line {}: '{t}' is not a class index (one integer per line)",
                    i + 1
                ),
            )
        })?;
        out.push(as_class(v, format!("line {}", i + 1))?);
    }
    if out.is_empty() {
        return Err(label_err(p, "no labels in the file"));
    }
    Ok(out)
}

fn folders(names: Option<&[String]>, data: &Dataset) -> Result<Labels> {
    let root = data.path();
    let files = data.image_files().ok_or_else(|| {
        label_err(
            root,
            "--labels folders needs an image folder; give arrays' labels as FILE.txt or FILE.npy",
        )
    })?;
    let mut classes = Vec::with_capacity(files.len());
    for f in files {
        let folder = f
            .strip_prefix(root)
            .ok()
            .and_then(|r| {
                let mut c = r.components();
                let first = c.next()?;
                // the image itself is not a class folder
                c.next()?;
                first.as_os_str().to_str()
            })
            .ok_or_else(|| {
                label_err(
                    f,
                    format!(
                        "not inside a class folder of {} (--labels folders reads the class from the first subfolder)",
                        root.display()
                    ),
                )
            })?;
        let class = match names {
            Some(names) => names.iter().position(|n| n == folder).ok_or_else(|| {
                label_err(
                    f,
                    format!(
                        "class folder '{folder}' is not among the listed classes ({})",
                        names.join(",")
                    ),
                )
            })?,
            None => folder.parse::<usize>().map_err(|_| {
                label_err(
                    f,
                    format!(
                        "class folder '{folder}' is not a class index; list the folders in class order: --labels folders:NAME,NAME,..."
                    ),
                )
            })?,
        };
        classes.push(class);
    }
    let source = match names {
        Some(n) => format!("class folders {} of {}", n.join(","), root.display()),
        None => format!("class folders of {}", root.display()),
    };
    Ok(Labels { classes, source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::InputSpec;
    use crate::preprocess::Preprocess;

    fn png(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut out = Vec::new();
        {
            let mut enc = png::Encoder::new(&mut out, 2, 2);
            enc.set_color(png::ColorType::Rgb);
            enc.set_depth(png::BitDepth::Eight);
            let mut wr = enc.write_header().unwrap();
            wr.write_image_data(&[9; 12]).unwrap();
        }
        std::fs::write(path, out).unwrap();
    }

    fn images(root: &Path) -> Dataset {
        let spec = InputSpec::new("x", Some(vec![1, 3, 2, 2]));
        Dataset::open(root, &[spec], Some(Preprocess::default())).unwrap()
    }

    #[test]
    fn parses_specs_and_rejects_bad_ones() {
        assert_eq!(
            LabelSpec::parse("folders").unwrap(),
            LabelSpec::Folders(None)
        );
        assert_eq!(
            LabelSpec::parse("l.txt").unwrap(),
            LabelSpec::File("l.txt".into())
        );
        for bad in ["folders:a,,b", "folders:a,a", "labels.csv", ""] {
            let e = LabelSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains("--labels takes"), "{bad}: {e}");
        }
    }

    #[test]
    fn reads_text_and_npy_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let t = d.join("l.txt");
        std::fs::write(&t, "# classes\n3\n\n0\n 12 \n").unwrap();
        let data = images_with(d);
        let l = Labels::load(&LabelSpec::File(t.clone()), &data).unwrap();
        assert_eq!(l.classes, vec![3, 0, 12]);
        std::fs::write(&t, "3\n-1\n").unwrap();
        let e = Labels::load(&LabelSpec::File(t.clone()), &data).unwrap_err();
        assert!(
            e.to_string().contains("line 2: class index -1 is negative"),
            "{e}"
        );
        std::fs::write(&t, "3\ncat\n").unwrap();
        let e = Labels::load(&LabelSpec::File(t), &data).unwrap_err();
        assert!(e.to_string().contains("'cat' is not a class index"), "{e}");
        let n = d.join("l.npy");
        let arr = qport_core::Tensor::from_vec(vec![2, 2], vec![1i64, 0, 4, 2]).unwrap();
        crate::npy::write(&n, &arr).unwrap();
        let l = Labels::load(&LabelSpec::File(n.clone()), &data).unwrap();
        assert_eq!(l.classes, vec![1, 0, 4, 2]);
        let f = qport_core::Tensor::from_vec(vec![2], vec![1.0f32, 0.0]).unwrap();
        crate::npy::write(&n, &f).unwrap();
        let e = Labels::load(&LabelSpec::File(n), &data).unwrap_err();
        assert!(e.to_string().contains("must be integers"), "{e}");
    }

    fn images_with(d: &Path) -> Dataset {
        let root = d.join("imgs");
        png(&root.join("a.png"));
        images(&root)
    }

    #[test]
    fn reads_class_folders_in_sample_order() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["180/b.png", "0/a.png", "0/c.png", "180/a.png"] {
            png(&d.join(f));
        }
        let data = images(d);
        let named = LabelSpec::parse("folders:0,180").unwrap();
        let l = Labels::load(&named, &data).unwrap();
        // samples are sorted by path: 0/a, 0/c, 180/a, 180/b
        assert_eq!(l.classes, vec![0, 0, 1, 1]);
        let by_index = Labels::load(&LabelSpec::Folders(None), &data).unwrap();
        assert_eq!(by_index.classes, vec![0, 0, 180, 180]);
        let missing = LabelSpec::parse("folders:0,90").unwrap();
        let e = Labels::load(&missing, &data).unwrap_err().to_string();
        assert!(
            e.contains("'180' is not among the listed classes (0,90)"),
            "{e}"
        );
        png(&d.join("loose.png"));
        let e = Labels::load(&named, &images(d)).unwrap_err().to_string();
        assert!(e.contains("not inside a class folder"), "{e}");
    }
}
