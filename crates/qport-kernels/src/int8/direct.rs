//! A 2-D convolution of dilation 1 and stride 1 or more (the 3 × 3
//! layers of a residual network, those of stride 2 included) as an
//! implicit GEMM on the VNNI kernel: no im2col and no packing of `B`.
//!
//! The image is copied once into channel quads ([`quad_image`]): per quad
//! of four channels a plane of the padded image (`hp × wp`, the padding
//! holding the activation zero point), each pixel's four channel bytes
//! adjacent — the layout the VNNI tile reads `B` in. With the reduction
//! ordered by kernel tap, then channel quad ([`pack_weights`] reorders
//! the weights once, at plan time), step `(tap, quad)` of `B` is that
//! quad's plane read from the tap's offset, and its columns are the output
//! positions laid out on the padded width `wp` (`ow + kw − 1` columns a
//! row, the last `kw − 1` of each row computed and dropped). So the tile
//! reads the image where it lies.
//!
//! With stride `s > 1` each quad holds `s²` planes, the padded image's
//! phases: phase `(a, b)` holds padded pixel `(s·y + a, s·x + b)` at
//! `(y, x)`. Tap `(i, j)` of output `(oy, ox)` reads padded pixel
//! `(s·oy + i, s·ox + j)`, which is pixel `(oy + i / s, ox + j / s)` of
//! phase `(i mod s, j mod s)`: a stride-1 read of that phase, from an
//! offset. So the same kernel runs on planes of `ow + (kw − 1) / s`
//! columns, the last `(kw − 1) / s` of each row dropped.
//!
//! That is how the AMX row reads the planes (its tiles in place). On the
//! VNNI row ([`exact_columns`]) each block of output rows is first copied
//! into row-compact planes, per quad, row phase `a` and kernel column
//! `j` a plane of `ow` pixels a row holding padded pixel `(s·y + a, s·x +
//! j)`: tap `(i, j)` then reads the plane of row phase `i mod s`, `i / s`
//! rows down, and every step's columns are the block's output positions
//! side by side. No column is computed and dropped (at 14 × 14, 196
//! positions instead of 224), for a copy of `s · kw` planes per quad.
//! Where the CPU also has AVX-512 VBMI ([`reads_planar`]) those planes
//! are gathered straight from the image itself ([`DirectImage::Planar`],
//! `[c][h][w]` bytes): per row and 16 output pixels one byte permute per
//! kernel column and pair of channels, and no quad image is made at all
//! (on ResNet-50's stride-2 layers that image took about 100 µs of a
//! 620 µs layer). The engine sends 1 × 1 kernels at stride 2 this way
//! too: their one plane per quad is the strided pixels in quads, one pass
//! where im2col and the packing of `B` are two.
//!
//! The sums are exact integers, whose value does not depend on the order
//! of the reduction: [`conv_sums`] and [`conv_requant`] give the bits of
//! im2col followed by [`crate::qgemm::gemm_u8s8`] (property tests hold them
//! equal). The missing channels of the last quad have zero weights and
//! zero bytes, and the zero-point correction counts only the true `c · kh
//! · kw` terms.
//!
//! Runs where the dispatch row is AVX-512 VNNI; elsewhere the functions
//! return `false` and the caller takes im2col and the GEMM.

use crate::igemm::QInt;
use crate::im2col::ConvGeometry;
use crate::int8::PackedI8;
use crate::par::ColumnBlock;
use qport_core::arith::FloatRequant;

/// One image of a dilation-1 2-D convolution with the same stride on
/// both axes, as the direct kernel sees it (derived from the
/// [`ConvGeometry`] every convolution path shares, by
/// [`DirectGeom::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectGeom {
    /// Input channels.
    pub c: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// Padding rows above the image.
    pub top: usize,
    /// Padding columns left of the image.
    pub left: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
    /// The stride (both axes).
    pub stride: usize,
}

impl DirectGeom {
    /// The direct kernel's view of `c` channels in the geometry `geo`;
    /// `None` unless `geo` is two-dimensional with dilations 1, one
    /// stride for both axes, padding that is not negative and an output
    /// that is not empty; at stride 1 the output must also cover the
    /// image (no negative padding below or right of it).
    ///
    /// ```
    /// use qport_kernels::im2col::ConvGeometry;
    /// use qport_kernels::int8::direct::DirectGeom;
    /// // a 3x3 kernel, padding 1: 5x6 outputs of a 5x6 image
    /// let geo = ConvGeometry::new_2d([5, 6], [3, 3], [5, 6], [1, 1], [1, 1], [1, 1]);
    /// let g = DirectGeom::new(&geo, 7).unwrap();
    /// assert_eq!((g.quads(), g.padded_height(), g.padded_width()), (2, 7, 8));
    /// // stride 2: four phases of 4 x 4 pixels per quad
    /// let geo = ConvGeometry::new_2d([5, 6], [3, 3], [3, 3], [2, 2], [1, 1], [1, 1]);
    /// let g = DirectGeom::new(&geo, 7).unwrap();
    /// assert_eq!((g.phases(), g.padded_height(), g.padded_width()), (4, 4, 4));
    /// // different strides on the two axes are not the direct kernel's
    /// let geo = ConvGeometry::new_2d([5, 6], [3, 3], [3, 6], [2, 1], [1, 1], [1, 1]);
    /// assert!(DirectGeom::new(&geo, 7).is_none());
    /// ```
    pub fn new(geo: &ConvGeometry, c: usize) -> Option<DirectGeom> {
        let unit = |v: &[usize]| v.iter().all(|&x| x == 1);
        if geo.rank() != 2 || !unit(&geo.dilations) {
            return None;
        }
        let stride = geo.strides[0];
        if stride == 0 || geo.strides[1] != stride {
            return None;
        }
        let top = usize::try_from(geo.pads_begin[0]).ok()?;
        let left = usize::try_from(geo.pads_begin[1]).ok()?;
        let ([h, w], [kh, kw], [oh, ow]) = (
            [geo.image[0], geo.image[1]],
            [geo.kernel[0], geo.kernel[1]],
            [geo.output[0], geo.output[1]],
        );
        let fits = oh > 0 && ow > 0 && kh > 0 && kw > 0 && c > 0;
        let covers = stride > 1 || (oh + kh > top + h && ow + kw > left + w);
        (fits && covers).then_some(DirectGeom {
            c,
            h,
            w,
            kh,
            kw,
            top,
            left,
            oh,
            ow,
            stride,
        })
    }

    /// Planes per channel quad: the `stride²` phases of the padded image.
    pub fn phases(&self) -> usize {
        self.stride * self.stride
    }

    /// The byte offset in [`quad_image`]'s output of step `(tap (ki, kj),
    /// quad q)` for output row `oy` (column 0): phase `(ki mod s, kj mod
    /// s)` of quad `q`, at pixel `(oy + ki / s, kj / s)`.
    pub fn step_offset(&self, (ki, kj): (usize, usize), q: usize, oy: usize) -> usize {
        let s = self.stride;
        let phase = (ki % s) * s + kj % s;
        let pixel = (oy + ki / s) * self.padded_width() + kj / s;
        ((q * self.phases() + phase) * self.plane() + pixel) * 4
    }

    /// Channel quads (`⌈c / 4⌉`).
    pub fn quads(&self) -> usize {
        self.c.div_ceil(4)
    }

    /// Rows of a plane (`oh + (kh − 1) / s`: the padded image at stride
    /// 1, a phase of it at stride `s`).
    pub fn padded_height(&self) -> usize {
        self.oh + (self.kh - 1) / self.stride
    }

    /// Columns of a plane (`ow + (kw − 1) / s`), the row stride of the
    /// positions the kernel computes.
    pub fn padded_width(&self) -> usize {
        self.ow + (self.kw - 1) / self.stride
    }

    /// Pixels of one plane: the padded image (or phase) and room for the
    /// last row's overreach (a tile reads up to 64 columns past it).
    pub fn plane(&self) -> usize {
        self.padded_height() * self.padded_width() + self.kw + 64
    }

    /// Bytes of [`quad_image`]'s output.
    pub fn image_len(&self) -> usize {
        self.quads() * self.phases() * self.plane() * 4
    }

    /// The reduction's true length, `c · kh · kw`.
    pub fn k(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// The reduction's length in the direct order (channels padded to
    /// quads): the depth of [`pack_weights`]' matrix.
    pub fn k_packed(&self) -> usize {
        self.kh * self.kw * self.quads() * 4
    }
}

/// True where [`conv_requant`] and [`conv_sums`] run (the dispatch row is
/// AVX-512 VNNI).
pub fn available() -> bool {
    crate::isa().vnni()
}

/// True where [`conv_requant`] and [`conv_sums`] compute only the output
/// positions themselves, no padding column (the VNNI row: each block's
/// rows copied first into row-compact planes, one per channel quad, row
/// phase and kernel column; the AMX row reads the planes of
/// [`quad_image`] in place, computing the `(kw − 1) / s` columns past
/// each output row and dropping them).
pub fn exact_columns() -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::vnni::exact_columns();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The weights of `m` output channels (`[m][c][kh][kw]`, row-major) in the
/// direct order of the reduction — kernel tap, then channel quad, then
/// channel in the quad, zero for the missing channels — packed for the
/// VNNI kernel (depth [`DirectGeom::k_packed`] of any geometry with these
/// `c`, `kh` and `kw`).
///
/// # Panics
/// When `w` is shorter than `m · c · kh · kw`.
pub fn pack_weights(w: &[i8], m: usize, c: usize, (kh, kw): (usize, usize)) -> PackedI8 {
    let cq = c.div_ceil(4);
    assert!(
        w.len() >= m * c * kh * kw,
        "weights of {m} x {c} x {kh} x {kw}"
    );
    let kp = kh * kw * cq * 4;
    let mut v = vec![0i8; m * kp];
    for i in 0..m {
        for ci in 0..c {
            for ki in 0..kh {
                for kj in 0..kw {
                    let tap = ki * kw + kj;
                    v[i * kp + (tap * cq + ci / 4) * 4 + ci % 4] =
                        w[((i * c + ci) * kh + ki) * kw + kj];
                }
            }
        }
    }
    PackedI8::new(&v, m, kp)
}

/// One image `x` (`[c][h][w]` u8) as channel quads into `out`
/// ([`DirectGeom::image_len`] bytes: per quad a plane of the padded image,
/// or its `s²` phases at stride `s`, each pixel's four channel bytes
/// adjacent): `pad` (the activation zero point) around the image for the
/// true channels, zero for the missing channels of the last quad and
/// after each plane. The quads are divided between the intra-op threads.
///
/// # Panics
/// When `x` is shorter than `c · h · w` or `out` than the image.
pub fn quad_image(x: &[u8], g: &DirectGeom, pad: u8, out: &mut [u8]) {
    let (c, h, w) = (g.c, g.h, g.w);
    assert!(x.len() >= c * h * w, "an image of {c} x {h} x {w}");
    let plane = g.plane() * 4;
    let out = &mut out[..g.image_len()];
    let work = out.len() * crate::par::STREAM_COST;
    crate::par::split_mut(out, plane, work, |start, block| {
        for (i, dst) in block.chunks_exact_mut(plane).enumerate() {
            let p = start / plane + i;
            let (q, phase) = (p / g.phases(), p % g.phases());
            quad_plane(x, g, q, (phase / g.stride, phase % g.stride), pad, dst);
        }
    });
}

/// Quad `q`'s plane of [`quad_image`] for phase `(a, b)` into `dst`.
fn quad_plane(x: &[u8], g: &DirectGeom, q: usize, (a, b): (usize, usize), pad: u8, dst: &mut [u8]) {
    let (c, h, w, s) = (g.c, g.h, g.w, g.stride);
    let (hp, wp) = (g.padded_height(), g.padded_width());
    // the channels of this quad that exist; the others are zero bytes
    let real = (c - 4 * q).min(4);
    let mut border = [0u8; 4];
    border[..real].fill(pad);
    let border = u32::from_le_bytes(border);
    let (rows, rest) = dst.split_at_mut(hp * wp * 4);
    rest.fill(0);
    let chan = |r: usize| (r < real).then(|| &x[(4 * q + r) * h * w..][..h * w]);
    let planes = [chan(0), chan(1), chan(2), chan(3)];
    // the plane's columns that hold image columns: x with s·x + b − left
    // in 0..w
    let lead = g.left.saturating_sub(b).div_ceil(s).min(wp);
    let end = (w + g.left).saturating_sub(b).div_ceil(s).clamp(lead, wp);
    let inside = end - lead;
    // image column of the first inside pixel
    let ix0 = (s * lead + b).wrapping_sub(g.left);
    if s > 1 {
        return phase_plane(g, (a, lead, inside, ix0), planes, pad, rows);
    }
    for (yp, row) in rows.chunks_exact_mut(wp * 4).enumerate() {
        let iy = (s * yp + a).wrapping_sub(g.top);
        if iy >= h {
            for px in row.chunks_exact_mut(4) {
                px.copy_from_slice(&border.to_le_bytes());
            }
            continue;
        }
        let (head, body) = row.split_at_mut(lead * 4);
        for px in head.chunks_exact_mut(4) {
            px.copy_from_slice(&border.to_le_bytes());
        }
        let (body, tail) = body.split_at_mut(inside * 4);
        for px in tail.chunks_exact_mut(4) {
            px.copy_from_slice(&border.to_le_bytes());
        }
        if inside == 0 {
            continue;
        }
        let src: [&[u8]; 4] = std::array::from_fn(|r| match planes[r] {
            Some(p) => &p[iy * w + ix0..iy * w + ix0 + inside],
            None => &[],
        });
        interleave(src, body);
    }
}

thread_local! {
    /// [`phase_plane`]'s scratch: the quad's channels of one phase.
    static PHASES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A phase plane of [`quad_plane`] at stride `s > 1` into `rows` (`hp ×
/// wp` pixels): each true channel's phase is gathered into a scratch
/// plane of its own (`pad` around the image; the plane's columns `lead..
/// lead + inside` of the phase's image rows `s·y + a − top` hold image
/// columns `ix0 + s·j`), then the four are interleaved in one pass, so
/// that narrow planes (ResNet-50's stride-2 layers read 8 to 29 columns)
/// run whole vectors rather than one short row at a time.
fn phase_plane(
    g: &DirectGeom,
    (a, lead, inside, ix0): (usize, usize, usize, usize),
    planes: [Option<&[u8]>; 4],
    pad: u8,
    rows: &mut [u8],
) {
    let (h, w, s) = (g.h, g.w, g.stride);
    let (hp, wp) = (g.padded_height(), g.padded_width());
    let np = hp * wp;
    // (a vector of slack after each plane: the gathers write whole vectors)
    let stride = np + 32;
    PHASES.with(|t| {
        let t = &mut *t.borrow_mut();
        if t.len() < 4 * stride {
            t.resize(4 * stride, 0);
        }
        for (r, p) in planes.iter().enumerate() {
            let Some(p) = p else { continue };
            let t = &mut t[r * stride..][..stride];
            t[..np].fill(pad);
            if inside == 0 {
                continue;
            }
            let n16 = inside.next_multiple_of(16);
            for yp in 0..hp {
                let iy = (s * yp + a).wrapping_sub(g.top);
                if iy >= h {
                    continue;
                }
                let at = yp * wp + lead;
                let dst = &mut t[at..(at + n16).min(stride)];
                every(&p[iy * w + ix0..], s, dst);
                // the vector's columns past the image: back to the padding
                // (the rows below write their own columns afterwards)
                let spill = (at + inside)..(at + n16).min(np);
                if !spill.is_empty() {
                    t[spill].fill(pad);
                }
            }
        }
        let src: [&[u8]; 4] = std::array::from_fn(|r| match planes[r] {
            Some(_) => &t[r * stride..][..np],
            None => &[],
        });
        interleave(src, rows);
    });
}

/// `dst[j] = src[s·j]` for the `j` of `dst` whose source byte exists
/// (stride 2 sixteen bytes at a time where SSE2 is there); the others are
/// left as they were.
fn every(src: &[u8], s: usize, dst: &mut [u8]) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut j = 0;
    #[cfg(target_arch = "x86_64")]
    if s == 2 {
        use std::arch::x86_64::*;
        // (32 bytes read per 16 written: whole loads stay inside `src`)
        while j + 16 <= dst.len() && 2 * j + 32 <= src.len() {
            // SAFETY: SSE2 is part of x86-64; bytes 2j..2j + 32 of `src`
            // and j..j + 16 of `dst` exist (the loop's condition).
            unsafe {
                let lo = _mm_loadu_si128(src.as_ptr().add(2 * j).cast());
                let hi = _mm_loadu_si128(src.as_ptr().add(2 * j + 16).cast());
                let m = _mm_set1_epi16(0xff);
                let even = _mm_packus_epi16(_mm_and_si128(lo, m), _mm_and_si128(hi, m));
                _mm_storeu_si128(dst.as_mut_ptr().add(j).cast(), even);
            }
            j += 16;
        }
    }
    for (d, v) in dst[j..].iter_mut().zip(src[s * j..].iter().step_by(s)) {
        *d = *v;
    }
}

/// Four rows of bytes (an empty one for a missing channel: zeros; the
/// others at least `n` bytes) as `[n][4]` into `dst` (`4n` bytes).
fn interleave(src: [&[u8]; 4], dst: &mut [u8]) {
    let n = dst.len() / 4;
    assert!(src.iter().all(|r| r.is_empty() || r.len() >= n));
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        /// 16 pixels from `rows` (null: zeros) at `j` into the 64 bytes
        /// at `out`.
        ///
        /// # Safety
        /// SSE2; each non-null row readable for 16 bytes from `j`, `out`
        /// writable for 64.
        #[inline(always)]
        unsafe fn sixteen(rows: [*const u8; 4], j: usize, out: *mut u8) {
            // SAFETY: the function's contract.
            unsafe {
                let ld = |r: *const u8| {
                    if r.is_null() {
                        _mm_setzero_si128()
                    } else {
                        _mm_loadu_si128(r.add(j).cast())
                    }
                };
                let (a, b, c, d) = (ld(rows[0]), ld(rows[1]), ld(rows[2]), ld(rows[3]));
                let (ab_lo, ab_hi) = (_mm_unpacklo_epi8(a, b), _mm_unpackhi_epi8(a, b));
                let (cd_lo, cd_hi) = (_mm_unpacklo_epi8(c, d), _mm_unpackhi_epi8(c, d));
                let o = out.cast::<__m128i>();
                _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
                _mm_storeu_si128(o.add(1), _mm_unpackhi_epi16(ab_lo, cd_lo));
                _mm_storeu_si128(o.add(2), _mm_unpacklo_epi16(ab_hi, cd_hi));
                _mm_storeu_si128(o.add(3), _mm_unpackhi_epi16(ab_hi, cd_hi));
            }
        }
        let rows = src.map(|r| {
            if r.is_empty() {
                std::ptr::null()
            } else {
                r.as_ptr()
            }
        });
        let mut j = 0;
        while j + 16 <= n {
            // SAFETY: SSE2 is part of x86-64; every row holds j + 16 <= n
            // bytes and `dst` 4n.
            unsafe { sixteen(rows, j, dst.as_mut_ptr().add(4 * j)) };
            j += 16;
        }
        if j < n {
            // the last pixels through zero-padded copies
            let mut t = [[0u8; 16]; 4];
            for (t, r) in t.iter_mut().zip(src) {
                if !r.is_empty() {
                    t[..n - j].copy_from_slice(&r[j..n]);
                }
            }
            let rows = [0, 1, 2, 3].map(|r| {
                if src[r].is_empty() {
                    std::ptr::null()
                } else {
                    t[r].as_ptr()
                }
            });
            let mut o = [0u8; 64];
            // SAFETY: SSE2; the copies hold 16 bytes, `o` 64.
            unsafe { sixteen(rows, 0, o.as_mut_ptr()) };
            dst[4 * j..4 * n].copy_from_slice(&o[..4 * (n - j)]);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (jj, px) in dst.chunks_exact_mut(4).enumerate() {
        for (r, b) in px.iter_mut().enumerate() {
            *b = src[r].get(jj).copied().unwrap_or(0);
        }
    }
}

/// True where the direct kernel reads the image itself
/// ([`DirectImage::Planar`]) for the geometry `g`: each block's
/// row-compact planes are gathered straight from the `[c][h][w]` bytes,
/// with no [`quad_image`] first. That is the VNNI row ([`exact_columns`])
/// with AVX-512 VBMI (a byte permute across two registers gathers a row's
/// taps) and a stride and kernel width whose 16 output pixels' taps lie
/// in 64 image columns (`15·s + kw ≤ 64`: strides 1 to 3 with the kernels
/// networks use). Elsewhere the kernel takes [`DirectImage::Quads`].
pub fn reads_planar(g: &DirectGeom) -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::vnni::reads_planar(g);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// The image a direct convolution reads.
#[derive(Clone, Copy, Debug)]
pub enum DirectImage<'a> {
    /// Its channel quads ([`quad_image`]).
    Quads(&'a [u8]),
    /// The image itself, `[c][h][w]` bytes (where [`reads_planar`] holds).
    Planar(&'a [u8]),
}

/// The operands of one image's direct convolution: the weights `a`
/// ([`pack_weights`] for `g`'s channels and kernel) with one zero point
/// per output channel `za`, the geometry `g`, and the image `img` (its
/// channel quads, or the image itself where [`reads_planar`] says) with
/// the activation zero point `zb`.
#[derive(Clone, Copy)]
pub struct DirectConv<'a> {
    /// The direct weights.
    pub a: &'a PackedI8,
    /// Their zero points, one per output channel.
    pub za: &'a [i32],
    /// The geometry.
    pub g: &'a DirectGeom,
    /// The image.
    pub img: DirectImage<'a>,
    /// The activation zero point (the padding's value).
    pub zb: i32,
}

/// Output rows `oy0..oy1` of `conv`, requantized by `rq` (one per output
/// channel) into rows `row0..row0 + a.m` of the one-byte block `out`,
/// whose columns are output positions `oy0·ow..oy1·ow`. The same bytes as
/// im2col, [`crate::qgemm::gemm_u8s8`] and
/// [`crate::int8::elementwise::requantize`]. Returns `false` (nothing
/// written) where the dispatch row has no direct kernel (all but AVX-512
/// VNNI, [`available`]), `T` is not one byte, or the image is
/// [`DirectImage::Planar`] where [`reads_planar`] does not hold.
///
/// # Panics
/// When the weights are not `g`'s, a slice is shorter than its shape
/// says, or the block's columns are not those rows' positions.
pub fn conv_requant<T: QInt>(
    conv: &DirectConv<'_>,
    rq: &[FloatRequant],
    rows: (usize, usize),
    out: &mut ColumnBlock<'_, T>,
    row0: usize,
) -> bool {
    match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        crate::Isa::Avx512Vnni | crate::Isa::Amx => {
            crate::vnni::direct_requant(conv, rq, rows, out, row0)
        }
        _ => false,
    }
}

/// [`conv_requant`]'s exact i32 sums instead, into `c` (`a.m` rows of
/// stride `ldc`; columns `0..(oy1 − oy0)·ow` are positions `oy0·ow..`).
/// Returns `false` (nothing written) where the dispatch row has no direct
/// kernel or cannot read a [`DirectImage::Planar`] image.
///
/// # Panics
/// As [`conv_requant`].
pub fn conv_sums(conv: &DirectConv<'_>, rows: (usize, usize), c: &mut [i32], ldc: usize) -> bool {
    match crate::isa() {
        #[cfg(target_arch = "x86_64")]
        crate::Isa::Avx512Vnni | crate::Isa::Amx => crate::vnni::direct_sums(conv, rows, c, ldc),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::im2col::im2col;
    use crate::int8::packed::backend_tests::exact;
    use proptest::prelude::*;
    use qport_core::arith::{ArithProfile, Requantizer};

    /// The stride-1 geometry of an `h × w` image, a `kh × kw` kernel and
    /// `top`, `left` padding, with `oh × ow` outputs.
    fn geometry(
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        (top, left): (isize, isize),
        (oh, ow): (usize, usize),
    ) -> ConvGeometry {
        strided((h, w), (kh, kw), (top, left), (oh, ow), 1)
    }

    /// [`geometry`] at stride `s` on both axes.
    fn strided(
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        (top, left): (isize, isize),
        (oh, ow): (usize, usize),
        s: usize,
    ) -> ConvGeometry {
        ConvGeometry::new_2d([h, w], [kh, kw], [oh, ow], [s, s], [1, 1], [top, left])
    }

    /// The reference: im2col of rows `oy0..oy1` and the exact sums.
    fn reference(
        x: &[u8],
        w: &[i8],
        za: &[i32],
        zb: i32,
        m: usize,
        (geo, c): (&ConvGeometry, usize),
        (oy0, oy1): (usize, usize),
    ) -> Vec<i32> {
        let rows = geo.output_rows(oy0, oy1);
        let (n, k) = (rows.output_size(), c * geo.kernel_size());
        let mut col = vec![0u8; k * n];
        im2col(&rows, c, x, zb as u8, &mut col);
        exact((w, za), (&col, zb), (m, k, n), n)
    }

    /// A random case of the direct kernel and what it must give: the
    /// geometry, the packed weights, their zero points, the image's quads,
    /// the block of output rows (`rows` modulo `oh + 1`, ordered), its
    /// output positions `n` and the exact sums of im2col and the GEMM.
    struct Case {
        g: DirectGeom,
        a: PackedI8,
        za: Vec<i32>,
        /// The image itself, `[c][h][w]`.
        x: Vec<u8>,
        /// Its channel quads.
        img: Vec<u8>,
        rows: (usize, usize),
        n: usize,
        want: Vec<i32>,
    }

    /// [`Case`] for `c` channels of an `h × w` image (values from `seed`),
    /// a `kh × kw` kernel at stride `st` with padding `(top, left, bottom,
    /// right)`, `m` output channels (zero points 0 when `symmetric`) and
    /// activation zero point `zb`; `None` when the kernel does not fit the
    /// padded image.
    #[allow(clippy::too_many_arguments)]
    fn case(
        c: usize,
        (h, w): (usize, usize),
        (kh, kw): (usize, usize),
        (top, left, bottom, right): (usize, usize, usize, usize),
        st: usize,
        m: usize,
        symmetric: bool,
        zb: i32,
        seed: u64,
        rows: (usize, usize),
    ) -> Option<Case> {
        let (hp, wp) = (h + top + bottom, w + left + right);
        if hp < kh || wp < kw {
            return None;
        }
        let (oh, ow) = ((hp - kh) / st + 1, (wp - kw) / st + 1);
        let geo = strided(
            (h, w),
            (kh, kw),
            (top as isize, left as isize),
            (oh, ow),
            st,
        );
        let g = DirectGeom::new(&geo, c).unwrap();
        let mut s = seed | 1;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let x: Vec<u8> = (0..c * h * w).map(|_| next() as u8).collect();
        let wt: Vec<i8> = (0..m * g.k()).map(|_| next() as i8).collect();
        let za: Vec<i32> = (0..m)
            .map(|_| {
                if symmetric {
                    0
                } else {
                    (next() % 256) as i32 - 128
                }
            })
            .collect();
        let (a, b) = (rows.0 % (oh + 1), rows.1 % (oh + 1));
        let (oy0, oy1) = (a.min(b), a.max(b));
        let want = reference(&x, &wt, &za, zb, m, (&geo, c), (oy0, oy1));
        let a = pack_weights(&wt, m, g.c, (g.kh, g.kw));
        let mut img = vec![9u8; g.image_len()];
        quad_image(&x, &g, zb as u8, &mut img);
        Some(Case {
            n: (oy1 - oy0) * ow,
            g,
            a,
            za,
            x,
            img,
            rows: (oy0, oy1),
            want,
        })
    }

    /// The float forms of `m` requantizers (`f32-rne`, bias `i − 3`, scale
    /// `step · (1 + i)` for row `i`, to u8 around 100) and the bytes they
    /// make of the sums `want` (`m` rows of `n`).
    fn requantized(want: &[i32], m: usize, n: usize, step: f64) -> (Vec<FloatRequant>, Vec<u8>) {
        let p = ArithProfile::preset("f32-rne").unwrap();
        let rq: Vec<Requantizer> = (0..m)
            .map(|i| Requantizer::new(i as f64 - 3.0, step * (1.0 + i as f64), 100, 0, 255, &p))
            .collect();
        let mut bytes = vec![0u8; m * n];
        crate::int8::elementwise::requantize(&rq, want, n, &mut bytes);
        (rq.iter().map(|r| r.float_form().unwrap()).collect(), bytes)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(160))]
        /// Any channel count (whole and partial quads), kernel, padding,
        /// stride (1 to 3: the phases of the padded image) and block of
        /// output rows: the sums and the requantized bytes of im2col and
        /// the exact GEMM, wherever the kernel runs, on the row-compact
        /// planes and on the padded width.
        #[test]
        fn matches_im2col_and_the_exact_gemm(
            c in 1usize..11, h in 1usize..13, w in 1usize..21, kh in 1usize..4, kw in 1usize..4,
            pads in (0usize..3, 0usize..3, 0usize..3, 0usize..3), m in 1usize..11,
            symmetric in any::<bool>(), zb in 0i32..256, seed in any::<u64>(), rows in (0usize..32, 0usize..32),
            st in prop_oneof![Just(1usize), Just(2), Just(3)],
        ) {
            let case = case(c, (h, w), (kh, kw), pads, st, m, symmetric, zb, seed, rows);
            prop_assume!(case.is_some());
            let case = case.unwrap();
            for padded in [false, true] {
                with_padded(padded, || check_case(&case, m, zb, false))?;
            }
            check_case(&case, m, zb, true)?;
        }
    }

    /// `f` on the padded width when `padded` (where the x86 kernels are),
    /// else on the path the host takes.
    fn with_padded<R>(padded: bool, f: impl FnOnce() -> R) -> R {
        #[cfg(target_arch = "x86_64")]
        return crate::vnni::with_padded(padded, f);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = padded;
            f()
        }
    }

    /// The sums and the requantized bytes of `case` (`m` output channels,
    /// activation zero point `zb`) against im2col and the exact GEMM, where
    /// the kernel runs, from the image itself (`planar`: where
    /// [`reads_planar`] holds) or its quads; the sums into a wider matrix,
    /// the bytes into a block of columns, nothing outside written.
    fn check_case(case: &Case, m: usize, zb: i32, planar: bool) -> Result<(), TestCaseError> {
        let Case {
            g,
            a,
            za,
            x,
            img,
            rows: (oy0, oy1),
            n,
            want,
        } = case;
        let (oy0, oy1, n) = (*oy0, *oy1, *n);
        let ldc = n + 3;
        let mut got = vec![7i32; m * ldc];
        let (img, runs) = if planar {
            (DirectImage::Planar(x), reads_planar(g))
        } else {
            (DirectImage::Quads(img), crate::isa().vnni())
        };
        let conv = DirectConv { a, za, g, img, zb };
        let ran = conv_sums(&conv, (oy0, oy1), &mut got, ldc);
        prop_assert_eq!(ran, runs);
        if ran {
            for i in 0..m {
                prop_assert_eq!(
                    &got[i * ldc..i * ldc + n],
                    &want[i * n..(i + 1) * n],
                    "row {}",
                    i
                );
                prop_assert!(
                    got[i * ldc + n..(i + 1) * ldc].iter().all(|&v| v == 7),
                    "row {} past n",
                    i
                );
            }
        }
        // requantized in the epilogue (a block of no columns has no
        // rows to write into)
        if n == 0 {
            return Ok(());
        }
        // (the block is columns 2..2 + n of a wider matrix: nothing
        // outside it is written)
        let (frq, bytes) = requantized(want, m, n, 1e-3);
        let ld = n + 5;
        let mut out = vec![7u8; (m + 1) * ld];
        let ran = std::sync::atomic::AtomicBool::new(false);
        crate::par::split_columns(&mut out, ld, &[0, 2, 2 + n, ld], 0, |i, mut blk| {
            if i == 1 {
                let r = conv_requant(&conv, &frq, (oy0, oy1), &mut blk, 1);
                ran.store(r, std::sync::atomic::Ordering::Relaxed);
            }
        });
        if ran.load(std::sync::atomic::Ordering::Relaxed) {
            prop_assert!(
                out[..ld].iter().all(|&v| v == 7),
                "row 0 is not the kernel's"
            );
            for i in 0..m {
                let row = &out[(i + 1) * ld..(i + 2) * ld];
                prop_assert_eq!(&row[2..2 + n], &bytes[i * n..(i + 1) * n], "row {}", i);
                prop_assert!(
                    row[..2].iter().chain(&row[2 + n..]).all(|&v| v == 7),
                    "row {} outside the block",
                    i
                );
            }
        }
        Ok(())
    }

    /// Layers whose reduction is long enough that the one to four output
    /// positions past the last vector of 16 are computed apart (49 =
    /// 3·16 + 1 positions of a 7 × 7 map, at stride 1 and 2, 65 = 4·16 +
    /// 1 of a block of rows), with and without weight zero points, and
    /// one without such columns: the sums and bytes of im2col and the
    /// exact GEMM on the row-compact planes (checked to run, and the tail
    /// with them) and on the padded width.
    #[test]
    fn long_reductions_with_columns_past_the_last_vector() {
        #[cfg(target_arch = "x86_64")]
        use std::sync::atomic::Ordering::Relaxed;
        let layers = [
            (64, (7, 7), 1, (0, 7), true, true),
            (64, (14, 14), 2, (0, 7), false, true),
            (48, (9, 13), 1, (2, 7), false, true),
            (40, (14, 14), 1, (3, 14), true, false),
            // rows wider than a window of 64 columns, at strides 2 and 3
            (7, (6, 150), 2, (0, 3), false, false),
            (5, (7, 131), 3, (1, 3), true, false),
        ];
        for (i, &(c, hw, st, rows, symmetric, tail)) in layers.iter().enumerate() {
            let case = case(
                c,
                hw,
                (3, 3),
                (1, 1, 1, 1),
                st,
                21,
                symmetric,
                37,
                7 + i as u64,
                rows,
            )
            .unwrap();
            // (on the padded width, on the compact planes from the quads,
            // then from the image itself)
            for (padded, planar) in [(true, false), (false, false), (false, true)] {
                #[cfg(target_arch = "x86_64")]
                let runs = (
                    crate::vnni::EXACT_RUNS.load(Relaxed),
                    crate::vnni::TAIL_RUNS.load(Relaxed),
                    crate::vnni::PLANAR_RUNS.load(Relaxed),
                );
                with_padded(padded, || check_case(&case, 21, 37, planar)).unwrap();
                #[cfg(target_arch = "x86_64")]
                if crate::isa() == crate::Isa::Avx512Vnni && !padded {
                    assert!(
                        crate::vnni::EXACT_RUNS.load(Relaxed) > runs.0,
                        "layer {i}: not on the compact planes"
                    );
                    if tail {
                        assert!(
                            crate::vnni::TAIL_RUNS.load(Relaxed) > runs.1,
                            "layer {i}: no tail"
                        );
                    }
                    if planar && crate::dispatch::has_vbmi() {
                        assert!(
                            crate::vnni::PLANAR_RUNS.load(Relaxed) > runs.2,
                            "layer {i}: not from the planar image"
                        );
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Channels in whole runs of 64 (16 quads a tap: the AMX tiles read
        /// the image where it lies, where the process holds them, the path
        /// checked to run), any kernel, padding, stride and block of output
        /// rows, output channels across blocks of 32: the sums and bytes of
        /// im2col and the exact GEMM, on the tiles and on VNNI alone.
        #[test]
        fn amx_tiles_match_im2col_and_the_exact_gemm(
            c in prop_oneof![Just(64usize), Just(128)], h in 1usize..9, w in 1usize..12,
            kh in 1usize..4, kw in 1usize..4, pads in (0usize..2, 0usize..2, 0usize..2, 0usize..2),
            m in 1usize..70, symmetric in any::<bool>(), zb in 0i32..256, seed in any::<u64>(),
            rows in (0usize..16, 0usize..16), st in prop_oneof![Just(1usize), Just(2)],
        ) {
            let case = case(c, (h, w), (kh, kw), pads, st, m, symmetric, zb, seed, rows);
            prop_assume!(case.as_ref().is_some_and(|c| c.n > 0));
            let Case { g, a, za, img, rows: (oy0, oy1), n, want, .. } = case.unwrap();
            let (frq, bytes) = requantized(&want, m, n, 1e-4);
            let conv = DirectConv { a: &a, za: &za, g: &g, img: DirectImage::Quads(&img), zb };
            for isa in [crate::Isa::Amx, crate::Isa::Avx512Vnni] {
                if !isa.supported() {
                    continue;
                }
                crate::with_isa(isa, || -> Result<(), TestCaseError> {
                    #[cfg(target_arch = "x86_64")]
                    let before = crate::vnni::AMX_RUNS.load(std::sync::atomic::Ordering::Relaxed);
                    let mut got = vec![7i32; m * n];
                    prop_assert!(conv_sums(&conv, (oy0, oy1), &mut got, n));
                    prop_assert_eq!(&got, &want);
                    // (columns 1..1 + n of a wider matrix)
                    let ld = n + 3;
                    let mut out = vec![7u8; m * ld];
                    crate::par::split_columns(&mut out, ld, &[0, 1, 1 + n, ld], 0, |i, mut blk| {
                        if i == 1 {
                            assert!(conv_requant(&conv, &frq, (oy0, oy1), &mut blk, 0));
                        }
                    });
                    for i in 0..m {
                        let row = &out[i * ld..(i + 1) * ld];
                        prop_assert_eq!(&row[1..1 + n], &bytes[i * n..(i + 1) * n], "row {}", i);
                        prop_assert!(row[0] == 7 && row[1 + n..].iter().all(|&v| v == 7), "row {} outside the block", i);
                    }
                    #[cfg(target_arch = "x86_64")]
                    if isa == crate::Isa::Amx {
                        let ran = crate::vnni::AMX_RUNS.load(std::sync::atomic::Ordering::Relaxed) > before;
                        prop_assert!(ran, "the AMX path did not run");
                    }
                    Ok(())
                })?;
            }
        }
    }

    /// The quads: each pixel's four channel bytes, the zero point around
    /// the image, zero for the missing channels.
    #[test]
    fn quad_image_lays_out_channel_quads() {
        // 5 channels (a full quad and one of 1), 2 x 3, padded 1 all round
        let g = DirectGeom::new(&geometry((2, 3), (3, 3), (1, 1), (2, 3)), 5).unwrap();
        let x: Vec<u8> = (0..30).map(|v| v as u8 + 1).collect();
        let mut img = vec![0xeeu8; g.image_len()];
        quad_image(&x, &g, 200, &mut img);
        let (wp, plane) = (g.padded_width(), g.plane());
        assert_eq!((g.padded_height(), wp), (4, 5));
        let px = |q: usize, y: usize, xx: usize| &img[(q * plane + y * wp + xx) * 4..][..4];
        assert_eq!(px(0, 0, 0), [200; 4]);
        // image pixel (0, 0) of channels 0..4, then of channel 4 alone
        assert_eq!(px(0, 1, 1), [1, 7, 13, 19]);
        assert_eq!(px(1, 1, 1), [25, 0, 0, 0]);
        assert_eq!(px(1, 0, 2), [200, 0, 0, 0]);
        assert_eq!(px(0, 2, 3), [6, 12, 18, 24]);
        // after each plane's pixels: zeros
        assert!(img[(hp_wp(&g)) * 4..plane * 4].iter().all(|&v| v == 0));
    }

    fn hp_wp(g: &DirectGeom) -> usize {
        g.padded_height() * g.padded_width()
    }

    /// A layer large enough to split: the same sums on 1, 2, 3 and 8
    /// intra-op threads (the quads' planes and the GEMM's rows or
    /// columns divided between them), from the quads and from the image
    /// itself.
    #[test]
    fn intra_op_threads_give_the_same_sums() {
        let _g = crate::test_lock();
        let geo = geometry((23, 29), (3, 3), (1, 1), (23, 29));
        let g = DirectGeom::new(&geo, 37).unwrap();
        let x: Vec<u8> = (0..37 * 23 * 29).map(|i| (i * 31 % 251) as u8).collect();
        for m in [70, 12] {
            let wt: Vec<i8> = (0..m * g.k()).map(|i| (i * 17 % 256) as u8 as i8).collect();
            let za: Vec<i32> = (0..m as i32).map(|i| i % 3 - 1).collect();
            let a = pack_weights(&wt, m, g.c, (g.kh, g.kw));
            let want = reference(&x, &wt, &za, 11, m, (&geo, 37), (0, 23));
            let n = 23 * 29;
            for (t, planar) in [1, 2, 3, 8]
                .into_iter()
                .flat_map(|t| [(t, false), (t, true)])
            {
                crate::par::set_threads(t);
                let mut img = vec![0u8; g.image_len()];
                quad_image(&x, &g, 11, &mut img);
                let mut got = vec![0i32; m * n];
                let conv = DirectConv {
                    a: &a,
                    za: &za,
                    g: &g,
                    img: if planar {
                        DirectImage::Planar(&x)
                    } else {
                        DirectImage::Quads(&img)
                    },
                    zb: 11,
                };
                let ran = conv_sums(&conv, (0, 23), &mut got, n);
                crate::par::set_threads(1);
                if ran {
                    assert!(got == want, "{m} rows, {t} threads, planar {planar}");
                }
            }
        }
    }
}
