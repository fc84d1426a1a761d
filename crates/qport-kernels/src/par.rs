//! Intra-op parallelism: the number of threads one inference may use, and
//! the helper kernels split their work with.
//!
//! The count is process-wide ([`set_threads`], default 1): a kernel large
//! enough to be worth it ([`MIN_WORK`] multiply-adds) splits its output
//! into up to that many disjoint blocks, runs one on the calling thread and
//! the others on a shared pool of worker threads (`rayon`), and returns
//! when all are done. Every output element is computed by exactly one
//! thread with the same sequence of operations as single-threaded, so
//! results are bit-identical whatever the thread count (tested).
//!
//! ```
//! qport_kernels::par::set_threads(2);
//! assert_eq!(qport_kernels::par::threads(), 2);
//! qport_kernels::par::set_threads(1);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Multiply-adds below which a kernel stays on the calling thread (the
/// hand-off costs a few microseconds).
pub const MIN_WORK: usize = 1 << 21;

static THREADS: AtomicUsize = AtomicUsize::new(1);
static POOL: Mutex<Option<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(None);

/// Sets the threads one inference may use (at least 1; clamped to 256).
pub fn set_threads(n: usize) {
    THREADS.store(n.clamp(1, 256), Ordering::Relaxed);
}

/// The threads one inference may use.
pub fn threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// The worker pool for `n` threads in all (`n − 1` workers plus the
/// caller), built on first use and rebuilt when the count changes.
fn pool(n: usize) -> Option<Arc<rayon::ThreadPool>> {
    let mut p = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((k, pool)) = p.as_ref() {
        if *k == n {
            return Some(pool.clone());
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(n - 1)
        .thread_name(|i| format!("qport-worker-{i}"))
        .build()
        .ok()?;
    let pool = Arc::new(pool);
    *p = Some((n, pool.clone()));
    Some(pool)
}

/// Splits `0..total` into up to [`threads`] ranges whose starts are
/// multiples of `align`, and runs `f(start, end)` on each, the first on the
/// calling thread, the rest on the pool; one range (the whole) when `work`
/// is below [`MIN_WORK`] or one thread is set.
pub fn split(total: usize, align: usize, work: usize, f: impl Fn(usize, usize) + Sync) {
    let t = threads();
    let align = align.max(1);
    let blocks = total.div_ceil(align);
    let parts = t.min(blocks);
    if parts <= 1 || work < MIN_WORK {
        f(0, total);
        return;
    }
    let Some(pool) = pool(t) else {
        f(0, total);
        return;
    };
    let per = blocks.div_ceil(parts) * align;
    let ranges: Vec<(usize, usize)> = (0..parts)
        .map(|i| (i * per, ((i + 1) * per).min(total)))
        .filter(|(a, b)| a < b)
        .collect();
    let f = &f;
    pool.in_place_scope(|s| {
        for &(a, b) in &ranges[1..] {
            s.spawn(move |_| f(a, b));
        }
        f(ranges[0].0, ranges[0].1);
    });
}

/// [`split`] over the elements of `out`: `f(start, block)` gets each
/// disjoint block `out[start..start + block.len()]`, every start a
/// multiple of `align` (so a kernel with `align`-element vector steps
/// takes its scalar tail only at the very end, as on one thread); the
/// blocks cover `out` once.
///
/// ```
/// let mut y = vec![0usize; 12];
/// qport_kernels::par::split_mut(&mut y, 4, 1 << 30, |start, block| {
///     assert_eq!(start % 4, 0);
///     for (i, v) in block.iter_mut().enumerate() {
///         *v = start + i;
///     }
/// });
/// assert_eq!(y, (0..12).collect::<Vec<_>>());
/// ```
pub fn split_mut<T: Send>(
    out: &mut [T],
    align: usize,
    work: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    let p = SendPtr(out.as_mut_ptr());
    let p = &p;
    split(out.len(), align, work, |a, b| {
        // SAFETY: the ranges of `split` are disjoint and within `out`,
        // which stays mutably borrowed until every block has returned.
        let block = unsafe { std::slice::from_raw_parts_mut(p.get().add(a), b - a) };
        f(a, block)
    });
}

/// Multiply-add equivalents of one element of a streaming (elementwise,
/// requantizing, pooling) step, for the `work` of [`split`]: such a step
/// splits from about `MIN_WORK / STREAM_COST` elements.
pub const STREAM_COST: usize = 64;

/// A raw pointer that may cross threads: for kernels whose blocks write
/// disjoint elements of one output.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) *mut T);

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole wrapper).
    pub(crate) fn get(&self) -> *mut T {
        self.0
    }
}

// SAFETY: users only write disjoint elements through it, and the scope in
// `split` joins every writer before the output is read.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn ranges_cover_everything_once_and_align() {
        let _g = crate::test_lock();
        for t in [1, 2, 3, 8] {
            set_threads(t);
            for (total, align) in [(100, 4), (7, 16), (1000, 32), (1, 1)] {
                let hits: Vec<AtomicUsize> = (0..total).map(|_| AtomicUsize::new(0)).collect();
                split(total, align, MIN_WORK, |a, b| {
                    assert!(a % align == 0 && a < b && b <= total);
                    for h in &hits[a..b] {
                        h.fetch_add(1, Ordering::Relaxed);
                    }
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
        set_threads(1);
    }
}
