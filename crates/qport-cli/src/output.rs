//! Everything the commands print goes through here: the output format
//! switch, stdout writes that surface a closed pipe as an error (so `main`
//! can exit quietly), colour (only on a terminal, never with `NO_COLOR`),
//! aligned tables, number formatting and progress bars (stderr, hidden when
//! stderr is not a terminal or with `--quiet`).

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal, Write};

/// Output format of a command's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned tables for people.
    #[default]
    #[value(alias = "text")]
    Human,
    /// One JSON document on stdout (schemas in docs/cli-json.md).
    Json,
}

/// Terminal styling of a piece of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Unstyled.
    Plain,
    /// Bold.
    Bold,
    /// Green (success).
    Good,
    /// Red (failure).
    Bad,
    /// Dim (secondary information).
    Dim,
}

impl Style {
    fn code(self) -> Option<&'static str> {
        match self {
            Style::Plain => None,
            Style::Bold => Some("1"),
            Style::Good => Some("32"),
            Style::Bad => Some("31"),
            Style::Dim => Some("2"),
        }
    }
}

/// What the user asked about presentation, resolved once per run.
#[derive(Debug, Clone)]
pub struct Ui {
    /// `--quiet`: no progress bars or notes on stderr.
    pub quiet: bool,
    color_stdout: bool,
    color_stderr: bool,
    /// Off a terminal, each progress bar or spinner also prints its label
    /// as one `qport: LABEL` line on stderr (see [`Ui::with_phase_lines`]).
    phase_lines: bool,
}

/// Colour decision: `NO_COLOR` (non-empty) always wins, then
/// `CLICOLOR_FORCE` (non-empty, not `0`) forces it, else only on a terminal.
fn color_wanted(is_tty: bool) -> bool {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    if set("NO_COLOR") {
        return false;
    }
    if set("CLICOLOR_FORCE") && std::env::var_os("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    is_tty
}

impl Ui {
    /// Resolves colour for stdout and stderr from the environment.
    pub fn new(quiet: bool) -> Ui {
        Ui {
            quiet,
            color_stdout: color_wanted(std::io::stdout().is_terminal()),
            color_stderr: color_wanted(std::io::stderr().is_terminal()),
            phase_lines: false,
        }
    }

    /// This `Ui` for a long command: when stderr is not a terminal and
    /// `--quiet` is not given, every phase (each progress bar or spinner)
    /// prints one `qport: LABEL` line on stderr, so a log shows where the
    /// time went.
    pub fn with_phase_lines(&self) -> Ui {
        Ui {
            phase_lines: !self.quiet && !std::io::stderr().is_terminal(),
            ..self.clone()
        }
    }

    /// Prints `qport: warning: TEXT` on stderr (also with `--quiet`: a
    /// warning is part of the result; JSON documents carry it too).
    pub fn warn(&self, text: &str) {
        if crate::embed::keep_warning(text) {
            return;
        }
        let mut e = std::io::stderr().lock();
        let _ = writeln!(e, "qport: {} {text}", self.warn_style("warning:"));
    }

    fn warn_style(&self, text: &str) -> String {
        paint(text, Style::Bad, self.color_stderr)
    }

    fn phase_line(&self, text: &str) {
        crate::embed::notify(crate::embed::Event::Phase(text));
        if self.phase_lines {
            let mut e = std::io::stderr().lock();
            let _ = writeln!(e, "qport: {text}");
        }
    }

    /// `text` styled for stdout (unchanged when colour is off).
    pub fn paint(&self, text: &str, style: Style) -> String {
        paint(text, style, self.color_stdout)
    }

    /// The `error:` label styled for stderr.
    pub fn err_style(&self, text: &str) -> String {
        paint(text, Style::Bad, self.color_stderr)
    }

    /// A progress bar on stderr labelled `msg`, counting `len` `unit`s
    /// (e.g. "samples"); hidden with `--quiet` or when stderr is not a
    /// terminal (indicatif checks the terminal itself), where a phase line
    /// `qport: MSG (LEN UNIT)` stands for it (with phase lines on).
    pub fn progress(&self, len: u64, unit: &str, msg: &str) -> Progress {
        self.phase_line(&format!("{msg} ({len} {unit})"));
        let target = if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let pb = ProgressBar::with_draw_target(Some(len), target);
        if let Ok(style) = ProgressStyle::with_template(&format!(
            "{{msg}} [{{bar:30}}] {{pos}}/{{len}} {unit} ({{elapsed}})"
        )) {
            pb.set_style(style.progress_chars("=> "));
        }
        pb.set_message(msg.to_string());
        Progress {
            bar: pb,
            observer: crate::embed::observer(),
        }
    }

    /// A labelled spinner on stderr for a step of unknown length (hidden
    /// like [`Ui::progress`]; its phase line is `qport: MSG`).
    pub fn spinner(&self, msg: &str) -> Progress {
        self.phase_line(msg);
        let target = if self.quiet {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let pb = ProgressBar::with_draw_target(None, target);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            pb.set_style(style);
        }
        pb.set_message(msg.to_string());
        pb.enable_steady_tick(std::time::Duration::from_millis(120));
        Progress {
            bar: pb,
            observer: crate::embed::observer(),
        }
    }
}

/// A progress bar or spinner that is cleared from the terminal when
/// dropped, so an error message never lands after a stale bar. Inside
/// [`crate::embed::execute`] its moves also reach the caller's observer
/// (from whichever thread makes them).
pub struct Progress {
    bar: ProgressBar,
    observer: Option<crate::embed::Observer>,
}

impl Progress {
    /// Moves on to the next phase of a spinner: a new label, and (with
    /// phase lines on) a new `qport: MSG` line.
    pub fn phase(&self, ui: &Ui, msg: &str) {
        ui.phase_line(msg);
        self.bar.set_message(msg.to_string());
    }

    /// A new label for the bar or spinner.
    pub fn set_message(&self, msg: impl Into<String>) {
        let msg = msg.into();
        if let Some(o) = &self.observer {
            o(crate::embed::Event::Phase(&msg));
        }
        self.bar.set_message(msg);
    }

    /// Sets the count done to `pos`.
    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
        self.moved();
    }

    /// Adds `delta` to the count done.
    pub fn inc(&self, delta: u64) {
        self.bar.inc(delta);
        self.moved();
    }

    /// Sets the total count.
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
        self.moved();
    }

    fn moved(&self) {
        if let Some(o) = &self.observer {
            o(crate::embed::Event::Progress {
                done: self.bar.position(),
                total: self.bar.length(),
            });
        }
    }
}

impl std::ops::Deref for Progress {
    type Target = ProgressBar;
    fn deref(&self) -> &ProgressBar {
        &self.bar
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

fn paint(text: &str, style: Style, on: bool) -> String {
    match style.code() {
        Some(code) if on => format!("\x1b[{code}m{text}\x1b[0m"),
        _ => text.to_string(),
    }
}

/// Writes `text` to stdout and flushes; a closed pipe comes back as an
/// `io::Error` of kind `BrokenPipe`.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .context("cannot write to stdout")
}

/// Writes `value` as pretty JSON and a newline to stdout.
/// Inside [`crate::embed::execute`] the document is kept for the caller
/// instead.
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    let mut s = serde_json::to_string_pretty(value).context("cannot encode JSON output")?;
    s.push('\n');
    match crate::embed::keep_document(s) {
        Some(s) => print(&s),
        None => Ok(()),
    }
}

/// Column alignment in a [`Table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Pad on the right.
    Left,
    /// Pad on the left (numbers).
    Right,
}

/// A simple aligned text table; widths count characters, styles are
/// applied after padding so colour codes never break alignment.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<(String, Style)>>,
}

impl Table {
    /// A table with these column headers; `align` has one letter a column,
    /// `l` (text, padded on the right) or `r` (numbers, padded on the left).
    ///
    /// # Panics
    /// Panics when `align` does not have one `l` or `r` per header.
    pub fn new(header: &[&str], align: &str) -> Table {
        let align: Vec<Align> = align
            .chars()
            .map(|c| match c {
                'l' => Align::Left,
                'r' => Align::Right,
                _ => panic!("Table::new: alignment {c:?} is neither 'l' nor 'r'"),
            })
            .collect();
        assert_eq!(
            align.len(),
            header.len(),
            "Table::new: one alignment a column"
        );
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            align,
            rows: vec![],
        }
    }

    /// Appends a row of plain cells.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows
            .push(cells.into_iter().map(|c| (c, Style::Plain)).collect());
    }

    /// Appends a row of styled cells.
    pub fn styled_row(&mut self, cells: Vec<(String, Style)>) {
        self.rows.push(cells);
    }

    /// Renders with two spaces between columns and `indent` before each
    /// line; the header is bold.
    pub fn render(&self, ui: &Ui, indent: &str) -> String {
        let n = self.header.len();
        let mut w: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, (c, _)) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |cells: Vec<(String, Style)>| -> String {
            let mut s = String::from(indent);
            for (i, (c, style)) in cells.iter().enumerate().take(n) {
                let pad = w[i] - c.chars().count();
                let last = i + 1 == n;
                let padded = match self.align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Left if last => c.clone(),
                    Align::Left => format!("{c}{}", " ".repeat(pad)),
                    Align::Right => format!("{}{c}", " ".repeat(pad)),
                };
                s.push_str(&ui.paint(&padded, *style));
                if !last {
                    s.push_str("  ");
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(
            self.header
                .iter()
                .map(|h| (h.clone(), Style::Bold))
                .collect(),
        );
        for r in &self.rows {
            out.push_str(&line(r.clone()));
        }
        out
    }
}

/// A byte count for people: `585532 bytes (571.8 KiB)`.
pub fn fmt_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{n} bytes ({v:.1} {})", UNITS[u])
}

/// A count with thousands separators: `1234567` → `1,234,567`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string().into_bytes();
    let groups: Vec<&str> = digits
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).expect("ASCII digits"))
        .collect();
    groups.join(",")
}

/// A number for tables: integers as integers, moderate magnitudes with up
/// to 6 decimals (trailing zeros trimmed), the rest in scientific notation.
pub fn fmt_num(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    let a = x.abs();
    if (1e-4..1e6).contains(&a) {
        let s = format!("{x:.6}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        return s.to_string();
    }
    format!("{x:.4e}")
}

/// Milliseconds from a duration, for JSON (microsecond resolution).
pub fn ms(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

/// A duration for people: `12.3 ms`, `1.52 s`.
pub fn fmt_ms(d: std::time::Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1e3)
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain() -> Ui {
        Ui {
            quiet: true,
            color_stdout: false,
            color_stderr: false,
            phase_lines: false,
        }
    }

    #[test]
    fn numbers_and_sizes() {
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(fmt_num(0.5), "0.5");
        assert_eq!(fmt_num(0.998157), "0.998157");
        assert_eq!(fmt_num(1.5e-9), "1.5000e-9");
        assert_eq!(fmt_num(f64::NAN), "NaN");
        assert_eq!(fmt_bytes(10), "10 bytes");
        assert_eq!(fmt_bytes(585532), "585532 bytes (571.8 KiB)");
        assert_eq!(fmt_count(1234567), "1,234,567");
        assert_eq!(fmt_count(123), "123");
    }

    #[test]
    fn table_aligns_and_keeps_colour_out_of_widths() {
        let mut t = Table::new(&["name", "n"], "lr");
        t.row(vec!["a".into(), "10".into()]);
        t.styled_row(vec![
            ("long".into(), Style::Good),
            ("2".into(), Style::Plain),
        ]);
        let s = t.render(&plain(), "  ");
        assert_eq!(s, "  name   n\n  a     10\n  long   2\n");
        let colored = Ui {
            color_stdout: true,
            ..plain()
        };
        let s = t.render(&colored, "");
        assert!(s.contains("\x1b[32mlong\x1b[0m"));
    }
}
