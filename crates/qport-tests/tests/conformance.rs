//! ONNX backend node tests, driven by the allow-list manifest in
//! `conformance/node/*.txt`.
//!
//! Every listed test must pass. Excluded tests are counted with their
//! reasons. A test that exercises only supported operators but is not in the
//! manifest fails this test too: support status must be a reviewed list.
//! Counts are printed and written to `target/conformance-summary.txt`.

use qport_tests::conformance::{model_supported, run_case, Listing, Manifest, Outcome};
use std::fmt::Write as _;

fn manifest() -> Manifest {
    let dir = qport_tests::repo_root().join("conformance/node");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut text = String::new();
    for f in files {
        text.push_str(&std::fs::read_to_string(&f).unwrap());
        text.push('\n');
    }
    Manifest::parse(&text).unwrap_or_else(|e| panic!("conformance manifest: {e}"))
}

#[test]
fn onnx_node_tests() {
    let root = qport_tests::fixture("node");
    let m = manifest();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() > 1000,
        "only {} node tests in {}",
        dirs.len(),
        root.display()
    );
    let (mut passed, mut failed, mut excluded, mut not_run) = (0, 0, 0, 0);
    let mut failures = vec![];
    let mut unlisted_supported = vec![];
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy().to_string();
        match m.listing(&name) {
            Listing::Excluded(_) => excluded += 1,
            Listing::Included => match run_case(d) {
                Outcome::Pass => passed += 1,
                Outcome::Fail(msg) => {
                    failed += 1;
                    failures.push(format!("{name}: {msg}"));
                }
            },
            Listing::Unlisted => {
                not_run += 1;
                if model_supported(d) {
                    unlisted_supported.push(name);
                }
            }
        }
    }
    let listed = passed + failed + excluded;
    let mut summary = String::new();
    writeln!(
        summary,
        "ONNX node conformance: {passed} passed, {failed} failed, {excluded} excluded, \
         {not_run} not run (unsupported ops), {} total",
        dirs.len()
    )
    .unwrap();
    writeln!(
        summary,
        "exclusions: {:.1}% of listed tests",
        100.0 * excluded as f64 / listed.max(1) as f64
    )
    .unwrap();
    // The plain closing line CI tools read: "N passed, N failed".
    writeln!(summary, "conformance: {passed} passed, {failed} failed").unwrap();
    eprint!("{summary}");
    let out = qport_tests::repo_root().join("target/conformance-summary.txt");
    let _ = std::fs::write(&out, &summary);
    assert!(
        failures.is_empty(),
        "{} listed node tests failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        unlisted_supported.is_empty(),
        "{} node tests use only supported ops but are not in conformance/node/*.txt \
         (list or exclude them):\n{}",
        unlisted_supported.len(),
        unlisted_supported.join("\n")
    );
    assert!(
        (excluded as f64) < 0.10 * listed as f64,
        "{excluded} of {listed} listed tests are excluded (limit 10%)"
    );
}
