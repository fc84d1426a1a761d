//! What every report shares: the header (`schema`, `qport_version`, and
//! for studies the command line), the `File` record and the profile record
//! (all three from `qport_core::report`, so the studies' reports use them
//! too), and the one way a result reaches stdout: a [`Render`] document printed
//! by [`emit`] in the format asked for (human and JSON; HTML is meant to
//! be a third method of the trait).

use crate::model_file::FileFacts;
use crate::output::{self, Format, Ui};
use anyhow::Result;
pub use qport_core::report::{FileJson, Header, ProfileJson};
use serde::Serialize;

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

impl From<&FileFacts> for FileJson {
    fn from(f: &FileFacts) -> FileJson {
        FileJson {
            path: f.path.display().to_string(),
            size_bytes: f.size,
            sha256: f.sha256.clone(),
        }
    }
}
