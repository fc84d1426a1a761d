//! User overrides of the registry from TOML: toolchain versions change the
//! rules, so every value of [`Platform`] can be replaced or a platform added.
//!
//! ```toml
//! [[platform]]          # patch a built-in platform
//! name = "j6p"
//! min_memory_unit = 512
//!
//! [[platform]]          # add one, starting from a base platform
//! name = "j6x"
//! base = "j6p"
//! march = "nash-x"
//! l2m_cap_bytes = 16777216
//! ```
//!
//! Unknown keys are errors (so a typo never silently does nothing).
//! `l2m_cap_bytes = 0` means "no L2M".

use crate::{ByoQdq, HighAccuracyOutput, Ip, Platform, PlatformError, Precision, Registry};
use serde::Deserialize;

/// One `[[platform]]` table: every field optional except `name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlatformPatch {
    name: String,
    base: Option<String>,
    march: Option<String>,
    family: Option<String>,
    precisions: Option<Vec<Precision>>,
    default_template: Option<String>,
    tail_output: Option<HighAccuracyOutput>,
    image_stride_align: Option<u64>,
    featuremap_align_elems: Option<u64>,
    min_memory_unit: Option<u64>,
    bpu_cores: Option<u32>,
    multi_core: Option<bool>,
    l2m_cap_bytes: Option<u64>,
    allowed_ips: Option<Vec<Ip>>,
    default_arith_profile: Option<String>,
    byo_qdq: Option<ByoQdq>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideFile {
    #[serde(default)]
    platform: Vec<PlatformPatch>,
}

impl PlatformPatch {
    fn apply(self, p: &mut Platform) {
        macro_rules! set {
            ($($f:ident),*) => { $(if let Some(v) = self.$f { p.$f = v; })* };
        }
        set!(
            family,
            precisions,
            default_template,
            tail_output,
            image_stride_align
        );
        set!(
            featuremap_align_elems,
            min_memory_unit,
            bpu_cores,
            multi_core,
            allowed_ips,
            default_arith_profile,
            byo_qdq
        );
        if let Some(m) = self.march {
            p.march = Some(m);
        }
        if let Some(c) = self.l2m_cap_bytes {
            p.l2m_cap_bytes = (c > 0).then_some(c);
        }
        p.name = self.name;
    }
}

impl Registry {
    /// Applies the overrides in TOML `text`; `origin` names it in errors.
    /// All or nothing: on error the registry is unchanged.
    pub fn apply_overrides_str(&mut self, text: &str, origin: &str) -> Result<(), PlatformError> {
        let mut next = self.clone();
        next.apply_all(text, origin)?;
        *self = next;
        Ok(())
    }

    fn apply_all(&mut self, text: &str, origin: &str) -> Result<(), PlatformError> {
        let err = |message: String| PlatformError::Override {
            origin: origin.to_string(),
            message,
        };
        let file: OverrideFile =
            toml::from_str(text).map_err(|e| err(e.to_string().trim_end().to_string()))?;
        for patch in file.platform {
            let name = patch.name.trim().to_ascii_lowercase();
            if name.is_empty() {
                return Err(err("a [[platform]] has an empty name".into()));
            }
            let idx = self.platforms.iter().position(|p| p.name == name);
            let mut p = match (idx, &patch.base) {
                (Some(i), None) => self.platforms[i].clone(),
                (_, Some(b)) => self
                    .get(b)
                    .map_err(|e| err(format!("platform `{name}`: base: {e}")))?
                    .clone(),
                (None, None) => {
                    return Err(err(format!(
                        "new platform `{name}` needs `base = \"<platform>\"` to start from"
                    )))
                }
            };
            patch.apply(&mut p);
            p.name = name.clone();
            if p.image_stride_align == 0 || p.featuremap_align_elems == 0 || p.min_memory_unit == 0
            {
                return Err(err(format!(
                    "platform `{name}`: alignments and memory unit must be at least 1"
                )));
            }
            match idx {
                Some(i) => self.platforms[i] = p,
                None => self.platforms.push(p),
            }
        }
        Ok(())
    }

    /// Applies the overrides in the TOML file at `path`.
    pub fn apply_overrides_file(&mut self, path: &std::path::Path) -> Result<(), PlatformError> {
        let text = std::fs::read_to_string(path).map_err(|e| PlatformError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        self.apply_overrides_str(&text, &path.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_existing_and_add_new() {
        let mut r = Registry::builtin();
        let text = r#"
[[platform]]
name = "J6P"
min_memory_unit = 512
l2m_cap_bytes = 0

[[platform]]
name = "j6x"
base = "nash-p"
march = "nash-x"
allowed_ips = ["bpu", "dsp"]
tail_output = "int32-dequantize"
"#;
        r.apply_overrides_str(text, "o.toml").unwrap();
        let p = r.get("j6p").unwrap();
        assert_eq!((p.min_memory_unit, p.l2m_cap_bytes), (512, None));
        let x = r.get("nash-x").unwrap();
        assert_eq!(x.name, "j6x");
        assert_eq!(x.image_stride_align, 64);
        assert_eq!(x.allowed_ips, vec![Ip::Bpu, Ip::Dsp]);
        assert_eq!(x.tail_output, HighAccuracyOutput::Int32Dequantize);
        assert_eq!(r.platforms.len(), 13);
    }

    #[test]
    fn malformed_overrides_are_clear_errors() {
        let mut r = Registry::builtin();
        for (text, needle) in [
            ("[[platform]\nname=", "o.toml"),
            (
                "[[platform]]\nname = \"j6p\"\nmin_memroy_unit = 4\n",
                "min_memroy_unit",
            ),
            ("[[platform]]\nname = \"new\"\n", "base"),
            ("[[platform]]\nname = \"new\"\nbase = \"zz\"\n", "zz"),
            (
                "[[platform]]\nname = \"j6e\"\nimage_stride_align = 0\n",
                "at least 1",
            ),
            (
                "[[platform]]\nname = \"j6e\"\nallowed_ips = [\"npu\"]\n",
                "npu",
            ),
            (
                "[[platform]]\nname = \"j6e\"\nbpu_cores = 2\n[[platform]]\nname = \"q\"\n",
                "base",
            ),
        ] {
            let e = r
                .apply_overrides_str(text, "o.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle) && e.contains("o.toml"), "{e}");
        }
        assert_eq!(r, Registry::builtin());
        let e = r
            .apply_overrides_file(std::path::Path::new("/nonexistent/p.toml"))
            .unwrap_err();
        assert!(e.to_string().contains("/nonexistent/p.toml"));
    }
}
