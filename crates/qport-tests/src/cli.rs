//! Running the `qport` binary in CLI tests: a clean environment (no colour
//! variables, no backtraces, stdin closed), captured output, a time limit
//! so a hang fails the test, and fresh temporary directories.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Exit code and output of one run.
#[derive(Debug)]
pub struct Out {
    /// Exit code.
    pub code: i32,
    /// Standard output (UTF-8).
    pub stdout: String,
    /// Standard error (UTF-8).
    pub stderr: String,
}

/// Longest a single run may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(180);

/// Runs `bin` (pass `env!("CARGO_BIN_EXE_qport")`) with `args` and extra
/// environment `env`.
///
/// # Panics
/// Panics (failing the test) if it cannot start, does not finish within
/// [`TIMEOUT`], is killed by a signal, or prints non-UTF-8.
pub fn run(bin: &str, args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("run qport");
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = vec![];
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for qport") {
            break st;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("qport {args:?} did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Out {
        code: status.code().expect("exited normally"),
        stdout: String::from_utf8(stdout.join().expect("stdout thread")).expect("utf-8 stdout"),
        stderr: String::from_utf8(stderr.join().expect("stderr thread")).expect("utf-8 stderr"),
    }
}

/// A fresh, empty directory under the system temp dir (`qport-<tag>-...`),
/// removed when dropped (a `tempfile::TempDir` that also derefs to its
/// path, so `dir.join(..)` and `&dir` as a `&Path` work as before).
pub fn temp_dir(tag: &str) -> TempDir {
    TempDir(
        tempfile::Builder::new()
            .prefix(&format!("qport-{tag}-"))
            .tempdir()
            .expect("create temp dir"),
    )
}

/// A temporary directory, removed on drop.
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// A usage or input error: exit 2, every word of `words` on stderr,
/// nothing on stdout, and no panic (`panicked`, `bug in qport`). Says
/// nothing of the headline: clap's own usage errors print `error: ...`.
///
/// # Panics
/// Panics (failing the test) when any of these does not hold.
pub fn assert_exit_2(o: &Out, words: &[&str]) {
    assert_eq!(o.code, 2, "stdout: {}\nstderr: {}", o.stdout, o.stderr);
    for w in words {
        assert!(o.stderr.contains(w), "missing {w:?} in:\n{}", o.stderr);
    }
    assert!(!o.stderr.contains("panicked"), "{}", o.stderr);
    assert!(!o.stderr.contains("bug in qport"), "{}", o.stderr);
    assert!(o.stdout.is_empty(), "{}", o.stdout);
}

/// An input error found by qport: [`assert_exit_2`] and a
/// `qport: error: ` headline on some line of stderr (phase lines such as
/// `qport: loading ...` may precede it off a terminal).
///
/// # Panics
/// Panics (failing the test) when any of these does not hold.
pub fn assert_input_error(o: &Out, words: &[&str]) {
    assert_exit_2(o, words);
    assert!(
        o.stderr.lines().any(|l| l.starts_with("qport: error: ")),
        "{}",
        o.stderr
    );
}

/// [`assert_input_error`] for a command that prints nothing before the
/// error: stderr starts with the `qport: error: ` headline.
///
/// # Panics
/// Panics (failing the test) when any of these does not hold.
pub fn assert_input_error_first(o: &Out, words: &[&str]) {
    assert_exit_2(o, words);
    assert!(o.stderr.starts_with("qport: error: "), "{}", o.stderr);
}

/// Every word of `words` occurs in `text` (a run's stdout or stderr).
///
/// # Panics
/// Panics (failing the test) naming the first missing word and `text`.
pub fn assert_contains_all(text: &str, words: &[&str]) {
    for w in words {
        assert!(text.contains(w), "missing {w:?} in:\n{text}");
    }
}

/// The names of the entries of `dir` (not recursive, in no set order).
///
/// # Panics
/// Panics (failing the test) when `dir` cannot be read.
pub fn entry_names(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("read dir entry").file_name())
        .collect()
}
