//! Times warm FP32 inferences of a model on one input, single-threaded:
//! `latency MODEL INPUT.npy RUNS` prints `{"times_ms": [...]}`.
//!
//! Used by `scripts/bench/fp32_latency.py`, which interleaves it with
//! onnxruntime in one run and reports ratios.

use std::time::Instant;

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: latency MODEL INPUT.npy RUNS");
        std::process::exit(2);
    }
    let model = qport_onnx::load(&args[1]).expect("load model");
    let plan = qport_engine::Plan::new(&model).expect("plan");
    let x = qport_data::npy::read(std::path::Path::new(&args[2])).expect("read input");
    let runs: usize = args[3].parse().expect("RUNS is a number");
    let name = plan.inputs().next().expect("an input").name.clone();
    for _ in 0..3 {
        plan.run(vec![(name.clone(), x.clone())]).expect("run");
    }
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let feed = vec![(name.clone(), x.clone())];
        let t = Instant::now();
        let out = plan.run(feed).expect("run");
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(out);
    }
    let list: Vec<String> = times.iter().map(|t| format!("{t:.4}")).collect();
    println!("{{\"times_ms\": [{}]}}", list.join(", "));
}
