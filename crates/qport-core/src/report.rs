//! The records every qport JSON report shares: the [`Header`] (`schema`,
//! `qport_version`, and for studies the command line), a file as reports
//! record it ([`FileJson`]), and an arithmetic profile ([`ProfileJson`]).
//! They live here, below every crate that writes a report (the studies in
//! `qport-study`, the commands in `qport-cli`), so each report is built
//! from the same records and serialises to the same JSON.
//!
//! ```
//! use qport_core::report::{FileJson, Header};
//! #[derive(serde::Serialize)]
//! struct Doc {
//!     #[serde(flatten)]
//!     header: Header,
//!     model: FileJson,
//! }
//! let doc = Doc {
//!     header: Header::new("qport.example/1"),
//!     model: FileJson { path: "m.onnx".into(), size_bytes: 3, sha256: "ab".into() },
//! };
//! let json = serde_json::to_string(&doc).unwrap();
//! assert!(json.starts_with(r#"{"schema":"qport.example/1","qport_version":""#));
//! ```

use crate::arith::{wire, ArithProfile};
use serde::{Deserialize, Serialize};

/// The first fields of every `--format json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// `qport.<command>/<version>`.
    pub schema: String,
    /// Version of qport that wrote the document.
    pub qport_version: String,
    /// The command line, for documents that record it (studies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

impl Header {
    /// A header without the command line.
    pub fn new(schema: &'static str) -> Header {
        Header {
            schema: schema.to_string(),
            qport_version: env!("CARGO_PKG_VERSION").to_string(),
            command: None,
        }
    }

    /// A header recording the command line (this process's arguments).
    pub fn with_command(schema: &'static str) -> Header {
        Header {
            command: Some(command_line()),
            ..Header::new(schema)
        }
    }
}

std::thread_local! {
    /// The command line [`with_command_line`] set on this thread.
    static COMMAND_LINE: std::cell::RefCell<Option<Vec<String>>> =
        const { std::cell::RefCell::new(None) };
}

/// The command line reports record: this process's arguments, or on this
/// thread inside [`with_command_line`] the command line given there (a
/// host program running a `qport` command in-process records the `qport`
/// command line that reproduces the report, not its own).
pub fn command_line() -> Vec<String> {
    COMMAND_LINE
        .with(|c| c.borrow().clone())
        .unwrap_or_else(|| std::env::args().collect())
}

/// Runs `f` with [`command_line`] returning `argv` on this thread.
pub fn with_command_line<R>(argv: Vec<String>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Vec<String>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            COMMAND_LINE.with(|c| *c.borrow_mut() = prev);
        }
    }
    let _restore = Restore(COMMAND_LINE.with(|c| c.borrow_mut().replace(argv)));
    f()
}

/// A file as reports record it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileJson {
    /// Path as given on the command line.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Lower-case hex sha256.
    pub sha256: String,
}

/// One arithmetic profile as reports record it (an entry of
/// `qport.profiles/1`): its name, where it came from and every policy in
/// its wire spelling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileJson {
    /// The profile's name.
    pub name: String,
    /// `preset` or `file`.
    pub origin: String,
    /// The file it was read from (`None` for a preset).
    pub file: Option<String>,
    /// One line on what the profile stands for.
    pub description: String,
    /// How products are summed.
    pub accumulator: String,
    /// How the accumulator is scaled to the output.
    pub requant: String,
    /// How scaled values are rounded to integers.
    pub rounding: String,
    /// Where the bias is added.
    pub bias: String,
    /// Precision of the float epilogue.
    pub epilogue: String,
    /// How non-GEMM operators compute.
    pub non_gemm: String,
    /// Which QDQ groups run as integer operators (`onnxruntime`, `all`,
    /// `none`).
    pub lowering: String,
    /// Public sources for the choices.
    pub sources: Vec<String>,
}

impl ProfileJson {
    /// The record of `p`, read from `file` (`None` for a preset).
    pub fn new(p: &ArithProfile, file: Option<&str>) -> ProfileJson {
        ProfileJson {
            name: p.name.clone(),
            origin: if file.is_some() { "file" } else { "preset" }.to_string(),
            file: file.map(str::to_string),
            description: p.description.clone(),
            accumulator: wire(&p.accumulator),
            requant: wire(&p.requant),
            rounding: wire(&p.rounding),
            bias: wire(&p.bias),
            epilogue: wire(&p.epilogue),
            non_gemm: wire(&p.non_gemm),
            lowering: wire(&p.lowering),
            sources: p.sources.clone(),
        }
    }
}
