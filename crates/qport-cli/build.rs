//! Embeds the bundled demo assets (`assets/demo/ppocr-cls.onnx` and every
//! `assets/demo/*.png`) into the binary: writes `$OUT_DIR/demo_assets.rs`
//! with one `include_bytes!` per file, so `qport demo` needs no files at run
//! time and new crops are picked up on the next build. Also sets
//! `QPORT_GIT_COMMIT` to the commit of the checkout being built (empty
//! outside a git checkout), which `qport study` records in its report.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dir = manifest.join("../../assets/demo");
    println!("cargo:rerun-if-changed={}", dir.display());
    println!("cargo:rerun-if-changed=build.rs");

    let mut crops: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "png"))
                .collect()
        })
        .unwrap_or_default();
    crops.sort();

    let mut src = String::new();
    src.push_str("/// The bundled demo crops: (file name, PNG bytes), sorted by name.\n");
    src.push_str("pub const CROPS: &[(&str, &[u8])] = &[\n");
    for p in &crops {
        let name = p.file_name().expect("file").to_string_lossy();
        let abs = p.canonicalize().expect("readable asset");
        writeln!(
            src,
            "    ({name:?}, include_bytes!({:?})),",
            abs.to_string_lossy()
        )
        .unwrap();
    }
    src.push_str("];\n");
    let model = dir.join("ppocr-cls.onnx");
    src.push_str("/// The bundled demo model, if present at build time.\n");
    if model.is_file() {
        let abs = model.canonicalize().expect("readable asset");
        writeln!(
            src,
            "pub const MODEL: Option<&[u8]> = Some(include_bytes!({:?}));",
            abs.to_string_lossy()
        )
        .unwrap();
    } else {
        src.push_str("pub const MODEL: Option<&[u8]> = None;\n");
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("demo_assets.rs");
    std::fs::write(out, src).expect("write demo_assets.rs");
    git_commit(&manifest.join("../.."));
}

/// `cargo:rustc-env=QPORT_GIT_COMMIT=<HEAD's sha>`, rebuilt when HEAD or
/// the branch it names moves.
fn git_commit(root: &std::path::Path) {
    let git = root.join(".git");
    let head = git.join("HEAD");
    if head.is_file() {
        println!("cargo:rerun-if-changed={}", head.display());
        if let Ok(h) = std::fs::read_to_string(&head) {
            if let Some(r) = h.trim().strip_prefix("ref: ") {
                println!("cargo:rerun-if-changed={}", git.join(r).display());
            }
        }
        println!(
            "cargo:rerun-if-changed={}",
            git.join("packed-refs").display()
        );
    }
    let sha = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_default();
    println!("cargo:rustc-env=QPORT_GIT_COMMIT={sha}");
}
