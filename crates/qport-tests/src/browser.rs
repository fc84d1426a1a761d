//! The browser check of HTML reports: `scripts/browser_check.py` (Python
//! standard library only) opens a page in headless Chromium and reports
//! console errors, non-local requests, unrendered SVGs and overflowing
//! text as JSON, keeping a full-page PNG screenshot. Chromium comes from
//! `scripts/ensure-chromium`, which the README's test command
//! (`bash scripts/test`) runs; a missing Chromium fails the test with a
//! message saying so, never a skip.

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// What the script printed and how it exited.
#[derive(Debug)]
pub struct Run {
    /// Exit code: 0 passed, 1 a check failed, 2 usage error or no browser.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs `python3 scripts/browser_check.py` with `args` (the page, options)
/// and extra environment `env`.
///
/// # Panics
/// Panics (failing the test) when `python3` cannot be started or the
/// script is killed by a signal.
pub fn run_script<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &str)]) -> Run {
    let script = crate::repo_root().join("scripts/browser_check.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    Run {
        code: status.code().expect("browser_check.py exited normally"),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Checks `page` in headless Chromium (1280 x 800 unless `extra` says
/// otherwise), writing the screenshot to `png`, and returns the script's
/// JSON summary (`ok`, `failures`, `svg_count`, `svgs`, `page`, ...).
///
/// # Panics
/// Panics (failing the test) when the check could not run (exit 2: no
/// Chromium, which names `scripts/ensure-chromium`, or a browser that did
/// not answer), or when the exit code and the summary disagree.
pub fn check(page: &Path, png: &Path, extra: &[&str]) -> Value {
    let mut args: Vec<&OsStr> = vec![
        page.as_os_str(),
        OsStr::new("--screenshot"),
        png.as_os_str(),
        OsStr::new("--json"),
        // generous: several Chromiums may start at once on a loaded machine
        OsStr::new("--timeout"),
        OsStr::new("90"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    let r = run_script(&args, &[]);
    assert!(
        r.code == 0 || r.code == 1,
        "the browser check of {} could not run (exit {}):\n{}\nInstall Chromium with \
         `bash scripts/ensure-chromium` (the README's `bash scripts/test` does) or set \
         QPORT_CHROMIUM to its binary.",
        page.display(),
        r.code,
        r.stderr.trim_end()
    );
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\n{}", r.stdout, r.stderr));
    assert_eq!(
        v["ok"],
        Value::Bool(r.code == 0),
        "exit {} for {v:#}",
        r.code
    );
    v
}

/// The `kind` of every failure in a summary, in order.
pub fn failure_kinds(v: &Value) -> Vec<String> {
    failures(v).into_iter().map(|(k, _)| k).collect()
}

/// `(kind, message)` of every failure in a summary, in order.
pub fn failures(v: &Value) -> Vec<(String, String)> {
    v["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().expect(k).to_string();
            (s("kind"), s("message"))
        })
        .collect()
}

/// Width and height of a PNG file, read from its signature and `IHDR`
/// chunk.
///
/// # Panics
/// Panics (failing the test) when the file is missing or not a PNG.
pub fn png_size(path: &Path) -> (u32, u32) {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        b.len() > 33 && b.starts_with(b"\x89PNG\r\n\x1a\n") && &b[12..16] == b"IHDR",
        "{} is not a PNG",
        path.display()
    );
    let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}
