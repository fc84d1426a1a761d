//! `qport regime`: the latency regime of an accelerator whose N cores
//! share one device-to-host link (`qport_platform::regime`), from a
//! measured sweep CSV or from a link model (fixed cost + bytes /
//! bandwidth). Prints each point's class, the onset and crossover in
//! bytes, the band's width ratio and the least-squares link fits;
//! `--out DIR` writes `regime.json` and `regime.svg` atomically.
//!
//! # JSON schema (`--format json`, `--out DIR` writes `DIR/regime.json`), `"schema": "qport.regime/1"`
//!
//! ```text
//! {
//!   "schema": "qport.regime/1", "qport_version": str, "command": [str],
//!   "input": { "mode": "sweep" | "link-model",
//!              "sweep": { "path": str, "size_bytes": int, "sha256": str } | null,
//!              "link": { "fixed_ms": float, "bytes_per_ms": float } | null },
//!   "scaling_tol": float,
//!   "regime": { "compute_ms": float, "cores": int },
//!   "onset_ms": float, "crossover_ms": float,
//!   "thresholds_from": "interpolated" | "link-model",
//!   "thresholds": Thresholds,
//!   "points": [ { "bytes": int, "d2h_ms": float, "predicted_scaling": float,
//!                 "predicted_throughput": float, "measured_scaling": float | null,
//!                 "model_class": Class, "measured_class": Class | null, "class": Class } ],
//!   "fits": [ { "over": "all" | "below-crossover", "bytes": [int],
//!               "link": { "fixed_ms": float, "bytes_per_ms": float },
//!               "residuals_ms": [float], "rms_ms": float, "r2": float,
//!               "thresholds": Thresholds } ],
//!   "notes": [str]
//! }
//! Thresholds = { "onset_bytes": float | null, "crossover_bytes": float | null,
//!                "width_ratio": float | null }
//! Class = "compute-bound" | "transition" | "d2h-bound"
//! ```

use crate::model_file;
use crate::out_dir::{self, OptOutDirArg};
use crate::output::{fmt_count, Format, Style, Table, Ui};
use crate::report::{emit, FileJson, Header, Render};
use crate::ExitStatus;
use anyhow::{Context, Result};
use qport_platform::regime::{
    analyze_link, analyze_sweep, log_sizes, Analysis, LinkModel, Regime, RegimeClass,
};
use qport_platform::regime_csv::parse_sweep;
use serde::Serialize;
use std::path::PathBuf;

/// Examples shown by `qport regime --help`.
pub const AFTER_HELP: &str = "\
Examples:
  qport regime --compute-ms 2.70 --cores 3 --sweep sweep.csv
  qport regime --compute-ms 2.70 --cores 3 --sweep sweep.csv --format json --out regime/
  qport regime --compute-ms 2.70 --cores 3 --fixed-ms 0.13 --bandwidth-mb-s 321
  qport regime --compute-ms 2.70 --cores 3 --fixed-ms 0.13 --bandwidth-mb-s 321 \\
               --outputs 3920,256368,511952,1000384,1999984

Model: one inference computes for C ms on a core, then moves its output
over the shared link in d(b) = fixed + b / bandwidth ms. N-core throughput
is min(N / C, 1 / d), 1-core min(1 / C, 1 / d), so the predicted scaling is
clamp(C / d, 1, N). A point is compute-bound while d < C / N (link-
saturation onset), D2H-bound from d >= C (single-inference crossover),
transition between; the band's width ratio is crossover / onset in bytes.

--sweep FILE.csv: a header row, then one measured point a row:
  output_bytes,d2h_p50_ms[,throughput_1core,throughput_ncore][,scaling]
sizes strictly increasing, times and throughputs (inferences/s) > 0; '#'
lines are comments. The thresholds interpolate the measured D2H linearly
between the two points that bracket C / N and C; the least-squares fit of
the link model (over all points, and over the points below the crossover)
is reported with its residuals. With measured scaling (the scaling column,
or both throughput columns) a point's class is the measured one (within
--scaling-tol of N: compute-bound, of 1: D2H-bound) and the model's class
is shown beside it. `qport sweep-models` writes models to measure a sweep.

Exit code 2 for a missing or malformed CSV (the message names the line and
column), sizes not strictly increasing, --cores 0, or a time or bandwidth
that is not positive.";

/// Arguments of `qport regime`.
#[derive(Debug, clap::Args)]
pub struct RegimeArgs {
    /// Compute time of one inference on one core, ms.
    #[arg(long, value_name = "MS")]
    pub compute_ms: f64,
    /// Cores sharing the device-to-host link (N).
    #[arg(long, value_name = "N")]
    pub cores: u32,
    /// Measured sweep CSV (see below).
    #[arg(long, value_name = "FILE.csv", conflicts_with_all = ["fixed_ms", "bandwidth_mb_s", "outputs"])]
    pub sweep: Option<PathBuf>,
    /// Link model: fixed cost of one transfer, ms.
    #[arg(long, value_name = "MS", default_value_t = 0.0)]
    pub fixed_ms: f64,
    /// Link model: bandwidth in MB/s (10^6 bytes per second).
    #[arg(long, value_name = "MB/S", required_unless_present = "sweep")]
    pub bandwidth_mb_s: Option<f64>,
    /// Link model: output sizes to predict, bytes (default: 17 sizes
    /// spaced in log scale around the band).
    #[arg(long, value_name = "BYTES,...", value_delimiter = ',')]
    pub outputs: Vec<u64>,
    /// Relative tolerance of the measured-scaling classes.
    #[arg(long, value_name = "X", default_value_t = 0.05)]
    pub scaling_tol: f64,
    #[command(flatten)]
    pub out: OptOutDirArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(Debug, Serialize)]
struct InputJson {
    mode: &'static str,
    sweep: Option<FileJson>,
    link: Option<LinkModel>,
}

#[derive(Debug, Serialize)]
struct RegimeJson {
    #[serde(flatten)]
    header: Header,
    input: InputJson,
    scaling_tol: f64,
    #[serde(flatten)]
    analysis: Analysis,
    notes: Vec<String>,
}

/// The default sizes of a link-model prediction: a log grid from a tenth
/// of the onset to three times the crossover (1 kB to 10 MB when either is
/// unknown).
fn default_sizes(regime: &Regime, link: &LinkModel) -> Vec<u64> {
    let t = regime.link_thresholds(link);
    let lo = t.onset_bytes.map_or(1e3, |o| (o / 10.0).max(1.0));
    let hi = t.crossover_bytes.map_or(1e7, |c| (c * 3.0).max(lo * 10.0));
    log_sizes(lo as u64, hi as u64, 17)
}

fn notes(a: &Analysis) -> Vec<String> {
    let mut v = vec![];
    for p in &a.points {
        if let (Some(s), Some(m)) = (p.measured_scaling, p.measured_class) {
            if m != p.model_class {
                v.push(format!(
                    "{} B: measured scaling {s:.2}x is {}, while D2H {:.3} ms puts it {} \
                     (c/N = {:.3} ms, c = {:.3} ms): the link {} than the model predicts",
                    fmt_count(p.bytes),
                    m.name(),
                    p.d2h_ms,
                    p.model_class.name(),
                    a.onset_ms,
                    a.crossover_ms,
                    if rank(m) > rank(p.model_class) {
                        "limits earlier"
                    } else {
                        "limits later"
                    }
                ));
            }
        }
    }
    let t = &a.thresholds;
    for (name, v_bytes, level) in [
        ("onset", t.onset_bytes, a.onset_ms),
        ("crossover", t.crossover_bytes, a.crossover_ms),
    ] {
        if v_bytes.is_none() {
            v.push(if a.thresholds_from == "interpolated" {
                format!(
                    "the {name} (D2H = {level:.3} ms) lies outside the measured sweep; \
                     see the fits' thresholds for an extrapolation"
                )
            } else {
                format!("the {name} (D2H = {level:.3} ms) is below the link's fixed cost")
            });
        }
    }
    v
}

fn rank(c: RegimeClass) -> u8 {
    match c {
        RegimeClass::ComputeBound => 0,
        RegimeClass::Transition => 1,
        RegimeClass::D2hBound => 2,
    }
}

fn bytes_cell(b: Option<f64>) -> String {
    b.map_or("-".into(), |b| fmt_count(b.round() as u64))
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.2}"))
}

impl Render for RegimeJson {
    fn human(&self, ui: &Ui) -> String {
        let a = &self.analysis;
        let mut s = format!(
            "{}  {} cores share one D2H link, compute {} ms per inference ({})\n\n",
            ui.paint("regime", Style::Bold),
            a.regime.cores,
            a.regime.compute_ms,
            match &self.input.sweep {
                Some(f) => format!("measured sweep {}", f.path),
                None => "link model".into(),
            }
        );
        let t = &a.thresholds;
        s.push_str(&format!(
            "  onset      D2H = c/N = {:.3} ms at {} B\n  crossover  D2H = c   = {:.3} ms at {} B\n  band width ratio {} (N = {}); thresholds: {}\n\n",
            a.onset_ms,
            bytes_cell(t.onset_bytes),
            a.crossover_ms,
            bytes_cell(t.crossover_bytes),
            ratio_cell(t.width_ratio),
            a.regime.cores,
            a.thresholds_from
        ));
        let mut tab = Table::new(
            &[
                "bytes",
                "D2H ms",
                "model x",
                "measured x",
                "model class",
                "class",
            ],
            "rrrrll",
        );
        for p in &a.points {
            let style = match p.class {
                RegimeClass::ComputeBound => Style::Good,
                RegimeClass::Transition => Style::Plain,
                RegimeClass::D2hBound => Style::Bad,
            };
            tab.styled_row(vec![
                (fmt_count(p.bytes), Style::Plain),
                (format!("{:.3}", p.d2h_ms), Style::Plain),
                (format!("{:.2}", p.predicted_scaling), Style::Plain),
                (
                    p.measured_scaling.map_or("-".into(), |m| format!("{m:.2}")),
                    Style::Plain,
                ),
                (p.model_class.name().into(), Style::Plain),
                (p.class.name().into(), style),
            ]);
        }
        s.push_str(&tab.render(ui, "  "));
        if !a.fits.is_empty() {
            s.push_str("\n  least squares d(b) = fixed + b / bandwidth\n");
            let mut f = Table::new(
                &[
                    "over",
                    "fixed ms",
                    "MB/s",
                    "rms ms",
                    "r2",
                    "onset B",
                    "crossover B",
                    "ratio",
                ],
                "lrrrrrrr",
            );
            for fit in &a.fits {
                f.row(vec![
                    fit.over.into(),
                    format!("{:.4}", fit.link.fixed_ms),
                    format!("{:.1}", fit.link.bytes_per_ms / 1000.0),
                    format!("{:.4}", fit.rms_ms),
                    format!("{:.4}", fit.r2),
                    bytes_cell(fit.thresholds.onset_bytes),
                    bytes_cell(fit.thresholds.crossover_bytes),
                    ratio_cell(fit.thresholds.width_ratio),
                ]);
            }
            s.push_str(&f.render(ui, "  "));
            let mut r = Table::new(
                &std::iter::once("bytes")
                    .chain(a.fits.iter().map(|f| f.over))
                    .collect::<Vec<_>>(),
                &"r".repeat(a.fits.len() + 1),
            );
            for p in &a.points {
                let mut row = vec![fmt_count(p.bytes)];
                for fit in &a.fits {
                    row.push(
                        fit.bytes
                            .iter()
                            .position(|&b| b == p.bytes)
                            .map_or("-".into(), |i| format!("{:+.4}", fit.residuals_ms[i])),
                    );
                }
                r.row(row);
            }
            s.push_str("\n  residuals, ms (measured - fitted)\n");
            s.push_str(&r.render(ui, "  "));
        }
        for n in &self.notes {
            s.push_str(&format!("\n{} {n}\n", ui.paint("note:", Style::Dim)));
        }
        s
    }
}

/// Runs `qport regime`.
pub fn run(args: &RegimeArgs, ui: &Ui) -> Result<ExitStatus> {
    let out = args.out.check(&["regime.json", "regime.svg"])?;
    if !(args.scaling_tol.is_finite() && (0.0..1.0).contains(&args.scaling_tol)) {
        anyhow::bail!("--scaling-tol must be in [0, 1), got {}", args.scaling_tol);
    }
    let regime = Regime::new(args.compute_ms, args.cores)?;
    let (input, analysis) = match &args.sweep {
        Some(path) => {
            let (bytes, facts) = model_file::read(path, "sweep CSV")?;
            let text = String::from_utf8(bytes)
                .with_context(|| format!("'{}' is not UTF-8 text", path.display()))?;
            let points = parse_sweep(&text, &path.display().to_string())?;
            let a = analyze_sweep(&regime, &points, args.scaling_tol)
                .with_context(|| format!("cannot analyse '{}'", path.display()))?;
            let input = InputJson {
                mode: "sweep",
                sweep: Some((&facts).into()),
                link: None,
            };
            (input, a)
        }
        None => {
            let mb_s = args.bandwidth_mb_s.unwrap_or(0.0);
            let link = LinkModel::new(args.fixed_ms, mb_s * 1000.0)?;
            let sizes = if args.outputs.is_empty() {
                default_sizes(&regime, &link)
            } else {
                args.outputs.clone()
            };
            let a = analyze_link(&regime, &link, &sizes).context("--outputs")?;
            let input = InputJson {
                mode: "link-model",
                sweep: None,
                link: Some(link),
            };
            (input, a)
        }
    };
    let doc = RegimeJson {
        header: Header::with_command("qport.regime/1"),
        input,
        scaling_tol: args.scaling_tol,
        notes: notes(&analysis),
        analysis,
    };
    if let Some(dir) = out {
        let json = serde_json::to_string_pretty(&doc).context("cannot encode regime.json")? + "\n";
        out_dir::write(dir, "regime.json", json.as_bytes())?;
        out_dir::write(
            dir,
            "regime.svg",
            qport_study::regime_plot::render(&doc.analysis).as_bytes(),
        )?;
    }
    emit(&doc, args.format, ui)?;
    Ok(ExitStatus::Success)
}
