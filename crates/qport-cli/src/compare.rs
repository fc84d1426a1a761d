//! What `quantize`, `agree` and `diverge` share about comparing outputs
//! (`qport_core::compare`): the argument group (`--output`,
//! `--argmax-axis`, `--min-cosine`, `--min-sqnr`), the human table with one
//! row per output, and the threshold check's exit status.

use crate::output::{fmt_num, Style, Table, Ui};
use crate::ExitStatus;
use qport_core::compare::{
    ArgmaxAxis, OutputChoice, OutputKind, OutputStats, ThresholdCheck, Thresholds,
};

/// `--output`, `--argmax-axis`, `--min-cosine`, `--min-sqnr`.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Compare only this model output (repeatable, or a comma-separated
    /// list; default: every output).
    #[arg(long = "output", value_name = "NAME")]
    pub outputs: Vec<String>,
    /// Take top-1 along this axis of every compared output (negative counts
    /// from the end), or `none`. Default: the last axis of a rank-2 [N, C]
    /// output; no top-1 for other shapes.
    #[arg(long, value_name = "AXIS|none", allow_hyphen_values = true)]
    pub argmax_axis: Option<ArgmaxAxis>,
    /// Fail (exit 1) when a compared output's mean cosine similarity is
    /// below X.
    #[arg(long, value_name = "X", value_parser = parse_cosine)]
    pub min_cosine: Option<f64>,
    /// Fail (exit 1) when a compared output's SQNR is below DB decibels.
    #[arg(long, value_name = "DB", value_parser = parse_db)]
    pub min_sqnr: Option<f64>,
}

fn parse_cosine(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !(-1.0..=1.0).contains(&x) {
        return Err(format!("{s} is not a cosine similarity (between -1 and 1)"));
    }
    Ok(x)
}

fn parse_db(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("'{s}' is not a number of decibels")),
    }
}

impl OutputArgs {
    /// The outputs to compare and their top-1 axis.
    pub fn choice(&self) -> OutputChoice {
        OutputChoice {
            names: self.outputs.clone(),
            argmax_axis: self.argmax_axis,
        }
    }

    /// The thresholds.
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            min_cosine: self.min_cosine,
            min_sqnr: self.min_sqnr,
        }
    }
}

/// A SQNR for tables: `inf` for identical outputs.
pub fn fmt_sqnr(x: Option<f64>) -> String {
    x.map_or("inf".into(), |v| format!("{v:.2}"))
}

/// One row per output: what it is, cosine (mean, min), SQNR, largest
/// difference, share within one quantization step, top-1 along its axis.
pub fn table(outputs: &[OutputStats], ui: &Ui, indent: &str) -> String {
    grouped_table(None, &[(String::new(), outputs)], ui, indent)
}

/// Like [`table`] for several comparisons: one row per (comparison,
/// output), the comparison named in a first column headed `label`.
pub fn grouped_table(
    label: Option<&str>,
    groups: &[(String, &[OutputStats])],
    ui: &Ui,
    indent: &str,
) -> String {
    let mut header = vec![];
    let mut align = String::new();
    if let Some(l) = label {
        header.push(l);
        align.push('l');
    }
    header.extend([
        "output",
        "kind",
        "cosine mean",
        "cosine min",
        "SQNR dB",
        "max |diff|",
        "within 1 step",
        "top-1",
        "bit-identical",
    ]);
    align.push_str("llrrrrrrr");
    let mut t = Table::new(&header, &align);
    let dash = || ("-".to_string(), Style::Dim);
    for (who, o) in groups
        .iter()
        .flat_map(|(who, outs)| outs.iter().map(move |o| (who, o)))
    {
        let kind = match o.kind {
            OutputKind::Float => (format!("{} {:?}", o.dtype, o.shape), Style::Plain),
            OutputKind::Integer => (format!("integer {} (not compared)", o.dtype), Style::Dim),
            OutputKind::PassThrough => (
                format!(
                    "pass-through of '{}' (not compared)",
                    o.passes_input.as_deref().unwrap_or("?")
                ),
                Style::Dim,
            ),
        };
        let low = o
            .cosine_mean
            .is_some_and(|c| c < qport_core::compare::LOW_COSINE);
        let num = |x: Option<f64>, digits: usize| {
            x.map_or_else(dash, |v| {
                (
                    format!("{v:.digits$}"),
                    if low { Style::Bad } else { Style::Plain },
                )
            })
        };
        let float = o.kind == OutputKind::Float;
        let mut row = vec![];
        if label.is_some() {
            row.push((who.clone(), Style::Plain));
        }
        row.extend([
            (o.name.clone(), Style::Bold),
            kind,
            num(o.cosine_mean, 5),
            num(o.cosine_min, 5),
            if float {
                (fmt_sqnr(o.sqnr_db), Style::Plain)
            } else {
                dash()
            },
            o.max_abs_diff
                .map_or_else(dash, |v| (fmt_num(v), Style::Plain)),
            o.within_steps
                .map_or_else(dash, |w| (format!("{:.2}%", 100.0 * w.share), Style::Plain)),
            o.top1.map_or_else(dash, |t| {
                (
                    format!("{}/{} (axis {})", t.agree, t.rows, t.axis),
                    if t.agree < t.rows {
                        Style::Bad
                    } else {
                        Style::Plain
                    },
                )
            }),
            (format!("{}/{}", o.bit_identical, o.samples), Style::Plain),
        ]);
        t.styled_row(row);
    }
    t.render(ui, indent)
}

/// The human lines of a threshold check (`None`: no threshold given).
pub fn check_lines(check: Option<&ThresholdCheck>, ui: &Ui) -> String {
    let Some(c) = check else {
        return String::new();
    };
    let mut asked = vec![];
    if let Some(x) = c.thresholds.min_cosine {
        asked.push(format!("--min-cosine {x}"));
    }
    if let Some(x) = c.thresholds.min_sqnr {
        asked.push(format!("--min-sqnr {x}"));
    }
    if c.passed {
        return ui.paint(
            &format!(
                "check passed: every compared output reaches {}\n",
                asked.join(" and ")
            ),
            Style::Good,
        );
    }
    let mut s = ui.paint(
        &format!("check FAILED ({}):\n", asked.join(", ")),
        Style::Bad,
    );
    for f in &c.failing {
        s += &format!("  {f}\n");
    }
    s
}

/// Exit 1 (after naming each failing output on stderr) when the check
/// failed, else 0.
pub fn status(check: Option<&ThresholdCheck>) -> ExitStatus {
    match check {
        Some(c) if !c.passed => {
            for f in &c.failing {
                eprintln!("qport: check failed: {f}");
            }
            ExitStatus::Failure
        }
        _ => ExitStatus::Success,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_parsed() {
        assert_eq!(parse_cosine("0.99"), Ok(0.99));
        assert!(parse_cosine("1.5")
            .unwrap_err()
            .contains("between -1 and 1"));
        assert!(parse_cosine("x").is_err());
        assert_eq!(parse_db("-3"), Ok(-3.0));
        assert!(parse_db("inf").is_err());
        assert_eq!(fmt_sqnr(None), "inf");
        assert_eq!(fmt_sqnr(Some(31.234)), "31.23");
    }
}
