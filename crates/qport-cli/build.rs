//! Embeds the bundled demo assets (`assets/demo/ppocr-cls.onnx` and every
//! `assets/demo/*.png`) into the binary: writes `$OUT_DIR/demo_assets.rs`
//! with one `include_bytes!` per file, so `qport demo` needs no files at run
//! time and new crops are picked up on the next build.

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
}
