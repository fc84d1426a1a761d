//! Where inference time goes, by operator type: runs a model (FP32 `Plan`,
//! or with a QDQ artifact its `IntegerPlan` under a profile) N times on a
//! synthetic input and attributes the time between successive value taps
//! to the op type that produced the value (a fused step's time lands on the
//! op that survives the fusion). Prints a table sorted by total time.
//!
//! Run: `cargo run --release -p qport-tests --example op_profile -- MODEL.onnx
//! [QDQ.onnx [PROFILE]] [--runs N] [--threads T] [--by-node]` (default 20
//! runs, 1 thread, profile f32-rne; `--by-node` gives each node its own
//! row, named by its output).

use qport_core::arith::ArithProfile;
use qport_core::{DType, Tensor};
use qport_engine::{IntegerPlan, Plan};
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let by_node = match args.iter().position(|a| a == "--by-node") {
        Some(i) => {
            args.remove(i);
            true
        }
        None => false,
    };
    let mut take = |flag: &str, default: usize| -> usize {
        match args.iter().position(|a| a == flag) {
            Some(i) => {
                let v = args[i + 1].parse().expect("a number");
                args.drain(i..i + 2);
                v
            }
            None => default,
        }
    };
    let runs = take("--runs", 20);
    let threads = take("--threads", 1);
    qport_kernels::par::set_threads(threads);
    let model = qport_onnx::load::load(&args[0]).expect("model");
    let integer = args.get(1).map(|q| {
        let q = qport_onnx::load::load(q).expect("QDQ model");
        let p = ArithProfile::preset(args.get(2).map_or("f32-rne", |s| s.as_str()))
            .expect("a preset name");
        IntegerPlan::new(&q, &p).expect("integer plan")
    });
    let fp32 = Plan::new(&model).expect("plan");
    let (plan, graph) = match &integer {
        Some(ip) => (ip.plan(), ip.model()),
        None => (&fp32, &model),
    };
    let producer: HashMap<&str, &str> = graph
        .graph
        .nodes
        .iter()
        .flat_map(|n| {
            n.outputs
                .iter()
                .map(move |o| (o.as_str(), n.op_type.as_str()))
        })
        .collect();
    let vi = &model.graph.inputs[0];
    let shape: Vec<usize> = vi
        .shape
        .as_ref()
        .expect("a declared input shape")
        .iter()
        .map(|d| match d {
            qport_onnx::Dim::Known(v) => *v as usize,
            _ => 1,
        })
        .collect();
    let n: usize = shape.iter().product();
    let x = Tensor::new(
        shape,
        qport_core::TensorData::F32(
            (0..n)
                .map(|i| ((i * 7919) % 2000) as f32 / 1000.0 - 1.0)
                .collect(),
        ),
    )
    .expect("input");
    assert_eq!(x.dtype(), DType::F32);
    let mut per_op: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut total = 0.0;
    for r in 0..runs + 2 {
        let t0 = Instant::now();
        let mut last = t0;
        let mut times: Vec<(String, f64)> = Vec::new();
        plan.run_with_step_tap(
            vec![(vi.name.clone(), x.clone())],
            &mut |step_op, name, _| {
                let now = Instant::now();
                let mut op = match step_op {
                    "Conv [blocked]" | "MaxPool [blocked]" | "qport:ToBlocked"
                    | "qport:ToPlanar" => step_op,
                    _ => producer.get(name).copied().unwrap_or("?"),
                }
                .to_string();
                if by_node {
                    op = format!("{op} {name}");
                }
                times.push((op, (now - last).as_secs_f64() * 1e3));
                last = Instant::now();
            },
        )
        .expect("run");
        if r >= 2 {
            total += t0.elapsed().as_secs_f64() * 1e3;
            for (op, ms) in times {
                let e = per_op.entry(op).or_default();
                e.0 += ms;
                e.1 += 1;
            }
        }
    }
    let mut rows: Vec<_> = per_op.into_iter().collect();
    rows.sort_by(|a, b| b.1 .0.total_cmp(&a.1 .0));
    println!(
        "{} ({}), {runs} runs, {threads} thread(s): {:.2} ms per inference",
        args[0],
        if integer.is_some() { "integer" } else { "fp32" },
        total / runs as f64
    );
    println!("{:<40} {:>9} {:>7} {:>6}", "op", "ms/inf", "share", "count");
    for (op, (ms, count)) in rows {
        println!(
            "{:<40} {:>9.3} {:>6.1}% {:>6}",
            op,
            ms / runs as f64,
            100.0 * ms / total,
            count / runs
        );
    }
}
