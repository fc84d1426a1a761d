//! `qport profiles`: the integer-arithmetic profiles (how a target
//! accumulates, requantizes, rounds and places the bias), the presets plus
//! any defined in `--profile-file` files, and the loading of those files
//! that every profile-aware command shares.
//!
//! # JSON schema (`--format json`), `"schema": "qport.profiles/1"`
//!
//! ```text
//! {
//!   "schema": "qport.profiles/1",
//!   "qport_version": str,
//!   "profile_files": [ { "path": str, "size_bytes": int, "sha256": str } ],
//!   "profiles": [ {
//!     "name": str, "origin": "preset" | "file", "file": str | null,
//!     "description": str,
//!     "accumulator": "exact-i32" | "i16-sat-pairs",
//!     "requant": "f32" | "f64" | "q31-shift" | "pot-shift",
//!     "rounding": "half-even" | "half-away" | "half-up" | "floor",
//!     "bias": "int32-accumulator" | "float-after-scale",
//!     "epilogue": "f64" | "f32" | "f16",
//!     "non_gemm": "float" | "fixed-point",
//!     "lowering": "onnxruntime" | "all" | "none",
//!     "sources": [str]
//!   } ]
//! }
//! ```

use crate::args::{LoadedProfiles, ProfileFilesArg};
use crate::output::{Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, ProfileJson, Render};
use crate::ExitStatus;
use anyhow::Result;
use serde::Serialize;

/// Examples shown by `qport profiles --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport profiles
  qport profiles --profile-file my-npu.toml --format json

Columns: accumulator = how products are summed (exact-i32, or i16-sat-pairs:
the x86 AVX2 u8*s8 path that saturates adjacent pairs to int16); requant =
how the int32 accumulator is scaled (f32, f64, q31-shift fixed point,
pot-shift power of two); rounding = how scaled values become integers; bias =
int32 in the accumulator or float after scaling; epilogue = float precision
of the scaled value ('-' for integer requantization, which has none);
non-gemm = float between dequantize and requantize, or integer fixed point;
lowering = which QDQ groups run as integer operators at all: onnxruntime
(the groups onnxruntime's CPU provider fuses on this host; on x86 not a
Conv/MatMul with int8 activations), all (every group qport can lower, int8
and uint8 activations alike, as integer hardware runs them) or none (the QDQ
graph runs in float as written, like onnxruntime with graph optimizations
disabled: ort-unfused). Presets are archetypes, not claims about a vendor's
silicon.

--profile-file FILE (TOML, or JSON for .json files) defines more profiles:
one profile at the top level, or several as [[profile]] tables, e.g.
  name = \"my-npu\"
  base = \"f32-rne\"
  rounding = \"half-away\"
Without `base` every field must be given but `lowering` (default
onnxruntime); unknown keys are errors. Exit code 2 for a malformed file.";

/// Arguments of `qport profiles`.
#[derive(Debug, clap::Args)]
pub struct ProfilesArgs {
    #[command(flatten)]
    files: ProfileFilesArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
}

#[derive(Serialize)]
struct ProfilesJson<'a> {
    /// `schema`, `qport_version`.
    #[serde(flatten)]
    header: Header,
    profile_files: Vec<FileJson>,
    profiles: Vec<ProfileJson>,
    /// What the human table is drawn from.
    #[serde(skip)]
    loaded: &'a LoadedProfiles,
}

impl Render for ProfilesJson<'_> {
    fn human(&self, ui: &Ui) -> String {
        render_human(self.loaded, ui)
    }
}

fn render_human(loaded: &LoadedProfiles, ui: &Ui) -> String {
    let mut t = Table::new(
        &[
            "profile",
            "accumulator",
            "requant",
            "rounding",
            "bias",
            "epilogue",
            "non-gemm",
            "lowering",
            "description",
        ],
        "lllllllll",
    );
    let reg = &loaded.registry;
    for p in reg.profiles() {
        let j = ProfileJson::new(p, reg.origin(&p.name));
        let epilogue = if p.integer_requant() {
            "-".to_string()
        } else {
            j.epilogue
        };
        let name_style = if j.file.is_some() {
            Style::Good
        } else {
            Style::Bold
        };
        t.styled_row(vec![
            (j.name, name_style),
            (j.accumulator, Style::Plain),
            (j.requant, Style::Plain),
            (j.rounding, Style::Plain),
            (j.bias, Style::Plain),
            (epilogue, Style::Plain),
            (j.non_gemm, Style::Plain),
            (j.lowering, Style::Plain),
            (j.description, Style::Dim),
        ]);
    }
    let mut s = t.render(ui, "");
    for f in &loaded.files {
        let shown = f.path.display().to_string();
        let names: Vec<&str> = reg
            .profiles()
            .iter()
            .filter(|p| reg.origin(&p.name) == Some(shown.as_str()))
            .map(|p| p.name.as_str())
            .collect();
        let line = format!(
            "from {shown}: {}",
            if names.is_empty() {
                "no profiles".to_string()
            } else {
                names.join(", ")
            }
        );
        s.push_str(&format!("\n{}", ui.paint(&line, Style::Dim)));
    }
    if !loaded.files.is_empty() {
        s.push('\n');
    }
    s
}

/// Runs `qport profiles`.
pub fn run(args: &ProfilesArgs, ui: &Ui) -> Result<ExitStatus> {
    let loaded = args.files.load()?;
    let reg = &loaded.registry;
    let doc = ProfilesJson {
        header: Header::new("qport.profiles/1"),
        profile_files: loaded.files.iter().map(FileJson::from).collect(),
        profiles: reg
            .profiles()
            .iter()
            .map(|p| ProfileJson::new(p, reg.origin(&p.name)))
            .collect(),
        loaded: &loaded,
    };
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qport_core::arith::ArithProfile;

    #[test]
    fn json_form_uses_wire_names() {
        let p = ArithProfile::preset("avx2-u8s8").unwrap();
        let j = ProfileJson::new(&p, None);
        assert_eq!(
            (
                j.origin.as_str(),
                j.accumulator.as_str(),
                j.requant.as_str()
            ),
            ("preset", "i16-sat-pairs", "f32")
        );
        let j = ProfileJson::new(&p, Some("f.toml"));
        assert_eq!(
            (j.origin.as_str(), j.file.as_deref()),
            ("file", Some("f.toml"))
        );
    }
}
