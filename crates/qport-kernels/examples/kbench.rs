use qport_kernels::activation::Activation;
use qport_kernels::depthwise::depthwise2d;
use qport_kernels::im2col::ConvGeometry;
use std::time::Instant;

fn main() {
    if std::env::var("GEMM").is_ok() {
        gemm_bench();
        return;
    }
    // (c, h, k, s, pad_begin, out)
    let cases = [
        (32, 112, 3, 1, 1, 112),
        (32, 112, 3, 1, 1, 112),
        (96, 112, 3, 2, 0, 56),
        (144, 56, 3, 1, 1, 56),
        (144, 56, 5, 2, 1, 28),
        (240, 28, 5, 1, 2, 28),
        (240, 28, 3, 2, 0, 14),
        (480, 14, 3, 1, 1, 14),
        (480, 14, 5, 1, 2, 14),
        (672, 14, 5, 1, 2, 14),
        (672, 14, 5, 2, 1, 7),
        (1152, 7, 5, 1, 2, 7),
        (1152, 7, 3, 1, 1, 7),
    ];
    let mut total = 0.0;
    for (c, h, k, s, p, o) in cases {
        let g = ConvGeometry {
            image: vec![h, h],
            kernel: vec![k, k],
            output: vec![o, o],
            strides: vec![s, s],
            dilations: vec![1, 1],
            pads_begin: vec![p, p],
        };
        let x: Vec<f32> = (0..c * h * h).map(|i| (i % 7) as f32 * 0.1).collect();
        let w: Vec<f32> = (0..c * k * k).map(|i| (i % 5) as f32 * 0.1).collect();
        let b: Vec<f32> = vec![0.1; c];
        let mut y = vec![0.0f32; c * o * o];
        let mut sc = vec![];
        let reps = 200;
        for _ in 0..5 {
            depthwise2d(
                &g,
                c,
                1,
                &x,
                &w,
                Some(&b),
                Activation::Clip { lo: 0.0, hi: 6.0 },
                &mut y,
                &mut sc,
            );
        }
        let t = Instant::now();
        for _ in 0..reps {
            depthwise2d(
                &g,
                c,
                1,
                &x,
                &w,
                Some(&b),
                Activation::Clip { lo: 0.0, hi: 6.0 },
                &mut y,
                &mut sc,
            );
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        let macs = (c * o * o * k * k) as f64;
        total += us;
        println!(
            "dw c{c} h{h} k{k} s{s}: {us:8.1} us  {:.1} GMAC/s",
            macs / us / 1e3
        );
    }
    println!("total {total:.1} us");
}

#[allow(dead_code)]
pub fn gemm_bench() {
    use qport_kernels::pgemm::{gemm_bias_act, PackedA};
    // (m, k, n)
    let cases = [
        (16, 32, 12544),
        (96, 16, 12544),
        (24, 96, 3136),
        (144, 24, 3136),
        (24, 144, 3136),
        (40, 144, 784),
        (240, 40, 784),
        (40, 240, 784),
        (80, 240, 196),
        (480, 80, 196),
        (80, 480, 196),
        (112, 480, 196),
        (672, 112, 196),
        (112, 672, 196),
        (192, 672, 49),
        (1152, 192, 49),
        (192, 1152, 49),
        (320, 1152, 49),
        (1280, 320, 49),
        (32, 27, 12544),
    ];
    let counts = [1, 1, 1, 1, 1, 1, 2, 1, 1, 3, 2, 1, 4, 3, 1, 4, 3, 1, 1, 1];
    let mut total = 0.0;
    for (&(m, k, n), &cnt) in cases.iter().zip(&counts) {
        let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.01).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.01).collect();
        let bias = vec![0.1f32; m];
        let pa = PackedA::new(&a, m, k);
        let mut c = vec![0.0f32; m * n];
        let mut sc = vec![];
        let reps = (2e8 / (m * n * k) as f64) as usize + 3;
        for _ in 0..3 {
            gemm_bias_act(
                &pa,
                &b,
                n,
                n,
                Some(&bias),
                Activation::Clip { lo: 0.0, hi: 6.0 },
                &mut c,
                n,
                &mut sc,
            );
        }
        let t = Instant::now();
        for _ in 0..reps {
            gemm_bias_act(
                &pa,
                &b,
                n,
                n,
                Some(&bias),
                Activation::Clip { lo: 0.0, hi: 6.0 },
                &mut c,
                n,
                &mut sc,
            );
        }
        let us = t.elapsed().as_secs_f64() * 1e6 / reps as f64;
        total += us * cnt as f64;
        println!(
            "gemm m{m} k{k} n{n}: {us:8.1} us x{cnt}  {:.1} GMAC/s",
            (m * n * k) as f64 / us / 1e3
        );
    }
    println!("gemm total {total:.1} us");
}
