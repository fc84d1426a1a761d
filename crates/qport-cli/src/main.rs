//! The `qport` binary; everything lives in the `qport_cli` library.

fn main() -> std::process::ExitCode {
    qport_cli::main()
}
