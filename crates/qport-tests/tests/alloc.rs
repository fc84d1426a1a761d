//! Heap traffic of steady-state inference, measured with a counting global
//! allocator (issue 17's memory target): once a [`Session`] has run a plan
//! on inputs of one shape, further runs on inputs of that shape reuse every
//! value's buffer, and **allocate nothing**. Held on EfficientNet-Lite0 and
//! every model family of the fixtures (ResNet-50 and MobileNetV2 with
//! random weights, the NHWC classifier, the gated CNN, the two-output
//! detector, the transformer encoder), FP32 and their onnxruntime u8s8 QDQ
//! artifacts under `IntegerPlan` (`f32-rne`), on one intra-op thread, with
//! the outputs checked bit for bit against [`Plan::run`]:
//!
//! - no operator outside [`PENDING`] allocates in a warm run (attributed
//!   by op type between the taps of `Session::run_with_tap`, so a failure
//!   names the op); with `PENDING` empty, no plan allocates at all,
//! - the operators in [`PENDING`] allocate in every warm run where the
//!   plan has them (so the list shrinks when one stops: the test fails
//!   until it is taken off),
//! - five more warm runs allocate nothing (without pending operators) or
//!   about what the pending ones did (at most twice) and leave nothing
//!   allocated,
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

/// Operator types (without domain) that still allocate in some warm run
/// of [`every_family_warm_runs_allocate_only_in_pending_operators`]: the
/// elementwise, shape, normalization and contrib operators the
/// transformer, detector, gated-CNN and NHWC families meet, which still
/// return fresh tensors. The convolutional classifiers allocate nothing.
/// An operator outside the list that allocates fails the test by name; one
/// on the list that no longer allocates anywhere fails it too (take it
/// off).
const PENDING: &[&str] = &[
    "Add",
    "Cast",
    "Concat",
    "Div",
    "Gather",
    "Greater",
    "LayerNormalization",
    "MatMul",
    "Mul",
    "Pow",
    "QLinearAdd",
    "QLinearAveragePool",
    "QLinearConcat",
    "QLinearLeakyRelu",
    "QLinearMatMul",
    "QLinearMul",
    "QLinearSigmoid",
    "QLinearSoftmax",
    "QLinearWhere",
    "ReduceMean",
    "ReduceSum",
    "Reshape",
    "Resize",
    "Shape",
    "Slice",
    "Softmax",
    "Split",
    "Sub",
    "Transpose",
    "Unsqueeze",
    "Where",
];

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
/// `want` bit for bit, every warm run allocating the same blocks and
/// leaving nothing allocated; the blocks one warm run allocates, per op
/// type.
fn check(
    name: &str,
    plan: &Plan,
    x: &[(String, Tensor)],
    want: &[(String, Tensor)],
) -> BTreeMap<String, u64> {
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
    for run in 0..5 {
        let (blocks, bytes, live) = count(|| session.run(&inputs).unwrap());
        for (i, (n, w)) in want.iter().enumerate() {
            assert_eq!(
                session.output(i).unwrap(),
                w,
                "{name}: output {n} of warm run {run} differs from Plan::run"
            );
        }
        // Without pending operators exactly nothing. With them, about what
        // the tapped run attributed to them: their fresh outputs trade
        // buffers with the pool, so the count moves by a few run to run.
        assert!(
            if pending == 0 {
                blocks == 0
            } else {
                blocks > 0 && blocks <= 2 * pending
            },
            "{name}: warm run {run} made {blocks} allocations ({bytes} bytes), \
             the pending operators {pending}: {per_op:?}"
        );
        assert_eq!(
            live, 0,
            "{name}: warm run {run} changed live bytes by {live}"
        );
    }
    eprintln!(
        "{name}: {} steps; a warm run allocates {pending} blocks: {per_op:?}",
        plan.len()
    );
    per_op
}

/// The first eval crop (`[1, 3, 224, 224]`, the input of EfficientNet-Lite0).
fn crop() -> Vec<(String, Tensor)> {
    qport_tests::photo_crops("eval", 1).remove(0).inputs
}

/// The first sample's inputs of the parity folder `parity/<dir>`.
fn parity_inputs(dir: &str) -> Vec<(String, Tensor)> {
    qport_tests::parity::samples(&fixture(&format!("parity/{dir}")))
        .remove(0)
        .inputs
}

/// Checks the FP32 plan of `fp32` on `x32` and the `f32-rne` integer plan
/// of `qdq` on `xq` (fixture paths, inputs by name); the blocks a warm run
/// of each allocates, per op type.
fn check_pair(
    family: &str,
    (fp32, x32): (&str, Vec<(String, Tensor)>),
    (qdq, xq): (&str, Vec<(String, Tensor)>),
) -> [BTreeMap<String, u64>; 2] {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    qport_kernels::par::set_threads(1);
    let model = qport_onnx::load::load(fixture(fp32)).unwrap();
    let plan = Plan::new(&model).unwrap();
    let want = plan.run(x32.clone()).unwrap();
    let fp32 = check(&format!("{family} fp32"), &plan, &x32, &want);

    let model = qport_onnx::load::load(fixture(qdq)).unwrap();
    let plan = IntegerPlan::new(&model, &ArithProfile::preset("f32-rne").unwrap()).unwrap();
    let want = plan.run(xq.clone()).unwrap();
    [
        fp32,
        check(&format!("{family} int8 f32-rne"), plan.plan(), &xq, &want),
    ]
}

#[test]
fn efficientnet_warm_runs_allocate_nothing() {
    let x = crop();
    assert_eq!(
        check_pair(
            "efficientnet-lite0",
            ("models/efficientnet-lite0.onnx", x.clone()),
            ("models/efficientnet-lite0.qdq-u8s8.onnx", x),
        ),
        [BTreeMap::new(), BTreeMap::new()],
        "EfficientNet-Lite0's warm runs (FP32, int8) allocate nothing"
    );
}

/// Every model family of the fixtures (NCHW and NHWC classifiers, a
/// residual network, a gated CNN, a detector with two outputs, a
/// transformer encoder with two integer inputs), FP32 and onnxruntime's
/// u8s8 QDQ artifact, on its first parity input: the convolutional
/// classifiers allocate nothing; elsewhere only [`PENDING`] operators
/// allocate, and each of them still does somewhere.
#[test]
fn every_family_warm_runs_allocate_only_in_pending_operators() {
    let families = [
        ("resnet50", "models/bench/resnet50.random.onnx", true),
        ("mobilenetv2", "models/bench/mobilenetv2.random.onnx", true),
        (
            "nhwc-classifier",
            "models/families/nhwc-classifier.onnx",
            false,
        ),
        ("gated-cnn", "models/families/gated-cnn.onnx", false),
        ("yolo-detector", "models/families/yolo-detector.onnx", false),
        ("text-encoder", "models/families/text-encoder.onnx", false),
    ];
    let mut seen: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (family, fp32, none) in families {
        let qdq = format!("models/families/{family}.qdq-u8s8.onnx");
        let got = check_pair(
            family,
            (fp32, parity_inputs(family)),
            (&qdq, parity_inputs(&format!("{family}.qdq-u8s8"))),
        );
        if none {
            assert!(
                got.iter().all(|m| m.is_empty()),
                "{family}: warm runs (FP32, int8) allocate: {got:?}"
            );
        }
        for (plan, per_op) in ["fp32", "int8"].iter().zip(&got) {
            for op in per_op.keys() {
                assert!(
                    PENDING.contains(&op.as_str()),
                    "{family} {plan}: {op} allocates in a warm run: {per_op:?}"
                );
                seen.entry(op.clone())
                    .or_default()
                    .push(format!("{family} {plan}"));
            }
        }
    }
    for op in PENDING {
        assert!(
            seen.contains_key(*op),
            "{op} allocates in no warm run any more: take it off PENDING"
        );
    }
    eprintln!("pending operators and the plans they allocate in: {seen:#?}");
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
