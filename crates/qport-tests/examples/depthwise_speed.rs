//! Speed of the exact 8-bit depthwise kernel (`depthwise_pairs`) on the
//! depthwise layers of MobileNetV2 and EfficientNet-Lite0, in each of its
//! layouts (one plane at a time, channels-last blocks of 16 channels, row
//! quads; a row without a layout runs the planes) and in the one it picks:
//! the best of seven timings of the
//! i32 sums, in µs, and the layer's multiply-adds per ns; then the FP32
//! kernel (`depthwise2d`, bias and Relu6) on the same layers.
//!
//! ```text
//! cargo run --release -p qport-tests --example depthwise_speed
//! ```
use qport_kernels::activation::Activation;
use qport_kernels::depthwise::depthwise2d;
use qport_kernels::idepthwise::{depthwise_pairs, depthwise_pairs_in, PairLayout};
use qport_kernels::im2col::ConvGeometry;
use std::time::Instant;

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    // (channels, input side, kernel side, stride)
    let layers = [
        (32usize, 112usize, 3usize, 1usize),
        (96, 112, 3, 2),
        (144, 56, 3, 1),
        (144, 56, 3, 2),
        (144, 56, 5, 2),
        (192, 28, 3, 1),
        (192, 28, 3, 2),
        (240, 28, 5, 1),
        (240, 28, 3, 2),
        (384, 14, 3, 1),
        (480, 14, 5, 1),
        (576, 14, 3, 1),
        (576, 14, 3, 2),
        (672, 14, 5, 2),
        (960, 7, 3, 1),
        (1152, 7, 5, 1),
    ];
    // `C H K S` on the command line: that layer alone
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("C H K S: four numbers"))
        .collect();
    let one = [(
        args.first().copied().unwrap_or(0),
        args.get(1).copied().unwrap_or(0),
        args.get(2).copied().unwrap_or(0),
        args.get(3).copied().unwrap_or(0),
    )];
    let layers: &[(usize, usize, usize, usize)] = if args.len() == 4 { &one } else { &layers };
    println!("isa {:?}", qport_kernels::isa());
    println!("    C    H  k  s     planes µs   chan-last µs   row-quads µs   picked µs   MAC/ns");
    for &(c, h, k, s) in layers {
        let o = (h + 2 * (k / 2) - k) / s + 1;
        let p = (k / 2) as isize;
        let g = ConvGeometry::new_2d([h, h], [k, k], [o, o], [s, s], [1, 1], [p, p]);
        let x: Vec<u8> = (0..c * h * h).map(|i| ((i * 104729) % 253) as u8).collect();
        let w: Vec<i32> = (0..c * k * k)
            .map(|i| ((i * 7919) % 255) as i32 - 127)
            .collect();
        let mut out = vec![0i32; c * o * o];
        let mut time = |f: &mut dyn FnMut(&mut [i32]) -> bool| {
            let reps = (2_000_000 / (c * o * o * k * k)).max(1);
            let mut best = f64::MAX;
            for _ in 0..7 {
                let t = Instant::now();
                for _ in 0..reps {
                    assert!(f(&mut out));
                }
                best = best.min(t.elapsed().as_secs_f64() / reps as f64);
            }
            best * 1e6
        };
        let planes = time(&mut |o| depthwise_pairs_in(PairLayout::Planes, &x, 7, c, &w, &g, o));
        let cl = time(&mut |o| depthwise_pairs_in(PairLayout::ChannelsLast, &x, 7, c, &w, &g, o));
        let rq = time(&mut |o| depthwise_pairs_in(PairLayout::RowQuads, &x, 7, c, &w, &g, o));
        let picked = time(&mut |o| depthwise_pairs(&x, 7, c, &w, &g, o));
        let macs = (c * o * o * k * k) as f64;
        let xf: Vec<f32> = x.iter().map(|&v| f32::from(v) / 64.0).collect();
        let wf: Vec<f32> = w.iter().map(|&v| v as f32 / 256.0).collect();
        let bias = vec![0.25f32; c];
        let mut yf = vec![0f32; c * o * o];
        let mut scratch = Vec::new();
        let act = Activation::Clip { lo: 0.0, hi: 6.0 };
        let f32_us = time(&mut |_| {
            depthwise2d(&g, c, 1, &xf, &wf, Some(&bias), act, &mut yf, &mut scratch);
            true
        });
        println!(
            "{c:5} {h:4} {k:2} {s:2}   {planes:11.1}   {cl:12.1}   {rq:12.1}   {picked:9.1}   {:6.1}   fp32 {f32_us:7.1} µs {:6.1} MAC/ns",
            macs / (picked * 1e3),
            macs / (f32_us * 1e3)
        );
    }
}
