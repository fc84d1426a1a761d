//! The user guides (`docs/guides/*.md`) as a test, so that their commands
//! cannot rot.
//!
//! Every fenced block of a guide names its language. ```` ```sh ```` blocks
//! run; the languages in [`SHOWN`] (output excerpts, file contents) are shown
//! and never run; any other fence, or one without a language, fails the
//! test, so no block is skipped silently. A `sh` block must hold a command,
//! and may call only `qport` and the tools in [`TOOLS`] (no command
//! substitution, which would hide a command from that check).
//!
//! Each guide's `sh` blocks run in order in one `bash` process with `set
//! -euo pipefail`, in a fresh temporary directory, with the `qport` built
//! for this test first on `PATH`. A guide names its data in variables it
//! declares as `: "${MODEL:=model.onnx}"`; the test sets those in [`DATA`]
//! to fixtures (`scripts/fetch-fixtures`) and [`INPUTS`] to an `.npz` it
//! writes, and clears every other variable a guide declares, so the guide's
//! own default applies. A command that fails fails the test, naming the
//! guide, the block and its line, and showing the block and its output.
//! Each guide's whole transcript is written to `target/guides/<guide>.log`
//! (the source of the output excerpts the guides show).

use qport_tests::cli::temp_dir;
use qport_tests::{fixture, repo_root};
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The guides, each run by the test of the same name below.
const GUIDES: &[&str] = &[
    "README.md",
    "quantize.md",
    "portability.md",
    "tune.md",
    "deployment-io.md",
    "migrate.md",
    "verify.md",
    "regime.md",
];

/// Data variables a guide may declare, and the fixture each is in the test.
const DATA: &[(&str, &str)] = &[
    ("MODEL", "models/efficientnet-lite0.onnx"),
    ("CALIB", "datasets/photo-crops/calib"),
    ("EVAL", "datasets/photo-crops/eval"),
    ("DATA", "datasets/photo-crops/study"),
];

/// The variable naming the inputs fed to a device (`verify.md`): an `.npz`
/// the test writes from the first evaluation crop.
const INPUTS: &str = "INPUTS";

/// Fence languages that are shown, never run.
const SHOWN: &[&str] = &["text", "console", "json", "toml", "csv"];

/// What a `sh` block may call besides `qport`: shell builtins and POSIX
/// tools found on any machine that runs the suite.
const TOOLS: &[&str] = &[
    ":", "cat", "cd", "cp", "echo", "export", "grep", "head", "ls", "mkdir", "printf", "rm", "sed",
    "sort", "tail", "test", "[", "true", "wc",
];

/// Words that open or close a compound command; the word after them is a
/// command.
const KEYWORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
];

/// Longest one guide may run: a guard against a hang, far above any
/// machine's time (the test's outcome never depends on speed).
const HANG_GUARD: Duration = Duration::from_secs(3600);

/// One fenced block of a guide.
#[derive(Debug, Clone, PartialEq)]
struct Block {
    /// 1-based line of the opening fence.
    line: usize,
    /// The fence's language.
    lang: String,
    /// The lines between the fences.
    text: String,
}

/// The fenced blocks of a Markdown text, checked: every fence has a
/// language, `sh` or one of [`SHOWN`], and is closed.
fn blocks(md: &str) -> Result<Vec<Block>, String> {
    let mut out = vec![];
    let mut open: Option<(usize, String, Vec<&str>)> = None;
    for (i, line) in md.lines().enumerate() {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                let lang = line.trim_start().trim_start_matches('`').trim();
                if lang.is_empty() {
                    return Err(format!(
                        "line {}: a fence without a language (```sh runs, ```text is shown)",
                        i + 1
                    ));
                }
                if lang != "sh" && !SHOWN.contains(&lang) {
                    return Err(format!(
                        "line {}: fence language `{lang}`: use ```sh (run by the test) or one of {SHOWN:?} (shown)",
                        i + 1
                    ));
                }
                open = Some((i + 1, lang.to_string(), vec![]));
            }
            (Some((_, _, lines)), false) => lines.push(line),
            (Some(_), true) => {
                let (line, lang, lines) = open.take().expect("open block");
                out.push(Block {
                    line,
                    lang,
                    text: lines.join("\n"),
                });
            }
            (None, false) => {}
        }
    }
    if let Some((line, ..)) = open {
        return Err(format!("line {line}: fence never closed"));
    }
    Ok(out)
}

/// The first word of every command of a `sh` block (after assignments and
/// compound-command keywords), skipping comments and here-document bodies.
/// Command substitution is refused: it would hide commands from the check.
fn command_words(script: &str) -> Result<Vec<String>, String> {
    let mut logical = vec![];
    let mut heredoc: Option<String> = None;
    let mut pending = String::new();
    for line in script.lines() {
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            }
            continue;
        }
        if let Some(end) = heredoc_end(line) {
            heredoc = Some(end);
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        logical.push(std::mem::take(&mut pending));
    }
    if heredoc.is_some() {
        return Err("a here-document is never closed".into());
    }
    logical.push(pending);
    let mut words = vec![];
    for line in logical {
        for cmd in split_commands(&line)? {
            if let Some(w) = first_word(&cmd) {
                words.push(w);
            }
        }
    }
    Ok(words)
}

/// The terminator of a here-document started on `line` (`<<EOF`,
/// `<<'EOF'`, `<<-"EOF"`).
fn heredoc_end(line: &str) -> Option<String> {
    let at = line.find("<<")?;
    let rest = line[at + 2..].trim_start_matches('-').trim_start();
    let word: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// The simple commands of one logical line, each as its words (quotes
/// removed), split at `|`, `&&`, `||`, `;`, `&`, `(` and `)` outside
/// quotes; a `#` starting a word starts a comment.
fn split_commands(line: &str) -> Result<Vec<Vec<String>>, String> {
    let mut cmds = vec![];
    let mut words: Vec<String> = vec![];
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for d in chars.by_ref() {
                    if d == '\'' {
                        break;
                    }
                    word.push(d);
                }
            }
            '"' => {
                in_word = true;
                while let Some(d) = chars.next() {
                    match d {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        '`' => return Err("command substitution (`...`)".into()),
                        '$' if chars.peek() == Some(&'(') => {
                            return Err("command substitution ($(...))".into())
                        }
                        d => word.push(d),
                    }
                }
            }
            '`' => return Err("command substitution (`...`)".into()),
            '$' if chars.peek() == Some(&'(') => return Err("command substitution ($(...))".into()),
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            '#' if !in_word => break,
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '|' | '&' | ';' | '(' | ')' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
                // `>&` / `2>&1` are redirections, not separators.
                if c == '&' && words.last().is_some_and(|w| w.ends_with('>')) {
                    continue;
                }
                cmds.push(std::mem::take(&mut words));
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    cmds.push(words);
    Ok(cmds.into_iter().filter(|w| !w.is_empty()).collect())
}

/// The command word of a simple command: past `NAME=value` assignments,
/// redirections and keywords; `None` for a `for`/`case` header or nothing.
fn first_word(words: &[String]) -> Option<String> {
    let mut it = words.iter().peekable();
    while let Some(w) = it.next() {
        if KEYWORDS.contains(&w.as_str()) || is_assignment(w) {
            continue;
        }
        if w.starts_with(['>', '<']) || w.starts_with("2>") || w.starts_with("1>") {
            if matches!(w.as_str(), ">" | ">>" | "<" | "2>" | "2>>" | "1>") {
                it.next();
            }
            continue;
        }
        if w == "for" || w == "case" || w == "in" {
            return None;
        }
        return Some(w.clone());
    }
    None
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// The variables a `sh` block declares as `: "${NAME:=default}"`.
fn declared(script: &str) -> Vec<String> {
    let mut out = vec![];
    for line in script.lines() {
        let l = line.trim_start();
        if let Some(rest) = l.strip_prefix(": \"${").or_else(|| l.strip_prefix(": ${")) {
            if let Some((name, _)) = rest.split_once(":=") {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// The checked `sh` blocks of guide `name`, and the variables they declare.
fn runnable(name: &str, md: &str) -> Result<(Vec<Block>, Vec<String>), String> {
    let all = blocks(md).map_err(|e| format!("{name}: {e}"))?;
    let mut run = vec![];
    let mut vars = vec![];
    for b in all.into_iter().filter(|b| b.lang == "sh") {
        let words = command_words(&b.text).map_err(|e| format!("{name} line {}: {e}", b.line))?;
        if words.is_empty() {
            return Err(format!(
                "{name} line {}: a ```sh block without a command",
                b.line
            ));
        }
        if let Some(w) = words
            .iter()
            .find(|w| *w != "qport" && !TOOLS.contains(&w.as_str()))
        {
            return Err(format!(
                "{name} line {}: `{w}` is not a command the guides test can run (qport or {TOOLS:?}); \
                 fence a block that must not run as ```text or ```console",
                b.line
            ));
        }
        vars.extend(declared(&b.text));
        run.push(b);
    }
    Ok((run, vars))
}

fn guides_dir() -> PathBuf {
    repo_root().join("docs/guides")
}

fn read_guide(name: &str) -> String {
    let p = guides_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Marker line the script prints before block `i` (1-based).
fn marker(i: usize, line: usize) -> String {
    format!("@@ guide block {i} (line {line})")
}

/// Runs guide `name`: its `sh` blocks in one `bash` in a fresh directory.
fn run_guide(name: &str) {
    let md = read_guide(name);
    let (run, vars) = runnable(name, &md).unwrap_or_else(|e| panic!("{e}"));
    let work = temp_dir("guide");
    let data = temp_dir("guide-data");
    let bin = temp_dir("guide-bin");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_qport"), bin.join("qport")).expect("link qport");

    let mut script = String::from("exec 2>&1\nset -euo pipefail\n");
    for (i, b) in run.iter().enumerate() {
        script.push_str(&format!(
            "printf '\\n%s at %ss\\n' '{}' \"$SECONDS\"\n",
            marker(i + 1, b.line)
        ));
        script.push_str(&b.text);
        script.push('\n');
    }
    let script_path = data.join("guide.sh");
    std::fs::write(&script_path, &script).expect("write script");

    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut cmd = Command::new("bash");
    cmd.arg("--noprofile")
        .arg("--norc")
        .arg(&script_path)
        .current_dir(&*work)
        .env(
            "PATH",
            std::env::join_paths(
                std::iter::once(bin.to_path_buf()).chain(std::env::split_paths(&path)),
            )
            .expect("PATH"),
        )
        .env_remove("NO_COLOR")
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in &vars {
        cmd.env_remove(v);
    }
    for (var, rel) in DATA {
        cmd.env(var, fixture(rel));
    }
    if vars.iter().any(|v| v == INPUTS) {
        cmd.env(INPUTS, first_eval_crop(&data));
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("start bash");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for bash") {
            break st;
        }
        if start.elapsed() > HANG_GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name}: still running after {HANG_GUARD:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
    let log = repo_root().join("target/guides");
    let _ = std::fs::create_dir_all(&log);
    let _ = std::fs::write(log.join(format!("{name}.log")), &out);
    eprintln!(
        "{name}: {} blocks in {:.1} s",
        run.len(),
        start.elapsed().as_secs_f64()
    );
    if !status.success() {
        let at = (1..=run.len())
            .rev()
            .find_map(|i| out.rfind(&marker(i, run[i - 1].line)).map(|p| (i, p)));
        match at {
            Some((i, p)) => panic!(
                "docs/guides/{name}: block {i} (line {}) failed ({status}):\n```sh\n{}\n```\noutput:\n{}",
                run[i - 1].line,
                run[i - 1].text,
                &out[p..]
            ),
            None => panic!("docs/guides/{name}: failed before its first block ({status}):\n{out}"),
        }
    }
}

/// The first crop of `datasets/photo-crops/eval`, preprocessed for
/// EfficientNet-Lite0, as `DIR/in.npz` (the inputs a device was fed).
fn first_eval_crop(dir: &Path) -> PathBuf {
    let p = dir.join("in.npz");
    let sample = qport_tests::photo_crops("eval", 1).remove(0);
    qport_data::npz::write(&p, &sample.inputs).expect("write in.npz");
    p
}

#[test]
fn every_guide_is_tested_and_every_data_variable_used() {
    let mut files: Vec<String> = std::fs::read_dir(guides_dir())
        .expect("docs/guides")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = GUIDES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(files, listed, "docs/guides/*.md and GUIDES differ");
    let mut used = BTreeSet::new();
    for g in GUIDES {
        let (_, vars) = runnable(g, &read_guide(g)).unwrap_or_else(|e| panic!("{e}"));
        used.extend(vars);
    }
    for (var, rel) in DATA {
        assert!(
            used.contains(*var),
            "DATA names {var} ({rel}) but no guide declares it"
        );
    }
    assert!(used.contains(INPUTS), "no guide declares {INPUTS}");
}

#[test]
fn fences_need_a_known_language_and_a_closing_fence() {
    let ok = "text\n```sh\nqport platforms\n```\n\n```text\nout\n```\n";
    let b = blocks(ok).unwrap();
    assert_eq!(b.len(), 2);
    assert_eq!(
        (b[0].line, b[0].lang.as_str(), b[0].text.as_str()),
        (2, "sh", "qport platforms")
    );
    assert_eq!(b[1].lang, "text");
    assert!(blocks("```\nqport\n```\n")
        .unwrap_err()
        .contains("without a language"));
    assert!(blocks("```bash\nqport\n```\n")
        .unwrap_err()
        .contains("`bash`"));
    assert!(blocks("```sh\nqport\n")
        .unwrap_err()
        .contains("never closed"));
}

#[test]
fn sh_blocks_are_checked_for_commands() {
    let words = |s: &str| command_words(s).unwrap();
    assert_eq!(
        words("# comment\n: \"${MODEL:=m.onnx}\"\nqport quantize \"$MODEL\" \\\n  --out q  # trailing\n"),
        [":", "qport"]
    );
    assert_eq!(
        words("test -f q/x || qport quantize m --out q\nrc=0; qport verify a || rc=$?\n[ \"$rc\" -le 1 ]"),
        ["test", "qport", "qport", "["]
    );
    assert_eq!(
        words("cat > t.csv <<'EOF'\nbytes,ms\nrm -rf /\nEOF\nqport regime --sweep t.csv 2>&1 | head -3"),
        ["cat", "qport", "head"]
    );
    assert_eq!(
        words("if qport lint a; then echo ok; fi"),
        ["qport", "echo"]
    );
    assert_eq!(
        words("for p in j6m j6p; do qport layout m -p \"$p\"; done"),
        ["qport"]
    );
    assert!(command_words("echo \"$(qport --version)\"").is_err());
    assert!(command_words("x=`date`").is_err());
    assert!(command_words("cat <<EOF\nnever closed\n").is_err());
    assert_eq!(
        declared(": \"${MODEL:=m.onnx}\"\n  : \"${CALIB:=c/}\"  # x"),
        ["MODEL", "CALIB"]
    );

    let guide = |body: &str| format!("# g\n\n```sh\n{body}\n```\n");
    let err = runnable("g.md", &guide("python make.py")).unwrap_err();
    assert!(err.contains("`python`") && err.contains("line 3"), "{err}");
    let err = runnable("g.md", &guide("# only a comment")).unwrap_err();
    assert!(err.contains("without a command"), "{err}");
    let (run, vars) = runnable(
        "g.md",
        &guide(": \"${MODEL:=m.onnx}\"\nqport info \"$MODEL\""),
    )
    .unwrap();
    assert_eq!((run.len(), vars), (1, vec!["MODEL".to_string()]));
}

#[test]
fn readme() {
    run_guide("README.md");
}

#[test]
fn quantize() {
    run_guide("quantize.md");
}

#[test]
fn portability() {
    run_guide("portability.md");
}

#[test]
fn tune() {
    run_guide("tune.md");
}

#[test]
fn deployment_io() {
    run_guide("deployment-io.md");
}

#[test]
fn migrate() {
    run_guide("migrate.md");
}

#[test]
fn verify() {
    run_guide("verify.md");
}

#[test]
fn regime() {
    run_guide("regime.md");
}
