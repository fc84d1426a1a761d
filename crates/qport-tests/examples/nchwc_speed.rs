//! Speed of the blocked-channel FP32 convolution (`nchwc::conv`) on the
//! convolution shapes of ResNet-50 and MobileNetV2, at the host's SIMD
//! level and capped at AVX2 (`with_isa`): the best of five timings in ms
//! and GFLOP/s on one thread (depthwise layers count their own
//! multiply-adds). `QPORT_BENCH_PLANAR=1` feeds planar input (a stem),
//! `QPORT_BENCH_COPIES=N` takes N copies of the weights in turn (so that
//! they come from memory, as in a network).
//!
//! ```text
//! cargo run --release -p qport-tests --example nchwc_speed [C M HW K S [dw]]
//! ```
use qport_kernels::activation::Activation;
use qport_kernels::im2col::ConvGeometry;
use qport_kernels::nchwc::{blocked_len, conv, Filters, Layout};
use qport_kernels::Isa;
use std::time::Instant;

/// Best of five timings (seconds per convolution) and the multiply-adds.
fn time(c: usize, m: usize, hw: usize, k: usize, s: usize, dw: bool) -> (f64, f64) {
    let p = k / 2;
    let o = (hw + 2 * p - k) / s + 1;
    let g = ConvGeometry::new_2d([hw, hw], [k, k], [o, o], [s, s], [1, 1], [p as isize; 2]);
    let cin = if dw { 1 } else { c };
    let w: Vec<f32> = (0..m * cin * k * k)
        .map(|i| ((i * 7919) % 251) as f32 / 251.0 - 0.5)
        .collect();
    let bias: Vec<f32> = (0..m).map(|i| i as f32 * 1e-3).collect();
    // several copies of the filters, taken in turn, so that the weights
    // come from memory as in a network (`QPORT_BENCH_COPIES`, default 1)
    let copies: usize = std::env::var("QPORT_BENCH_COPIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let fs: Vec<Filters> = (0..copies)
        .map(|_| {
            if dw {
                Filters::depthwise(&w, c, [k, k], Some(&bias))
            } else {
                Filters::dense(&w, m, c, [k, k], Some(&bias))
            }
        })
        .collect();
    let mut turn = 0;
    let planar = std::env::var("QPORT_BENCH_PLANAR").is_ok_and(|v| v == "1");
    let layout = if planar {
        Layout::Planar
    } else {
        Layout::Blocked
    };
    let len = if planar {
        c * hw * hw
    } else {
        blocked_len(1, c, hw * hw)
    };
    let x: Vec<f32> = (0..len)
        .map(|i| ((i * 104729) % 253) as f32 / 253.0 - 0.5)
        .collect();
    let mut y = vec![0.0f32; blocked_len(1, m, o * o)];
    let mut run = || {
        turn = (turn + 1) % fs.len();
        conv(&g, 1, &x, layout, &fs[turn], None, Activation::Relu, &mut y)
    };
    let macs = (m * cin * k * k * o * o) as f64;
    let reps = (2e9 / macs).max(3.0) as usize;
    run();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..reps {
            run();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    (best, macs)
}

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let dw_arg = std::env::args().any(|a| a == "dw");
    let shapes: Vec<(usize, usize, usize, usize, usize, bool)> = if args.len() >= 5 {
        vec![(args[0], args[1], args[2], args[3], args[4], dw_arg)]
    } else {
        vec![
            (64, 64, 56, 3, 1, false),
            (64, 64, 56, 1, 1, false),
            (64, 256, 56, 1, 1, false),
            (256, 64, 56, 1, 1, false),
            (128, 128, 56, 3, 2, false),
            (128, 128, 28, 3, 1, false),
            (512, 128, 28, 1, 1, false),
            (256, 256, 14, 3, 1, false),
            (1024, 256, 14, 1, 1, false),
            (256, 1024, 14, 1, 1, false),
            (512, 512, 7, 3, 1, false),
            (2048, 512, 7, 1, 1, false),
            (96, 96, 56, 3, 2, true),
            (144, 144, 56, 3, 1, true),
            (384, 384, 14, 3, 1, true),
            (960, 960, 7, 3, 1, true),
        ]
    };
    println!("c x m @hw kxk /s | best ms | GFLOP/s | AVX2 ms | AVX2 GFLOP/s");
    for (c, m, hw, k, s, dw) in shapes {
        let (t, macs) = time(c, m, hw, k, s, dw);
        let (t2, _) = qport_kernels::with_isa(Isa::Avx2, || time(c, m, hw, k, s, dw));
        println!(
            "{c} x {m} @{hw} {k}x{k} /{s}{} | {:.3} | {:.0} | {:.3} | {:.0}",
            if dw { " dw" } else { "" },
            t * 1e3,
            2.0 * macs / t / 1e9,
            t2 * 1e3,
            2.0 * macs / t2 / 1e9
        );
    }
}
