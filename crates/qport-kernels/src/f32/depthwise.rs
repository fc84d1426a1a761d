//! Depthwise 2-D convolution of `f32` planes (one input channel per group)
//! with the bias and an [`Activation`] applied as each output is written.
//!
//! [`depthwise2d`] is the entry point. Every path (the portable scalar
//! reference, the path of [`crate::force_generic`] or of a call inside
//! [`crate::with_generic_kernels`], and the AVX2 and AVX-512 bodies) sums
//! the same products in the same order, so all of them return the same
//! bits. That order is the one onnxruntime's CPU provider uses for a
//! depthwise `Conv` (im2col, then one SGEMM per group), so that qport's
//! FP32 and float-simulated runs reproduce onnxruntime's values to the
//! bit rather than to a tolerance:
//!
//! - one filter per channel (the SGEMM has a single row): the taps, in
//!   kernel row-major order with taps in the padding counted as products
//!   with zero, are cut into blocks of 4, then a block of 2 and a block of
//!   1 for the remainder (`tap_blocks`); each block is summed left to
//!   right with separate multiplies and adds, and each block's sum is
//!   added to the running total, which starts at `+0.0`;
//! - several filters per channel: one fused multiply-add chain over the
//!   taps, from `+0.0`.
//!
//! The bias is then added (only when there is one) and the activation
//! applied.
//!
//! The fast paths copy each input channel once into a zero-padded scratch
//! plane whose rows are split into `stride_w` column phases, so that every
//! kernel tap of a block of outputs is one contiguous vector load. They
//! compute blocks of `R` output rows by `C` vectors of output columns in
//! registers and store each output element once. At AVX-512, 3 x 3 and
//! 5 x 5 kernels at stride 1 or 2 (one filter per channel, no dilation)
//! read each plane row of a block once, as aligned vectors, and make the
//! column shifts of the taps in registers. Narrow maps of at least 16
//! channels run with vectors across 16 channels instead: at most 8 output
//! columns for those kernels at stride 1, else at most 16 (28 at stride 1
//! for other kernels).

use crate::activation::Activation;
#[cfg(target_arch = "x86_64")]
use crate::arch::x86_64::depthwise as x86;
use crate::dispatch::{level, Level};
use crate::im2col::ConvGeometry;

/// The geometry of one depthwise call, checked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geo {
    pub(crate) h: usize,
    pub(crate) w: usize,
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) oh: usize,
    pub(crate) ow: usize,
    pub(crate) sh: usize,
    pub(crate) sw: usize,
    pub(crate) dh: usize,
    pub(crate) dw: usize,
    pub(crate) pt: usize,
    pub(crate) pl: usize,
}

impl Geo {
    pub(crate) fn new(g: &ConvGeometry) -> Option<Geo> {
        if g.rank() != 2
            || g.image.len() != 2
            || g.kernel.len() != 2
            || g.output.len() != 2
            || g.strides.len() != 2
            || g.dilations.len() != 2
            || g.pads_begin.len() != 2
            || g.pads_begin.iter().any(|&p| p < 0)
            || g.strides.contains(&0)
            || g.dilations.contains(&0)
            || g.kernel.contains(&0)
        {
            return None;
        }
        Some(Geo {
            h: g.image[0],
            w: g.image[1],
            kh: g.kernel[0],
            kw: g.kernel[1],
            oh: g.output[0],
            ow: g.output[1],
            sh: g.strides[0],
            sw: g.strides[1],
            dh: g.dilations[0],
            dw: g.dilations[1],
            pt: g.pads_begin[0] as usize,
            pl: g.pads_begin[1] as usize,
        })
    }
}

/// Output rows and vectors of columns per register block, from the number
/// of vectors an output row needs (AVX-512 has twice the registers).
pub(crate) fn block(ow: usize, lanes: usize) -> (usize, usize) {
    match (ow.div_ceil(lanes), lanes) {
        (0 | 1, _) => (7, 1),
        (2, 16) => (6, 2),
        (2, _) => (4, 2),
        (3, 16) => (4, 3),
        (3, _) => (2, 3),
        (_, 16) => (3, 4),
        _ => (2, 4),
    }
}

/// The scratch layout for `lanes`-wide vectors: (rows, phase width,
/// plane elements), or `None` on overflow. The phase width is a multiple of
/// `lanes` so that, with an aligned plane, the vector at each block's
/// first column is aligned; it leaves at least one vector past the last
/// block for the shifted loads.
pub(crate) fn layout(g: &Geo, lanes: usize) -> Option<(usize, usize, usize)> {
    let (r, c) = block(g.ow, lanes);
    let oh_pad = g.oh.checked_next_multiple_of(r)?;
    let ow_pad = g.ow.checked_next_multiple_of(c * lanes)?;
    let rows = (oh_pad - 1)
        .checked_mul(g.sh)?
        .checked_add((g.kh - 1).checked_mul(g.dh)?)?
        .checked_add(1)?;
    let wq = ow_pad
        .checked_add(((g.kw - 1).checked_mul(g.dw)? / g.sw).max(1))?
        .checked_next_multiple_of(lanes)?;
    let len = rows.checked_mul(g.sw)?.checked_mul(wq)?;
    len.checked_add(lanes)?;
    Some((rows, wq, len))
}

/// The offset in a plane of [`layout`] (phase width `wq`) of tap `t`
/// (kernel row-major) for output row 0, column 0.
#[inline(always)]
pub(crate) fn tap_offset(g: &Geo, wq: usize, t: usize) -> usize {
    let (ki, kj) = (t / g.kw, t % g.kw);
    ki * g.dh * g.sw * wq + ((kj * g.dw) % g.sw) * wq + (kj * g.dw) / g.sw
}

/// Copies image row `src` into padded row `dst` of a plane of [`layout`]
/// (`sw` phases of `wq` elements): phase `b` holds padded column
/// `j * sw + b` (image column `j * sw + b - pl`) at `dst[b * wq + j]`.
/// Only columns inside the image are written (the padding keeps its
/// zeros).
#[inline(always)]
pub(crate) fn fill_row(g: &Geo, src: &[f32], dst: &mut [f32], wq: usize) {
    for b in 0..g.sw {
        let seg = &mut dst[b * wq..][..wq];
        for (j, d) in seg.iter_mut().enumerate() {
            let c = (j * g.sw + b) as isize - g.pl as isize;
            if c >= 0 && (c as usize) < g.w {
                *d = src[c as usize];
            }
        }
    }
}

/// The scratch elements [`depthwise2d`] uses for geometry `g` at most, or
/// `None` when `g` is not a 2-D geometry with non-negative padding, or the
/// size overflows. Callers can use it to refuse pathological geometries.
pub fn depthwise2d_scratch(g: &ConvGeometry) -> Option<usize> {
    let geo = Geo::new(g)?;
    if geo.oh == 0 || geo.ow == 0 {
        return Some(0);
    }
    let a = layout(&geo, 16)?.2 + 16;
    let b = layout(&geo, 8)?.2 + 8;
    Some(a.max(b))
}

/// Depthwise convolution: output channel `o` (of `channels * mult`) is
/// input channel `o / mult` of `image` (`[channels, H, W]`) convolved with
/// kernel `o` of `kernels` (`[channels * mult, KH, KW]`), plus `bias[o]`,
/// through `act`, written to `out` (`[channels * mult, OH, OW]`; every
/// element is overwritten). `scratch` is reused between calls.
///
/// Positions outside the image (padding, including any end padding the
/// output size implies) read as zero.
///
/// Groups of 16 input channels are divided between the intra-op threads
/// ([`crate::par`]); every output is the same on any number of threads.
///
/// # Panics
/// Panics unless the geometry has two spatial axes, non-negative padding,
/// non-zero kernel, strides and dilations, a scratch size that does not
/// overflow ([`depthwise2d_scratch`]), and the slices are long enough.
#[allow(clippy::too_many_arguments)]
pub fn depthwise2d(
    g: &ConvGeometry,
    channels: usize,
    mult: usize,
    image: &[f32],
    kernels: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
    scratch: &mut Vec<f32>,
) {
    let args = Args::new(g, channels, mult, image, kernels, bias, act, out);
    let geo = args.g;
    let (isz, osz, ksz) = (geo.h * geo.w, geo.oh * geo.ow, geo.kh * geo.kw);
    let work = channels * mult * osz * ksz;
    let lvl = level();
    if crate::par::parts_for(work) > 1 && channels > 1 && osz > 0 {
        // groups of 16 input channels (the AVX-512 channels-last body's
        // groups) on the intra-op threads, each with its own scratch, at
        // this thread's level; every channel is computed as on one thread
        let per = mult * osz;
        crate::par::split_mut(
            &mut out[..channels * per],
            16 * per,
            work,
            |start, block| {
                let (c0, n) = (start / per, block.len() / per);
                let part = Args::new(
                    g,
                    n,
                    mult,
                    &image[c0 * isz..][..n * isz],
                    &kernels[c0 * mult * ksz..][..n * mult * ksz],
                    bias.map(|b| &b[c0 * mult..][..n * mult]),
                    act,
                    block,
                );
                THREAD_SCRATCH.with(|s| depthwise_at(lvl, &part, block, &mut s.borrow_mut()));
            },
        );
        return;
    }
    depthwise_at(lvl, &args, out, scratch)
}

thread_local! {
    /// The scratch of a block of channels run on an intra-op thread.
    static THREAD_SCRATCH: std::cell::RefCell<Vec<f32>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// [`depthwise2d`] at a given SIMD level (the CPU must support it) on
/// checked operands.
pub(crate) fn depthwise_at(lvl: Level, args: &Args, out: &mut [f32], scratch: &mut Vec<f32>) {
    let geo = &args.g;
    if geo.oh == 0 || geo.ow == 0 || args.channels * args.mult == 0 {
        return;
    }
    match lvl {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller chose a level this CPU supports; the slices
        // were checked against the geometry.
        Level::Avx512 => unsafe { x86::avx512(args, out, scratch) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        Level::Avx2 => unsafe { x86::avx2(args, out, scratch) },
        _ => reference(args, out, scratch),
    }
}

/// The operands of one depthwise call (geometry and slices checked), as
/// every body ([`reference`], the SIMD ones under `arch`) takes them.
#[derive(Clone, Copy)]
pub(crate) struct Args<'a> {
    pub(crate) g: Geo,
    pub(crate) channels: usize,
    pub(crate) mult: usize,
    pub(crate) image: &'a [f32],
    pub(crate) kernels: &'a [f32],
    pub(crate) bias: Option<&'a [f32]>,
    pub(crate) act: Activation,
}

impl<'a> Args<'a> {
    /// The checked operands of a call writing `out`.
    ///
    /// # Panics
    /// As [`depthwise2d`], on the geometry and the slices' lengths.
    #[allow(clippy::too_many_arguments)]
    fn new(
        g: &ConvGeometry,
        channels: usize,
        mult: usize,
        image: &'a [f32],
        kernels: &'a [f32],
        bias: Option<&'a [f32]>,
        act: Activation,
        out: &[f32],
    ) -> Args<'a> {
        let g = Geo::new(g).expect("depthwise2d: needs a 2-D geometry with non-negative padding");
        let m = channels * mult;
        assert!(
            image.len() >= channels * g.h * g.w,
            "depthwise2d: image too short"
        );
        assert!(
            kernels.len() >= m * g.kh * g.kw,
            "depthwise2d: kernels too short"
        );
        if let Some(b) = bias {
            assert!(b.len() >= m, "depthwise2d: bias too short");
        }
        assert!(out.len() >= m * g.oh * g.ow, "depthwise2d: out too short");
        Args {
            g,
            channels,
            mult,
            image,
            kernels,
            bias,
            act,
        }
    }
}

/// The blocks the taps of a one-filter-per-channel depthwise convolution
/// are summed in: `(first tap, taps)` for blocks of 4, then a block of 2
/// and a block of 1 for what is left of `taps`.
pub(crate) fn tap_blocks(taps: usize) -> impl Iterator<Item = (usize, usize)> {
    let fours = taps / 4;
    let rest = taps % 4;
    (0..fours)
        .map(|b| (4 * b, 4))
        .chain((rest >= 2).then_some((4 * fours, 2)))
        .chain((rest % 2 == 1).then_some((taps - 1, 1)))
}

/// The scalar body of [`depthwise2d`] on the generic table: the order of
/// the module documentation, output row by output row (all rows in one
/// span with unit strides). Each input plane
/// is first copied into a zero-padded plane in `scratch` (a tap in the
/// padding then reads a zero, the product the definition counts), so the
/// loops over the columns of a row carry no bounds tests and the compiler
/// can run them on the baseline vector unit; every output element is
/// still the definition's sequence of separately rounded operations (the
/// test module keeps that definition, one element at a time, as the
/// oracle of every path).
fn reference(a: &Args, out: &mut [f32], scratch: &mut Vec<f32>) {
    let Args {
        g,
        channels,
        mult,
        image,
        kernels,
        bias,
        act,
    } = *a;
    let g = &g;
    let (ksz, osz, isz) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
    // the phase-split plane of the SIMD bodies ([`layout`] for one lane,
    // [`fill_row`], [`tap_offset`]): the columns a tap reads for
    // consecutive outputs are contiguous whatever the stride
    let (prows, wq, len) = layout(g, 1).expect("depthwise2d: scratch size overflows");
    let row = g.sw * wq;
    // With unit strides the output rows are summed as one span: output
    // (r, c) reads plane[r·row + tap + c], so one loop per tap over
    // (oh − 1)·row + ow positions covers every row (the positions past
    // `ow` in each row are computed and dropped), long loops instead of
    // one short loop per row and tap. Each element is the same sequence
    // of operations either way.
    let flat = g.sh == 1 && g.sw == 1 && mult == 1 && g.oh > 0;
    let span = if flat { (g.oh - 1) * row + g.ow } else { g.ow };
    // (every tap's span lies in the plane: no loop below is cut short)
    debug_assert!(ksz == 0 || tap_offset(g, wq, ksz - 1) + span <= len);
    let need = len + span;
    if scratch.len() < need {
        scratch.resize(need, 0.0);
    }
    let (plane, acc) = scratch[..need].split_at_mut(len);
    // the padding: zero once, never written by the copies below
    plane.fill(0.0);
    // the taps' sum for `acc.len()` consecutive outputs whose first reads
    // plane[base + tap offset]: blocks of taps (`tap_blocks`), each
    // block's products summed left to right, then added to the total
    // (each block in one pass over the outputs, its partial sum in a
    // register: the same operations per element as a pass per tap)
    let taps = |k: &[f32], plane: &[f32], base: usize, acc: &mut [f32]| {
        acc.fill(0.0);
        let n = acc.len();
        let at = |t: usize| base + tap_offset(g, wq, t);
        // tap t's inputs for the n outputs (never cut short: see above)
        let src = |t: usize| {
            let a = at(t).min(plane.len());
            debug_assert!(a + n <= plane.len());
            &plane[a..(a + n).min(plane.len())]
        };
        for (t0, len) in tap_blocks(ksz) {
            match len {
                4 => {
                    let (w0, w1, w2, w3) = (k[t0], k[t0 + 1], k[t0 + 2], k[t0 + 3]);
                    let (p0, p1, p2, p3) = (src(t0), src(t0 + 1), src(t0 + 2), src(t0 + 3));
                    let m = p0.len().min(p1.len()).min(p2.len()).min(p3.len());
                    let (p0, p1, p2, p3, a) =
                        (&p0[..m], &p1[..m], &p2[..m], &p3[..m], &mut acc[..m]);
                    for i in 0..m {
                        let mut b = w0 * p0[i];
                        b += w1 * p1[i];
                        b += w2 * p2[i];
                        b += w3 * p3[i];
                        // (float addition commutes: the block's sum plus
                        // the running total, as MLAS writes it)
                        a[i] += b;
                    }
                }
                2 => {
                    let (w0, w1) = (k[t0], k[t0 + 1]);
                    let (p0, p1) = (src(t0), src(t0 + 1));
                    let m = p0.len().min(p1.len());
                    let (p0, p1, a) = (&p0[..m], &p1[..m], &mut acc[..m]);
                    for i in 0..m {
                        let mut b = w0 * p0[i];
                        b += w1 * p1[i];
                        a[i] += b;
                    }
                }
                _ => {
                    let w0 = k[t0];
                    for (a, &v) in acc.iter_mut().zip(src(t0)) {
                        *a += w0 * v;
                    }
                }
            }
        }
    };
    let finish = |yr: &mut [f32], acc: &[f32], o: usize| match bias {
        Some(b) => {
            for (v, &a) in yr.iter_mut().zip(acc) {
                *v = act.apply(a + b[o]);
            }
        }
        None => {
            for (v, &a) in yr.iter_mut().zip(acc) {
                *v = act.apply(a);
            }
        }
    };
    for o in 0..channels * mult {
        if o % mult == 0 {
            let img = &image[(o / mult) * isz..][..isz];
            for y in g.pt..prows.min(g.pt + g.h) {
                fill_row(
                    g,
                    &img[(y - g.pt) * g.w..][..g.w],
                    &mut plane[y * row..][..row],
                    wq,
                );
            }
        }
        let k = &kernels[o * ksz..][..ksz];
        let y = &mut out[o * osz..][..osz];
        if flat {
            taps(k, plane, 0, acc);
            for r in 0..g.oh {
                finish(&mut y[r * g.ow..][..g.ow], &acc[r * row..][..g.ow], o);
            }
            continue;
        }
        for r in 0..g.oh {
            if mult == 1 {
                taps(k, plane, r * g.sh * row, acc);
            } else {
                acc.fill(0.0);
                for (t, &w) in k.iter().enumerate() {
                    let at = r * g.sh * row + tap_offset(g, wq, t);
                    for (a, &v) in acc.iter_mut().zip(&plane[at..]) {
                        *a = w.mul_add(v, *a);
                    }
                }
            }
            finish(&mut y[r * g.ow..][..g.ow], acc, o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::supported;
    use proptest::prelude::*;

    fn geometry() -> impl Strategy<Value = ConvGeometry> {
        (
            (1usize..20, 1usize..20),
            (1usize..6, 1usize..6),
            (1usize..4, 1usize..4),
            (1usize..3, 1usize..3),
            (0isize..3, 0isize..3),
            (0usize..3, 0usize..3),
        )
            .prop_map(
                |((h, w), (kh, kw), (sh, sw), (dh, dw), (pt, pl), (eb, er))| {
                    // output size for begin padding, some end padding and a few
                    // extra (all-padding) positions
                    let out = |i: usize, k: usize, s: usize, d: usize, p: isize, e: usize| {
                        let span = (k - 1) * d + 1;
                        (i + p as usize + e).saturating_sub(span) / s + 1
                    };
                    let output = [out(h, kh, sh, dh, pt, eb), out(w, kw, sw, dw, pl, er)];
                    ConvGeometry::new_2d([h, w], [kh, kw], output, [sh, sw], [dh, dw], [pt, pl])
                },
            )
    }

    /// The order of the module documentation, one output element at a
    /// time: the oracle of every path.
    fn definition(a: &Args, out: &mut [f32]) {
        let Args {
            g,
            channels,
            mult,
            image,
            kernels,
            bias,
            act,
        } = *a;
        let g = &g;
        let (ksz, osz, isz) = (g.kh * g.kw, g.oh * g.ow, g.h * g.w);
        // the input under tap `t` of output (r, x); zero in the padding
        let tap = |img: &[f32], r: usize, x: usize, t: usize| {
            let iy = (r * g.sh + (t / g.kw) * g.dh) as isize - g.pt as isize;
            let ix = (x * g.sw + (t % g.kw) * g.dw) as isize - g.pl as isize;
            if iy < 0 || iy >= g.h as isize || ix < 0 || ix >= g.w as isize {
                0.0
            } else {
                img[iy as usize * g.w + ix as usize]
            }
        };
        for o in 0..channels * mult {
            let img = &image[(o / mult) * isz..][..isz];
            let k = &kernels[o * ksz..][..ksz];
            let y = &mut out[o * osz..][..osz];
            for r in 0..g.oh {
                for x in 0..g.ow {
                    let mut acc = 0.0f32;
                    if mult == 1 {
                        for (t0, n) in tap_blocks(ksz) {
                            let mut blk = k[t0] * tap(img, r, x, t0);
                            for (t, &w) in k.iter().enumerate().take(t0 + n).skip(t0 + 1) {
                                blk += w * tap(img, r, x, t);
                            }
                            // (float addition commutes: the block's sum plus
                            // the running total, as MLAS writes it)
                            acc += blk;
                        }
                    } else {
                        for (t, &w) in k.iter().enumerate() {
                            acc = w.mul_add(tap(img, r, x, t), acc);
                        }
                    }
                    if let Some(b) = bias {
                        acc += b[o];
                    }
                    y[r * g.ow + x] = act.apply(acc);
                }
            }
        }
    }

    /// Values in [-1, 1) from an xorshift generator seeded with `seed`.
    fn uniform(seed: u64) -> impl FnMut() -> f32 {
        let mut s = seed | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    /// Image, kernels and bias of `ch` channels with `mult` filters each
    /// for geometry `g`, drawn in that order from [`uniform`]`(seed)`.
    fn operands(g: &ConvGeometry, ch: usize, mult: usize, seed: u64) -> [Vec<f32>; 3] {
        let mut rnd = uniform(seed);
        let m = ch * mult;
        let image = (0..ch * g.image_size()).map(|_| rnd()).collect();
        let kern = (0..m * g.kernel_size()).map(|_| rnd()).collect();
        let bias = (0..m).map(|_| rnd()).collect();
        [image, kern, bias]
    }

    fn act() -> impl Strategy<Value = Activation> {
        prop_oneof![
            Just(Activation::Identity),
            Just(Activation::Relu),
            Just(Activation::Clip { lo: -0.5, hi: 0.7 }),
            Just(Activation::LeakyRelu(0.1)),
            Just(Activation::HardSwish),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn simd_matches_reference(
            g in geometry(), ch in 1usize..4, mult in 1usize..3, act in act(),
            with_bias: bool, seed: u64,
        ) {
            let m = ch * mult;
            let [image, kern, bias] = operands(&g, ch, mult, seed);
            let bias = with_bias.then_some(&bias[..]);
            let n = m * g.output_size();
            let mut want = vec![f32::NAN; n];
            let reference = |image: &[f32], kern: &[f32], bias, act, out: &mut [f32]| {
                let args = Args::new(&g, ch, mult, image, kern, bias, act, out);
                depthwise_at(Level::Generic, &args, out, &mut vec![]);
            };
            reference(&image, &kern, bias, act, &mut want);
            let mut def = vec![f32::NAN; n];
            definition(&Args::new(&g, ch, mult, &image, &kern, bias, act, &def), &mut def);
            for i in 0..n {
                prop_assert_eq!(want[i].to_bits(), def[i].to_bits(),
                    "generic at {}: {} vs definition {} (geometry {:?})", i, want[i], def[i], g);
            }
            for lvl in [Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let mut got = vec![f32::NAN; n];
                let mut scratch = vec![f32::NAN; 7];
                let args = Args::new(&g, ch, mult, &image, &kern, bias, act, &got);
                depthwise_at(lvl, &args, &mut got, &mut scratch);
                let mut again = vec![0.0; n];
                depthwise_at(lvl, &args, &mut again, &mut scratch);
                for i in 0..n {
                    prop_assert_eq!(got[i].to_bits(), again[i].to_bits(), "not deterministic");
                    prop_assert_eq!(got[i].to_bits(), want[i].to_bits(),
                        "{:?} at {}: {} vs reference {} (geometry {:?})", lvl, i, got[i], want[i], g);
                }
            }
        }
    }

    /// Geometries of the AVX-512 body for `K x K` kernels at stride 1 or 2
    /// (`channel_k`): both kernel sides 3 or both 5, no dilation, output
    /// rows from 1 to 70 columns (every register block of `block`, with
    /// and without a partial last vector).
    fn shifted_geometry() -> impl Strategy<Value = ConvGeometry> {
        (
            (1usize..24, 1usize..140),
            prop_oneof![Just(3usize), Just(5)],
            1usize..3,
            (0isize..6, 0isize..6),
            (0usize..3, 0usize..3),
        )
            .prop_map(|((h, w), k, s, (pt, pl), (eb, er))| {
                let (pt, pl) = (pt.min(k as isize - 1), pl.min(k as isize - 1));
                let out =
                    |i: usize, p: isize, e: usize| (i + p as usize + e).saturating_sub(k) / s + 1;
                let output = [out(h, pt, eb), out(w, pl, er).min(70)];
                ConvGeometry::new_2d([h, w], [k, k], output, [s, s], [1, 1], [pt, pl])
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(150))]
        /// The SIMD levels on the geometries of the AVX-512 `K x K` body,
        /// one filter per channel (the dispatch takes that body for fewer
        /// than 16 channels at any width).
        #[test]
        fn shifted_kernels_match_reference(
            g in shifted_geometry(), ch in 1usize..4, act in act(), with_bias: bool, seed: u64,
        ) {
            let [image, kern, bias] = operands(&g, ch, 1, seed);
            let bias = with_bias.then_some(&bias[..]);
            let n = ch * g.output_size();
            let mut want = vec![f32::NAN; n];
            definition(&Args::new(&g, ch, 1, &image, &kern, bias, act, &want), &mut want);
            for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
                if !supported(lvl) {
                    continue;
                }
                let mut got = vec![f32::NAN; n];
                let args = Args::new(&g, ch, 1, &image, &kern, bias, act, &got);
                depthwise_at(lvl, &args, &mut got, &mut vec![f32::NAN; 3]);
                for i in 0..n {
                    prop_assert_eq!(got[i].to_bits(), want[i].to_bits(),
                        "{:?} at {}: {} vs definition {} (geometry {:?})", lvl, i, got[i], want[i], g);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(100))]
        /// The AVX-512 body with vectors across channels, on any geometry
        /// and channel count (whole groups of 16 and a partial one),
        /// whether or not the dispatch would choose it.
        #[test]
        #[cfg(target_arch = "x86_64")]
        fn by_channels_matches_reference(
            g in geometry(), ch in 1usize..40, act in act(), with_bias: bool, seed: u64,
        ) {
            if !supported(Level::Avx512) {
                return Ok(());
            }
            let [image, kern, bias] = operands(&g, ch, 1, seed);
            let bias = with_bias.then_some(&bias[..]);
            let n = ch * g.output_size();
            let mut want = vec![f32::NAN; n];
            let args = Args::new(&g, ch, 1, &image, &kern, bias, act, &want);
            depthwise_at(Level::Generic, &args, &mut want, &mut vec![]);
            let mut got = vec![f32::NAN; n];
            let mut scratch = vec![f32::NAN; 3];
            // SAFETY: AVX-512F is supported; the operands were checked.
            unsafe { x86::by_channels(&args, &mut got, &mut scratch) };
            for i in 0..n {
                prop_assert_eq!(got[i].to_bits(), want[i].to_bits(),
                    "at {}: {} vs reference {} ({} channels, geometry {:?})", i, got[i], want[i], ch, g);
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn transpose16_swaps_rows_and_lanes() {
        if !supported(Level::Avx512) {
            return;
        }
        let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let mut t = vec![0.0f32; 256];
        // SAFETY: AVX-512F is supported; 16 rows of 16 in bounds.
        unsafe {
            use std::arch::x86_64::*;
            let mut v = [_mm512_setzero_ps(); 16];
            for (i, vi) in v.iter_mut().enumerate() {
                *vi = _mm512_loadu_ps(m.as_ptr().add(16 * i));
            }
            x86::transpose16(&mut v);
            for (j, vj) in v.iter().enumerate() {
                _mm512_storeu_ps(t.as_mut_ptr().add(16 * j), *vj);
            }
        }
        for i in 0..16 {
            for j in 0..16 {
                assert_eq!(t[16 * j + i], m[16 * i + j], "({i}, {j})");
            }
        }
    }

    /// The channels split over the intra-op threads: the bits of one
    /// thread, for channel counts that do and do not fill groups of 16,
    /// one or two filters per channel, on every level (the threads run
    /// the caller's level).
    #[test]
    fn intra_op_threads_give_bit_identical_outputs() {
        use crate::dispatch::{with_isa, Isa};
        let _g = crate::test_lock();
        for (ch, mult, side, k, s) in [(40, 1, 56, 3, 1), (37, 2, 30, 5, 2), (1000, 1, 14, 3, 2)] {
            let o = (side + 2 * (k / 2) - k) / s + 1;
            let p = (k / 2) as isize;
            let g = ConvGeometry::new_2d([side, side], [k, k], [o, o], [s, s], [1, 1], [p, p]);
            let [image, kern, bias] = operands(&g, ch, mult, ch as u64);
            let run = |t: usize| {
                crate::par::set_threads(t);
                let mut y = vec![f32::NAN; ch * mult * o * o];
                let act = Activation::Clip { lo: -0.5, hi: 0.5 };
                depthwise2d(
                    &g,
                    ch,
                    mult,
                    &image,
                    &kern,
                    Some(&bias),
                    act,
                    &mut y,
                    &mut vec![],
                );
                crate::par::set_threads(1);
                y.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            let lvls = [
                (Level::Generic, Isa::Generic),
                (Level::Avx2, Isa::Avx2),
                (Level::Avx512, Isa::Avx512),
            ];
            for (lvl, isa) in lvls.into_iter().filter(|&(l, _)| supported(l)) {
                let one = with_isa(isa, || run(1));
                let mut want = vec![f32::NAN; ch * mult * o * o];
                let act = Activation::Clip { lo: -0.5, hi: 0.5 };
                let args = Args::new(&g, ch, mult, &image, &kern, Some(&bias), act, &want);
                depthwise_at(lvl, &args, &mut want, &mut vec![]);
                let want: Vec<u32> = want.iter().map(|v| v.to_bits()).collect();
                assert_eq!(one, want, "{lvl:?} {ch}x{side} one thread");
                assert_eq!(with_isa(isa, || run(2)), one, "{lvl:?} {ch}x{side}");
                assert_eq!(with_isa(isa, || run(3)), one, "{lvl:?} {ch}x{side}");
            }
        }
    }

    #[test]
    fn tap_blocks_are_fours_then_a_two_then_a_one() {
        let blocks = |k| tap_blocks(k).collect::<Vec<_>>();
        assert_eq!(blocks(1), [(0, 1)]);
        assert_eq!(blocks(3), [(0, 2), (2, 1)]);
        assert_eq!(blocks(9), [(0, 4), (4, 4), (8, 1)]);
        assert_eq!(blocks(25).len(), 7);
        assert_eq!(blocks(25)[6], (24, 1));
        assert_eq!(blocks(7), [(0, 4), (4, 2), (6, 1)]);
        assert_eq!(blocks(6), [(0, 4), (4, 2)]);
    }

    #[test]
    fn blocked_sum_of_a_3x3_tap_window() {
        // one output, nine taps: ((t0 + t1 + t2 + t3) + 0) then + (t4..t7),
        // then + t8, each block left to right; values chosen so that a
        // plain left-to-right sum rounds differently
        let g = ConvGeometry::new_2d([3, 3], [3, 3], [1, 1], [1, 1], [1, 1], [0, 0]);
        let image = [1.0f32, 1.0, 1.0, 1.0, 1e8, 1.0, -1e8, 0.5, 7.0];
        let kern = [1.0f32; 9];
        let b1 = ((1.0f32 + 1.0) + 1.0) + 1.0;
        let b2 = ((1e8f32 + 1.0) + -1e8) + 0.5;
        let want = 7.0f32 + (b2 + (b1 + 0.0));
        assert_eq!(want, 11.5);
        let plain: f32 = image.iter().sum();
        assert_ne!(
            want.to_bits(),
            plain.to_bits(),
            "the case does not separate the orders"
        );
        for lvl in [Level::Generic, Level::Avx2, Level::Avx512] {
            if !supported(lvl) {
                continue;
            }
            let mut got = [f32::NAN];
            let args = Args::new(&g, 1, 1, &image, &kern, None, Activation::Identity, &got);
            depthwise_at(lvl, &args, &mut got, &mut vec![]);
            assert_eq!(
                got[0].to_bits(),
                want.to_bits(),
                "{lvl:?}: {} vs {want}",
                got[0]
            );
        }
    }

    #[test]
    fn same_padding_stride_two_5x5() {
        // the EfficientNet-Lite shape class: TF-SAME asymmetric padding
        let g = ConvGeometry::new_2d([14, 14], [5, 5], [7, 7], [2, 2], [1, 1], [1, 1]);
        let image: Vec<f32> = (0..196).map(|i| (i % 13) as f32 - 6.0).collect();
        let kern: Vec<f32> = (0..25).map(|i| (i % 5) as f32 - 2.0).collect();
        let mut want = vec![0.0; 49];
        let args = Args::new(&g, 1, 1, &image, &kern, None, Activation::Identity, &want);
        depthwise_at(Level::Generic, &args, &mut want, &mut vec![]);
        let mut got = vec![0.0; 49];
        depthwise2d(
            &g,
            1,
            1,
            &image,
            &kern,
            None,
            Activation::Identity,
            &mut got,
            &mut vec![],
        );
        // small integers: exact whatever the rounding
        assert_eq!(got, want);
    }
}
