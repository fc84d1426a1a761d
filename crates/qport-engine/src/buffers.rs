//! A per-thread pool of `f32` buffers that a [`crate::Plan`] run recycles:
//! when a value dies, its storage returns here, and operators that
//! overwrite every element of their output take it back instead of
//! allocating and zero-filling a new one.
//!
//! Buffers are matched by exact length, so a reused buffer needs neither
//! growing nor zero-filling. Taken buffers hold stale (initialised) values, so only kernels that
//! write every output element may use [`take_f32`]; results never depend
//! on what the buffer held.

use qport_core::{Tensor, TensorData};
use std::cell::RefCell;

/// Buffers kept per thread at most.
const MAX_BUFFERS: usize = 128;

/// Buffers of one length kept per thread at most.
const MAX_PER_LENGTH: usize = 3;

thread_local! {
    static POOL: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

thread_local! {
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The per-thread kernel scratch vector (any length, stale contents), to
/// be handed back with [`give_scratch`] so its allocation is reused.
pub(crate) fn take_scratch() -> Vec<f32> {
    SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Returns the kernel scratch vector taken with [`take_scratch`].
pub(crate) fn give_scratch(v: Vec<f32>) {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if v.capacity() > s.capacity() {
            *s = v;
        }
    });
}

/// A buffer of exactly `len` elements with unspecified (but initialised)
/// contents: the most recently returned pooled buffer of that length (a
/// plan run asks for the same sizes every time; the latest is the likeliest
/// to be in cache), else a new one.
pub(crate) fn take_f32(len: usize) -> Vec<f32> {
    POOL.with(|p| take(&mut p.borrow_mut(), len))
}

/// Returns the storage of a dead `f32`, `u8` or `i8` tensor to its pool
/// (other dtypes are dropped).
pub(crate) fn recycle(t: Tensor) {
    let (_, data) = t.into_parts();
    match data {
        TensorData::F32(v) => give_f32(v),
        TensorData::U8(v) => give_bytes(v),
        TensorData::I8(v) => give_bytes(i8_to_u8(v)),
        _ => {}
    }
}

thread_local! {
    static POOL8: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A `u8` buffer of exactly `len` elements with unspecified (initialised)
/// contents, from the pool of dead 8-bit tensors (quantized activations)
/// when one of that length is there.
pub(crate) fn take_u8(len: usize) -> Vec<u8> {
    POOL8.with(|p| take(&mut p.borrow_mut(), len))
}

/// [`take_u8`] as `i8`.
pub(crate) fn take_i8(len: usize) -> Vec<i8> {
    let v = std::mem::ManuallyDrop::new(take_u8(len));
    // SAFETY: u8 and i8 have the same size and alignment and every bit
    // pattern is valid for both; the allocation is handed over whole.
    unsafe { Vec::from_raw_parts(v.as_ptr() as *mut i8, v.len(), v.capacity()) }
}

fn i8_to_u8(v: Vec<i8>) -> Vec<u8> {
    let v = std::mem::ManuallyDrop::new(v);
    // SAFETY: as in `take_i8`.
    unsafe { Vec::from_raw_parts(v.as_ptr() as *mut u8, v.len(), v.capacity()) }
}

/// Returns an 8-bit buffer to its pool (same limits as [`give_f32`]).
fn give_bytes(v: Vec<u8>) {
    if v.len() >= 4096 {
        POOL8.with(|p| keep(&mut p.borrow_mut(), v));
    }
}

/// The most recently added buffer of `pool` of exactly `len` elements,
/// removed from it, else a new zero-filled one.
fn take<T: Clone + Default>(pool: &mut Vec<Vec<T>>, len: usize) -> Vec<T> {
    match pool.iter().rposition(|v| v.len() == len) {
        Some(i) => pool.remove(i),
        None => vec![T::default(); len],
    }
}

/// Adds `v` to `pool`: at most [`MAX_PER_LENGTH`] buffers of one length
/// and [`MAX_BUFFERS`] in all, dropping the oldest.
fn keep<T>(pool: &mut Vec<Vec<T>>, v: Vec<T>) {
    if pool.iter().filter(|b| b.len() == v.len()).count() >= MAX_PER_LENGTH {
        return;
    }
    if pool.len() >= MAX_BUFFERS {
        pool.remove(0);
    }
    pool.push(v);
}

/// Returns a buffer to the pool. The pool keeps at most
/// [`MAX_PER_LENGTH`] buffers of one length (a plan needs few of each size
/// at a time) and at most [`MAX_BUFFERS`] in all, dropping the oldest.
pub(crate) fn give_f32(v: Vec<f32>) {
    if v.len() >= 1024 {
        POOL.with(|p| keep(&mut p.borrow_mut(), v));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_byte_buffers_across_u8_and_i8() {
        recycle(Tensor::from_vec(vec![5000], vec![7u8; 5000]).unwrap());
        let v = take_i8(5000);
        assert_eq!(v, vec![7i8; 5000]);
        recycle(Tensor::from_vec(vec![5000], v).unwrap());
        assert_eq!(take_u8(5000), vec![7u8; 5000]);
        assert_eq!(take_u8(6000), vec![0u8; 6000]);
    }

    #[test]
    fn reuses_buffers_of_the_same_length() {
        give_f32(vec![1.0; 5000]);
        give_f32(vec![2.0; 2000]);
        let v = take_f32(2000);
        assert_eq!(v, vec![2.0; 2000]);
        let w = take_f32(4000);
        assert_eq!(w, vec![0.0; 4000]);
        assert_eq!(take_f32(5000).len(), 5000);
    }
}
