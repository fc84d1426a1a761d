//! [`ProfileRegistry`]: the presets plus profiles a user defines in a small
//! TOML or JSON file.
//!
//! A file holds one profile (its fields at the top level) or several
//! (`[[profile]]` tables in TOML, `{"profile": [...]}` in JSON). Every field
//! is named as in [`ArithProfile`]; unknown keys are errors that name the
//! key. `base = "<profile>"` starts from a preset (or a profile defined
//! earlier) and the file overrides a few fields; without `base` every
//! arithmetic policy field must be given. `lowering` (which QDQ groups run
//! as integer operators: `onnxruntime`, `all` or `none`) is inherited from
//! the base too, and without a base defaults to `onnxruntime`, so files
//! written before the field existed keep their meaning.
//!
//! ```toml
//! name = "my-npu"
//! base = "f32-rne"
//! rounding = "half-away"
//! non_gemm = "fixed-point"
//! ```

use super::{
    presets, Accumulator, ArithProfile, BiasPlacement, Epilogue, Lowering, NonGemm, ProfileError,
    Requant, Rounding, PRESET_NAMES,
};
use serde::Deserialize;
use std::path::Path;

/// Syntax of a profile file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileFormat {
    /// TOML.
    Toml,
    /// JSON.
    Json,
}

impl ProfileFormat {
    /// `.json` files are JSON, `.toml` files TOML; any other name is JSON
    /// when its text starts with `{`, else TOML.
    pub fn guess(path: &Path, text: &str) -> ProfileFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => ProfileFormat::Json,
            Some(e) if e.eq_ignore_ascii_case("toml") => ProfileFormat::Toml,
            _ if text.trim_start().starts_with('{') => ProfileFormat::Json,
            _ => ProfileFormat::Toml,
        }
    }
}

/// One profile as written in a file: every field optional except `name`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileSpec {
    name: String,
    base: Option<String>,
    description: Option<String>,
    accumulator: Option<Accumulator>,
    requant: Option<Requant>,
    rounding: Option<Rounding>,
    bias: Option<BiasPlacement>,
    epilogue: Option<Epilogue>,
    non_gemm: Option<NonGemm>,
    lowering: Option<Lowering>,
    sources: Option<Vec<String>>,
}

/// A file of several profiles.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileList {
    profile: Vec<ProfileSpec>,
}

/// The known profiles: presets first, then user profiles in the order they
/// were added.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRegistry {
    profiles: Vec<ArithProfile>,
    /// Where each profile came from: `None` for presets, else the origin
    /// (file path) given to [`ProfileRegistry::add_str`].
    origins: Vec<Option<String>>,
}

impl Default for ProfileRegistry {
    fn default() -> Self {
        ProfileRegistry::builtin()
    }
}

impl ProfileRegistry {
    /// The presets alone.
    pub fn builtin() -> ProfileRegistry {
        let profiles = presets();
        let origins = vec![None; profiles.len()];
        ProfileRegistry { profiles, origins }
    }

    /// All profiles, in listing order.
    pub fn profiles(&self) -> &[ArithProfile] {
        &self.profiles
    }

    /// Profile names, in listing order.
    pub fn names(&self) -> Vec<&str> {
        self.profiles.iter().map(|p| p.name.as_str()).collect()
    }

    /// Looks a profile up by name, case-insensitively; the error lists the
    /// valid names.
    pub fn get(&self, name: &str) -> Result<&ArithProfile, ProfileError> {
        let want = name.trim().to_ascii_lowercase();
        self.profiles
            .iter()
            .find(|p| p.name == want)
            .ok_or_else(|| ProfileError::Unknown {
                name: name.to_string(),
                valid: self.names().join(", "),
            })
    }

    /// The file a profile was read from; `None` for presets and unknown
    /// names.
    pub fn origin(&self, name: &str) -> Option<&str> {
        let i = self.profiles.iter().position(|p| p.name == name)?;
        self.origins[i].as_deref()
    }

    /// Whether `name` is one of the presets.
    pub fn is_preset(name: &str) -> bool {
        PRESET_NAMES.contains(&name)
    }

    /// Reads the profiles in `text` (from `origin`, a file path for
    /// messages) and adds them; returns their names. All or nothing: on an
    /// error the registry is unchanged. A name already known is an error.
    pub fn add_str(
        &mut self,
        text: &str,
        format: ProfileFormat,
        origin: &str,
    ) -> Result<Vec<String>, ProfileError> {
        let specs = parse(text, format, origin)?;
        let mut next = self.clone();
        let mut added = Vec::with_capacity(specs.len());
        for spec in specs {
            let p = next.resolve(spec, origin)?;
            p.validate(origin)?;
            if next.get(&p.name).is_ok() {
                let what = if Self::is_preset(&p.name) {
                    "a preset"
                } else {
                    "an earlier profile"
                };
                return Err(ProfileError::Invalid {
                    origin: origin.to_string(),
                    profile: p.name.clone(),
                    message: format!("the name is already taken by {what}; pick another name"),
                });
            }
            added.push(p.name.clone());
            next.profiles.push(p);
            next.origins.push(Some(origin.to_string()));
        }
        *self = next;
        Ok(added)
    }

    /// Reads the profile file at `path` ([`ProfileFormat::guess`]) and adds
    /// its profiles, as [`Self::add_str`].
    pub fn add_file(&mut self, path: &Path) -> Result<Vec<String>, ProfileError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError::Parse {
            origin: origin.clone(),
            message: format!("cannot read: {e}"),
        })?;
        self.add_str(&text, ProfileFormat::guess(path, &text), &origin)
    }

    /// Fills a spec's missing fields from its base.
    fn resolve(&self, spec: ProfileSpec, origin: &str) -> Result<ArithProfile, ProfileError> {
        let name = spec.name.trim().to_ascii_lowercase();
        let invalid = |message: String| ProfileError::Invalid {
            origin: origin.to_string(),
            profile: name.clone(),
            message,
        };
        let base = match &spec.base {
            Some(b) => Some(
                self.get(b)
                    .map_err(|e| invalid(format!("`base`: {e}")))?
                    .clone(),
            ),
            None => None,
        };
        fn pick<T: Copy>(
            given: Option<T>,
            base: Option<&ArithProfile>,
            from_base: fn(&ArithProfile) -> T,
            key: &str,
        ) -> Result<T, String> {
            given.or_else(|| base.map(from_base)).ok_or_else(|| {
                format!("missing `{key}` (give it, or `base = \"<profile>\"` to inherit it)")
            })
        }
        let b = base.as_ref();
        Ok(ArithProfile {
            accumulator: pick(spec.accumulator, b, |p| p.accumulator, "accumulator")
                .map_err(&invalid)?,
            requant: pick(spec.requant, b, |p| p.requant, "requant").map_err(&invalid)?,
            rounding: pick(spec.rounding, b, |p| p.rounding, "rounding").map_err(&invalid)?,
            bias: pick(spec.bias, b, |p| p.bias, "bias").map_err(&invalid)?,
            epilogue: pick(spec.epilogue, b, |p| p.epilogue, "epilogue").map_err(&invalid)?,
            non_gemm: pick(spec.non_gemm, b, |p| p.non_gemm, "non_gemm").map_err(&invalid)?,
            lowering: spec
                .lowering
                .or_else(|| b.map(|p| p.lowering))
                .unwrap_or_default(),
            description: spec
                .description
                .or_else(|| b.map(|p| format!("based on {}", p.name)))
                .unwrap_or_default(),
            sources: spec.sources.unwrap_or_default(),
            name,
        })
    }
}

/// The specs in `text`: one at the top level, or a `profile` list.
fn parse(
    text: &str,
    format: ProfileFormat,
    origin: &str,
) -> Result<Vec<ProfileSpec>, ProfileError> {
    let err = |message: String| ProfileError::Parse {
        origin: origin.to_string(),
        message,
    };
    match format {
        ProfileFormat::Toml => {
            let table: toml::Table =
                toml::from_str(text).map_err(|e| err(toml_message(&e, text)))?;
            if table.contains_key("profile") {
                let list: ProfileList =
                    toml::from_str(text).map_err(|e| err(toml_message(&e, text)))?;
                Ok(list.profile)
            } else {
                let one: ProfileSpec =
                    toml::from_str(text).map_err(|e| err(toml_message(&e, text)))?;
                Ok(vec![one])
            }
        }
        ProfileFormat::Json => {
            let value: serde_json::Value =
                serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
            let Some(obj) = value.as_object() else {
                return Err(err("expected a JSON object at the top level".into()));
            };
            if obj.contains_key("profile") {
                let list: ProfileList =
                    serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
                Ok(list.profile)
            } else {
                let one: ProfileSpec =
                    serde_json::from_str(text).map_err(|e| err(e.to_string()))?;
                Ok(vec![one])
            }
        }
    }
}

/// A TOML error on one line: `line L, column C: message`.
fn toml_message(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim_end();
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {col}: {msg}")
        }
        None => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(text: &str, format: ProfileFormat) -> Result<ProfileRegistry, ProfileError> {
        let mut r = ProfileRegistry::builtin();
        r.add_str(text, format, "my.toml")?;
        Ok(r)
    }

    fn err(text: &str, format: ProfileFormat) -> String {
        add(text, format).unwrap_err().to_string()
    }

    #[test]
    fn every_preset_round_trips_through_toml_and_json() {
        for mut p in presets() {
            p.name = format!("rt-{}", p.name);
            let toml_text = toml::to_string(&p).unwrap();
            let json_text = serde_json::to_string_pretty(&p).unwrap();
            assert_eq!(toml::from_str::<ArithProfile>(&toml_text).unwrap(), p);
            assert_eq!(serde_json::from_str::<ArithProfile>(&json_text).unwrap(), p);
            for (text, f) in [
                (toml_text, ProfileFormat::Toml),
                (json_text, ProfileFormat::Json),
            ] {
                let r = add(&text, f).unwrap();
                assert_eq!(r.get(&p.name).unwrap(), &p);
                assert_eq!(r.origin(&p.name), Some("my.toml"));
            }
        }
    }

    #[test]
    fn base_inherits_and_fields_override() {
        let r = add(
            "name = \"My-NPU\"\nbase = \"f32-rne\"\nrounding = \"half-away\"\n",
            ProfileFormat::Toml,
        )
        .unwrap();
        let p = r.get("my-npu").unwrap();
        let base = ArithProfile::preset("f32-rne").unwrap();
        assert_eq!(p.rounding, Rounding::HalfAway);
        assert_eq!(p.requant, base.requant);
        assert_eq!(p.accumulator, base.accumulator);
        assert_eq!(p.description, "based on f32-rne");
        assert_eq!(r.profiles().len(), PRESET_NAMES.len() + 1);
        assert_eq!(r.origin("f32-rne"), None);

        // Several profiles; a later one may build on an earlier one.
        let text = r#"{"profile": [
            {"name": "a", "base": "gemmlowp", "rounding": "half-up"},
            {"name": "b", "base": "A", "non_gemm": "float", "sources": ["x"]}
        ]}"#;
        let r = add(text, ProfileFormat::Json).unwrap();
        let b = r.get("b").unwrap();
        assert_eq!(
            (b.requant, b.rounding),
            (Requant::Q31Shift, Rounding::HalfUp)
        );
        assert_eq!(
            (b.non_gemm, b.sources.clone()),
            (NonGemm::Float, vec!["x".into()])
        );

        let full = "name = \"full\"\naccumulator = \"i16-sat-pairs\"\nrequant = \"f64\"\n\
                    rounding = \"floor\"\nbias = \"float-after-scale\"\nepilogue = \"f16\"\n\
                    non_gemm = \"float\"\n";
        let r = add(full, ProfileFormat::Toml).unwrap();
        assert_eq!(r.get("full").unwrap().description, "");
        // without a base, a file written before `lowering` existed keeps
        // onnxruntime's rules
        assert_eq!(r.get("full").unwrap().lowering, Lowering::Onnxruntime);
    }

    #[test]
    fn lowering_is_inherited_or_given() {
        let r = add(
            "[[profile]]\nname = \"npu\"\nbase = \"gemmlowp\"\n\
             [[profile]]\nname = \"npu-ort\"\nbase = \"gemmlowp\"\nlowering = \"onnxruntime\"\n\
             [[profile]]\nname = \"flat\"\nbase = \"f32-rne\"\nlowering = \"none\"\n",
            ProfileFormat::Toml,
        )
        .unwrap();
        assert_eq!(r.get("npu").unwrap().lowering, Lowering::All);
        assert_eq!(r.get("npu-ort").unwrap().lowering, Lowering::Onnxruntime);
        let flat = r.get("flat").unwrap();
        assert_eq!(flat.lowering, Lowering::None);
        assert!(flat.is_float_execution());
        let e = err(
            "{\"name\": \"x\", \"base\": \"exact\", \"lowering\": \"some\"}",
            ProfileFormat::Json,
        );
        assert!(e.contains("some") && e.contains("onnxruntime"), "{e}");
    }

    #[test]
    fn unknown_keys_are_named() {
        for (text, f) in [
            (
                "name = \"x\"\nbase = \"exact\"\nroundnig = \"floor\"\n",
                ProfileFormat::Toml,
            ),
            (
                "[[profile]]\nname = \"x\"\nbase = \"exact\"\nroundnig = 1\n",
                ProfileFormat::Toml,
            ),
            (
                "{\"name\": \"x\", \"base\": \"exact\", \"roundnig\": 1}",
                ProfileFormat::Json,
            ),
            (
                "{\"profile\": [{\"name\": \"x\", \"roundnig\": 1}]}",
                ProfileFormat::Json,
            ),
        ] {
            let e = err(text, f);
            assert!(e.contains("roundnig") && e.contains("my.toml"), "{e}");
        }
        let e = err(
            "name = \"x\"\nbase = \"exact\"\n\nextra = 1\n",
            ProfileFormat::Toml,
        );
        assert!(e.contains("line 4") && e.contains("extra"), "{e}");
    }

    #[test]
    fn malformed_profiles_are_clear_errors() {
        for (text, f, needle) in [
            (
                "name = \"x\"\nrounding = \"floor\"\n",
                ProfileFormat::Toml,
                "missing `accumulator`",
            ),
            ("name = \"x\"\nbase = \"zz\"\n", ProfileFormat::Toml, "zz"),
            (
                "name = \"x\"\nbase = \"exact\"\nrounding = \"up\"\n",
                ProfileFormat::Toml,
                "up",
            ),
            ("base = \"exact\"\n", ProfileFormat::Toml, "name"),
            (
                "name = \"exact\"\nbase = \"exact\"\n",
                ProfileFormat::Toml,
                "already taken",
            ),
            (
                "name = \"a b\"\nbase = \"exact\"\n",
                ProfileFormat::Toml,
                "`name`",
            ),
            (
                "name = \"x\"\nbase = \"gemmlowp\"\nbias = \"float-after-scale\"\n",
                ProfileFormat::Toml,
                "float-after-scale",
            ),
            (
                "name = \"x\"\nbase = \"pot-shift\"\nepilogue = \"f16\"\n",
                ProfileFormat::Toml,
                "f16",
            ),
            ("name = [", ProfileFormat::Toml, "line 1"),
            ("[1, 2]", ProfileFormat::Json, "object"),
            ("{\"name\": ", ProfileFormat::Json, "EOF"),
        ] {
            let e = err(text, f);
            assert!(e.contains(needle) && e.contains("my.toml"), "{needle}: {e}");
        }
        // All or nothing: a bad second profile leaves the registry alone.
        let mut r = ProfileRegistry::builtin();
        let text = "[[profile]]\nname = \"ok\"\nbase = \"exact\"\n[[profile]]\nname = \"bad\"\n";
        assert!(r.add_str(text, ProfileFormat::Toml, "o.toml").is_err());
        assert_eq!(r, ProfileRegistry::builtin());
    }

    #[test]
    fn format_guess_and_files() {
        let g = |p: &str, t: &str| ProfileFormat::guess(Path::new(p), t);
        assert_eq!(g("a.JSON", "name = 1"), ProfileFormat::Json);
        assert_eq!(g("a.toml", "{"), ProfileFormat::Toml);
        assert_eq!(g("a.txt", "  {\"name\": 1}"), ProfileFormat::Json);
        assert_eq!(g("a", "name = 1"), ProfileFormat::Toml);
        let mut r = ProfileRegistry::builtin();
        let e = r.add_file(Path::new("/nonexistent/p.toml")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/p.toml"), "{e}");
        let e = r.get("nope").unwrap_err().to_string();
        assert!(e.contains("nope") && e.contains("fp16-epilogue"), "{e}");
    }
}
