//! Heap traffic of steady-state inference, measured with a counting global
//! allocator (issue 17's memory target): once a [`Session`] has run a plan
//! on inputs of one shape, further runs on inputs of that shape reuse every
//! value's buffer, and the target is that they **allocate nothing**. Held on
//! EfficientNet-Lite0 and ResNet-50 (random weights), FP32 and their onnxruntime u8s8 QDQ
//! artifacts under `IntegerPlan` (`f32-rne`), on one intra-op thread, with
//! the outputs checked bit for bit against [`Plan::run`]:
//!
//! - no operator outside [`PENDING`] allocates in a warm run (attributed
//!   by op type between the taps of `Session::run_with_tap`, so a failure
//!   names the op); EfficientNet-Lite0's plans allocate nothing at all,
//! - the operators in [`PENDING`] allocate in every warm run where the
//!   plan has them (so the list shrinks when one stops: the test fails
//!   until it is taken off),
//! - five more warm runs allocate exactly that (nothing, without pending
//!   operators) and leave nothing allocated,
//! - [`Plan::run`] (which borrows a pooled arena, copies the inputs in and
//!   moves the outputs out) makes at most a dozen allocations.
//!
//! The numbers print with `--nocapture`.

use qport_core::arith::ArithProfile;
use qport_core::Tensor;
use qport_engine::{IntegerPlan, Plan, Session};
use qport_tests::fixture;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static BLOCKS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards to the system allocator; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Relaxed);
        if ON.load(Relaxed) {
            BLOCKS.fetch_add(1, Relaxed);
            BYTES.fetch_add(l.size() as u64, Relaxed);
        }
        // SAFETY: same layout contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Relaxed);
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as i64 - l.size() as i64, Relaxed);
        if ON.load(Relaxed) {
            BLOCKS.fetch_add(1, Relaxed);
            BYTES.fetch_add(new as u64, Relaxed);
        }
        // SAFETY: as in `dealloc`.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Tests in this file run one at a time (the counters are global).
static SERIAL: Mutex<()> = Mutex::new(());

/// (blocks, bytes, live-byte change) of `f`.
fn count(f: impl FnOnce()) -> (u64, u64, i64) {
    BLOCKS.store(0, Relaxed);
    BYTES.store(0, Relaxed);
    let live = LIVE.load(Relaxed);
    ON.store(true, Relaxed);
    f();
    ON.store(false, Relaxed);
    (
        BLOCKS.load(Relaxed),
        BYTES.load(Relaxed),
        LIVE.load(Relaxed) - live,
    )
}

/// Operator types whose warm runs still allocate (met in ResNet-50's FP32
/// plan): `MaxPool` builds its window table per call and returns a fresh
/// tensor, and the float unary operators (`Relu` after a residual `Add`,
/// which no convolution absorbs) map into a fresh vector.
const PENDING: &[&str] = &["MaxPool", "Relu"];

/// The op type without its domain (`com.microsoft:QGemm` → `QGemm`).
fn base(op: &str) -> &str {
    op.rsplit(':').next().unwrap_or(op)
}

/// Allocations per op type (without domain) during one warm `run_with_tap` of `session`
/// (the counter is read at each tap, with counting off while the tap
/// records).
fn by_op(session: &mut Session, plan: &Plan, inputs: &[&Tensor]) -> BTreeMap<String, u64> {
    let op_of: HashMap<&str, &str> = plan.producers().collect();
    let mut per: Vec<(&str, u64)> = Vec::with_capacity(2 * op_of.len() + 8);
    BLOCKS.store(0, Relaxed);
    ON.store(true, Relaxed);
    session
        .run_with_tap(inputs, &mut |name, _| {
            ON.store(false, Relaxed);
            per.push((
                op_of.get(name).copied().unwrap_or("?"),
                BLOCKS.swap(0, Relaxed),
            ));
            ON.store(true, Relaxed);
        })
        .unwrap();
    ON.store(false, Relaxed);
    let mut m = BTreeMap::new();
    for (op, n) in per {
        *m.entry(base(op).to_string()).or_default() += n;
    }
    m.retain(|_, n| *n > 0);
    m
}

/// Runs a session of `plan` warm on `x` five times: outputs equal to
/// `want` bit for bit, the allocations as the [module docs](self) say;
/// the blocks each warm run allocates.
fn check(name: &str, plan: &Plan, x: &[(String, Tensor)], want: &[(String, Tensor)]) -> u64 {
    let inputs: Vec<&Tensor> = x.iter().map(|(_, t)| t).collect();
    let mut session: Session = plan.session();
    // the first run sizes every buffer; the next ones let the buffer pool
    // reach its steady size: a pending operator's fresh output pushes the
    // one it replaces into the pool, which keeps up to three buffers of a
    // length (measured: ResNet-50's u8 MaxPool output adds 200704 live
    // bytes in each of its first warm runs)
    for _ in 0..2 {
        session.run(&inputs).unwrap();
    }
    let per_op = by_op(&mut session, plan, &inputs);
    for _ in 0..2 {
        session.run(&inputs).unwrap();
    }
    let pending: u64 = per_op.values().sum();
    for op in per_op.keys() {
        assert!(
            PENDING.contains(&op.as_str()),
            "{name}: {op} allocates in a warm run (blocks per op type): {per_op:?}"
        );
    }
    let used: Vec<&str> = plan.producers().map(|(_, op)| base(op)).collect();
    for op in PENDING.iter().filter(|op| used.contains(op)) {
        assert!(
            per_op.contains_key(*op),
            "{name}: {op} no longer allocates: take it off PENDING"
        );
    }
    for run in 0..5 {
        let (blocks, bytes, live) = count(|| session.run(&inputs).unwrap());
        for (i, (n, w)) in want.iter().enumerate() {
            assert_eq!(
                session.output(i).unwrap(),
                w,
                "{name}: output {n} of warm run {run} differs from Plan::run"
            );
        }
        assert_eq!(
            blocks, pending,
            "{name}: warm run {run} made {blocks} allocations ({bytes} bytes), \
             the pending operators {pending}: {per_op:?}"
        );
        assert_eq!(
            live, 0,
            "{name}: warm run {run} changed live bytes by {live}"
        );
    }
    eprintln!(
        "{name}: {} steps; a warm run allocates {pending} blocks, all in {per_op:?}",
        plan.len()
    );
    pending
}

/// The first eval crop (`[1, 3, 224, 224]`, the input of both models).
fn crop() -> Vec<(String, Tensor)> {
    qport_tests::photo_crops("eval", 1).remove(0).inputs
}

/// `x` under the input name of `model`.
fn renamed(model: &qport_onnx::Model, x: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    let name = model.graph.inputs[0].name.clone();
    x.into_iter().map(|(_, t)| (name.clone(), t)).collect()
}

/// Checks the FP32 plan of `fp32` and the `f32-rne` integer plan of `qdq`
/// (fixture paths) on the first eval crop; the blocks a warm run of each
/// allocates.
fn check_family(family: &str, fp32: &str, qdq: &str) -> [u64; 2] {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    qport_kernels::par::set_threads(1);
    let model = qport_onnx::load::load(fixture(fp32)).unwrap();
    let plan = Plan::new(&model).unwrap();
    let x = renamed(&model, crop());
    let want = plan.run(x.clone()).unwrap();
    let fp32 = check(&format!("{family} fp32"), &plan, &x, &want);

    let model = qport_onnx::load::load(fixture(qdq)).unwrap();
    let plan = IntegerPlan::new(&model, &ArithProfile::preset("f32-rne").unwrap()).unwrap();
    let x = renamed(&model, crop());
    let want = plan.run(x.clone()).unwrap();
    [
        fp32,
        check(&format!("{family} int8 f32-rne"), plan.plan(), &x, &want),
    ]
}

#[test]
fn efficientnet_warm_runs_allocate_nothing() {
    assert_eq!(
        check_family(
            "efficientnet-lite0",
            "models/efficientnet-lite0.onnx",
            "models/efficientnet-lite0.qdq-u8s8.onnx",
        ),
        [0, 0],
        "EfficientNet-Lite0's warm runs (FP32, int8) allocate nothing"
    );
}

#[test]
fn resnet50_warm_runs_allocate_only_in_pending_operators() {
    check_family(
        "resnet50",
        "models/bench/resnet50.random.onnx",
        "models/families/resnet50.qdq-u8s8.onnx",
    );
}

#[test]
fn plan_runs_reuse_the_arena_and_free_what_they_allocate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    qport_kernels::par::set_threads(1);
    let model = qport_onnx::load::load(fixture("models/efficientnet-lite0.onnx")).unwrap();
    let plan = Plan::new(&model).unwrap();
    let x = crop();
    let first = plan.run(x.clone()).unwrap();
    // the buffer pool's steady size, as in `check`
    plan.run(x.clone()).unwrap();
    let runs: Vec<(u64, u64, i64)> = (0..4)
        .map(|_| count(|| assert_eq!(plan.run(x.clone()).unwrap(), first)))
        .collect();
    eprintln!("Plan::run warm: {runs:?} (blocks, bytes, live change)");
    for (b, _, live) in &runs {
        assert_eq!(
            *b, runs[0].0,
            "Plan::run allocations vary run to run: {runs:?}"
        );
        // the input copy and the returned outputs are dropped inside `count`
        assert_eq!(*live, 0, "Plan::run left {live} bytes allocated");
    }
    // the input copy (list, name, shape, data), the ordered input list,
    // the output list with its names, and each output moved out of the
    // arena (its shape and data are allocated again next run): a dozen at
    // most, whatever the model's size
    assert!(
        runs[0].0 <= 12,
        "Plan::run made {} allocations per warm run",
        runs[0].0
    );
}
