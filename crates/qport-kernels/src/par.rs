//! Intra-op parallelism: the number of threads one inference may use, and
//! the helper kernels split their work with.
//!
//! The count is process-wide ([`set_threads`], default 1): a kernel large
//! enough to be worth it ([`MIN_WORK`] multiply-adds) splits its output
//! into up to that many disjoint blocks, runs one on the calling thread and
//! the others on a shared pool of worker threads, and returns when all are
//! done. Every output element is computed by exactly one thread with the
//! same sequence of operations as single-threaded, so results are
//! bit-identical whatever the thread count (tested).
//!
//! The workers spin for a short while ([`SPIN`]) after each job before
//! they sleep, so the next split of an inference (usually a few
//! microseconds to a millisecond later) starts at once instead of waiting
//! for a sleeping thread to be woken (tens of microseconds in a virtual
//! machine, per split). The pool serves one split at a time: a split
//! issued while another thread's split holds it runs on its own thread.
//!
//! ```
//! qport_kernels::par::set_threads(2);
//! assert_eq!(qport_kernels::par::threads(), 2);
//! qport_kernels::par::set_threads(1);
//! ```

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Multiply-adds below which a kernel stays on the calling thread (the
/// hand-off to spinning workers costs a microsecond or two). Measured
/// against 2^21 and 2^19 on MobileNetV2, EfficientNet-Lite0 and ResNet-50
/// (`op_profile`, `f32-rne`) on a 2-vCPU Zen 4 guest at 2 threads and a
/// 16-core Xeon at 2, 8 and 16: 2^18 was the fastest or level on every
/// model and thread count (the small networks' 7 × 7 to 28 × 28 layers
/// split; MobileNetV2 on 8 threads 5.0 → 2.4 ms from 2^21), and one
/// thread never splits.
pub const MIN_WORK: usize = 1 << 18;

/// How long a worker spins for the next job before it sleeps.
pub const SPIN: Duration = Duration::from_micros(500);

static THREADS: AtomicUsize = AtomicUsize::new(1);
static POOL: Mutex<Option<Arc<Pool>>> = Mutex::new(None);
static PARALLEL: AtomicUsize = AtomicUsize::new(0);

/// Splits that ran on more than one thread since the process started:
/// lets a test check that a thread-count comparison really ran parallel
/// code (a model too small for [`MIN_WORK`] never splits).
pub fn parallel_splits() -> usize {
    PARALLEL.load(Ordering::Relaxed)
}

/// Sets the threads one inference may use (at least 1; clamped to 256).
pub fn set_threads(n: usize) {
    THREADS.store(n.clamp(1, 256), Ordering::Relaxed);
}

/// The threads one inference may use.
pub fn threads() -> usize {
    THREADS.load(Ordering::Relaxed)
}

/// A job the pool's workers run: called with the worker's part index
/// (1 ..= workers). The lifetime is erased; [`Pool::run`] keeps the
/// closure alive until every worker is done with it.
type Job = *const (dyn Fn(usize) + Sync);

/// Worker threads that spin, then sleep, between jobs.
struct Pool {
    /// Worker threads (the caller runs part 0).
    workers: usize,
    /// Held by the thread whose split the pool is running.
    busy: Mutex<()>,
    /// Bumped for every job (and at shutdown); a worker runs a job when
    /// it sees a new value.
    epoch: AtomicU64,
    /// The current job, written under `busy` before `epoch` is bumped.
    job: UnsafeCell<Option<Job>>,
    /// Workers not yet done with the current job.
    pending: AtomicUsize,
    /// A worker's part panicked.
    panicked: AtomicBool,
    /// The pool is being replaced: workers exit at the next epoch.
    stop: AtomicBool,
    /// Sleeping workers, and their wake-up.
    sleepers: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
}

// SAFETY: `job` is written only by the thread holding `busy`, before the
// release bump of `epoch`, and read by workers only after they acquire
// that epoch and before they decrement `pending`, which the writer waits
// to reach zero before it writes again or returns.
unsafe impl Sync for Pool {}
// SAFETY: as above; the raw job pointer is only dereferenced under that
// protocol.
unsafe impl Send for Pool {}

impl Pool {
    /// A pool of `workers` threads (named `qport-worker-<i>`); `None`
    /// when the system refuses a thread.
    fn new(workers: usize) -> Option<Arc<Pool>> {
        let pool = Arc::new(Pool {
            workers,
            busy: Mutex::new(()),
            epoch: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
        });
        for i in 1..=workers {
            let p = pool.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("qport-worker-{}", i - 1))
                .spawn(move || p.work(i));
            if spawned.is_err() {
                pool.shut_down();
                return None;
            }
        }
        Some(pool)
    }

    /// A worker's loop: wait for a new epoch (spinning for [`SPIN`], then
    /// asleep), run part `index` of its job, report.
    fn work(&self, index: usize) {
        let mut seen = 0;
        loop {
            let mut e = self.epoch.load(Ordering::Acquire);
            let start = Instant::now();
            let mut spins = 0u32;
            while e == seen {
                std::hint::spin_loop();
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                    let mut g = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
                    self.sleepers.fetch_add(1, Ordering::SeqCst);
                    while self.epoch.load(Ordering::SeqCst) == seen {
                        g = self.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                    self.sleepers.fetch_sub(1, Ordering::SeqCst);
                }
                e = self.epoch.load(Ordering::Acquire);
            }
            seen = e;
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // SAFETY: see `unsafe impl Sync for Pool`: the job was written
            // before this epoch and stays alive until `pending` is zero.
            let job = unsafe { (*self.job.get()).expect("a job with the epoch") };
            // SAFETY: as above, the closure outlives this call.
            let f = unsafe { &*job };
            let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index))).is_ok();
            if !ok {
                self.panicked.store(true, Ordering::Relaxed);
            }
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Wakes sleeping workers after an epoch bump.
    fn notify(&self) {
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
    }

    /// Ends the workers (after their current job).
    fn shut_down(&self) {
        // (after a split in progress: `run` refuses a stopped pool)
        let _busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        self.stop.store(true, Ordering::Release);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.notify();
    }

    /// Runs `f(0)` on this thread and `f(1..=workers)` on the workers,
    /// returning when all are done; `false` (nothing run) when another
    /// thread's split holds the pool. A panic in any part is raised here
    /// after every part has finished.
    fn run(&self, f: &(dyn Fn(usize) + Sync)) -> bool {
        let Ok(_busy) = self.busy.try_lock() else {
            return false;
        };
        if self.stop.load(Ordering::Acquire) {
            return false; // replaced (a new thread count) after we got it
        }
        // SAFETY: only the lifetime is erased; this function does not
        // return (or unwind) before every worker is done with the job.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        // SAFETY: we hold `busy` and no worker reads `job` until the epoch
        // below (the previous job's workers all finished: `pending` was 0).
        unsafe { *self.job.get() = Some(job) };
        self.panicked.store(false, Ordering::Relaxed);
        self.pending.store(self.workers, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::SeqCst);
        self.notify();
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(0)));
        let mut spins = 0u32;
        while self.pending.load(Ordering::Acquire) != 0 {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) {
                std::thread::yield_now();
            }
        }
        if let Err(p) = mine {
            std::panic::resume_unwind(p);
        }
        assert!(
            !self.panicked.load(Ordering::Relaxed),
            "a part of a parallel split panicked on a worker thread"
        );
        true
    }
}

/// The worker pool for `n` threads in all (`n − 1` workers plus the
/// caller), built on first use and rebuilt when the count changes.
fn pool(n: usize) -> Option<Arc<Pool>> {
    let mut p = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pool) = p.as_ref() {
        if pool.workers + 1 == n {
            return Some(pool.clone());
        }
    }
    if let Some(old) = p.take() {
        old.shut_down();
    }
    let pool = Pool::new(n - 1)?;
    *p = Some(pool.clone());
    Some(pool)
}

thread_local! {
    /// Set while this thread runs one part of a [`split`] that went
    /// parallel: a split inside it runs whole, on this thread.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with [`INSIDE`] set on this thread (restored also when `f`
/// panics).
fn inside<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            INSIDE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(INSIDE.with(|c| c.replace(true)));
    f()
}

/// The threads a [`split`] of `work` would hand parts to (before its
/// block count caps them): [`threads`], or 1 when `work` is below
/// [`MIN_WORK`] or the calling thread is itself one part of a parallel
/// split. For callers that size their blocks to the split.
pub fn parts_for(work: usize) -> usize {
    if work < MIN_WORK || INSIDE.with(|c| c.get()) {
        1
    } else {
        threads()
    }
}

/// Splits `0..total` into up to [`threads`] ranges whose starts are
/// multiples of `align`, and runs `f(start, end)` on each, the first on the
/// calling thread, the rest on the pool; one range (the whole) when `work`
/// is below [`MIN_WORK`], one thread is set, or the caller is itself one
/// part of a parallel split (so an outer split over large blocks keeps
/// every thread busy with one hand-off, and the kernels inside a block run
/// as on one thread).
pub fn split(total: usize, align: usize, work: usize, f: impl Fn(usize, usize) + Sync) {
    let t = threads();
    let align = align.max(1);
    let blocks = total.div_ceil(align);
    let parts = parts_for(work).min(blocks);
    if parts <= 1 {
        f(0, total);
        return;
    }
    let Some(pool) = pool(t) else {
        f(0, total);
        return;
    };
    let per = blocks.div_ceil(parts) * align;
    // part i: the i-th range of `per` (the last one shorter), none past
    // the end
    let part = |i: usize| {
        let (a, b) = (i * per, ((i + 1) * per).min(total));
        if i < parts && a < b {
            inside(|| f(a, b));
        }
    };
    if pool.run(&part) {
        PARALLEL.fetch_add(1, Ordering::Relaxed);
    } else {
        // another thread's split holds the pool: this one runs here
        f(0, total);
    }
}

/// Columns `cols` of every row of a row-major matrix, one block of a
/// [`split_columns`]: rows are reached one at a time, each as a slice of
/// the block's columns.
pub struct ColumnBlock<'a, T> {
    ptr: SendPtr<T>,
    rows: usize,
    row_len: usize,
    cols: std::ops::Range<usize>,
    _out: PhantomData<&'a mut [T]>,
}

impl<T> ColumnBlock<'_, T> {
    /// The block's columns.
    pub fn cols(&self) -> std::ops::Range<usize> {
        self.cols.clone()
    }

    /// The matrix's rows (every block has all of them).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row `r`'s part in this block (`cols().len()` elements).
    ///
    /// # Panics
    /// When `r` is not below [`Self::rows`].
    pub fn row(&mut self, r: usize) -> &mut [T] {
        assert!(r < self.rows, "row {r} of {}", self.rows);
        // SAFETY: `split_columns` checked that every row lies in the
        // matrix and that the blocks' column ranges do not overlap; this
        // block is the only one with these columns, and the `&mut self`
        // borrow keeps two slices of one block from coexisting.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.ptr.get().add(r * self.row_len + self.cols.start),
                self.cols.len(),
            )
        }
    }

    /// The block's first element (row 0, column `cols().start`) and the
    /// matrix's row stride, for kernels that write the block's rows
    /// themselves (only columns `cols()` of each row, while `self` is
    /// borrowed).
    pub(crate) fn raw_parts(&mut self) -> (*mut T, usize) {
        // SAFETY: column `cols.start` of row 0 is inside the matrix
        // (`split_columns` checked the bounds).
        (unsafe { self.ptr.get().add(self.cols.start) }, self.row_len)
    }

    /// The whole matrix when this block covers every column (it is then
    /// contiguous), for kernels that split it further.
    pub fn whole(&mut self) -> Option<&mut [T]> {
        (self.cols.start == 0 && self.cols.end == self.row_len).then(|| {
            // SAFETY: the block owns every column of every row, i.e. the
            // whole matrix, for the `&mut self` borrow.
            unsafe { std::slice::from_raw_parts_mut(self.ptr.get(), self.rows * self.row_len) }
        })
    }
}

/// [`split`] over column blocks of the row-major matrix `out`
/// (`row_len` columns per row): block `i` is columns
/// `bounds[i]..bounds[i + 1]` of every row, and `f(i, block)` runs once for
/// each, blocks `0..n` divided into contiguous runs between the threads
/// (so a caller whose blocks are equal in size and a multiple of the
/// thread count in number keeps them all busy). For kernels that compute
/// a block of output positions for every channel at once, as a row-blocked
/// convolution does.
///
/// ```
/// // a 2×6 matrix in blocks of columns 0..2, 2..4 and 4..6
/// let mut y = vec![0usize; 12];
/// qport_kernels::par::split_columns(&mut y, 6, &[0, 2, 4, 6], 1 << 30, |i, mut b| {
///     for r in 0..b.rows() {
///         let c0 = b.cols().start;
///         for (j, v) in b.row(r).iter_mut().enumerate() {
///             *v = 100 * i + 10 * r + c0 + j;
///         }
///     }
/// });
/// assert_eq!(&y[..6], &[0, 1, 102, 103, 204, 205]);
/// assert_eq!(&y[6..], &[10, 11, 112, 113, 214, 215]);
/// ```
///
/// # Panics
/// When `row_len` does not divide `out.len()`, or `bounds` is not
/// non-decreasing within `0..=row_len`.
pub fn split_columns<T: Send>(
    out: &mut [T],
    row_len: usize,
    bounds: &[usize],
    work: usize,
    f: impl Fn(usize, ColumnBlock<'_, T>) + Sync,
) {
    let rows = out.len().checked_div(row_len).unwrap_or(0);
    assert_eq!(rows * row_len, out.len(), "rows of {row_len} columns");
    assert!(
        bounds.windows(2).all(|w| w[0] <= w[1]) && bounds.last().is_none_or(|&b| b <= row_len),
        "column bounds {bounds:?} of {row_len} columns"
    );
    let n = bounds.len().saturating_sub(1);
    let ptr = SendPtr(out.as_mut_ptr());
    let ptr = &ptr;
    split(n, 1, work, |b0, b1| {
        for i in b0..b1 {
            f(
                i,
                ColumnBlock {
                    ptr: SendPtr(ptr.get()),
                    rows,
                    row_len,
                    cols: bounds[i]..bounds[i + 1],
                    _out: PhantomData,
                },
            );
        }
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

    #[test]
    fn splits_inside_a_parallel_part_run_whole_and_columns_cover_once() {
        let _g = crate::test_lock();
        for t in [1, 2, 3] {
            set_threads(t);
            let inner = AtomicUsize::new(0);
            split(6, 1, MIN_WORK, |_, _| {
                // whole: inside a parallel part, or on one thread
                split(100, 1, MIN_WORK, |a, b| {
                    assert_eq!((a, b), (0, 100));
                    inner.fetch_add(1, Ordering::Relaxed);
                })
            });
            // one inner split per outer part (6 in parts of 6 / t)
            assert_eq!(inner.load(Ordering::Relaxed), t);
            // 5 rows of 9 columns in uneven column blocks
            let mut y = vec![0u32; 45];
            split_columns(&mut y, 9, &[0, 4, 4, 7, 9], MIN_WORK, |_, mut b| {
                for r in 0..b.rows() {
                    b.row(r).iter_mut().for_each(|v| *v += 1);
                }
                assert_eq!(b.whole().is_some(), b.cols() == (0..9));
            });
            assert!(y.iter().all(|&v| v == 1), "{t}: {y:?}");
        }
        set_threads(1);
    }

    #[test]
    fn a_panicking_part_reaches_the_caller_and_the_pool_goes_on() {
        let _g = crate::test_lock();
        set_threads(2);
        // the second part runs on the worker
        let r = std::panic::catch_unwind(|| {
            split(2, 1, MIN_WORK, |a, _| assert!(a == 0, "part {a} fails"));
        });
        assert!(r.is_err());
        let hits = AtomicUsize::new(0);
        split(2, 1, MIN_WORK, |a, b| {
            hits.fetch_add(b - a, Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 2);
        set_threads(1);
    }

    #[test]
    fn concurrent_splits_and_new_thread_counts_each_cover_once() {
        let _g = crate::test_lock();
        for t in [2, 3, 2, 4] {
            set_threads(t);
            // four threads split at once: one holds the pool, the others
            // run their splits whole on their own threads
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for _ in 0..50 {
                            let hits: Vec<AtomicUsize> =
                                (0..64).map(|_| AtomicUsize::new(0)).collect();
                            split(64, 8, MIN_WORK, |a, b| {
                                for h in &hits[a..b] {
                                    h.fetch_add(1, Ordering::Relaxed);
                                }
                            });
                            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                        }
                    });
                }
            });
        }
        set_threads(1);
    }
}
