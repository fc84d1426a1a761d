//! Buffers used from their first cache-line boundary.
//!
//! The system allocator starts a large block 16 bytes past a page
//! boundary, so a kernel's 64-byte vectors at whole-vector offsets from a
//! `Vec`'s start would each straddle two cache lines. The packed operands
//! (filters, weight tiles, per-call packed inputs) are over-allocated by
//! one line and used from the first line boundary instead.
//!
//! ```
//! let mut buf: Vec<u8> = Vec::new();
//! let part = qport_kernels::aligned::line_slice(&mut buf, 1000);
//! assert_eq!(part.len(), 1000);
//! assert_eq!(part.as_ptr() as usize % qport_kernels::aligned::LINE, 0);
//! ```

/// Bytes in a cache line.
pub const LINE: usize = 64;

/// Elements of `T` a buffer needs beyond its used part for that part to
/// start on a line boundary.
pub const fn slack<T>() -> usize {
    LINE / std::mem::size_of::<T>()
}

/// Elements of `T` from the start of `buf` to its first line boundary
/// (at most [`slack`]).
pub fn line_offset<T>(buf: &[T]) -> usize {
    buf.as_ptr().align_offset(LINE).min(slack::<T>())
}

/// The `len` elements of `buf` from its first line boundary, `buf` grown
/// (with default values) to hold them; what they held before is kept
/// only where `buf` did not grow.
pub fn line_slice<T: Clone + Default>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    if buf.len() < len + slack::<T>() {
        buf.resize(len + slack::<T>(), T::default());
    }
    let off = line_offset(buf);
    &mut buf[off..off + len]
}
