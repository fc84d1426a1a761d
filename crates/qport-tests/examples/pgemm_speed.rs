//! Speed of the packed FP32 GEMM (`pgemm::gemm_bias_act`, the step of every
//! ungrouped float convolution) on the convolution shapes of ResNet-50 and
//! MobileNetV2 (`m × k × n` = output channels × reduction × output
//! positions, with onnxruntime's block of the sum over `k`), at the host's
//! SIMD level and capped at AVX2 (`with_isa`): the best of five timings in
//! ms and GFLOP/s on one thread. On an AVX2-only host both columns are the
//! AVX2 kernel.
//!
//! ```text
//! cargo run --release -p qport-tests --example pgemm_speed
//! ```
use qport_kernels::activation::Activation;
use qport_kernels::pgemm::{gemm_bias_act, ort_k_block, PackedA};
use qport_kernels::Isa;
use std::time::Instant;

/// Best of five timings of `m × k × n` (seconds per product), with the
/// weight packed for the calling thread's level.
fn time(m: usize, k: usize, n: usize) -> f64 {
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7919) % 251) as f32 / 251.0 - 0.5)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 104729) % 253) as f32 / 253.0 - 0.5)
        .collect();
    let bias: Vec<f32> = (0..m).map(|i| i as f32 * 1e-3).collect();
    let pa = PackedA::new(&a, m, k);
    let kb = ort_k_block(n, k);
    let mut c = vec![0.0f32; m * n];
    let mut scratch = vec![];
    let mut run = || {
        let act = Activation::Relu;
        gemm_bias_act(&pa, &b, n, n, Some(&bias), act, &mut c, n, kb, &mut scratch)
    };
    let flops = 2.0 * (m * k * n) as f64;
    let reps = (4e9 / flops).max(3.0) as usize;
    run();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            run();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    let shapes = [
        (64usize, 147usize, 12544usize),
        (64, 576, 3136),
        (256, 64, 3136),
        (64, 256, 3136),
        (128, 1152, 784),
        (512, 128, 784),
        (128, 512, 784),
        (256, 2304, 196),
        (1024, 256, 196),
        (256, 1024, 196),
        (512, 4608, 49),
        (2048, 512, 49),
        (512, 2048, 49),
        (96, 16, 12544),
        (144, 24, 3136),
        (960, 160, 49),
    ];
    qport_kernels::par::set_threads(1);
    println!("isa {:?}; one thread", qport_kernels::isa());
    println!("    m     k      n    host ms  GFLOP/s    avx2 ms  GFLOP/s  avx2/host");
    for (m, k, n) in shapes {
        let flops = 2.0 * (m * k * n) as f64;
        let host = time(m, k, n);
        let avx2 = qport_kernels::with_isa(Isa::Avx2, || time(m, k, n));
        println!(
            "{m:5} {k:5} {n:6}  {:9.3}  {:7.1}  {:9.3}  {:7.1}  {:9.2}",
            host * 1e3,
            flops / host / 1e9,
            avx2 * 1e3,
            flops / avx2 / 1e9,
            avx2 / host,
        );
    }
}
