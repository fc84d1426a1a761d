//! `qport sweep-models`: ONNX models of one fixed compute (about `--macs`
//! multiply-accumulates, or as many as `--like MODEL`) and controlled
//! float32 output sizes (`qport_study::sweep`), plus `manifest.json`, for
//! a user to time on a target's own runtime and feed to `qport regime`.
//!
//! # JSON schema (`--format json`; `DIR/manifest.json` is the same document), `"schema": "qport.sweep-models/1"`
//!
//! ```text
//! {
//!   "schema": "qport.sweep-models/1", "qport_version": str, "command": [str],
//!   "requested_macs": int,
//!   "like": { "path": str, "size_bytes": int, "sha256": str } | null,
//!   "seed": int, "opset": int,
//!   "models": [ { "file": str, "macs": int, "output_bytes": int,
//!                 "input_shape": [int], "output_shape": [int],
//!                 "size_bytes": int, "sha256": str } ]
//! }
//! ```
//! `file` is relative to the manifest's directory; `macs` is exact (the
//! same for every model), `output_bytes` exactly as requested.

use crate::args::InputShapeArgs;
use crate::model_file::{self, sha256_hex};
use crate::out_dir::{self, OutDirArg};
use crate::output::{fmt_count, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_study::sweep::{build_sweep, model_macs, SweepModel, SweepRequest, OPSET};
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport sweep-models --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport sweep-models --macs 4000000000 --outputs 3920,256368,511952,1000384,1999984 --out sweep/
  qport sweep-models --like resnet50.onnx --outputs 3920,1000384 --out sweep/
  qport sweep-models --like det.onnx --input-shape images=1,3,640,640 --outputs 4096,2000000 --out sweep/
  qport bench sweep/sweep_3920B.onnx            time one on this host as a check

Each model computes x[R, K] @ W[K, K] (R*K*K multiply-accumulates, as close
to --macs as possible; the same in every model) and copies the result into
a float32 output of exactly the requested bytes (Reshape, Tile, Slice: no
MACs). Sizes must be multiples of 4 (float32 elements); any other size is
refused with the two nearest valid sizes. Weights are seeded (--seed), so
the same command writes the same files. Run each model on the target,
record output bytes and D2H p50 (and 1-core and N-core throughput if you
can) in a CSV and give it to `qport regime --sweep`.

Exit code 2 for a size that is not a multiple of 4 or given twice, --macs 0,
a --like model whose MACs cannot be counted (dynamic shapes: give
--input-shape), or an --out that cannot be written.";

/// Arguments of `qport sweep-models`.
#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    /// Multiply-accumulates per inference.
    #[arg(
        long,
        value_name = "N",
        required_unless_present = "model",
        conflicts_with = "model"
    )]
    pub macs: Option<u64>,
    /// Take the MACs of this ONNX model (Conv, ConvTranspose, Gemm, MatMul).
    #[arg(long = "like", value_name = "MODEL")]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub shapes: InputShapeArgs,
    /// Output sizes in bytes, comma-separated (multiples of 4).
    #[arg(long, value_name = "BYTES,...", value_delimiter = ',', required = true)]
    pub outputs: Vec<u64>,
    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub out: OutDirArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Serialize)]
struct ModelJson {
    #[serde(flatten)]
    model: SweepModel,
    size_bytes: u64,
    sha256: String,
}

#[derive(Debug, Serialize)]
struct ManifestJson {
    #[serde(flatten)]
    header: Header,
    requested_macs: u64,
    like: Option<FileJson>,
    seed: u64,
    opset: i64,
    models: Vec<ModelJson>,
    #[serde(skip)]
    dir: String,
}

impl Render for ManifestJson {
    fn human(&self, ui: &Ui) -> String {
        let mut s = format!(
            "{}  {} models in {} ({} MACs each, requested {}{})\n",
            ui.paint("sweep-models", Style::Bold),
            self.models.len(),
            self.dir,
            fmt_count(self.models.first().map_or(0, |m| m.model.macs)),
            fmt_count(self.requested_macs),
            self.like
                .as_ref()
                .map_or(String::new(), |f| format!(" like {}", f.path)),
        );
        let mut t = Table::new(&["file", "output bytes", "input", "output"], "lrll");
        for m in &self.models {
            t.row(vec![
                m.model.file.clone(),
                fmt_count(m.model.output_bytes),
                format!("{:?}", m.model.input_shape),
                format!("{:?}", m.model.output_shape),
            ]);
        }
        s.push_str(&t.render(ui, "  "));
        s.push_str(
            "  manifest.json lists them; time each on the target, then `qport regime --sweep`\n",
        );
        s
    }
}

/// Runs `qport sweep-models`.
pub fn run(args: &SweepArgs, ui: &Ui) -> Result<ExitStatus> {
    let names: Vec<String> = args
        .outputs
        .iter()
        .map(|b| format!("sweep_{b}B.onnx"))
        .chain(["manifest.json".to_string()])
        .collect();
    let dir = args
        .out
        .check(&names.iter().map(String::as_str).collect::<Vec<_>>())?;
    let (macs, like) = match (&args.model, args.macs) {
        (Some(path), _) => {
            let mut loaded = model_file::load(path)?;
            args.shapes.apply(&mut loaded.model, path)?;
            let macs = model_macs(&loaded.model)
                .with_context(|| format!("--like '{}'", path.display()))?;
            (macs, Some(FileJson::from(&loaded.facts)))
        }
        (None, Some(m)) => (m, None),
        (None, None) => anyhow::bail!("give --macs N or --like MODEL"),
    };
    let models = build_sweep(&SweepRequest {
        macs,
        outputs: args.outputs.clone(),
        seed: args.seed,
    })?;
    let mut entries = vec![];
    for m in models {
        let bytes = qport_onnx::to_bytes(&m.model);
        out_dir::write(dir, &m.file, &bytes)?;
        entries.push(ModelJson {
            size_bytes: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
            model: m,
        });
    }
    let doc = ManifestJson {
        header: Header::with_command("qport.sweep-models/1"),
        requested_macs: macs,
        like,
        seed: args.seed,
        opset: OPSET,
        models: entries,
        dir: dir.display().to_string(),
    };
    let json = serde_json::to_string_pretty(&doc).context("cannot encode manifest.json")? + "\n";
    out_dir::write(dir, "manifest.json", json.as_bytes())?;
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}
