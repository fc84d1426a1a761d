//! Runs ONNX backend node tests from the fixture cache and prints each
//! result: `cargo run --release -p qport-tests --example node_tests -- [PATTERN...]`.
//!
//! Patterns use `*` globs (`test_conv*`); with none, every test runs. The
//! cache is `$QPORT_FIXTURES/node` (default `~/.cache/qport/fixtures/node`).
//! Tests whose models use unsupported operators are counted separately.

use qport_tests::conformance::{glob, model_supported, run_case, Outcome};

fn main() {
    let root = std::env::var("QPORT_FIXTURES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::PathBuf::from(std::env::var("HOME").unwrap_or_default())
                .join(".cache/qport/fixtures")
        })
        .join("node");
    let pats: Vec<String> = std::env::args().skip(1).collect();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    let (mut pass, mut fail, mut unsup) = (0, 0, 0);
    for d in dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        if !pats.is_empty() && !pats.iter().any(|p| glob(p, &name)) {
            continue;
        }
        if !model_supported(&d) {
            unsup += 1;
            if !pats.is_empty() {
                println!("UNSUPPORTED {name}");
            }
            continue;
        }
        match run_case(&d) {
            Outcome::Pass => {
                pass += 1;
                println!("PASS {name}");
            }
            Outcome::Fail(m) => {
                fail += 1;
                println!("FAIL {name}: {m}");
            }
        }
    }
    println!("{pass} passed, {fail} failed, {unsup} use unsupported ops");
}
