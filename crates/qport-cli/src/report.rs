//! What every report shares: the header (`schema`, `qport_version`, and
//! for studies the command line), the `File` record, the profile record,
//! and the one way a result reaches stdout: a [`Render`] document printed
//! by [`emit`] in the format asked for (human and JSON; HTML is meant to
//! be a third method of the trait).

use crate::model_file::FileFacts;
use crate::output::{self, Format, Ui};
use anyhow::Result;
use qport_core::arith::{wire, ArithProfile};
use serde::Serialize;

/// The first fields of every `--format json` document.
#[derive(Debug, Serialize)]
pub struct Header {
    /// `qport.<command>/<version>`.
    pub schema: &'static str,
    /// Version of qport that wrote the document.
    pub qport_version: &'static str,
    /// The command line, for documents that record it (studies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

impl Header {
    /// A header without the command line.
    pub fn new(schema: &'static str) -> Header {
        Header {
            schema,
            qport_version: env!("CARGO_PKG_VERSION"),
            command: None,
        }
    }

    /// A header recording the command line.
    pub fn with_command(schema: &'static str) -> Header {
        Header {
            command: Some(std::env::args().collect()),
            ..Header::new(schema)
        }
    }
}

/// A command's result: a JSON document (`Serialize`) that also renders
/// for people. Adding an output format (HTML next) is one more method here
/// and one more arm in [`emit`], not a change to every command.
pub trait Render: Serialize {
    /// The human form: aligned tables, styled through `ui`.
    fn human(&self, ui: &Ui) -> String;
}

/// Prints `doc` on stdout in `format`.
pub fn emit<R: Render>(doc: &R, format: Format, ui: &Ui) -> Result<()> {
    match format {
        Format::Json => output::print_json(doc),
        Format::Human => output::print(&doc.human(ui)),
    }
}

/// A file as reports record it.
#[derive(Debug, Serialize)]
pub struct FileJson {
    /// Path as given on the command line.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lower-case hex sha256.
    pub sha256: String,
}

impl From<&FileFacts> for FileJson {
    fn from(f: &FileFacts) -> FileJson {
        FileJson {
            path: f.path.display().to_string(),
            size_bytes: f.size,
            sha256: f.sha256.clone(),
        }
    }
}

/// One profile in `qport.profiles/1`.
#[derive(Debug, Serialize)]
pub struct ProfileJson {
    pub name: String,
    pub origin: &'static str,
    pub file: Option<String>,
    pub description: String,
    pub accumulator: String,
    pub requant: String,
    pub rounding: String,
    pub bias: String,
    pub epilogue: String,
    pub non_gemm: String,
    pub sources: Vec<String>,
}

impl ProfileJson {
    /// The JSON form of `p`, read from `file` (`None` for a preset).
    pub fn new(p: &ArithProfile, file: Option<&str>) -> ProfileJson {
        ProfileJson {
            name: p.name.clone(),
            origin: if file.is_some() { "file" } else { "preset" },
            file: file.map(str::to_string),
            description: p.description.clone(),
            accumulator: wire(&p.accumulator),
            requant: wire(&p.requant),
            rounding: wire(&p.rounding),
            bias: wire(&p.bias),
            epilogue: wire(&p.epilogue),
            non_gemm: wire(&p.non_gemm),
            sources: p.sources.clone(),
        }
    }
}
