//! `qport verify --model M.qdq.onnx --inputs IN.npz --target-outputs OUT`:
//! a target's output dump against qport's integer execution of the same
//! artifact, consistency as the vendor's verifier reports it, and when
//! they differ the cause (`qport_study::verify`: layout, output type,
//! arithmetic, scales ignored, or none).
//!
//! # JSON schema (`--format json`), `"schema": "qport.verify/1"`
//!
//! ```text
//! {
//!   "schema": "qport.verify/1",
//!   "qport_version": str,
//!   "command": [str],
//!   "model": File, "inputs": File, "target_outputs": str,
//!   "fp32": File | null, "descriptors": File | null,
//!   "platform": str | null,
//!   "host": { "isa_class": str | null, "onnxruntime_profile": str | null },
//!   "declared": str, "digits": int, "tolerance": float,
//!   "consistent": bool,
//!   "outputs": [ {
//!     "name": str, "shape": [int], "source": str,
//!     "dump_dtype": str, "dump_shape": [int],
//!     "expected_type": str | null,          // the platform's runtime type (F32, S32)
//!     "consistency": Residual | null,       // dump as written vs the declared profile
//!     "consistent": bool,
//!     "diagnosis": {
//!       "verdict": "consistent" | "explained" | "closest" | "none",
//!       "causes": [ "layout" | "output-type" | "arithmetic" | "scales-ignored" ],
//!       "best": Candidate | null, "tied": [ Candidate ], "summary": str
//!     },
//!     "hypotheses": [ { "cause": str, "tried": int, "best": Candidate | null, "decisive": bool } ],
//!     "first_differences": [ { "index": int, "target": float, "qport": float } ]
//!   } ],
//!   "warnings": [str],
//!   "layers": Layers | null,               // --target-dumps (docs/cli-json.md)
//!   "seconds": float
//! }
//! File = { "path": str, "size_bytes": int, "sha256": str }
//! Residual = { "elements": int, "mismatched": int, "non_finite": int, "max_abs": float,
//!              "max_rel": float, "rms": float, "cosine": float, "bit_exact": bool }
//! Candidate = {
//!   "causes": [str], "read_as": str, "float_for_int32": bool,
//!   "layout": { "platforms": [str], "tensor_type": str, "aligned_shape": [int],
//!               "stride": [int], "aligned_byte_size": int } | null,
//!   "dequantized": { "source": str, "scales": [float], "zero_points": [int],
//!                    "axis": int | null } | null,
//!   "execution": { "kind": "profile", "profile": str } | { "kind": "float32" }
//!              | { "kind": "float16" }
//!              | { "kind": "recalibrated", "calibrator": str, "asymmetric": bool },
//!   "residual": Residual
//! }
//! ```

use crate::args::ProfileFilesArg;
use crate::model_file;
use crate::output::{fmt_num, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{anyhow, bail, Context, Result};
use qport_study::bench::isa::IsaFeatures;
use qport_study::dump::{
    dump_integer_run, localize, DiffMetric, DumpMeta, Localization, TargetDump, Tolerance,
};
use qport_study::verify::{self, Candidate, Options, Verdict, Verification};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// Examples shown by `qport verify --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport verify --model q/model.qdq.onnx --inputs in.npz --target-outputs board/out.npz
  qport verify --model q/model.qdq.onnx --inputs in.npz --target-outputs board/ --platform j6m --fp32 model.onnx
  qport verify --model m.qdq.onnx --inputs in.npz --target-outputs out.npz --profile gemmlowp --digits 3 --format json
  qport verify --model q/model.qdq.onnx --inputs in.npz --target-outputs board/out.npz --target-dumps board/layers/
                    also the first intermediate value where the board's dumps depart from qport's

The dump (--target-outputs): an .npz keyed by output name, or a folder of
<escaped output name>.npy files (every byte outside [A-Za-z0-9._-] written as
%XX); an output may also be named by its index (0, 1, ...). --inputs is an
.npz keyed by model input name, the tensors the target was fed, run as one
batch.

The reference is the artifact run in integers under --profile (default: the
--platform's default profile, else f32-rne, onnxruntime's CPU arithmetic).
An output is consistent when every element is within 10^-digits (--digits,
default 5); the report gives mismatched elements, max absolute and relative
error and cosine. When it is not, qport tries every explanation and names
the one that reproduces the dump (every element within the tolerance) with
the fewest causes, ties listed:
  layout          the dump is a padded buffer: unpacked per every platform's
                  descriptor (F32 and S32 forms) and --descriptors FILE (the
                  device's own, e.g. `qport layout --format json` output)
  output-type     integers not dequantized (the output's DequantizeLinear, or
                  s_x*s_w of a GEMM tail's int32 accumulator), or float32
                  where the --platform's high-accuracy form is int32 (J6E/M)
  arithmetic      another profile (every preset and --profile-file profile)
  scales-ignored  the float graph in float32 or float16, or the artifact
                  re-calibrated with each of qport's calibrators on --inputs
                  (the float model is --fp32, else the one recovered from the
                  artifact; the platform is --platform, else the artifact's)
When none reproduces the dump, the closest is named only when its RMS
residual is at most a tenth of the declared profile's and every other cause
is at least twice as far; else the verdict is none, with the first elements
that differ.

With --target-dumps DIR (the board's intermediate tensors, named as `qport
run --dump` names its files), qport dumps its own run of the artifact under
the declared profile and names the first value, in execution order, where
the board's departs: by how many LSB for integer values (--dump-lsb N
tolerates N), by error and cosine for float ones.

Exit code 0 when every output is consistent, 1 when one is not, 2 for bad
input: a dump for no output (the model's outputs and shapes are listed), a
missing output, a dump whose size fits neither the output nor a padded
layout, a dtype a target does not write, inputs that do not fit.";

/// Arguments of `qport verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// The quantized (QDQ) ONNX artifact the target runs.
    #[arg(long, value_name = "M.qdq.onnx")]
    pub model: PathBuf,
    /// The inputs the target was fed: an .npz keyed by model input name.
    #[arg(long, value_name = "IN.npz")]
    pub inputs: PathBuf,
    /// The target's outputs: an .npz keyed by output name, or a folder of
    /// `<escaped output name>.npy` files.
    #[arg(long, value_name = "OUT.npz|DIR")]
    pub target_outputs: PathBuf,
    /// The target's platform: its high-accuracy output form and default
    /// profile, and the platform re-calibration uses.
    #[arg(long, short = 'p', value_name = "P")]
    pub platform: Option<String>,
    /// The device's own output descriptors (JSON: an array, or an object
    /// with `outputs`, of name, tensor_type, valid_shape, aligned_shape,
    /// stride, aligned_byte_size).
    #[arg(long, value_name = "FILE.json")]
    pub descriptors: Option<PathBuf>,
    /// The profile the target is declared to compute under (`qport
    /// profiles` lists them).
    #[arg(long, value_name = "X")]
    pub profile: Option<String>,
    #[command(flatten)]
    pub files: ProfileFilesArg,
    /// Decimal digits of the consistency check (tolerance 10^-digits).
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub digits: u32,
    /// The original float model, for the float and re-calibration
    /// hypotheses (default: the float graph recovered from the artifact).
    #[arg(long, value_name = "MODEL.onnx")]
    pub fp32: Option<PathBuf>,
    /// A folder of the target's intermediate tensors, one
    /// `<escaped value name>.npy` per value as `qport run --dump` names
    /// them (its index.json optional): qport dumps its own run of the
    /// artifact under the declared profile and names the first value, in
    /// execution order, where the target's departs (integer values by how
    /// many LSB, float values by error and cosine).
    #[arg(long, value_name = "DIR")]
    pub target_dumps: Option<PathBuf>,
    /// With --target-dumps: the largest difference in LSB an integer value
    /// may show and still agree.
    #[arg(long, value_name = "N", default_value_t = 0, requires = "target_dumps")]
    pub dump_lsb: u64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// The per-layer section: qport's dump against the target's.
#[derive(Debug, Serialize)]
struct Layers {
    target_dumps: String,
    profile: String,
    qport_values: usize,
    #[serde(flatten)]
    localization: Localization,
}

#[derive(Debug, Serialize)]
struct Host {
    isa_class: Option<qport_study::bench::isa::IsaClass>,
    onnxruntime_profile: Option<&'static str>,
}

/// `qport.verify/1`.
#[derive(Debug, Serialize)]
struct VerifyDoc {
    #[serde(flatten)]
    header: Header,
    model: FileJson,
    inputs: FileJson,
    target_outputs: String,
    fp32: Option<FileJson>,
    descriptors: Option<FileJson>,
    platform: Option<String>,
    host: Host,
    #[serde(flatten)]
    verification: Verification,
    layers: Option<Layers>,
    seconds: f64,
}

impl Render for VerifyDoc {
    fn human(&self, ui: &Ui) -> String {
        render_human(self, ui)
    }
}

/// Runs `qport verify`.
pub fn run(args: &VerifyArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let ui = &ui.with_phase_lines();
    if args.digits > 15 {
        bail!(
            "--digits {} is beyond float precision (at most 15)",
            args.digits
        );
    }
    let loaded_profiles = args.files.load()?;
    let registry = qport_platform::Registry::builtin();
    let platform = match &args.platform {
        Some(p) => Some(registry.get(p)?.clone()),
        None => None,
    };
    let declared_name = match (&args.profile, &platform) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p.default_arith_profile.clone(),
        (None, None) => "f32-rne".to_string(),
    };
    let declared = loaded_profiles.registry.get(&declared_name)?.clone();
    let spinner = ui.spinner("loading model and dumps");
    let loaded = model_file::load(&args.model)?;
    let (in_bytes, in_facts) = model_file::read(&args.inputs, "inputs")?;
    let inputs = qport_data::npz::decode(&in_bytes)
        .with_context(|| format!("cannot read inputs '{}'", args.inputs.display()))?;
    let dumps = verify::read_target_outputs(
        &args.target_outputs,
        &verify::declared_outputs(&loaded.model),
    )
    .map_err(|e| anyhow!(e))?;
    let (descriptors, desc_facts) = match &args.descriptors {
        Some(p) => {
            let (bytes, facts) = model_file::read(p, "descriptors file")?;
            let text = std::str::from_utf8(&bytes)
                .map_err(|_| anyhow!("descriptors file '{}': not UTF-8", p.display()))?;
            let d = verify::parse_descriptors(text, &p.display().to_string())?;
            (d, Some(FileJson::from(&facts)))
        }
        None => (Vec::new(), None),
    };
    let (float_model, fp32_facts) = match &args.fp32 {
        Some(p) => {
            let m = model_file::load(p)?;
            (Some(m.model), Some(FileJson::from(&m.facts)))
        }
        None => (None, None),
    };
    let mut opts = Options::new(declared);
    opts.profiles = loaded_profiles.registry.profiles().to_vec();
    opts.platform = platform.clone();
    opts.platforms = registry.platforms.clone();
    opts.descriptors = descriptors;
    opts.digits = args.digits;
    opts.float_model = float_model;
    spinner.set_message("running the artifact and testing hypotheses");
    let verification = verify::verify(&loaded.model, &inputs, &dumps, &opts)
        .with_context(|| format!("cannot verify '{}'", args.target_outputs.display()))?;
    drop(spinner);
    let layers = match &args.target_dumps {
        Some(dir) => Some(localize_layers(
            dir,
            args,
            &loaded,
            &inputs,
            &opts.declared,
            ui,
        )?),
        None => None,
    };
    for w in &verification.warnings {
        ui.warn(w);
    }
    let class = IsaFeatures::detect().class();
    let doc = VerifyDoc {
        header: Header::with_command("qport.verify/1"),
        model: (&loaded.facts).into(),
        inputs: (&in_facts).into(),
        target_outputs: args.target_outputs.display().to_string(),
        fp32: fp32_facts,
        descriptors: desc_facts,
        platform: platform.map(|p| p.name),
        host: Host {
            isa_class: class,
            onnxruntime_profile: verify::onnxruntime_profile(class),
        },
        verification,
        layers,
        seconds: t0.elapsed().as_secs_f64(),
    };
    emit(&doc, args.format, ui)?;
    Ok(if doc.verification.consistent {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// qport's dump of the artifact under `declared` (in a temporary folder)
/// against the target's dumps in `dir`.
fn localize_layers(
    dir: &std::path::Path,
    args: &VerifyArgs,
    loaded: &model_file::LoadedModel,
    inputs: &[(String, qport_core::Tensor)],
    declared: &qport_core::arith::ArithProfile,
    ui: &Ui,
) -> Result<Layers> {
    let bad_dir = || format!("cannot read target dumps '{}'", dir.display());
    let target = TargetDump::open(dir).with_context(bad_dir)?;
    if target.files.is_empty() {
        bail!(
            "no .npy files in '{}' (expected one per value, named as `qport run --dump` names them)",
            dir.display()
        );
    }
    let spinner = ui.spinner("dumping qport's run of every layer");
    let tmp = tempfile::tempdir().context("cannot create a temporary folder for qport's dump")?;
    let meta = DumpMeta {
        model_path: args.model.display().to_string(),
        model_sha256: loaded.facts.sha256.clone(),
        profile: declared.name.clone(),
    };
    let summary = dump_integer_run(
        &loaded.model,
        declared,
        inputs.to_vec(),
        tmp.path(),
        meta,
        &[],
    )
    .with_context(|| format!("cannot run '{}' layer by layer", args.model.display()))?;
    spinner.set_message("comparing layer by layer");
    let tol = Tolerance {
        lsb: args.dump_lsb,
        ..Tolerance::default()
    };
    let localization = localize(&summary.index, &target, &tol).with_context(bad_dir)?;
    if localization.values.is_empty() {
        bail!(
            "no file in '{}' names a value of qport's run (qport's values include {}); name files as `qport run --dump` does",
            dir.display(),
            summary
                .index
                .values
                .iter()
                .take(5)
                .map(|v| format!("'{}'", v.name))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(Layers {
        target_dumps: dir.display().to_string(),
        profile: declared.name.clone(),
        qport_values: summary.index.values.len(),
        localization,
    })
}

fn diff_text(m: &DiffMetric) -> String {
    match m {
        DiffMetric::Integer {
            elements,
            differing,
            max_lsb,
        } => format!("{differing}/{elements} elements differ, max {max_lsb} LSB"),
        DiffMetric::Float {
            elements,
            max_abs,
            max_rel,
            cosine,
            nan_mismatch,
        } => format!(
            "max |diff| {} (rel {}), cosine {}, {nan_mismatch} NaN mismatches over {elements} elements",
            fmt_num(*max_abs),
            fmt_num(*max_rel),
            fmt_num(*cosine)
        ),
    }
}

fn render_layers(l: &Layers, ui: &Ui) -> String {
    let loc = &l.localization;
    let mut out = format!(
        "\nlayer by layer ({}, qport under {}): {} values compared, {} of qport's not in the dump, {} only in the dump\n",
        l.target_dumps,
        l.profile,
        loc.values.len(),
        loc.missing_in_target.len(),
        loc.target_only.len()
    );
    match loc.first() {
        None => out.push_str(&format!(
            "  {}\n",
            ui.paint("no compared value departs", Style::Good)
        )),
        Some(v) => {
            out.push_str(&format!(
                "  first departing value: {} ({} {}): {}\n",
                ui.paint(&v.name, Style::Bad),
                v.op.as_deref().unwrap_or("graph input"),
                v.producer.as_deref().unwrap_or(""),
                diff_text(&v.metric)
            ));
            let mut t = Table::new(&["value", "op", "difference"], "lll");
            let start = loc.first_departure.unwrap_or(0).saturating_sub(2);
            for r in loc.values.iter().skip(start).take(8) {
                let style = if r.departs { Style::Bad } else { Style::Plain };
                t.styled_row(vec![
                    (r.name.clone(), style),
                    (r.op.clone().unwrap_or_default(), Style::Plain),
                    (diff_text(&r.metric), Style::Plain),
                ]);
            }
            out.push_str(&t.render(ui, "  "));
        }
    }
    out
}

fn candidate_row(
    label: &str,
    c: Option<&Candidate>,
    tried: usize,
    decisive: bool,
) -> Vec<(String, Style)> {
    let style = if decisive { Style::Bold } else { Style::Plain };
    match c {
        Some(c) => vec![
            (label.to_string(), style),
            (tried.to_string(), Style::Plain),
            (c.describe(), style),
            (fmt_num(c.residual.rms), Style::Plain),
            (fmt_num(c.residual.max_abs), Style::Plain),
            (
                if c.residual.bit_exact { "yes" } else { "no" }.into(),
                Style::Plain,
            ),
            (if decisive { "yes" } else { "-" }.into(), style),
        ],
        None => vec![
            (label.to_string(), Style::Dim),
            (tried.to_string(), Style::Dim),
            ("(nothing to try)".into(), Style::Dim),
            ("-".into(), Style::Dim),
            ("-".into(), Style::Dim),
            ("-".into(), Style::Dim),
            ("-".into(), Style::Dim),
        ],
    }
}

fn render_human(d: &VerifyDoc, ui: &Ui) -> String {
    let v = &d.verification;
    let mut out = format!(
        "{} against {} (declared profile {}, {} decimal digits{})\n",
        d.model.path,
        ui.paint(&d.target_outputs, Style::Bold),
        ui.paint(&v.declared, Style::Bold),
        v.digits,
        d.platform
            .as_deref()
            .map(|p| format!(", platform {p}"))
            .unwrap_or_default()
    );
    for o in &v.outputs {
        out.push_str(&format!(
            "\noutput '{}' {:?}: dump {} {:?} ({})\n",
            o.name, o.shape, o.dump_dtype, o.dump_shape, o.source
        ));
        match &o.consistency {
            Some(c) => out.push_str(&format!(
                "  {}: {}/{} elements mismatched, max abs error {}, max rel error {}, cosine {:.6}\n",
                if o.consistent {
                    ui.paint("consistent", Style::Good)
                } else {
                    ui.paint("inconsistent", Style::Bad)
                },
                c.mismatched,
                c.elements,
                fmt_num(c.max_abs),
                fmt_num(c.max_rel),
                c.cosine
            )),
            None => out.push_str(&format!(
                "  {}: the dump's size is not the output's\n",
                ui.paint("inconsistent", Style::Bad)
            )),
        }
        if o.consistent {
            continue;
        }
        let verdict = match o.diagnosis.verdict {
            Verdict::Explained | Verdict::Closest => Style::Bold,
            _ => Style::Bad,
        };
        out.push_str(&format!(
            "  cause: {}\n",
            ui.paint(&o.diagnosis.summary, verdict)
        ));
        if let (Some(b), Some(host)) = (&o.diagnosis.best, d.host.onnxruntime_profile) {
            if b.execution
                == (verify::Execution::Profile {
                    profile: host.to_string(),
                })
            {
                out.push_str(&format!(
                    "  ({host} models onnxruntime's CPU kernels on this machine's ISA)\n"
                ));
            }
        }
        let mut t = Table::new(
            &[
                "hypothesis",
                "tried",
                "best",
                "RMS",
                "max |diff|",
                "bit-exact",
                "decisive",
            ],
            "lrlrrll",
        );
        for h in &o.hypotheses {
            t.styled_row(candidate_row(
                h.cause.name(),
                h.best.as_ref(),
                h.tried,
                h.decisive,
            ));
        }
        out.push_str(&t.render(ui, "  "));
        if o.diagnosis.verdict == Verdict::None && !o.first_differences.is_empty() {
            let mut t = Table::new(&["index", "target", "qport"], "rrr");
            for f in &o.first_differences {
                t.row(vec![
                    f.index.to_string(),
                    fmt_num(f.target),
                    fmt_num(f.qport),
                ]);
            }
            out.push_str("  first differing elements:\n");
            out.push_str(&t.render(ui, "  "));
        }
    }
    if let Some(l) = &d.layers {
        out.push_str(&render_layers(l, ui));
    }
    out.push_str(&format!(
        "\n{}\n",
        if v.consistent {
            ui.paint("all outputs consistent", Style::Good)
        } else {
            ui.paint("inconsistent", Style::Bad)
        }
    ));
    out
}
