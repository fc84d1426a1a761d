//! Speed of the host's exact u8×s8 GEMM (`qgemm`) on the convolution and
//! classifier shapes of ResNet-50 and MobileNetV2 (`m × k × n` = output
//! channels × reduction × output positions): the best of five timings of
//! the i32 path and of the path with the requantization fused into the
//! kernel's epilogue, in ms and GMAC/s. Compare with the core's peak
//! (`vpdpbusd`: 64 multiply-adds per instruction).
//!
//! ```text
//! cargo run --release -p qport-tests --example qgemm_speed [M K N]
//! ```
//!
//! With `M K N`, that one shape instead (for a profiler);
//! `QPORT_BENCH_THREADS=T` runs on `T` intra-op threads (default 1);
//! `QPORT_BENCH_COLD=1` reads `A` from memory on every call (copies of it
//! over 64 MiB, used in turn), as a network's layers read their weights;
//! `QPORT_BENCH_PROFILE=exact` fuses that profile's requantization (the
//! f64 form) instead of `f32-rne`'s.
use qport_kernels::int8::PackedI8;
use qport_kernels::qgemm::gemm_u8s8;
use std::time::Instant;
/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    if let Some(t) = std::env::var("QPORT_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        qport_kernels::par::set_threads(t);
    }
    let shapes = [
        (64usize, 576usize, 3136usize),
        (256, 64, 3136),
        (64, 256, 3136),
        (128, 1152, 784),
        (512, 128, 784),
        (256, 2304, 196),
        (1024, 256, 196),
        (256, 1024, 196),
        (512, 4608, 49),
        (2048, 512, 49),
        (512, 2048, 49),
        (1280, 320, 49),
        (96, 16, 12544),
        (1000, 1280, 1),
        (1000, 2048, 1),
    ];
    let given: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("M K N: three numbers"))
        .collect();
    let shapes = match given[..] {
        [m, k, n] => vec![(m, k, n)],
        [] => shapes.to_vec(),
        _ => panic!("M K N: three numbers"),
    };
    let profile = std::env::var("QPORT_BENCH_PROFILE").unwrap_or_else(|_| "f32-rne".into());
    println!(
        "isa {:?}, fused requantization: {profile}",
        qport_kernels::isa()
    );
    println!("    m     k     n       i32 ms  GMAC/s    fused ms  GMAC/s");
    for (m, k, n) in shapes {
        let a: Vec<i8> = (0..m * k).map(|i| ((i * 7919) % 251) as i8).collect();
        let b: Vec<u8> = (0..k * n).map(|i| ((i * 104729) % 253) as u8).collect();
        // with QPORT_BENCH_COLD, enough copies of A to pass 64 MiB, used in
        // turn: each call reads its weights from memory, as a network does
        let copies = if std::env::var_os("QPORT_BENCH_COLD").is_some() {
            (64usize << 20).div_ceil(m * k).max(1)
        } else {
            1
        };
        let pas: Vec<PackedI8> = (0..copies).map(|_| PackedI8::new(&a, m, k)).collect();
        let mut turn = 0usize;
        let mut next = || {
            turn += 1;
            &pas[turn % copies]
        };
        let za = vec![0i32; m];
        let mut c = vec![0i32; m * n];
        let macs = (m * k * n) as f64;
        let reps = (2e9 / macs).max(3.0) as usize;
        gemm_u8s8(next(), &za, &b, 3, n, &mut c, n);
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                gemm_u8s8(next(), &za, &b, 3, n, &mut c, n);
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        let p = qport_core::arith::ArithProfile::preset(&profile).expect("a preset name");
        let rq: Vec<qport_core::arith::FloatRequant> = (0..m)
            .map(|i| {
                qport_core::arith::Requantizer::new(i as f64, 1e-4, 100, 0, 255, &p)
                    .float_form()
                    .unwrap()
            })
            .collect();
        let mut o = vec![0u8; m * n];
        let bounds = [0, n];
        let mut bestf = f64::MAX;
        let fuses = qport_kernels::qgemm::fuses_requant::<u8>(k);
        for _ in 0..5 {
            if !fuses {
                break;
            }
            let t = Instant::now();
            for _ in 0..reps {
                let pa = next();
                qport_kernels::par::split_columns(&mut o, n, &bounds, 0, |_, mut blk| {
                    qport_kernels::qgemm::gemm_u8s8_requant(pa, &za, (&b, n), 3, &rq, &mut blk, 0);
                });
            }
            bestf = bestf.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        let fused = if fuses {
            format!("{:8.3}  {:6.1}", bestf * 1e3, macs / bestf / 1e9)
        } else {
            "     (no fused kernel)".into()
        };
        println!(
            "{m:5} {k:5} {n:5}  {:8.3}  {:6.1}    {fused}",
            best * 1e3,
            macs / best / 1e9,
        );
    }
}
