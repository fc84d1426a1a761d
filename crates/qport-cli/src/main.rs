//! The `qport` binary; everything lives in the `qport_cli` library.

/// Blocks of 1 KiB and more (tensors among them) start on a cache line:
/// the kernels' 64-byte vectors then never straddle two
/// ([`qport_engine::LineAligned`]).
#[global_allocator]
static ALLOC: qport_engine::LineAligned = qport_engine::LineAligned;

fn main() -> std::process::ExitCode {
    qport_cli::main()
}
