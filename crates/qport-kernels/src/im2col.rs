//! Patch extraction for convolution as matrix multiply, in channel-first
//! (NCHW-like) layout, for any number of spatial dimensions.
//!
//! [`im2col`] turns one image `[C, D1, .., Dn]` into a column matrix
//! `[C * K1 * .. * Kn, O1 * .. * On]` whose row `(c, k1, .., kn)` holds, for
//! every output position `o`, the input element at
//! `o * stride - pad_begin + k * dilation` (or zero where that falls in the
//! padding). Convolution is then `W[M, C*K] x col`. [`col2im`] is the adjoint:
//! it adds a column matrix back into an image (transposed convolution).
//! [`conv2d_direct`] convolves one 2-D channel without a column matrix (the
//! depthwise case), with an AVX2 build of the same loop chosen at run time.

/// The geometry shared by one convolution's image and column matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// Spatial dimensions of the image.
    pub image: Vec<usize>,
    /// Kernel spatial dimensions.
    pub kernel: Vec<usize>,
    /// Output (column) spatial dimensions.
    pub output: Vec<usize>,
    /// Strides per spatial axis.
    pub strides: Vec<usize>,
    /// Dilations per spatial axis.
    pub dilations: Vec<usize>,
    /// Padding before each spatial axis (negative values crop).
    pub pads_begin: Vec<isize>,
}

impl ConvGeometry {
    /// A two-dimensional geometry from `[height, width]` pairs.
    ///
    /// ```
    /// use qport_kernels::im2col::ConvGeometry;
    /// // a 3x3 image, 2x2 kernel, stride 2, one row/column of padding before
    /// let g = ConvGeometry::new_2d([3, 3], [2, 2], [2, 2], [2, 2], [1, 1], [1, 1]);
    /// assert_eq!((g.rank(), g.output_size()), (2, 4));
    /// ```
    pub fn new_2d(
        image: [usize; 2],
        kernel: [usize; 2],
        output: [usize; 2],
        strides: [usize; 2],
        dilations: [usize; 2],
        pads_begin: [isize; 2],
    ) -> ConvGeometry {
        ConvGeometry {
            image: image.to_vec(),
            kernel: kernel.to_vec(),
            output: output.to_vec(),
            strides: strides.to_vec(),
            dilations: dilations.to_vec(),
            pads_begin: pads_begin.to_vec(),
        }
    }

    /// The geometry of output rows `row0..row1` along the first spatial
    /// axis: the same image, the output cut to those rows and the padding
    /// before the axis shifted by `row0 * stride`, so that [`im2col`] on it
    /// gives exactly columns `row0 * rest..row1 * rest` of the full column
    /// matrix (`rest` the output positions per row). Convolutions run
    /// blocks of rows this way so that each block's column matrix stays in
    /// cache.
    ///
    /// ```
    /// use qport_kernels::im2col::{im2col, ConvGeometry};
    /// let g = ConvGeometry::new_2d([4, 4], [3, 3], [4, 4], [1, 1], [1, 1], [1, 1]);
    /// let img: Vec<i32> = (1..=16).collect();
    /// let mut full = vec![0; 9 * 16];
    /// im2col(&g, 1, &img, 0, &mut full);
    /// let mut part = vec![0; 9 * 8];
    /// im2col(&g.output_rows(1, 3), 1, &img, 0, &mut part);
    /// for r in 0..9 {
    ///     assert_eq!(part[r * 8..][..8], full[r * 16 + 4..][..8]);
    /// }
    /// ```
    ///
    /// # Panics
    /// Panics unless `row0 <= row1 <= output[0]`.
    pub fn output_rows(&self, row0: usize, row1: usize) -> ConvGeometry {
        assert!(
            row0 <= row1 && row1 <= self.output[0],
            "output_rows: rows {row0}..{row1} of {}",
            self.output[0]
        );
        let mut g = self.clone();
        g.output[0] = row1 - row0;
        g.pads_begin[0] -= (row0 * g.strides[0]) as isize;
        g
    }

    /// Number of spatial axes.
    pub fn rank(&self) -> usize {
        self.image.len()
    }

    /// Elements of one image channel.
    pub fn image_size(&self) -> usize {
        self.image.iter().product()
    }

    /// Kernel elements per channel.
    pub fn kernel_size(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Output positions (columns of the column matrix).
    pub fn output_size(&self) -> usize {
        self.output.iter().product()
    }

    fn validate(&self) {
        let r = self.rank();
        assert!(r >= 1, "im2col: at least one spatial axis");
        assert!(
            self.kernel.len() == r
                && self.output.len() == r
                && self.strides.len() == r
                && self.dilations.len() == r
                && self.pads_begin.len() == r,
            "im2col: geometry vectors must all have {r} entries"
        );
    }

    /// For the last axis, kernel tap `k`: the range of output positions
    /// whose input coordinate is inside the image, and the input coordinate
    /// of output position 0.
    fn last_axis_run(&self, k: usize) -> (usize, usize, isize) {
        let a = self.rank() - 1;
        let base = k as isize * self.dilations[a] as isize - self.pads_begin[a];
        let (lo, hi) = valid_range(
            base,
            self.strides[a] as isize,
            self.image[a] as isize,
            self.output[a],
        );
        (lo, hi, base)
    }
}

/// Output positions `o` in `0..n_out` with `0 <= base + o*stride < extent`,
/// as a half-open range.
fn valid_range(base: isize, stride: isize, extent: isize, n_out: usize) -> (usize, usize) {
    // smallest o with base + o*s >= 0
    let lo = if base >= 0 {
        0
    } else {
        ((-base + stride - 1) / stride) as usize
    };
    // smallest o with base + o*s >= extent
    let hi = if base >= extent {
        0
    } else {
        ((extent - base + stride - 1) / stride) as usize
    };
    let hi = hi.min(n_out);
    (lo.min(hi), hi)
}

/// Spatial ranks up to this keep their index arithmetic on the stack.
const MAX_STACK_RANK: usize = 8;

/// Iterates the multi-indices of `dims` (row-major), calling `f` with each
/// (once, with `[]`, when `dims` is empty).
fn for_each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    // on the stack for the ranks networks use (no allocation per call)
    let mut stack = [0usize; MAX_STACK_RANK];
    let mut heap = Vec::new();
    let idx: &mut [usize] = if dims.len() <= MAX_STACK_RANK {
        &mut stack[..dims.len()]
    } else {
        heap.resize(dims.len(), 0);
        &mut heap
    };
    loop {
        f(idx);
        let mut ax = dims.len();
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < dims[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}

/// Calls `f(col_offset, image_offset_or_none, lo, hi, base)` for each run of
/// one column-matrix row along the last output axis.
///
/// For channel `c` and kernel tap `kidx`, each combination of the leading
/// output coordinates gives one run of `output[last]` columns starting at
/// `col_offset`; `image_row` is the offset of the image row those columns
/// read (`None` when the row lies in the padding), and `lo..hi`, `base` are
/// as in [`ConvGeometry::last_axis_run`].
fn for_each_run(
    g: &ConvGeometry,
    channels: usize,
    mut f: impl FnMut(usize, Option<usize>, usize, usize, isize),
) {
    let r = g.rank();
    let lead_out = &g.output[..r - 1];
    let ow = g.output[r - 1];
    let osize = g.output_size();
    let ksize = g.kernel_size();
    let isize_ = g.image_size();
    let mut stack = [1usize; MAX_STACK_RANK];
    let mut heap = Vec::new();
    let img_strides: &mut [usize] = if r <= MAX_STACK_RANK {
        &mut stack[..r]
    } else {
        heap.resize(r, 1);
        &mut heap
    };
    for i in (0..r - 1).rev() {
        img_strides[i] = img_strides[i + 1] * g.image[i + 1];
    }
    for c in 0..channels {
        let mut row = c * ksize;
        for_each_index(&g.kernel, |k| {
            let (lo, hi, base) = g.last_axis_run(k[r - 1]);
            let mut col = row * osize;
            for_each_index(lead_out, |o| {
                let mut off = c * isize_;
                let mut inside = true;
                for a in 0..r - 1 {
                    let p = o[a] as isize * g.strides[a] as isize
                        + k[a] as isize * g.dilations[a] as isize
                        - g.pads_begin[a];
                    if p < 0 || p >= g.image[a] as isize {
                        inside = false;
                        break;
                    }
                    off += p as usize * img_strides[a];
                }
                f(col, inside.then_some(off), lo, hi, base);
                col += ow;
            });
            row += 1;
        });
    }
}

/// Panics unless `g` is consistent, the image holds `channels` images and
/// the column matrix `[channels * kernel_size, output_size]` fits in
/// `col_len` (the messages name `op`).
fn check_col(g: &ConvGeometry, channels: usize, image_len: usize, col_len: usize, op: &str) {
    g.validate();
    let rows = channels * g.kernel_size();
    assert!(
        image_len >= channels * g.image_size(),
        "{op}: image too short"
    );
    assert!(col_len >= rows * g.output_size(), "{op}: col too short");
}

/// [`im2col`] with whole channels split over the intra-op threads
/// ([`crate::par`]): the same bytes in `col` whatever the thread count
/// (each channel's rows are a copy of its own plane).
pub fn im2col_par<T: Copy + Send + Sync>(
    g: &ConvGeometry,
    channels: usize,
    image: &[T],
    zero: T,
    col: &mut [T],
) {
    check_col(g, channels, image.len(), col.len(), "im2col");
    let (is, per) = (g.image_size(), g.kernel_size() * g.output_size());
    let col = &mut col[..channels * per];
    if per == 0 {
        return;
    }
    let work = col.len() * crate::par::STREAM_COST;
    crate::par::split_mut(col, per, work, |start, block| {
        // blocks start on a channel and hold whole channels
        let (c0, c) = (start / per, block.len() / per);
        im2col(g, c, &image[c0 * is..(c0 + c) * is], zero, block);
    });
}

/// Fills `col` (`[channels * kernel_size, output_size]`, row-major) from
/// `image` (`[channels, image...]`), writing `zero` for padding.
///
/// # Panics
/// Panics if the geometry vectors disagree in length or a slice is shorter
/// than the geometry requires.
pub fn im2col<T: Copy>(g: &ConvGeometry, channels: usize, image: &[T], zero: T, col: &mut [T]) {
    check_col(g, channels, image.len(), col.len(), "im2col");
    if g.rank() == 2 {
        return im2col_2d(g, channels, image, zero, col);
    }
    let ow = g.output[g.rank() - 1];
    let s = g.strides[g.rank() - 1];
    for_each_run(g, channels, |col_off, img, lo, hi, base| {
        let dst = &mut col[col_off..col_off + ow];
        match img {
            None => dst.fill(zero),
            Some(img_off) => {
                dst[..lo].fill(zero);
                dst[hi..].fill(zero);
                if hi > lo {
                    let start = (img_off as isize + base + (lo * s) as isize) as usize;
                    let run = &mut dst[lo..hi];
                    let n = hi - lo;
                    if s == 1 {
                        run.copy_from_slice(&image[start..start + n]);
                    } else {
                        strided_copy(run, &image[start..start + (n - 1) * s + 1], s);
                    }
                }
            }
        }
    });
}

/// [`im2col`] for two spatial axes (every image network): the same bytes
/// as the general loop, with the row arithmetic hoisted out of the runs
/// (one kernel tap's valid column range per tap, one input row per output
/// row), so that the short runs of small feature maps cost little more
/// than their copy.
fn im2col_2d<T: Copy>(g: &ConvGeometry, channels: usize, image: &[T], zero: T, col: &mut [T]) {
    let (ih, iw) = (g.image[0], g.image[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (oh, ow) = (g.output[0], g.output[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (ph, pw) = (g.pads_begin[0], g.pads_begin[1]);
    let (is, os) = (ih * iw, oh * ow);
    if os == 0 {
        return;
    }
    for c in 0..channels {
        let plane = &image[c * is..(c + 1) * is];
        for ki in 0..kh {
            for kj in 0..kw {
                let r = (c * kh + ki) * kw + kj;
                let dst_row = &mut col[r * os..(r + 1) * os];
                // columns lo..hi read the image, from column base + lo·sw
                let base = (kj * dw) as isize - pw;
                let (lo, hi) = valid_range(base, sw as isize, iw as isize, ow);
                let first = (base + (lo * sw) as isize).max(0) as usize;
                if sh == 1 && sw == 1 && iw == ow {
                    // output position p reads image element p + shift: the
                    // rows inside the image are one copy, then the columns
                    // that fall in the padding are cleared
                    let top = ki as isize * dh as isize - ph;
                    let (y0, y1) = valid_range(top, 1, ih as isize, oh);
                    let shift = top * iw as isize + base;
                    let (a, b) = (y0 * ow, y1 * ow);
                    fill_short(&mut dst_row[..a], zero);
                    fill_short(&mut dst_row[b..], zero);
                    // (positions whose image index leaves the plane are
                    // padding columns, cleared below)
                    let from = (a as isize).max(-shift) as usize;
                    let to = (b as isize).min(is as isize - shift).max(from as isize) as usize;
                    if to > from {
                        let src = (from as isize + shift) as usize;
                        dst_row[from..to].copy_from_slice(&plane[src..src + (to - from)]);
                    }
                    for dst in dst_row[a..b].chunks_exact_mut(ow) {
                        fill_short(&mut dst[..lo], zero);
                        fill_short(&mut dst[hi.max(lo)..], zero);
                    }
                    continue;
                }
                for (oy, dst) in dst_row.chunks_exact_mut(ow).enumerate() {
                    let iy = (oy * sh + ki * dh) as isize - ph;
                    if iy < 0 || iy >= ih as isize || hi == lo {
                        dst.fill(zero);
                        continue;
                    }
                    fill_short(&mut dst[..lo], zero);
                    fill_short(&mut dst[hi..], zero);
                    let n = hi - lo;
                    let src = &plane[iy as usize * iw + first..];
                    if sw == 1 {
                        copy_short(&mut dst[lo..hi], &src[..n]);
                    } else {
                        strided_copy(&mut dst[lo..hi], &src[..(n - 1) * sw + 1], sw);
                    }
                }
            }
        }
    }
}

/// `dst.copy_from_slice(src)` with the short copies of small feature maps
/// (a few elements per output row) done in fixed-size pieces the compiler
/// turns into plain moves instead of a library call.
#[inline(always)]
fn copy_short<T: Copy>(dst: &mut [T], src: &[T]) {
    let n = dst.len();
    if n > 32 {
        dst.copy_from_slice(&src[..n]);
        return;
    }
    let (mut d, mut s) = (dst, &src[..n]);
    while d.len() >= 8 {
        let (dh, dt) = d.split_at_mut(8);
        let (sh, st) = s.split_at(8);
        dh.copy_from_slice(sh);
        (d, s) = (dt, st);
    }
    if d.len() >= 4 {
        let (dh, dt) = d.split_at_mut(4);
        let (sh, st) = s.split_at(4);
        dh.copy_from_slice(sh);
        (d, s) = (dt, st);
    }
    if d.len() >= 2 {
        let (dh, dt) = d.split_at_mut(2);
        let (sh, st) = s.split_at(2);
        dh.copy_from_slice(sh);
        (d, s) = (dt, st);
    }
    if let (Some(x), Some(&y)) = (d.first_mut(), s.first()) {
        *x = y;
    }
}

/// `dst.fill(v)` with the few elements of a padding border set one by one
/// (no library call).
#[inline(always)]
fn fill_short<T: Copy>(dst: &mut [T], v: T) {
    if dst.len() > 8 {
        dst.fill(v);
    } else {
        for x in dst {
            *x = v;
        }
    }
}

/// `dst[j] = src[j * s]`, with the common stride 2 in a form that
/// vectorises.
#[inline]
fn strided_copy<T: Copy>(dst: &mut [T], src: &[T], s: usize) {
    if s == 2 {
        let n = dst.len();
        let pairs = n.min(src.len() / 2);
        for (d, p) in dst.iter_mut().zip(src.chunks_exact(2)).take(pairs) {
            *d = p[0];
        }
        for (j, d) in dst.iter_mut().enumerate().skip(pairs) {
            *d = src[2 * j];
        }
    } else {
        for (d, &v) in dst.iter_mut().zip(src.iter().step_by(s)) {
            *d = v;
        }
    }
}

/// Adds `col` (`[channels * kernel_size, output_size]`) into `image`
/// (`[channels, image...]`), skipping entries that fall in the padding: the
/// adjoint of [`im2col`].
///
/// # Panics
/// As [`im2col`].
pub fn col2im<T: Copy + std::ops::AddAssign>(
    g: &ConvGeometry,
    channels: usize,
    col: &[T],
    image: &mut [T],
) {
    check_col(g, channels, image.len(), col.len(), "col2im");
    let s = g.strides[g.rank() - 1];
    for_each_run(g, channels, |col_off, img, lo, hi, base| {
        if let Some(img_off) = img {
            if hi > lo {
                let start = (img_off as isize + base + (lo * s) as isize) as usize;
                let src = &col[col_off + lo..col_off + hi];
                if s == 1 {
                    for (d, &v) in image[start..start + (hi - lo)].iter_mut().zip(src) {
                        *d += v;
                    }
                } else {
                    for (j, &v) in src.iter().enumerate() {
                        image[start + j * s] += v;
                    }
                }
            }
        }
    });
}

/// The scratch elements [`conv2d_direct`] needs for geometry `g` (two
/// spatial axes), or `None` if that count overflows.
pub fn conv2d_direct_scratch(g: &ConvGeometry) -> Option<usize> {
    if g.rank() != 2 || g.kernel.contains(&0) || g.strides.contains(&0) {
        return None;
    }
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let hq = g.output[0].checked_add((g.kernel[0] - 1).checked_mul(g.dilations[0])? / sh)?;
    let wq = g.output[1].checked_add((g.kernel[1] - 1).checked_mul(g.dilations[1])? / sw)?;
    let planes = sh.checked_mul(sw)?.checked_mul(hq)?.checked_mul(wq)?;
    planes.checked_add(wq.checked_mul((4096 / wq.max(1)).clamp(1, g.output[0].max(1)))?)
}

/// An element type [`conv2d_direct`] accepts: copied, multiplied and
/// accumulated (`f32`, `f64`, integers).
pub trait DirectScalar: Copy + std::ops::Mul<Output = Self> + std::ops::AddAssign {}

impl<T: Copy + std::ops::Mul<Output = T> + std::ops::AddAssign> DirectScalar for T {}

/// Direct 2-D convolution of one image channel (`[H, W]`) with one kernel
/// (`[KH, KW]`), added into `out` (`[OH, OW]`): the per-channel step of a
/// depthwise convolution, with no column matrix.
///
/// The image is first split into `stride_h * stride_w` zero-padded phase
/// planes so that every kernel tap becomes one long contiguous
/// multiply-add over a block of output rows (computed with the phase
/// plane's row pitch, the extra columns discarded). Each output sums its
/// taps in kernel row-major order with separate multiplies and adds, as
/// [`im2col`] followed by the scalar GEMM would, on every CPU. `scratch` is
/// reused between calls.
///
/// # Panics
/// Panics unless the geometry has two spatial axes and non-negative
/// padding, the slices are as long as it requires and the scratch size
/// ([`conv2d_direct_scratch`]) does not overflow.
pub fn conv2d_direct<T: DirectScalar>(
    g: &ConvGeometry,
    image: &[T],
    kernel: &[T],
    zero: T,
    out: &mut [T],
    scratch: &mut Vec<T>,
) {
    g.validate();
    assert_eq!(g.rank(), 2, "conv2d_direct: needs two spatial axes");
    assert!(
        g.pads_begin.iter().all(|&p| p >= 0),
        "conv2d_direct: negative padding"
    );
    assert!(
        image.len() >= g.image_size(),
        "conv2d_direct: image too short"
    );
    assert!(
        kernel.len() >= g.kernel_size(),
        "conv2d_direct: kernel too short"
    );
    assert!(out.len() >= g.output_size(), "conv2d_direct: out too short");
    #[cfg(target_arch = "x86_64")]
    if crate::isa().avx2() {
        // SAFETY: the dispatch table has an x86-64 row only where the CPU
        // has AVX2 + FMA (`dispatch::detect`).
        unsafe { direct_avx2(g, image, kernel, zero, out, scratch) };
        return;
    }
    direct_body(g, image, kernel, zero, out, scratch);
}

#[cfg(target_arch = "x86_64")]
crate::arch::x86_64::recompiled! {
    /// [`direct_body`] compiled with AVX2 enabled (wider vectors, same
    /// operations and order, so the same results).
    "avx2" fn direct_avx2<T: DirectScalar>(
        g: &ConvGeometry, image: &[T], kernel: &[T], zero: T, out: &mut [T], scratch: &mut Vec<T>,
    ) = direct_body;
}

#[inline(always)]
fn direct_body<T: DirectScalar>(
    g: &ConvGeometry,
    image: &[T],
    kernel: &[T],
    zero: T,
    out: &mut [T],
    scratch: &mut Vec<T>,
) {
    let (h, w) = (g.image[0], g.image[1]);
    let (kh, kw) = (g.kernel[0], g.kernel[1]);
    let (oh, ow) = (g.output[0], g.output[1]);
    let (sh, sw) = (g.strides[0], g.strides[1]);
    let (dh, dw) = (g.dilations[0], g.dilations[1]);
    let (pt, pl) = (g.pads_begin[0] as usize, g.pads_begin[1] as usize);
    if oh == 0 || ow == 0 {
        return;
    }
    let need = conv2d_direct_scratch(g).expect("conv2d_direct: empty kernel or scratch overflow");
    // phase plane (a, b) holds padded[i * sh + a][j * sw + b]
    let hq = oh + (kh - 1) * dh / sh;
    let wq = ow + (kw - 1) * dw / sw;
    let plane = hq * wq;
    let phases = sh * sw;
    let block_rows = (4096 / wq).clamp(1, oh);
    scratch.clear();
    scratch.resize(need, zero);
    let (planes, acc) = scratch.split_at_mut(phases * plane);
    for b in 0..sw {
        // columns j in lo..hi read image column start + (j - lo) * sw
        let base = b as isize - pl as isize;
        let (lo, hi) = valid_range(base, sw as isize, w as isize, wq);
        if hi <= lo {
            continue;
        }
        let start = (base + (lo * sw) as isize) as usize;
        for a in 0..sh {
            let dst = &mut planes[(a * sw + b) * plane..][..plane];
            for (i, drow) in dst.chunks_exact_mut(wq).enumerate() {
                let y = (i * sh + a) as isize - pt as isize;
                if y < 0 || y >= h as isize {
                    continue;
                }
                let row = &image[y as usize * w..][..w];
                let drow = &mut drow[lo..hi];
                if sw == 1 {
                    drow.copy_from_slice(&row[start..start + drow.len()]);
                } else {
                    for (d, &x) in drow.iter_mut().zip(row[start..].iter().step_by(sw)) {
                        *d = x;
                    }
                }
            }
        }
    }
    let mut r0 = 0;
    while r0 < oh {
        let rows = block_rows.min(oh - r0);
        let len = (rows - 1) * wq + ow;
        let acc = &mut acc[..len];
        acc.fill(zero);
        for ki in 0..kh {
            let (a, ro) = ((ki * dh) % sh, (ki * dh) / sh);
            for kj in 0..kw {
                let (b, co) = ((kj * dw) % sw, (kj * dw) / sw);
                let wv = kernel[ki * kw + kj];
                let src = &planes[(a * sw + b) * plane + (r0 + ro) * wq + co..][..len];
                for (o, &x) in acc.iter_mut().zip(src) {
                    *o += wv * x;
                }
            }
        }
        for r in 0..rows {
            let orow = &mut out[(r0 + r) * ow..][..ow];
            for (o, &v) in orow.iter_mut().zip(&acc[r * wq..][..ow]) {
                *o += v;
            }
        }
        r0 += rows;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whole channels split over 1, 2 and 3 threads write the column
    /// matrix of the definition (a padded, strided 3x3 over 13 channels:
    /// more than one block's work, an odd channel count).
    #[test]
    fn threaded_im2col_is_the_definition() {
        let _g = crate::test_lock();
        let g = ConvGeometry::new_2d([40, 37], [3, 3], [20, 19], [2, 2], [1, 1], [1, 1]);
        let channels = 13;
        let image: Vec<i32> = (0..channels * g.image_size())
            .map(|i| i as i32 * 7 - 3)
            .collect();
        let want = naive(&g, channels, &image);
        assert!(want.len() * crate::par::STREAM_COST >= crate::par::MIN_WORK);
        for t in [1, 2, 3] {
            crate::par::set_threads(t);
            let mut col = vec![i32::MIN; want.len()];
            im2col_par(&g, channels, &image, 0, &mut col);
            crate::par::set_threads(1);
            assert_eq!(col, want, "{t} threads");
        }
    }

    /// Direct definition of the column matrix.
    fn naive(g: &ConvGeometry, channels: usize, image: &[i32]) -> Vec<i32> {
        let r = g.rank();
        let mut out = vec![];
        for c in 0..channels {
            for_each_index(&g.kernel, |k| {
                for_each_index(&g.output, |o| {
                    let mut off = c;
                    let mut ok = true;
                    for a in 0..r {
                        let p = (o[a] * g.strides[a] + k[a] * g.dilations[a]) as isize
                            - g.pads_begin[a];
                        if p < 0 || p >= g.image[a] as isize {
                            ok = false;
                        }
                        off = off * g.image[a] + p.max(0) as usize;
                    }
                    out.push(if ok { image[off] } else { 0 });
                });
            });
        }
        out
    }

    fn geometry() -> impl Strategy<Value = (ConvGeometry, usize)> {
        geometry_with(1..4, -1..3)
    }

    fn geometry_with(
        ranks: std::ops::Range<usize>,
        pads: std::ops::Range<isize>,
    ) -> impl Strategy<Value = (ConvGeometry, usize)> {
        (ranks, 1usize..3).prop_flat_map(move |(r, ch)| {
            (
                proptest::collection::vec(
                    (1usize..6, 1usize..4, 1usize..4, 1usize..3, pads.clone()),
                    r,
                ),
                Just(ch),
            )
                .prop_map(|(axes, ch)| {
                    let mut g = ConvGeometry {
                        image: vec![],
                        kernel: vec![],
                        output: vec![],
                        strides: vec![],
                        dilations: vec![],
                        pads_begin: vec![],
                    };
                    for (i, k, s, d, p) in axes {
                        g.image.push(i);
                        g.kernel.push(k);
                        g.strides.push(s);
                        g.dilations.push(d);
                        g.pads_begin.push(p);
                        // any output count works for the kernels; use a
                        // few more than fit to exercise the right padding
                        g.output.push(i / s + 2);
                    }
                    (g, ch)
                })
        })
    }

    proptest! {
        #[test]
        fn im2col_matches_definition((g, ch) in geometry()) {
            let image: Vec<i32> = (1..=(ch * g.image_size()) as i32).collect();
            let mut col = vec![-7; ch * g.kernel_size() * g.output_size()];
            im2col(&g, ch, &image, 0, &mut col);
            prop_assert_eq!(col, naive(&g, ch, &image));
        }

        /// The 2-D path's whole-plane copy (stride 1, as many output as
        /// image columns: "same" convolutions) against the definition, with
        /// cropping and padding on every side.
        #[test]
        fn same_width_planes_match_definition(
            ih in 1usize..9, iw in 1usize..9, kh in 1usize..4, kw in 1usize..4,
            dh in 1usize..3, dw in 1usize..3, ph in -2isize..4, pw in -2isize..4,
            oh in 1usize..12, ch in 1usize..3,
        ) {
            let g = ConvGeometry::new_2d([ih, iw], [kh, kw], [oh, iw], [1, 1], [dh, dw], [ph, pw]);
            let image: Vec<i32> = (1..=(ch * g.image_size()) as i32).collect();
            let mut col = vec![-7; ch * g.kernel_size() * g.output_size()];
            im2col(&g, ch, &image, 0, &mut col);
            prop_assert_eq!(col, naive(&g, ch, &image));
        }

        #[test]
        fn output_rows_give_those_columns((g, ch) in geometry(), a in 0usize..8, b in 0usize..8) {
            let image: Vec<i32> = (1..=(ch * g.image_size()) as i32).collect();
            let full = naive(&g, ch, &image);
            let (rows, osz) = (g.output[0], g.output_size());
            let (r0, r1) = (a.min(b).min(rows), a.max(b).min(rows));
            let rest = osz / rows;
            let part_g = g.output_rows(r0, r1);
            let w = (r1 - r0) * rest;
            let mut part = vec![-7; ch * g.kernel_size() * w];
            im2col(&part_g, ch, &image, 0, &mut part);
            for r in 0..ch * g.kernel_size() {
                prop_assert_eq!(&part[r * w..][..w], &full[r * osz + r0 * rest..][..w]);
            }
        }

        #[test]
        fn col2im_is_the_adjoint((g, ch) in geometry()) {
            // <im2col(x), y> == <x, col2im(y)> for all x, y
            let n_img = ch * g.image_size();
            let n_col = ch * g.kernel_size() * g.output_size();
            let x: Vec<i64> = (0..n_img).map(|i| (i as i64 * 7) % 5 - 2).collect();
            let y: Vec<i64> = (0..n_col).map(|i| (i as i64 * 3) % 7 - 3).collect();
            let mut cx = vec![0; n_col];
            im2col(&g, ch, &x, 0, &mut cx);
            let mut ty = vec![0; n_img];
            col2im(&g, ch, &y, &mut ty);
            let lhs: i64 = cx.iter().zip(&y).map(|(a, b)| a * b).sum();
            let rhs: i64 = x.iter().zip(&ty).map(|(a, b)| a * b).sum();
            prop_assert_eq!(lhs, rhs);
        }
    }

    #[test]
    fn two_d_with_padding() {
        // 1 channel 3x3 image, 2x2 kernel, stride 2, pad 1: 2x2 output
        let g = ConvGeometry::new_2d([3, 3], [2, 2], [2, 2], [2, 2], [1, 1], [1, 1]);
        let img: Vec<i32> = (1..=9).collect();
        let mut col = vec![0; 16];
        im2col(&g, 1, &img, 0, &mut col);
        assert_eq!(col, vec![0, 0, 0, 5, 0, 0, 4, 6, 0, 2, 0, 8, 1, 3, 7, 9]);
    }

    proptest! {
        #[test]
        fn direct_matches_im2col((g, _ch) in geometry_with(2..3, 0..3)) {
            let image: Vec<i64> = (0..g.image_size() as i64).map(|i| i % 7 - 3).collect();
            let kernel: Vec<i64> = (0..g.kernel_size() as i64).map(|i| i % 5 - 2).collect();
            let mut col = vec![0; g.kernel_size() * g.output_size()];
            im2col(&g, 1, &image, 0, &mut col);
            let mut want = vec![0i64; g.output_size()];
            for (r, &kv) in kernel.iter().enumerate() {
                for (o, w) in want.iter_mut().enumerate() {
                    *w += kv * col[r * g.output_size() + o];
                }
            }
            let mut got = vec![0i64; g.output_size()];
            conv2d_direct(&g, &image, &kernel, 0, &mut got, &mut vec![]);
            prop_assert_eq!(got, want);
        }
    }
}
