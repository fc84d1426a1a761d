//! `qport`: platform-aware quantization and portability checks for ONNX
//! models. This library owns the command line (clap), the exit-code
//! contract and the one place where errors and panics are printed; the
//! `qport` binary is [`main`], and [`embed`] runs a command in-process for
//! a host program (the Python package), its JSON document captured instead
//! of printed.
//!
//! Exit codes: `0` success; `1` a check ran and failed its threshold (or
//! a compared model output holds NaN or an infinity); `2`
//! usage or input error (bad flags, missing or malformed files, wrong input
//! shapes). A closed stdout (`qport info m.onnx | head -1`) exits `0`
//! quietly. A panic is a bug in qport: it prints a short report request and
//! exits `101`.

mod ablate;
mod agree;
mod args;
mod bench;
mod calibrators;
mod compare;
mod data;
mod demo;
mod deploy;
mod diverge;
pub mod embed;
mod info;
mod layout;
mod lint;
mod merge;
mod migrate;
mod mixed;
mod model_file;
mod out_dir;
mod output;
mod platform_report;
mod platforms;
mod profiles;
mod quantize;
mod regime;
mod report;
mod run;
mod sensitivity;
mod study;
mod sweep;
mod tune;
mod verify;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

/// The outcome of a command that did not fail with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything ran and every check passed (exit 0).
    Success,
    /// A check ran and failed its threshold (exit 1).
    Failure,
}

impl ExitStatus {
    /// [`ExitStatus::Failure`] when any of `all` is, else success: the
    /// outcome of a command with several checks.
    pub fn any_failed(all: impl IntoIterator<Item = ExitStatus>) -> ExitStatus {
        if all.into_iter().any(|s| s == ExitStatus::Failure) {
            ExitStatus::Failure
        } else {
            ExitStatus::Success
        }
    }
}

/// Exit code for usage and input errors.
const EXIT_ERROR: u8 = 2;

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        match s {
            ExitStatus::Success => ExitCode::SUCCESS,
            ExitStatus::Failure => ExitCode::from(1),
        }
    }
}

const ABOUT: &str =
    "Quantize ONNX models for embedded targets and check that the result is portable.";

const AFTER_HELP: &str = "\
Examples:
  qport demo                                  the whole study on the bundled classifier: ./qport-demo/report.html
  qport study model.onnx --data photos/ --preprocess effnet-lite --platforms j6m,j6p --out study/
                                              quantize, agree, diverge, bench, layout, migrate, lint: one report
  qport info model.onnx                       inputs, outputs, ops and parameters of a model
  qport run model.onnx --input x=x.npy        run a model on a .npy tensor
  qport run model.onnx --inputs in.npz --output out.npz --format json
  qport quantize model.onnx --platform j6m --calib photos/ --preprocess effnet-lite --out q/
                                              int8 QDQ artifact + quant_config.json + report
  qport platforms                             what each deployment target requires
  qport layout model.onnx --platform j6p      stride and alignedByteSize of every input/output
  qport deploy-check -p s6p --ips dsp         check cores, L2M and IPs against a platform
  qport migrate --from j6m --to j6p           what changes between two platforms
  qport profiles                              integer-arithmetic profiles (accumulator, requant, rounding)
  qport run q/model.qdq.onnx --profile gemmlowp --inputs in.npz
                                              run a QDQ artifact in integers under a profile
  qport diverge q/model.qdq.onnx --data photos/ --preprocess effnet-lite --profiles avx2-u8s8,f32-rne
                                              first layer and stage where two profiles diverge
  qport agree q/model.qdq.onnx --data photos/ --preprocess effnet-lite --profiles all --out agree/
                                              top-1 agreement matrix across profiles, FP32 controls
  qport bench model.onnx --int8 q/model.qdq.onnx --profiles f32-rne,avx2-u8s8
                                              is INT8 faster than FP32 here? latency, ISA, kernel table
  qport verify --model q/model.qdq.onnx --inputs in.npz --target-outputs board.npz
                                              a device's dump vs qport, and the cause when they differ
  qport regime --compute-ms 2.7 --cores 3 --sweep sweep.csv --out regime/
                                              compute-bound or D2H-bound? onset, crossover, SVG
  qport sweep-models --like model.onnx --outputs 3920,1000384 --out sweep/
                                              fixed-compute models of exact output sizes to measure
  qport lint q/model.qdq.onnx --platform j6m  what j6m's native flow ignores or rejects in the artifact

Exit codes: 0 success, 1 a check ran and failed, 2 usage or input error.
Machine-readable output: --format json (schemas in docs/cli-json.md).
Colour is used only on a terminal; set NO_COLOR to turn it off.";

/// The `qport` command line.
#[derive(Debug, Parser)]
#[command(
    name = "qport",
    version,
    about = ABOUT,
    after_help = AFTER_HELP,
    propagate_version = true,
    arg_required_else_help = true
)]
pub struct Cli {
    /// No progress bars or notes on stderr (results and errors still print).
    #[arg(long, short, global = true)]
    quiet: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Describe a model: file hash, opsets, inputs/outputs, op histogram,
    /// parameters, unsupported ops.
    #[command(after_help = info::AFTER_HELP)]
    Info(info::InfoArgs),
    /// Run a model on tensors from .npy/.npz files with qport's engine.
    #[command(after_help = run::AFTER_HELP)]
    Run(run::RunArgs),
    /// The mission in miniature on the bundled PP-OCR text-direction
    /// classifier: quantize for j6m and j6p, agree across every profile,
    /// localize the first divergence, bench, layout, migrate, lint; writes
    /// a self-contained HTML report.
    #[command(after_help = demo::AFTER_HELP)]
    Demo(demo::DemoArgs),
    /// The whole study in one command: quantize per platform, agreement
    /// across profiles, the first divergence, bench, layouts, migration,
    /// lint (sensitivity, tuning, regime on request); writes report.json
    /// and a self-contained report.html.
    #[command(after_help = study::AFTER_HELP)]
    Study(study::StudyArgs),
    /// Quantize a model for a platform: calibrate, write a QDQ artifact, its
    /// quant_config.json and a report.
    #[command(after_help = quantize::AFTER_HELP)]
    Quantize(quantize::QuantizeArgs),
    /// List the deployment platforms and what each requires.
    #[command(after_help = platforms::AFTER_HELP)]
    Platforms(platforms::PlatformsArgs),
    /// Runtime tensor descriptors (stride, padding, alignedByteSize) of a
    /// model's inputs and outputs on a platform.
    #[command(after_help = layout::AFTER_HELP)]
    Layout(layout::LayoutArgs),
    /// Check deployment settings (cores, L2M, IPs) against a platform.
    #[command(after_help = deploy::AFTER_HELP)]
    DeployCheck(deploy::DeployArgs),
    /// Checklist of what changes when moving from one platform to another.
    #[command(after_help = migrate::AFTER_HELP)]
    Migrate(migrate::MigrateArgs),
    /// List the integer-arithmetic profiles (presets and --profile-file
    /// definitions) and their policies.
    #[command(after_help = profiles::AFTER_HELP)]
    Profiles(profiles::ProfilesArgs),
    /// Where and why two arithmetic profiles diverge on a quantized model:
    /// the first diverging layer and the stage (accumulation, rounding...).
    #[command(after_help = diverge::AFTER_HELP)]
    Diverge(diverge::DivergeArgs),
    /// Cross-profile agreement of a quantized model: top-1 agreement
    /// matrix, bit-identical outputs, FP32 controls, flips and margins.
    #[command(after_help = agree::AFTER_HELP)]
    Agree(agree::AgreeArgs),
    /// Combine the shard directories of `qport agree --shard I/N` into the
    /// agree.json of one unsharded run.
    #[command(after_help = merge::AFTER_HELP)]
    Merge(merge::MergeArgs),
    /// Per-node quantization sensitivity: each node alone at the base
    /// precision, each promoted alone to int16, ranked, with MAC shares.
    #[command(after_help = sensitivity::AFTER_HELP)]
    Sensitivity(sensitivity::SensitivityArgs),
    /// Mixed precision to an accuracy target: promote the nodes that
    /// matter to int16, write the tuned config, artifact and trajectory.
    #[command(after_help = tune::AFTER_HELP)]
    Tune(tune::TuneArgs),
    /// Scope ablation: each named part of the model quantized alone, the
    /// rest in float, and whether the losses add up.
    #[command(after_help = ablate::AFTER_HELP)]
    Ablate(ablate::AblateArgs),
    /// Every calibrator (symmetric and asymmetric) on the same model,
    /// platform and data in one table.
    #[command(after_help = calibrators::AFTER_HELP)]
    Calibrators(calibrators::CalibratorsArgs),
    /// FP32 vs INT8 latency on this machine: ISA features, median/p10/p90
    /// per profile, INT8/FP32 ratios, peak RSS, the kernel table's
    /// prediction for other ISAs.
    #[command(after_help = bench::AFTER_HELP)]
    Bench(bench::BenchArgs),
    /// Check a target's output dump against qport's integer execution of the artifact and name the cause when they differ (layout, output type, arithmetic, scales ignored)
    #[command(after_help = verify::AFTER_HELP)]
    Verify(verify::VerifyArgs),
    /// Latency regime of N cores sharing one device-to-host link:
    /// compute-bound / transition / D2H-bound against output size, the
    /// onset and crossover in bytes, least-squares link fit, SVG.
    #[command(after_help = regime::AFTER_HELP)]
    Regime(regime::RegimeArgs),
    /// ONNX models of fixed compute and exact float32 output sizes, to
    /// measure a D2H sweep on a target's runtime (for `qport regime`).
    #[command(after_help = sweep::AFTER_HELP)]
    SweepModels(sweep::SweepArgs),
    /// What a platform's native flow will ignore, reject or handle
    /// differently in a QDQ artifact (rules with severity, nodes, source).
    #[command(after_help = lint::AFTER_HELP)]
    Lint(lint::LintArgs),
}

/// The `qport` binary: parses `std::env::args`, runs the command, prints
/// errors and maps the outcome to the exit code.
pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; everything
            // else is a usage error.
            let code = if e.use_stderr() { EXIT_ERROR } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let ui = output::Ui::new(cli.quiet);
    let result = dispatch(&cli, &ui);
    match result {
        Ok(status) => status.into(),
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            report_error(&err, &ui);
            ExitCode::from(error_exit_code(&err))
        }
    }
}

/// Runs the parsed command line `cli` with `ui`.
fn dispatch(cli: &Cli, ui: &output::Ui) -> anyhow::Result<ExitStatus> {
    match &cli.command {
        Command::Info(a) => info::run(a, ui),
        Command::Run(a) => run::run(a, ui),
        Command::Demo(a) => demo::run(a, ui),
        Command::Study(a) => study::run(a, ui),
        Command::Quantize(a) => quantize::run(a, ui),
        Command::Platforms(a) => platforms::run(a, ui),
        Command::Layout(a) => layout::run(a, ui),
        Command::DeployCheck(a) => deploy::run(a, ui),
        Command::Migrate(a) => migrate::run(a, ui),
        Command::Profiles(a) => profiles::run(a, ui),
        Command::Diverge(a) => diverge::run(a, ui),
        Command::Agree(a) => agree::run(a, ui),
        Command::Merge(a) => merge::run(a, ui),
        Command::Bench(a) => bench::run(a, ui),
        Command::Sensitivity(a) => sensitivity::run(a, ui),
        Command::Tune(a) => tune::run(a, ui),
        Command::Ablate(a) => ablate::run(a, ui),
        Command::Calibrators(a) => calibrators::run(a, ui),
        Command::Verify(a) => verify::run(a, ui),
        Command::Regime(a) => regime::run(a, ui),
        Command::SweepModels(a) => sweep::run(a, ui),
        Command::Lint(a) => lint::run(a, ui),
    }
}

/// The exit code of a command that failed with `err`: `1` when a compared
/// model output holds NaN or an infinity (the check ran, its result is
/// unusable), else `2` (usage or input error).
fn error_exit_code(err: &anyhow::Error) -> u8 {
    if is_non_finite(err) {
        1
    } else {
        EXIT_ERROR
    }
}

/// True when the error is a model output holding NaN or an infinity: the
/// measurement ran and its result is unusable, a failed check (exit 1).
fn is_non_finite(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|c| c.is::<qport_core::compare::NonFiniteOutput>())
}

/// True when the error comes from writing to a closed stdout.
fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Prints `qport: error: <headline>` and one `  cause: ...` line per further
/// link of the chain ([`error_lines`]).
fn report_error(err: &anyhow::Error, ui: &output::Ui) {
    let mut stderr = std::io::stderr().lock();
    for (i, text) in error_lines(err).into_iter().enumerate() {
        let _ = if i == 0 {
            writeln!(stderr, "qport: {} {text}", ui.err_style("error:"))
        } else {
            writeln!(stderr, "  cause: {text}")
        };
    }
}

/// The headline and the causes of `err`, one per link of the chain,
/// skipping links whose text the previous line already contains (many
/// errors embed their source's message).
fn error_lines(err: &anyhow::Error) -> Vec<String> {
    let mut lines: Vec<String> = vec![];
    for link in err.chain() {
        let text = link.to_string();
        if lines.last().is_some_and(|prev| prev.contains(&text)) {
            continue;
        }
        lines.push(text);
    }
    lines
}

/// Replaces Rust's panic message with a short bug-report request (the
/// default hook still runs when `RUST_BACKTRACE` is set).
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0") {
            default(info);
        }
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "qport: internal error: {msg}{at}");
        let _ = writeln!(
            e,
            "  this is a bug in qport {}, please report it with the command line you ran",
            env!("CARGO_PKG_VERSION")
        );
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_valid() {
        Cli::command().debug_assert();
    }

    #[test]
    fn preprocess_help_lists_every_preset() {
        let cli = Cli::command();
        let mut seen = 0;
        for cmd in cli.get_subcommands() {
            let Some(arg) = cmd.get_arguments().find(|a| a.get_id() == "preprocess") else {
                continue;
            };
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            for p in qport_data::preprocess::PRESETS {
                assert!(
                    help.contains(p),
                    "{} --preprocess lacks {p}: {help}",
                    cmd.get_name()
                );
            }
            seen += 1;
        }
        assert!(seen >= 5, "{seen} commands take --preprocess");
        for p in qport_data::preprocess::PRESETS {
            assert!(
                quantize::AFTER_HELP.contains(p),
                "quantize --help lacks {p}"
            );
        }
    }

    #[test]
    fn broken_pipe_is_detected_through_context() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = anyhow::Error::new(io).context("writing the table");
        assert!(is_broken_pipe(&err));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
