//! Speed of the direct INT8 convolution (`qport_kernels::int8::direct`)
//! on ResNet-50's 3 × 3 layers of stride 1 and 2 and its 7 × 7 stem: the
//! best of seven timings of the channel quads (`quad_image`), of the sums
//! of all output rows from them (`conv_sums`) and of those sums from the
//! image itself (`DirectImage::Planar`, where `reads_planar` holds), in
//! µs, and the layer's multiply-adds per ns on each route.
//!
//! ```text
//! cargo run --release -p qport-tests --example direct_speed
//! ```
use qport_kernels::im2col::ConvGeometry;
use qport_kernels::int8::direct::{
    conv_sums, pack_weights, quad_image, reads_planar, DirectConv, DirectGeom, DirectImage,
};
use std::time::Instant;

/// Activations start on a cache line, as in the `qport` binary.
#[global_allocator]
static ALLOC: qport_kernels::aligned::LineAligned = qport_kernels::aligned::LineAligned;

fn main() {
    // (output channels, input channels, input side, kernel side, stride)
    let layers = [
        (64usize, 3usize, 224usize, 7usize, 2usize),
        (64, 64, 56, 3, 1),
        (128, 128, 56, 3, 2),
        (128, 128, 28, 3, 1),
        (256, 256, 28, 3, 2),
        (256, 256, 14, 3, 1),
        (512, 512, 14, 3, 2),
        (512, 512, 7, 3, 1),
    ];
    println!("isa {:?}", qport_kernels::isa());
    println!("    m    c    H  k  s   quads µs    sums µs   MAC/ns   planar µs   MAC/ns");
    for (m, c, h, k, s) in layers {
        let p = k / 2;
        let o = (h + 2 * p - k) / s + 1;
        let geo = ConvGeometry::new_2d(
            [h, h],
            [k, k],
            [o, o],
            [s, s],
            [1, 1],
            [p as isize, p as isize],
        );
        let g = DirectGeom::new(&geo, c).expect("a direct geometry");
        let x: Vec<u8> = (0..c * h * h).map(|i| ((i * 104729) % 253) as u8).collect();
        let w: Vec<i8> = (0..m * g.k()).map(|i| ((i * 7919) % 255) as i8).collect();
        let a = pack_weights(&w, m, c, (k, k));
        let za = vec![0i32; m];
        let mut img = vec![0u8; g.image_len()];
        let mut out = vec![0i32; m * o * o];
        let best = |f: &mut dyn FnMut()| {
            let mut best = f64::MAX;
            for _ in 0..7 {
                let t = Instant::now();
                for _ in 0..10 {
                    f();
                }
                best = best.min(t.elapsed().as_secs_f64() / 10.0);
            }
            best * 1e6
        };
        let quads = best(&mut || quad_image(&x, &g, 3, &mut img));
        let mut conv = DirectConv {
            a: &a,
            za: &za,
            g: &g,
            img: DirectImage::Quads(&img),
            zb: 3,
        };
        let sums = best(&mut || {
            assert!(
                conv_sums(&conv, (0, o), &mut out, o * o),
                "needs AVX-512 VNNI"
            );
        });
        let macs = (m * c * k * k * o * o) as f64;
        let planar = if reads_planar(&g) {
            conv.img = DirectImage::Planar(&x);
            let t = best(&mut || assert!(conv_sums(&conv, (0, o), &mut out, o * o)));
            format!("{t:9.1}   {:6.1}", macs / (t * 1e3))
        } else {
            "        -        -".to_string()
        };
        println!(
            "{m:5} {c:4} {h:4} {k:2} {s:2}  {quads:9.1}  {sums:9.1}   {:6.1}   {planar}",
            macs / ((quads + sums) * 1e3)
        );
    }
}
