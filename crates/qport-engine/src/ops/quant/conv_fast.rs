//! The prepared 8-bit `QLinearConv`: when the weights, scales, zero points
//! and bias are constants (every convolution of a lowered QDQ artifact),
//! everything that does not depend on the activations is done once when
//! the plan is built — the weights packed for the integer GEMM kernels
//! ([`qport_kernels::int8::PackedI8`], run by [`qport_kernels::qgemm`]), one prepared
//! [`qport_core::arith::Requantizer`] per output channel — and inference
//! runs, per block of output rows sized to stay in the L2 cache, im2col
//! (or nothing, for a pointwise layer in one block), the GEMM into a
//! reused per-thread i32 buffer, and requantization straight into the
//! 8-bit output, so the accumulators never leave the cache (with AVX-512
//! VNNI and the float requantization policies, in the GEMM kernel's
//! epilogue: the sums never leave the registers). With AVX-512 VNNI, a
//! layer of one group, stride 1 or 2 and a kernel wider than 1 × 1 skips
//! im2col: the image is copied once into channel quads (at stride 2 the
//! image's four phases) and the kernel reads it there
//! ([`qport_kernels::int8::direct`], weights reordered at plan time).
//! Depthwise layers run their own exact kernel
//! ([`qport_kernels::idepthwise`]), channels-last on narrow maps where
//! AVX-512 has it, requantizing as it writes. Signed activations are turned into unsigned ones by flipping
//! their top bit (`x ^ 0x80`, zero point `+128`: the same differences
//! `x − x_zero`), so u8×s8 kernels serve s8×s8 models too.
//!
//! The arithmetic is exactly that of the general path in [`super::conv`]
//! (the same sums, the same requantizer): property and model tests hold
//! the two equal.
#![deny(clippy::undocumented_unsafe_blocks)]

use super::common::{
    f32_values, per_channel, scalar_f32, scalar_zero, weight_zero_points, Grid, Prepared,
};
use super::conv::conv_accumulate_with;
use super::matmul::{add_int32_bias, int_bias};
use crate::error::{OpError, OpResult};
use crate::ops::nn::spatial::{row_block, row_blocks, ConvAttrs, ConvGeom, ConvSizes, ShapeMemo};
use crate::ops::{input, reuse_output, BuildCtx};
use qport_core::arith::{Accumulator, FloatRequant, Requantizer};
use qport_core::{DType, Tensor, TensorData};
use qport_kernels::idepthwise::{depthwise_pairs, depthwise_pairs_requant, depthwise_plane};
use qport_kernels::igemm::QInt;
use qport_kernels::im2col::{im2col_par, ConvGeometry};
use qport_kernels::int8::direct::{self, DirectGeom, DirectImage};
use qport_kernels::int8::elementwise;
use qport_kernels::int8::PackedI8;
use qport_kernels::par::ColumnBlock;
use qport_kernels::qgemm;
use std::cell::RefCell;

/// Bytes of one row block's working set (column matrix, packed copy,
/// accumulators) in [`PreparedConv`]'s blocked path where the host does
/// not report its L2 cache: three quarters of a 1 MiB L2.
const BLOCK_BYTES: usize = 768 << 10;

/// Bytes of one row block's working set: three quarters of the L2 cache
/// the host reports ([`qport_kernels::cache::l2_bytes`]; between 256 KiB
/// and 4 MiB), else [`BLOCK_BYTES`]. On a 2 MiB-L2 Xeon (a 2-vCPU guest),
/// 1.5 MiB instead of 768 KiB made ResNet-50 `f32-rne` 3 % faster on one
/// thread and 4–6 % on two (`op_profile`, alternated; 1 and 2 MiB gave
/// the same as 1.5), mostly where a 14 x 14 or 28 x 28 layer now runs as
/// one or two blocks instead of four.
fn block_bytes() -> usize {
    qport_kernels::cache::l2_bytes()
        .map_or(BLOCK_BYTES, |l2| (l2 / 4 * 3).clamp(256 << 10, 4 << 20))
}

/// Output positions of one block at least (fewer make the per-block
/// calls dominate).
const MIN_BLOCK_COLS: usize = 64;

/// A `QLinearConv` with constant i8 weights and constant quantization
/// parameters, prepared at plan time.
pub(crate) struct PreparedConv {
    attrs: ConvAttrs,
    w_shape: Vec<usize>,
    w: Vec<i8>,
    w_zero: Vec<i32>,
    /// Per group, the weights packed for the integer GEMM kernels.
    packed: Vec<PackedI8>,
    /// A 2-D layer of one group, stride 1 or 2 and dilation 1 with a kernel
    /// larger than 1 × 1, or 1 × 1 at stride 2: its weights in the order
    /// of the direct kernel ([`direct::pack_weights`]), which reads the
    /// image in channel quads instead of im2col where the host has it.
    direct: Option<PackedI8>,
    rq: Vec<Requantizer>,
    /// The requantizers as float forms, when every channel has one and no
    /// bias is added apart: the GEMM kernels that can requantize in their
    /// epilogue then do ([`qgemm::gemm_u8s8_requant`]).
    frq: Option<Vec<FloatRequant>>,
    /// `frq` before narrowing ([`Requantizer::narrowed`]: the f64 forms
    /// an f32 form reproduces on the channel's accumulators run as that),
    /// where narrowing changed some: the depthwise kernel that takes one
    /// variant across channels runs these when the narrowed ones mix.
    frq_wide: Option<Vec<FloatRequant>>,
    /// The int32 bias added to the accumulators with wrapping, when the
    /// profile places it there and the sum may overflow i32 (otherwise the
    /// requantizers add it).
    bias_acc: Option<Vec<i32>>,
    /// Depthwise layers: `w − w_zero` (the exact kernel of 16-bit
    /// pairs, [`depthwise_pairs`]); empty for the others.
    w_centered: Vec<i32>,
    x_zero: i32,
    y: Grid,
    /// The AVX2 int16-saturating pair accumulation (u8 activations only).
    sat_pairs: bool,
    /// What the last call derived from its input shape.
    memo: ShapeMemo<Call>,
}

/// What a call of a [`PreparedConv`] derives from its input shape (kept
/// for the next call with that shape).
struct Call {
    g: ConvGeom,
    y_shape: Vec<usize>,
    /// Output rows per block of [`PreparedConv::blocked`] ([`block_rows`]).
    rb: usize,
    /// Each block of `rb` output rows: its first row and its geometry.
    blocks: Vec<(usize, ConvGeometry)>,
    /// The blocks' first output positions, then the output size: block
    /// `i` writes positions `bounds[i]..bounds[i + 1]` of every channel.
    bounds: Vec<usize>,
    /// The direct kernel's geometry, for a layer with direct weights
    /// whose padding it can take.
    direct: Option<DirectGeom>,
}

/// Output rows per block of [`PreparedConv::blocked`]: the block's column
/// matrix, its packed copy and its accumulators stay in the L2 cache (and
/// the threads get equal shares, see [`row_block`]). A layer on the
/// direct kernel's row-compact planes (`compact`,
/// [`direct::exact_columns`]) has no column matrix: its planes hold at most
/// `kdim` bytes an output position (`kw` of the `kh · kw` taps, for the
/// block's rows and the `(kh − 1) / s` below), so its blocks are twice as
/// tall, and fewer blocks leave fewer part-filled vectors (a 14 × 14 map in
/// one block: 12 vectors of 16 and 4 positions, not 8 + 5 vectors).
fn block_rows(g: &ConvGeom, compact: bool) -> usize {
    let ConvSizes { os, kdim, .. } = g.sizes();
    let rows = g.spatial.output.first().copied().unwrap_or(0);
    if os == 0 || rows == 0 {
        return 0;
    }
    let col = if compact { kdim } else { 2 * kdim };
    row_block(
        rows,
        os / rows,
        col + 4 * g.c_out,
        block_bytes(),
        MIN_BLOCK_COLS,
    )
}

thread_local! {
    /// Signed activations with their top bit flipped (the calling thread's).
    static FLIP: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Accumulators and im2col patches of the blocks this thread runs.
    static SCRATCH: RefCell<(Vec<i32>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    /// The channel quads of the image this thread's direct layer reads.
    static QUADS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

impl PreparedConv {
    /// Prepares the convolution when inputs 1..=8 are constants of the
    /// supported types (i8 weights, 8-bit output); `None` otherwise (the
    /// general path runs).
    pub(crate) fn try_new(ctx: &BuildCtx, attrs: &ConvAttrs) -> OpResult<Option<PreparedConv>> {
        let (Some(xs), Some(w), Some(ws), Some(ys)) = (
            ctx.const_input(1),
            ctx.const_input(3),
            ctx.const_input(4),
            ctx.const_input(6),
        ) else {
            return Ok(None);
        };
        let present = |i: usize| ctx.node.input(i).is_some_and(|n| !n.is_empty());
        let (xz, wz, yz, bias) = (
            ctx.const_input(2),
            ctx.const_input(5),
            ctx.const_input(7),
            ctx.const_input(8),
        );
        if (present(2) && xz.is_none())
            || (present(5) && wz.is_none())
            || yz.is_none()
            || (present(8) && bias.is_none())
        {
            return Ok(None);
        }
        let Some(yz) = yz else { return Ok(None) };
        let Ok(wv) = w.as_slice::<i8>() else {
            return Ok(None);
        };
        let y = match yz.dtype() {
            DType::U8 => Grid::U8,
            DType::I8 => Grid::I8,
            _ => return Ok(None),
        };
        let w_shape = w.shape().to_vec();
        if w_shape.len() < 3 || w_shape[0] == 0 {
            return Ok(None);
        }
        let c_out = w_shape[0];
        let x_scale = scalar_f32(xs, "x_scale")?;
        let x_zero = scalar_zero(xz, "x_zero_point")?;
        let w_scale = per_channel(f32_values(ws, "w_scale")?, ws.shape(), c_out, "w_scale")?;
        let w_zero = weight_zero_points(wz, c_out)?;
        let y_scale = scalar_f32(ys, "y_scale")?;
        let y_zero = scalar_zero(Some(yz), "y_zero_point")?;
        let bias: Option<Vec<i32>> = match bias {
            Some(b) => {
                let v = b
                    .as_slice::<i32>()
                    .map_err(|_| OpError::dtype("B (bias)", b.dtype()))?;
                if v.len() != c_out {
                    return Err(OpError::invalid(format!(
                        "B (bias) has {} elements, expected {c_out}",
                        v.len()
                    )));
                }
                Some(v.to_vec())
            }
            None => None,
        };
        let kdim: usize = w_shape[1..].iter().product();
        let profile = ctx.arith;
        // an int32 bias joins the i32 accumulator (wrapping, as in the
        // general path) before requantization; a float one the requantizer.
        // When no channel's accumulator plus bias can leave i32, wrapping
        // never happens and the requantizer adds the int32 bias itself, in
        // the same pass (no separate bias loop). |x - zx| <= 255, so channel
        // c's accumulator is at most 255 * sum_k |w[c,k] - zw[c]| in
        // magnitude (the saturating pairs' sums are smaller still).
        let int_bias = int_bias(profile);
        let bound: Vec<i64> = (0..c_out)
            .map(|c| {
                let w_abs: i64 = wv[c * kdim..(c + 1) * kdim]
                    .iter()
                    .map(|&v| (i64::from(v) - i64::from(w_zero[c])).abs())
                    .sum();
                255 * w_abs
            })
            .collect();
        let wraps = bias.as_ref().is_some_and(|b| {
            b.iter()
                .zip(&bound)
                .any(|(&bc, &bd)| bd + i64::from(bc).abs() > i64::from(i32::MAX))
        });
        let separate_bias = int_bias && wraps;
        let rq: Vec<Requantizer> = (0..c_out)
            .map(|c| {
                let b = bias
                    .as_ref()
                    .filter(|_| !separate_bias)
                    .map_or(0.0, |b| f64::from(b[c]));
                let m = profile.gemm_multiplier(&[x_scale, w_scale[c]], &[y_scale]);
                let r = Requantizer::new(b, m, y_zero, y.min(), y.max(), profile);
                // the accumulators stay within the bound (a bias added
                // apart is not: those keep their form)
                if separate_bias {
                    r
                } else {
                    r.narrowed(bound[c])
                }
            })
            .collect();
        let group = attrs.group;
        if c_out % group != 0 {
            return Ok(None); // the general path reports it
        }
        let mg = c_out / group;
        // (depthwise layers run on their own kernel when 2-D; packing
        // their few weights too keeps every other geometry on the GEMM)
        let packed = (0..group)
            .map(|gi| PackedI8::new(&wv[gi * mg * kdim..(gi + 1) * mg * kdim], mg, kdim))
            .collect();
        let sat_pairs = profile.accumulator == Accumulator::I16SatPairs;
        // (packed only where the host has the kernel: elsewhere it would
        // be a copy of the weights that never runs)
        // (a 1 × 1 kernel at stride 2 too: from the image itself, see
        // `direct_geom`, its planes are the strided pixels in quads, one
        // pass where im2col and the packing of `B` are two)
        let stride = attrs.window.uniform_stride();
        let direct = (direct::available()
            && group == 1
            && w_shape.len() == 4
            && (w_shape[2] * w_shape[3] > 1 || stride.is_some_and(|s| s > 1))
            && stride.is_some_and(|s| (1..=DIRECT_MAX_STRIDE).contains(&s))
            && !sat_pairs
            && w_shape[2] * w_shape[3] * w_shape[1].div_ceil(4) * 4 <= qport_kernels::int8::MAX_K)
            .then(|| direct::pack_weights(wv, c_out, w_shape[1], (w_shape[2], w_shape[3])));
        let ks = kdim.max(1);
        // only a layer that can be a 2-D depthwise plane (see
        // `ConvGeom::depthwise_plane`) reads the centred weights
        let plane = group > 1 && mg == 1 && w_shape.len() == 4 && w_shape[1] == 1;
        let w_centered = if plane {
            wv.iter()
                .enumerate()
                .map(|(i, &v)| i32::from(v) - w_zero[(i / ks).min(c_out - 1)])
                .collect()
        } else {
            vec![]
        };
        let frq = rq
            .iter()
            .map(Requantizer::float_form)
            .collect::<Option<Vec<_>>>()
            .filter(|_| !separate_bias);
        // the forms before narrowing, where it changed some (for the
        // depthwise kernels that take one variant across channels)
        let frq_wide = rq
            .iter()
            .map(Requantizer::wide_form)
            .collect::<Option<Vec<_>>>()
            .filter(|w| frq.as_ref().is_some_and(|f| f != w));
        Ok(Some(PreparedConv {
            w_centered,
            frq,
            frq_wide,
            attrs: attrs.clone(),
            w_shape,
            w: wv.to_vec(),
            w_zero,
            packed,
            rq,
            bias_acc: bias.filter(|_| separate_bias),
            x_zero,
            y,
            direct,
            sat_pairs,
            memo: ShapeMemo::default(),
        }))
    }

    /// The geometry, output shape and row blocks of a call on an input of
    /// shape `x`: the previous call's when the shape (and the block size)
    /// is the same.
    fn call(&self, x: &[usize]) -> OpResult<std::sync::Arc<Call>> {
        self.memo.get(
            x,
            &[],
            |c| c.rb == block_rows(&c.g, compact(&c.direct)),
            || {
                let g = self.attrs.geometry(x, &self.w_shape)?;
                let direct = self.direct.as_ref().and_then(|_| direct_geom(&g));
                let rb = block_rows(&g, compact(&direct));
                let (blocks, bounds) = row_blocks(&g.spatial, rb);
                Ok(Call {
                    y_shape: g.y_shape(),
                    g,
                    rb,
                    blocks,
                    bounds,
                    direct,
                })
            },
        )
    }

    /// The convolution of the 8-bit `x` into `out` (`call`'s output shape,
    /// every element written).
    fn run_into<T: QInt>(&self, call: &Call, x: &Tensor, out: &mut [T]) -> OpResult<()> {
        #[cfg(test)]
        tests::PREPARED_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let g = &call.g;
        let sat = self.sat_pairs && x.dtype() == DType::U8 && !g.depthwise();
        let os = g.spatial.output_size();
        FLIP.with(|flip| -> OpResult<()> {
            let flip = &mut *flip.borrow_mut();
            // activations as u8 with the matching zero point
            let (xu, xz): (&[u8], i32) = match x.data() {
                TensorData::U8(v) => (v, self.x_zero),
                TensorData::I8(v) => {
                    flip.clear();
                    flip.extend(v.iter().map(|&b| (b as u8) ^ 0x80));
                    (&flip[..], self.x_zero + 128)
                }
                _ => unreachable!("8-bit input checked by the callers"),
            };
            let is = g.spatial.image_size();
            for n in 0..g.batch {
                let xn = &xu[n * g.c_in * is..(n + 1) * g.c_in * is];
                let o = &mut out[n * g.c_out * os..][..g.c_out * os];
                if !sat && !g.depthwise_plane() {
                    self.blocked(xn, xz, call, o);
                    continue;
                }
                if sat {
                    SCRATCH.with(|s| -> OpResult<()> {
                        let acc = &mut s.borrow_mut().0;
                        // the saturating pairs see the stored u8 values
                        let a = conv_accumulate_with(xn, &self.w, &one(g), xz, &self.w_zero, true)?;
                        acc.clear();
                        acc.extend_from_slice(&a);
                        self.finish(acc, 0..g.c_out, os, o);
                        Ok(())
                    })?;
                    continue;
                }
                // a depthwise layer runs in chunks of channels whose planes
                // and sums stay in the L2 cache through the widening, the
                // taps and the requantization; the chunks are divided
                // between the intra-op threads (each chunk as on one)
                let work = g.c_out * os * g.sizes().ks;
                let chunk = depthwise_chunk(g, qport_kernels::par::parts_for(work));
                qport_kernels::par::split_mut(o, chunk * os, work, |start, block| {
                    SCRATCH.with(|s| {
                        let acc = &mut s.borrow_mut().0;
                        if acc.len() < chunk * os {
                            acc.resize(chunk * os, 0);
                        }
                        for (k, ob) in block.chunks_mut(chunk * os).enumerate() {
                            let c0 = start / os + k * chunk;
                            let ch = c0..c0 + ob.len() / os;
                            if self.depthwise_requant(xn, xz, g, ch.clone(), ob) {
                                continue;
                            }
                            let acc = &mut acc[..ob.len()];
                            self.depthwise(xn, xz, g, ch.clone(), acc);
                            self.finish(acc, ch, os, ob);
                        }
                    })
                });
            }
            Ok(())
        })
    }

    /// One image through the exact GEMM in blocks of output rows: per
    /// block, the block's column matrix (im2col of those rows, or the
    /// input itself when one block covers a pointwise layer), the GEMM
    /// into `acc` (`[c_out, block]`), the wrapping bias and the
    /// requantization into `out` (`[c_out, os]` of this image). Blocks are
    /// sized so that column matrix, packed operand and accumulators stay
    /// in the core's L2 cache between the passes; every output element
    /// is the same exact sum and the same requantization as unblocked.
    ///
    /// With several intra-op threads the blocks are divided between them
    /// (one hand-off per image); a layer in one block splits its im2col,
    /// GEMM and requantization instead.
    fn blocked<T: QInt>(&self, xn: &[u8], xz: i32, call: &Call, out: &mut [T]) {
        let g = &call.g;
        let ConvSizes { os, kdim, .. } = g.sizes();
        if os == 0 || call.blocks.is_empty() {
            return;
        }
        // (a vpdpbusd does 64 multiply-adds to an FMA's 16: count a
        // quarter of them against the hand-off cost, as the GEMM does)
        let work = g.c_out * kdim * os / 4;
        let mut run = |img: Option<(DirectImage<'_>, &DirectGeom)>| {
            qport_kernels::par::split_columns(out, os, &call.bounds, work, |i, mut o| {
                SCRATCH.with(|s| {
                    let (acc, col) = &mut *s.borrow_mut();
                    self.block(xn, xz, g, &call.blocks[i], acc, col, img, &mut o);
                })
            })
        };
        match (&call.direct, direct::available()) {
            // each block's planes gathered from the image where it lies
            (Some(dg), true) if direct::reads_planar(dg) => {
                run(Some((DirectImage::Planar(&xn[..dg.c * dg.h * dg.w]), dg)))
            }
            // the image in channel quads once, read by every block
            (Some(dg), true) => QUADS.with(|q| {
                let q = &mut *q.borrow_mut();
                // (the image starts on a cache line, so the kernels'
                // 64-byte rows of quads do not straddle two)
                let q = qport_kernels::aligned::line_slice(q, dg.image_len());
                direct::quad_image(xn, dg, xz.clamp(0, 255) as u8, q);
                run(Some((DirectImage::Quads(&q[..]), dg)))
            }),
            _ => run(None),
        }
    }

    /// Block `(r0, sub)` of [`Self::blocked`] into its columns `o` of the
    /// output.
    #[allow(clippy::too_many_arguments)]
    fn block<T: QInt>(
        &self,
        xn: &[u8],
        xz: i32,
        g: &ConvGeom,
        (r0, sub): &(usize, ConvGeometry),
        acc: &mut Vec<i32>,
        col: &mut Vec<u8>,
        img: Option<(DirectImage<'_>, &DirectGeom)>,
        o: &mut ColumnBlock<'_, T>,
    ) {
        let ConvSizes {
            is,
            os,
            cg,
            mg,
            kdim,
            ..
        } = g.sizes();
        let rest = os / g.spatial.output[0];
        let (j0, nb) = (r0 * rest, sub.output[0] * rest);
        debug_assert_eq!(o.cols(), j0..j0 + nb);
        // the padding holds the zero point (a u8 value here)
        let pad = xz.clamp(0, 255) as u8;
        // the requantization in the GEMM's epilogue where a kernel can
        // (the same bytes; the i32 sums never leave the registers)
        let fused = self
            .frq
            .as_ref()
            .filter(|_| qgemm::fuses_requant::<T>(kdim));
        if fused.is_none() && acc.len() < g.c_out * nb {
            acc.resize(g.c_out * nb, 0);
        }
        let acc = &mut acc[..if fused.is_some() { 0 } else { g.c_out * nb }];
        // the direct kernel on the image's channel quads (one group)
        let direct = self.direct.as_ref().zip(img);
        if let Some((da, (img, dg))) = direct {
            #[cfg(test)]
            tests::DIRECT_RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let rows = (*r0, r0 + sub.output[0]);
            let conv = direct::DirectConv {
                a: da,
                za: &self.w_zero,
                g: dg,
                img,
                zb: xz,
            };
            let ran = match fused {
                Some(frq) => direct::conv_requant(&conv, frq, rows, o, 0),
                None => direct::conv_sums(&conv, rows, acc, nb),
            };
            assert!(ran, "the direct kernel runs where the quads were made");
            if fused.is_some() {
                return;
            }
        }
        for gi in (0..g.group).filter(|_| direct.is_none()) {
            let xs = &xn[gi * cg * is..(gi + 1) * cg * is];
            // a pointwise layer's block is its columns of the input itself
            // (rows `os` apart): the fused kernel reads them in place, the
            // i32 kernels when the block is the whole image (else a copy)
            let (b, ldb): (&[u8], usize) = if g.pointwise() && (nb == os || fused.is_some()) {
                (&xs[j0..], os)
            } else {
                if col.len() < kdim * nb {
                    col.resize(kdim * nb, 0);
                }
                im2col_par(sub, cg, xs, pad, &mut col[..kdim * nb]);
                (&col[..kdim * nb], nb)
            };
            let wz = &self.w_zero[gi * mg..(gi + 1) * mg];
            if let Some(frq) = fused {
                let rq = &frq[gi * mg..(gi + 1) * mg];
                let ran =
                    qgemm::gemm_u8s8_requant(&self.packed[gi], wz, (b, ldb), xz, rq, o, gi * mg);
                assert!(ran, "the fused kernel runs where `fuses_requant` says");
                continue;
            }
            debug_assert_eq!(ldb, nb, "the i32 kernels read a dense B");
            let c = &mut acc[gi * mg * nb..(gi + 1) * mg * nb];
            qgemm::gemm_u8s8(&self.packed[gi], wz, b, xz, nb, c, nb);
        }
        if fused.is_some() {
            return;
        }
        // whole channels on the intra-op threads when this block has the
        // whole output (each element as on one thread; inside a block
        // that is one of several in parallel, one thread): the bias, then
        // the requantization
        let work = acc.len() * qport_kernels::par::STREAM_COST;
        if let Some(b) = &self.bias_acc {
            qport_kernels::par::split_mut(acc, nb, work, |a0, a| {
                add_int32_bias(a, &b[a0 / nb..], nb);
            });
        }
        let acc = &*acc;
        let rq = |ch: usize, row: &mut [T]| {
            elementwise::requantize(&self.rq[ch..ch + 1], &acc[ch * nb..][..nb], nb, row);
        };
        if let Some(whole) = o.whole() {
            qport_kernels::par::split_mut(whole, nb, work, |o0, part| {
                for (i, row) in part.chunks_mut(nb).enumerate() {
                    rq(o0 / nb + i, row);
                }
            });
        } else {
            for ch in 0..g.c_out {
                rq(ch, o.row(ch));
            }
        }
    }

    /// The wrapping bias (when added apart) and the requantization of the
    /// accumulators `acc` of channels `ch` (`[ch.len(), os]`) into `out`.
    fn finish<T: QInt>(
        &self,
        acc: &mut [i32],
        ch: std::ops::Range<usize>,
        os: usize,
        out: &mut [T],
    ) {
        if let Some(b) = &self.bias_acc {
            add_int32_bias(acc, &b[ch.clone()], os);
        }
        elementwise::requantize(&self.rq[ch], acc, os, out);
    }

    /// Channels `ch` of one image `xn` of a 2-D depthwise layer straight
    /// into their 8-bit outputs `out` where the kernel requantizes as it
    /// writes ([`depthwise_pairs_requant`]: every channel has a float form
    /// and no bias is added apart); `false`, nothing written, elsewhere.
    /// The same bytes as [`Self::depthwise`] then [`Self::finish`].
    fn depthwise_requant<T: QInt>(
        &self,
        xn: &[u8],
        xz: i32,
        g: &ConvGeom,
        ch: std::ops::Range<usize>,
        out: &mut [T],
    ) -> bool {
        let (Some(frq), false) = (&self.frq, self.w_centered.is_empty()) else {
            return false;
        };
        let ConvSizes { is, ks, .. } = g.sizes();
        let run = |forms: &[FloatRequant], out: &mut [T]| {
            depthwise_pairs_requant(
                &xn[ch.start * is..ch.end * is],
                xz,
                ch.len(),
                &self.w_centered[ch.start * ks..ch.end * ks],
                &g.spatial,
                &forms[ch.clone()],
                out,
            )
        };
        // (a kernel that declines writes nothing)
        run(frq, out)
            || self.frq_wide.as_ref().is_some_and(|w| {
                let ran = run(w, out);
                #[cfg(test)]
                tests::WIDE_RUNS.fetch_add(usize::from(ran), std::sync::atomic::Ordering::Relaxed);
                ran
            })
    }

    /// Exact accumulators of channels `ch` of one image `xn` of a 2-D
    /// depthwise layer into `acc` (`[ch.len(), os]`); the other layers run
    /// [`Self::blocked`].
    fn depthwise(
        &self,
        xn: &[u8],
        xz: i32,
        g: &ConvGeom,
        ch: std::ops::Range<usize>,
        acc: &mut [i32],
    ) {
        let ConvSizes { is, os, ks, .. } = g.sizes();
        let x = &xn[ch.start * is..ch.end * is];
        if self.w_centered.is_empty()
            || !depthwise_pairs(
                x,
                xz,
                ch.len(),
                &self.w_centered[ch.start * ks..ch.end * ks],
                &g.spatial,
                acc,
            )
        {
            let pg = g.plane();
            for (i, c) in ch.enumerate() {
                depthwise_plane(
                    &xn[c * is..(c + 1) * is],
                    xz,
                    &self.w[c * ks..(c + 1) * ks],
                    self.w_zero[c],
                    &pg,
                    &mut acc[i * os..(i + 1) * os],
                );
            }
        }
    }
}

/// Bytes of one chunk of a depthwise layer's channels in
/// [`PreparedConv::depthwise`] (the 8-bit input and output planes and the
/// i32 sums; the plane of pairs is one channel's): inside the L2 cache.
const DEPTHWISE_CHUNK_BYTES: usize = 512 << 10;

/// Channels per chunk of a 2-D depthwise layer split between `threads`
/// intra-op threads: the fewest chunks whose channels fit
/// [`DEPTHWISE_CHUNK_BYTES`] (at least one channel each), rounded up to a
/// multiple of the threads (at most one chunk per channel), the channels
/// shared evenly between them (the threads take whole chunks, so even
/// chunks keep them evenly loaded). The chunks change no value.
fn depthwise_chunk(g: &ConvGeom, threads: usize) -> usize {
    let ConvSizes { is, os, .. } = g.sizes();
    let per_channel = (is + 4 * os + os).max(1);
    let fit = (DEPTHWISE_CHUNK_BYTES / per_channel).max(1);
    let c = g.c_out.max(1);
    let t = threads.max(1);
    let chunks = (c.div_ceil(fit).div_ceil(t) * t).min(c);
    c.div_ceil(chunks)
}

/// The largest stride of the layers the direct kernel takes (at stride 2
/// it reads the image's four phases: ResNet-50's stride-2 3 × 3 layers,
/// which im2col and the GEMM ran at half the GEMM's rate).
const DIRECT_MAX_STRIDE: usize = 2;

/// The direct kernel's geometry of `g` ([`DirectGeom::new`]: two spatial
/// axes, dilations 1, one stride, padding it can take) for a layer of one
/// group, where the kernel computes only the output positions
/// ([`direct::exact_columns`]) or the rows are wide enough that the
/// `(kw − 1) / s` extra columns it computes per output row are at most a
/// quarter of them (ResNet-50's 7 × 7 maps at stride 1, 2 in 7, measured
/// slower than im2col; its 14 × 14 ones, 2 in 14, faster; at stride 2, 1
/// in 7 and faster); else `None` (im2col and the GEMM). A 1 × 1 kernel
/// (at stride 2) only where the kernel gathers its planes from the image
/// itself ([`direct::reads_planar`]): from the quads, whose image holds
/// all four phases, it would be no faster than im2col.
fn direct_geom(g: &ConvGeom) -> Option<DirectGeom> {
    let s = &g.spatial;
    let step = s.strides.first().copied().unwrap_or(1).max(1);
    let extra = s.kernel.get(1).map_or(0, |k| k.saturating_sub(1) / step);
    let wide = s.rank() == 2 && (direct::exact_columns() || s.output[1] >= 4 * extra);
    if g.group != 1 || !wide {
        return None;
    }
    DirectGeom::new(s, g.c_in).filter(|d| d.kh * d.kw > 1 || direct::reads_planar(d))
}

/// True where a layer with the direct geometry `direct` runs on the
/// direct kernel's row-compact planes ([`block_rows`]).
fn compact(direct: &Option<DirectGeom>) -> bool {
    direct.is_some() && direct::exact_columns()
}

/// The geometry of one image of `g`.
fn one(g: &ConvGeom) -> ConvGeom {
    let mut g = g.clone();
    g.batch = 1;
    g
}

impl Prepared for PreparedConv {
    /// Declines activations that are not 8-bit.
    fn run_reusing(
        &self,
        inputs: &[Option<&Tensor>],
        outputs: &mut [Option<Tensor>],
    ) -> OpResult<bool> {
        let x = input(inputs, 0)?;
        if !matches!(x.dtype(), DType::U8 | DType::I8) {
            return Ok(false);
        }
        let call = self.call(x.shape())?;
        match self.y {
            Grid::U8 => self.run_into(&call, x, reuse_output::<u8>(outputs, 0, &call.y_shape)?)?,
            _ => self.run_into(&call, x, reuse_output::<i8>(outputs, 0, &call.y_shape)?)?,
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv::build_qlinear_conv;
    use crate::ops::nn::spatial::with_row_block;
    use crate::ops::quant::test_util::{bytes, q8, run_const, t};
    use qport_core::arith::presets;
    use qport_core::Tensor;
    use qport_onnx::Attribute;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The 64×64 depthwise case of `prepared_equals_general` spans several
    /// chunks of channels, each a multiple of the cache budget's share.
    #[test]
    fn depthwise_runs_in_chunks_of_channels() {
        let node = qport_onnx::Node::new("n", "QLinearConv", ["x"], ["y"]).with_attrs(vec![
            ("group", Attribute::Int(20)),
            ("pads", Attribute::Ints(vec![1, 1, 1, 1])),
        ]);
        let attrs = crate::ops::nn::spatial::ConvAttrs::parse(&node).unwrap();
        let g = attrs.geometry(&[1, 20, 64, 64], &[20, 1, 3, 3]).unwrap();
        assert!(g.depthwise_plane());
        let chunk = super::depthwise_chunk(&g, 1);
        assert_eq!(chunk, 20, "21 planes of 64x64 fit the budget: one chunk");
        // a small layer is one chunk; a wide one even chunks that fit
        let g = attrs.geometry(&[1, 20, 8, 8], &[20, 1, 3, 3]).unwrap();
        assert_eq!(super::depthwise_chunk(&g, 1), 20);
        let wide = |c: i64, hw: usize| {
            let node = qport_onnx::Node::new("n", "QLinearConv", ["x"], ["y"]).with_attrs(vec![
                ("group", Attribute::Int(c)),
                ("pads", Attribute::Ints(vec![1, 1, 1, 1])),
            ]);
            let attrs = crate::ops::nn::spatial::ConvAttrs::parse(&node).unwrap();
            let c = c as usize;
            let g = attrs.geometry(&[1, c, hw, hw], &[c, 1, 3, 3]).unwrap();
            super::depthwise_chunk(&g, 1)
        };
        assert_eq!(wide(192, 28), 96, "111 fit: two chunks of 96");
        assert_eq!(wide(100, 64), 20, "21 fit: five chunks of 20");
        assert_eq!(wide(22, 64), 11, "21 fit: two chunks of 11");
        assert_eq!(wide(3, 1024), 1, "not even one fits: one channel each");
        // with threads: a multiple of them (each takes whole chunks), at
        // most one channel each
        let g = attrs.geometry(&[1, 20, 64, 64], &[20, 1, 3, 3]).unwrap();
        assert_eq!(super::depthwise_chunk(&g, 2), 10, "one chunk per thread");
        assert_eq!(
            super::depthwise_chunk(&g, 8),
            3,
            "8 chunks wanted: 3 channels each (the last 2)"
        );
        assert_eq!(super::depthwise_chunk(&g, 32), 1, "20 channels: one each");
    }

    /// Calls of `PreparedConv::run_into` (so the test below can tell the
    /// prepared path really ran).
    pub(super) static PREPARED_RUNS: AtomicUsize = AtomicUsize::new(0);

    /// Blocks run on the direct kernel (so the tests below can tell it
    /// ran where the host has it).
    pub(super) static DIRECT_RUNS: AtomicUsize = AtomicUsize::new(0);

    /// A `QLinearConv` of `ins` under `p`, by the general path (every
    /// input given at run time) and by the prepared one (`consts` as
    /// initializers).
    fn general_and_prepared(
        attrs: &[(&str, Attribute)],
        ins: &[Option<&Tensor>],
        consts: &[bool],
        p: &qport_core::arith::ArithProfile,
    ) -> (Vec<Tensor>, Vec<Tensor>) {
        let run = |consts: &[bool]| {
            run_const(
                build_qlinear_conv,
                "QLinearConv",
                attrs.to_vec(),
                ins,
                consts,
                Some(p),
            )
            .unwrap()
        };
        (run(&[]), run(consts))
    }

    /// Depthwise calls that ran on the forms before narrowing (the
    /// narrowed ones mixing the two variants where the kernel takes one).
    pub(super) static WIDE_RUNS: AtomicUsize = AtomicUsize::new(0);

    /// `exact` on a depthwise layer whose channels narrow to the f32 form
    /// only in part ([`qport_core::arith::Requantizer::narrowed`]): on a
    /// narrow map (the channels-last kernel of AVX-512 hosts, which takes
    /// one form variant across its lanes; channel 0's weight zero point
    /// puts its centred weights outside i8, so that the row-quad kernel
    /// of VBMI hosts declines the layer) the layer runs on the f64 forms,
    /// elsewhere on the mixed ones; either way the bytes of the general
    /// path, which requantizes in f64 as the profile states.
    #[test]
    fn exact_depthwise_with_partly_narrowed_channels_equals_general() {
        let exact = qport_core::arith::ArithProfile::preset("exact").unwrap();
        let (xs, ws) = ([1usize, 48, 8, 8], [48usize, 1, 3, 3]);
        let x = q8(&xs, bytes(3, xs.iter().product()), false);
        let w = q8(&ws, bytes(4, ws.iter().product()), true);
        let wzs: Vec<i8> = (0..48).map(|c| if c == 0 { 127 } else { 0 }).collect();
        let wz = t(&[48], wzs.clone());
        let (xsc, xz) = (Tensor::scalar(0.02f32), Tensor::scalar(131u8));
        let (ysc, yz) = (Tensor::scalar(0.05f32), Tensor::scalar(120u8));
        let b = t(&[48], (0..48).map(|c| c * 37 - 900).collect::<Vec<i32>>());
        let attrs = vec![
            ("group", Attribute::Int(48)),
            ("pads", Attribute::Ints(vec![1, 1, 1, 1])),
        ];
        let consts = [false, true, true, true, true, true, true, true, true];
        let before = WIDE_RUNS.load(Ordering::Relaxed);
        let mut mixed = 0;
        for seed in 0..8u32 {
            // per-channel scales whose multipliers narrow or not
            let sw: Vec<f32> = (0..48)
                .map(|c| 0.004 + ((c * 7919 + seed * 104_729) % 1000) as f32 * 3.1e-6)
                .collect();
            let sw = t(&[48], sw);
            let ins = [
                Some(&x),
                Some(&xsc),
                Some(&xz),
                Some(&w),
                Some(&sw),
                Some(&wz),
                Some(&ysc),
                Some(&yz),
                Some(&b),
            ];
            // how many channels narrow: the layer mixes both forms
            let narrowed = (0..48)
                .filter(|&c| {
                    let s = sw.to_f32_vec().unwrap()[c];
                    let wc = exact.gemm_multiplier(&[0.02, s], &[0.05]);
                    let bound: i64 = match w.data() {
                        qport_core::TensorData::I8(v) => v[c * 9..c * 9 + 9]
                            .iter()
                            .map(|&q| 255 * (i64::from(q) - i64::from(wzs[c])).abs())
                            .sum(),
                        _ => unreachable!(),
                    };
                    let r = qport_core::arith::Requantizer::new(
                        f64::from(c as i32 * 37 - 900),
                        wc,
                        120,
                        0,
                        255,
                        &exact,
                    );
                    matches!(
                        r.narrowed(bound).float_form(),
                        Some(qport_core::arith::FloatRequant::F32 { .. })
                    )
                })
                .count();
            mixed += usize::from(narrowed > 0 && narrowed < 48);
            let (general, prepared) = general_and_prepared(&attrs, &ins, &consts, &exact);
            assert_eq!(
                prepared[0], general[0],
                "seed {seed}: {narrowed} of 48 narrowed"
            );
        }
        assert!(mixed > 0, "no scale set mixed the two forms");
        // (AVX-512 rows: the channels-last kernel of narrow maps)
        let avx512 = matches!(
            qport_kernels::isa(),
            qport_kernels::Isa::Avx512 | qport_kernels::Isa::Avx512Vnni | qport_kernels::Isa::Amx
        );
        if avx512 {
            assert!(
                WIDE_RUNS.load(Ordering::Relaxed) > before,
                "the f64 forms never ran"
            );
        }
    }

    /// The prepared path (constants as initializers) equals the general
    /// one (the same inputs given at run time) bit for bit, over layer
    /// shapes (pointwise, 3x3 strided and padded, grouped, depthwise, 5x5
    /// depthwise), u8 and i8 activations and outputs, symmetric and
    /// asymmetric weights, with and without bias (and with a bias so close
    /// to the i32 limits that accumulator plus bias wraps), under every
    /// preset (onnxruntime's arithmetic included), in one block of output
    /// rows and in blocks of one and two rows.
    #[test]
    fn prepared_equals_general() {
        // (x shape, w shape, group, strides, pads)
        type Case = ([usize; 4], [usize; 4], i64, [i64; 2], [i64; 4]);
        let cases: [Case; 10] = [
            ([2, 8, 5, 6], [12, 8, 1, 1], 1, [1, 1], [0, 0, 0, 0]),
            // (stride 2: the direct kernel where the host has it)
            ([1, 6, 9, 7], [5, 6, 3, 3], 1, [2, 2], [1, 1, 1, 1]),
            ([1, 8, 6, 6], [6, 4, 3, 3], 2, [1, 1], [1, 0, 0, 1]),
            ([2, 7, 10, 9], [7, 1, 3, 3], 7, [1, 1], [1, 1, 1, 1]),
            ([1, 5, 11, 12], [5, 1, 5, 5], 5, [2, 2], [2, 2, 2, 2]),
            ([1, 3, 17, 20], [16, 3, 3, 3], 1, [2, 2], [0, 1, 1, 0]),
            // a depthwise layer in three chunks of channels
            // (`depthwise_runs_in_chunks_of_channels`)
            ([1, 20, 64, 64], [20, 1, 3, 3], 20, [1, 1], [1, 1, 1, 1]),
            // stride 1 and one group: the direct kernel where the host has
            // it (two images, uneven padding; channels not a multiple of
            // four, a 2 x 3 kernel)
            ([2, 6, 9, 11], [10, 6, 3, 3], 1, [1, 1], [1, 0, 2, 1]),
            ([1, 5, 8, 12], [7, 5, 2, 3], 1, [1, 1], [0, 1, 1, 0]),
            // a pointwise layer at stride 2 (the direct kernel where it
            // reads the image itself; the last column and row unread)
            ([1, 9, 11, 13], [6, 9, 1, 1], 1, [2, 2], [0, 0, 0, 0]),
        ];
        let profiles = presets();
        let direct_before = DIRECT_RUNS.load(Ordering::Relaxed);
        for (n, (xs, ws, group, strides, pads)) in cases.into_iter().enumerate() {
            let case_before = DIRECT_RUNS.load(Ordering::Relaxed);
            for variant in 0..4 {
                // the last case's bias is near the i32 limits, so its sums
                // may wrap and the prepared path adds it apart (wrapping)
                let huge_bias = n == 5;
                let (signed_x, asym_w) = (variant & 1 == 1, variant & 2 == 2);
                let bias_on = n % 2 == 0 || huge_bias;
                let xn: usize = xs.iter().product();
                let wn: usize = ws.iter().product();
                let xb = bytes(n as u64 * 7 + variant as u64, xn);
                let x = q8(&xs, xb, signed_x);
                let w = q8(&ws, bytes(n as u64 + 50, wn), true);
                let m = ws[0];
                let wz: Vec<i8> = (0..m)
                    .map(|c| if asym_w { (c as i8) * 5 - 9 } else { 0 })
                    .collect();
                let ws_scale: Vec<f32> = (0..m).map(|c| 0.003 + c as f32 * 0.0007).collect();
                let (xsc, ysc) = (Tensor::scalar(0.02f32), Tensor::scalar(0.05f32));
                let xz = if signed_x {
                    Tensor::scalar(-3i8)
                } else {
                    Tensor::scalar(131u8)
                };
                let yz = if variant == 1 {
                    Tensor::scalar(5i8)
                } else {
                    Tensor::scalar(120u8)
                };
                let (tws, twz) = (t(&[m], ws_scale), t(&[m], wz));
                let b = t(
                    &[m],
                    (0..m as i32)
                        .map(|c| match (huge_bias, c % 2) {
                            (false, _) => c * 97 - 300,
                            (true, 0) => i32::MAX - 40 * c,
                            (true, _) => i32::MIN + 40 * c,
                        })
                        .collect::<Vec<i32>>(),
                );
                let ins = [
                    Some(&x),
                    Some(&xsc),
                    Some(&xz),
                    Some(&w),
                    Some(&tws),
                    Some(&twz),
                    Some(&ysc),
                    Some(&yz),
                    bias_on.then_some(&b),
                ];
                let attrs = vec![
                    ("group", Attribute::Int(group)),
                    ("strides", Attribute::Ints(strides.to_vec())),
                    ("pads", Attribute::Ints(pads.to_vec())),
                ];
                let consts = [false, true, true, true, true, true, true, true, true];
                for p in &profiles {
                    let before = PREPARED_RUNS.load(Ordering::Relaxed);
                    let (general, prepared) = general_and_prepared(&attrs, &ins, &consts, p);
                    let name = p.name.as_str();
                    // at least the prepared call ran (tests run in parallel,
                    // so other tests may add to the count too)
                    assert!(PREPARED_RUNS.load(Ordering::Relaxed) > before, "{name}");
                    assert_eq!(
                        prepared[0], general[0],
                        "case {n} variant {variant} profile {name}"
                    );
                    // blocks of one and of two output rows: the same values
                    for rows in [1, 2] {
                        let blocked = with_row_block(rows, || {
                            run_const(
                                build_qlinear_conv,
                                "QLinearConv",
                                attrs.clone(),
                                &ins,
                                &consts,
                                Some(p),
                            )
                        })
                        .unwrap();
                        assert_eq!(
                            blocked[0], general[0],
                            "case {n} variant {variant} profile {name}, blocks of {rows} rows"
                        );
                    }
                }
            }
            // the 3 x 3 stride-2 layer: the direct kernel, on its phases
            if n == 1 && qport_kernels::int8::direct::available() {
                assert!(
                    DIRECT_RUNS.load(Ordering::Relaxed) > case_before,
                    "the stride-2 layer did not run on the direct kernel"
                );
            }
            // the pointwise stride-2 layer: the direct kernel where it
            // reads the image itself
            if n == 9 {
                let geo = qport_kernels::im2col::ConvGeometry::new_2d(
                    [11, 13],
                    [1, 1],
                    [6, 7],
                    [2, 2],
                    [1, 1],
                    [0, 0],
                );
                let g = super::DirectGeom::new(&geo, 9).unwrap();
                if qport_kernels::int8::direct::reads_planar(&g) {
                    assert!(
                        DIRECT_RUNS.load(Ordering::Relaxed) > case_before,
                        "the pointwise stride-2 layer did not run on the direct kernel"
                    );
                }
            }
        }
        if qport_kernels::int8::direct::available() {
            assert!(
                DIRECT_RUNS.load(Ordering::Relaxed) > direct_before,
                "the direct kernel never ran"
            );
        }
    }
}
