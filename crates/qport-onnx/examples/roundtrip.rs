//! Loads ONNX models and writes them back through the IR.
//!
//! ```text
//! cargo run -p qport-onnx --example roundtrip -- IN.onnx OUT.onnx
//! cargo run -p qport-onnx --example roundtrip -- --check A.onnx B.onnx ...
//! cargo run -p qport-onnx --example roundtrip -- --tensor IN.pb OUT.pb
//! ```
//!
//! With `--check`, each model is only loaded and the outcome printed, one
//! line per file (`ok <path>` or `err <path>: <message>`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--check") {
        let mut failed = false;
        for p in &args[1..] {
            match qport_onnx::load(p) {
                Ok(m) => println!("ok {p} ({} nodes)", m.graph.nodes.len()),
                Err(e) => {
                    failed = true;
                    println!("err {p}: {e}");
                }
            }
        }
        return if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    if let [flag, input, output] = args.as_slice() {
        if flag == "--tensor" {
            let r = qport_onnx::read_tensor_pb(input)
                .and_then(|(name, t)| qport_onnx::write_tensor_pb(output, &name, &t));
            if let Err(e) = r {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
            return ExitCode::SUCCESS;
        }
    }
    let [input, output] = args.as_slice() else {
        eprintln!("usage: roundtrip IN.onnx OUT.onnx | --check FILE... | --tensor IN.pb OUT.pb");
        return ExitCode::from(2);
    };
    let model = match qport_onnx::load(input) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("{input}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = qport_onnx::save(&model, output) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    println!(
        "{input} -> {output}: {} nodes, {} initializers",
        model.graph.nodes.len(),
        model.graph.initializers.len()
    );
    ExitCode::SUCCESS
}
