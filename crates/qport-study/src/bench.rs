//! Latency benchmark of compiled plans: deterministic synthetic inputs
//! from a model's input declarations (or the caller's samples of real
//! data, cycled round by round), interleaved warm measurements
//! (every round runs each variant once, in order, so drift hits all
//! equally), intra-op threads (one inference split over N threads) and
//! optional concurrency (N threads each running whole inferences),
//! percentiles, INT8-vs-FP32 ratios and the process's peak
//! RSS. [`isa`] describes the host and what the kernel table predicts.

pub mod isa;

use crate::StudyError;
use qport_core::{DType, Tensor};
use qport_engine::Plan;
use qport_onnx::{Dim, ValueInfo};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// Seed of the synthetic inputs (the bytes of `"qport"`).
pub const SEED: u64 = 0x71_70_6f_72_74;

/// How to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchOptions {
    /// Size given to a dynamic first (batch) dimension; at least 1.
    pub batch: usize,
    /// Rounds run before measuring (not recorded).
    pub warmup: usize,
    /// Rounds measured; at least 1.
    pub runs: usize,
    /// Intra-op threads: the threads one inference may use (its GEMMs are
    /// split between them, see [`qport_kernels::par`]); at least 1. Set
    /// for the duration of [`measure`] and restored after.
    pub threads: usize,
    /// Inferences run at once, one per thread (a throughput measure);
    /// at least 1.
    pub concurrent: usize,
    /// Seed of the synthetic inputs.
    pub seed: u64,
    /// The order of the runs.
    pub order: Order,
}

/// The order [`measure`] runs variants in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// Every round runs each variant once, in turn: drift on a shared
    /// machine hits all variants alike, but each run starts with the
    /// caches holding the previous variant's weights.
    #[default]
    Interleaved,
    /// Each variant's warm-up and measured runs back to back (caches warm
    /// with its own weights, as onnxruntime's timing loops run).
    Blocked,
}

impl Order {
    /// The name used in reports: `interleaved` or `blocked`.
    pub fn name(self) -> &'static str {
        match self {
            Order::Interleaved => "interleaved",
            Order::Blocked => "blocked",
        }
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            batch: 1,
            warmup: 3,
            runs: 20,
            threads: 1,
            concurrent: 1,
            seed: SEED,
            order: Order::Interleaved,
        }
    }
}

impl BenchOptions {
    /// Checks the counts (`runs`, `threads`, `concurrent`, `batch` at
    /// least 1).
    pub fn validate(&self) -> Result<(), StudyError> {
        for (what, v) in [
            ("runs", self.runs),
            ("threads", self.threads),
            ("concurrent", self.concurrent),
            ("batch", self.batch),
        ] {
            if v == 0 {
                return Err(StudyError::Input(format!("--{what} must be at least 1")));
            }
        }
        Ok(())
    }
}

/// The concrete shape of input `vi` with dynamic batch `batch`: a known
/// dimension stays, a dynamic first dimension becomes `batch`; any other
/// dynamic dimension, an unknown rank or a fixed first dimension that
/// differs from an explicit `batch` other than 1 is an error naming the
/// input.
pub fn input_shape(vi: &ValueInfo, batch: usize) -> Result<Vec<usize>, StudyError> {
    let dims = vi.shape.as_ref().ok_or_else(|| {
        StudyError::Input(format!(
            "input '{}' declares no shape; cannot build a synthetic tensor for it",
            vi.name
        ))
    })?;
    let mut shape = Vec::with_capacity(dims.len());
    for (axis, d) in dims.iter().enumerate() {
        shape.push(match d {
            Dim::Known(n) => {
                let n = *n as usize;
                if axis == 0 && batch != 1 && n != batch {
                    return Err(StudyError::Input(format!(
                        "--batch {batch}: input '{}' has a fixed batch dimension of {n} ({})",
                        vi.name,
                        vi.shape_string()
                    )));
                }
                n
            }
            Dim::Param(_) | Dim::Unknown if axis == 0 => batch,
            Dim::Param(_) | Dim::Unknown => {
                return Err(StudyError::Input(format!(
                    "input '{}' ({}) has dynamic dimension {axis} ('{d}'); only the first \
                     (batch) dimension may be dynamic (set by --batch)",
                    vi.name,
                    vi.shape_string()
                )))
            }
        });
    }
    Ok(shape)
}

/// splitmix64: a small, well-mixed deterministic generator.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Deterministic synthetic inputs for `inputs` (a plan's declared graph
/// inputs): float inputs uniform in `[-1, 1)` from `seed` (input `i` uses
/// the stream `seed + i`), integer inputs zero, booleans false. String
/// inputs and shapes [`input_shape`] refuses are errors.
pub fn synthetic_inputs<'a>(
    inputs: impl IntoIterator<Item = &'a ValueInfo>,
    batch: usize,
    seed: u64,
) -> Result<Vec<(String, Tensor)>, StudyError> {
    let mut out = vec![];
    for (i, vi) in inputs.into_iter().enumerate() {
        let shape = input_shape(vi, batch)?;
        let dtype = vi.dtype.unwrap_or(DType::F32);
        let n: usize = shape.iter().product();
        let tensor = if dtype.is_float() {
            let mut state = seed.wrapping_add(i as u64);
            let v: Vec<f32> = (0..n)
                .map(|_| ((splitmix(&mut state) >> 40) as f32 / (1u64 << 23) as f32) - 1.0)
                .collect();
            let t = Tensor::from_vec(shape, v);
            t.and_then(|t| {
                if dtype == DType::F32 {
                    Ok(t)
                } else {
                    t.cast(dtype)
                }
            })
        } else if dtype == DType::Str {
            return Err(StudyError::Input(format!(
                "input '{}' is a string tensor; cannot build a synthetic tensor for it",
                vi.name
            )));
        } else {
            Tensor::zeros(dtype, shape)
        }
        .map_err(|e| StudyError::Input(format!("input '{}': {e}", vi.name)))?;
        out.push((vi.name.clone(), tensor));
    }
    Ok(out)
}

/// One run's inputs: `(graph input name, tensor)`.
pub type InputSet = Vec<(String, Tensor)>;

/// One thing to time: a compiled plan and the inputs it runs on.
pub struct Variant<'a> {
    /// Name in the results (`fp32`, or a profile's name).
    pub name: String,
    /// The plan (for an integer plan, [`qport_engine::IntegerPlan::plan`]).
    pub plan: &'a Plan,
    /// The input sets it runs on, in turn (round `r` runs set
    /// `r % len`): one from [`synthetic_inputs`], or samples of real data.
    /// At least one.
    pub inputs: Vec<InputSet>,
}

/// Latency statistics of one variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    /// The variant's name.
    pub name: String,
    /// Median per-inference latency, ms.
    pub median_ms: f64,
    /// 10th percentile, ms.
    pub p10_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// Fastest inference, ms.
    pub min_ms: f64,
    /// Slowest inference, ms.
    pub max_ms: f64,
    /// Inferences measured (runs × concurrent).
    pub samples: usize,
    /// Inferences completed per second over the measured rounds, all
    /// threads together.
    pub throughput_per_s: f64,
}

impl Latency {
    /// Statistics of per-inference times `ms` (any order; not empty) whose
    /// rounds took `wall` in all.
    pub fn from_samples(name: &str, ms: &[f64], wall: Duration) -> Latency {
        let mut s = ms.to_vec();
        s.sort_by(f64::total_cmp);
        let secs = wall.as_secs_f64();
        Latency {
            name: name.to_string(),
            median_ms: percentile(&s, 0.5),
            p10_ms: percentile(&s, 0.1),
            p90_ms: percentile(&s, 0.9),
            min_ms: s.first().copied().unwrap_or(f64::NAN),
            max_ms: s.last().copied().unwrap_or(f64::NAN),
            samples: s.len(),
            throughput_per_s: if secs > 0.0 {
                s.len() as f64 / secs
            } else {
                f64::NAN
            },
        }
    }
}

/// The `q` quantile (0 to 1) of ascending `sorted`, linearly interpolated
/// between closest ranks (numpy's default); NaN when empty.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
        }
    }
}

/// How a variant's latency compares with FP32's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VsFp32 {
    /// Variant median / FP32 median (below 1: faster).
    pub ratio: f64,
    /// The sign in words.
    pub speed: Speed,
}

/// The sign of a latency ratio in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Speed {
    /// Lower latency than FP32.
    Faster,
    /// Higher latency than FP32.
    Slower,
    /// Equal medians.
    Same,
}

impl VsFp32 {
    /// Compares medians `variant_ms` with `fp32_ms`; `None` when either is
    /// not a positive finite number.
    pub fn new(variant_ms: f64, fp32_ms: f64) -> Option<VsFp32> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !ok(variant_ms) || !ok(fp32_ms) {
            return None;
        }
        let ratio = variant_ms / fp32_ms;
        let speed = if ratio < 1.0 {
            Speed::Faster
        } else if ratio > 1.0 {
            Speed::Slower
        } else {
            Speed::Same
        };
        Some(VsFp32 { ratio, speed })
    }

    /// `1.76x slower`, `2.10x faster`, `same speed` (factors ≥ 1).
    pub fn describe(&self) -> String {
        match self.speed {
            Speed::Faster => format!("{:.2}x faster", 1.0 / self.ratio),
            Speed::Slower => format!("{:.2}x slower", self.ratio),
            Speed::Same => "same speed".into(),
        }
    }
}

/// Times every variant: `opts.warmup` unrecorded rounds, then
/// `opts.runs` measured rounds; each round runs every variant once, in
/// order, each inference using `opts.threads` intra-op threads. With
/// `opts.concurrent` N > 1, each variant's turn in a round is N
/// threads each running one inference at the same time (started together
/// at a barrier); each thread's time is one sample. `progress` gets the
/// number of rounds done (warm-up included) after each round. Results are
/// in variant order.
pub fn measure(
    variants: &[Variant<'_>],
    opts: &BenchOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<Vec<Latency>, StudyError> {
    opts.validate()?;
    if let Some(v) = variants.iter().find(|v| v.inputs.is_empty()) {
        return Err(StudyError::Input(format!(
            "variant `{}` has no input sets to run on",
            v.name
        )));
    }
    struct Restore(usize);
    impl Drop for Restore {
        fn drop(&mut self) {
            qport_kernels::par::set_threads(self.0);
        }
    }
    let _restore = Restore(qport_kernels::par::threads());
    qport_kernels::par::set_threads(opts.threads);
    let n = opts.concurrent;
    let rounds = opts.warmup + opts.runs;
    let barrier = Barrier::new(n);
    let abort = AtomicBool::new(false);
    let failure: Mutex<Option<StudyError>> = Mutex::new(None);
    // samples[variant] collects every thread's measured times (ms)
    let samples: Mutex<Vec<Vec<f64>>> = Mutex::new(vec![vec![]; variants.len()]);
    let mut walls = vec![Duration::ZERO; variants.len()];

    // Every thread walks the same schedule, in lockstep: a start barrier,
    // one inference, an end barrier. A failing thread sets `abort` before
    // the end barrier, so every thread sees it after and stops together.
    let worker = |lead: bool, walls: &mut [Duration], progress: &mut dyn FnMut(usize)| {
        let mut own: Vec<Vec<f64>> = vec![vec![]; variants.len()];
        let nv = variants.len().max(1);
        // (round, variant) in run order
        let schedule: Vec<(usize, usize)> = match opts.order {
            Order::Interleaved => (0..rounds)
                .flat_map(|r| (0..variants.len()).map(move |v| (r, v)))
                .collect(),
            Order::Blocked => (0..variants.len())
                .flat_map(|v| (0..rounds).map(move |r| (r, v)))
                .collect(),
        };
        'rounds: for (step, &(round, vi)) in schedule.iter().enumerate() {
            let v = &variants[vi];
            {
                let set = round % v.inputs.len();
                let feed = v.inputs[set].clone();
                barrier.wait();
                let t0 = Instant::now();
                let result = v.plan.run(feed);
                let dt = t0.elapsed();
                if let Err(source) = result {
                    abort.store(true, Ordering::SeqCst);
                    let mut f = failure.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert(StudyError::Sample {
                        sample: format!("input set {} of {} ({})", set + 1, v.inputs.len(), v.name),
                        source,
                    });
                }
                barrier.wait();
                if abort.load(Ordering::SeqCst) {
                    break 'rounds;
                }
                if round >= opts.warmup {
                    own[vi].push(dt.as_secs_f64() * 1e3);
                    if lead {
                        walls[vi] += t0.elapsed();
                    }
                }
            }
            if lead && (step + 1) % nv == 0 {
                // rounds' worth of inferences done
                progress((step + 1) / nv);
            }
        }
        let mut all = samples.lock().unwrap_or_else(|e| e.into_inner());
        for (a, o) in all.iter_mut().zip(own) {
            a.extend(o);
        }
    };
    std::thread::scope(|s| {
        for _ in 1..n {
            s.spawn(|| worker(false, &mut [], &mut |_| {}));
        }
        worker(true, &mut walls, progress);
    });
    if let Some(e) = failure.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let samples = samples.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(variants
        .iter()
        .zip(samples)
        .zip(walls)
        .map(|((v, s), wall)| Latency::from_samples(&v.name, &s, wall))
        .collect())
}

/// The process's peak resident set size in bytes (`VmHWM` in
/// `/proc/self/status`); `None` where unavailable.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut it = line["VmHWM:".len()..].split_whitespace();
    let kb: u64 = it.next()?.parse().ok()?;
    match it.next() {
        Some("kB") | None => kb.checked_mul(1024),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&s, 0.5), 3.0);
        assert!((percentile(&s, 0.1) - 1.4).abs() < 1e-12);
        assert!((percentile(&s, 0.9) - 4.6).abs() < 1e-12);
        assert_eq!(percentile(&[2.0, 4.0], 0.5), 3.0);
        assert_eq!(percentile(&[7.0], 0.9), 7.0);
        assert!(percentile(&[], 0.5).is_nan());
        let l = Latency::from_samples("x", &[5.0, 1.0, 3.0, 2.0, 4.0], Duration::from_secs(1));
        assert_eq!(
            (l.median_ms, l.min_ms, l.max_ms, l.samples),
            (3.0, 1.0, 5.0, 5)
        );
        assert_eq!(l.throughput_per_s, 5.0);
    }

    #[test]
    fn ratio_and_sign() {
        let slow = VsFp32::new(17.6, 10.0).unwrap();
        assert_eq!(slow.speed, Speed::Slower);
        assert_eq!(slow.describe(), "1.76x slower");
        let fast = VsFp32::new(5.0, 10.5).unwrap();
        assert_eq!(fast.speed, Speed::Faster);
        assert_eq!(fast.describe(), "2.10x faster");
        assert_eq!(VsFp32::new(3.0, 3.0).unwrap().speed, Speed::Same);
        assert!(VsFp32::new(f64::NAN, 1.0).is_none());
        assert!(VsFp32::new(1.0, 0.0).is_none());
        let j = serde_json::to_value(slow).unwrap();
        assert_eq!(j["speed"], "slower");
    }

    #[test]
    fn shapes_bind_the_batch_and_refuse_other_dynamic_dims() {
        let vi = |dims: Vec<Dim>| ValueInfo {
            name: "x".into(),
            dtype: Some(DType::F32),
            shape: Some(dims),
        };
        let d = vi(vec![Dim::Param("N".into()), Dim::Known(3), Dim::Known(4)]);
        assert_eq!(input_shape(&d, 2).unwrap(), [2, 3, 4]);
        let fixed = vi(vec![Dim::Known(1), Dim::Known(3)]);
        assert_eq!(input_shape(&fixed, 1).unwrap(), [1, 3]);
        let e = input_shape(&fixed, 4).unwrap_err().to_string();
        assert!(e.contains("'x'") && e.contains("fixed batch"), "{e}");
        let e = input_shape(&vi(vec![Dim::Known(1), Dim::Param("L".into())]), 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("'x'") && e.contains("dimension 1"), "{e}");
        let none = ValueInfo {
            shape: None,
            ..vi(vec![])
        };
        assert!(input_shape(&none, 1).is_err());
    }

    #[test]
    fn synthetic_inputs_are_deterministic_and_bounded() {
        let a = ValueInfo::known("a", DType::F32, &[2, 50]);
        let b = ValueInfo::known("b", DType::I64, &[3]);
        let x = synthetic_inputs([&a, &b], 1, SEED).unwrap();
        let y = synthetic_inputs([&a, &b], 1, SEED).unwrap();
        let (xa, ya) = (x[0].1.to_f32_vec().unwrap(), y[0].1.to_f32_vec().unwrap());
        assert_eq!(xa, ya);
        assert!(xa.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(xa.iter().any(|&v| v < 0.0) && xa.iter().any(|&v| v > 0.0));
        assert_ne!(synthetic_inputs([&a], 1, SEED + 7).unwrap()[0].1, x[0].1);
        assert_eq!(x[1].1.dtype(), DType::I64);
        assert_eq!(x[1].1.shape(), [3]);
    }

    /// `y = Relu(x)`, `x: float32[N, 4]`.
    fn relu_plan() -> Plan {
        let x = ValueInfo {
            name: "x".into(),
            dtype: Some(DType::F32),
            shape: Some(vec![Dim::Param("N".into()), Dim::Known(4)]),
        };
        let graph = qport_onnx::Graph {
            name: "relu".into(),
            inputs: vec![x],
            outputs: vec![ValueInfo {
                name: "y".into(),
                dtype: Some(DType::F32),
                shape: None,
            }],
            nodes: vec![qport_onnx::Node::new("r", "Relu", ["x"], ["y"])],
            ..qport_onnx::Graph::default()
        };
        let model = qport_onnx::Model {
            producer_name: "qport-test".into(),
            model_version: 1,
            ..qport_onnx::Model::new(graph, 13)
        };
        Plan::new(&model).unwrap()
    }

    #[test]
    fn measure_interleaves_variants_on_several_threads() {
        let plan = relu_plan();
        let inputs = synthetic_inputs(plan.inputs(), 3, SEED).unwrap();
        assert_eq!(inputs[0].1.shape(), [3, 4]);
        let variants = [
            Variant {
                name: "a".into(),
                plan: &plan,
                inputs: vec![inputs.clone()],
            },
            Variant {
                name: "b".into(),
                plan: &plan,
                inputs: vec![inputs],
            },
        ];
        let opts = BenchOptions {
            warmup: 1,
            runs: 3,
            concurrent: 2,
            ..BenchOptions::default()
        };
        let mut rounds = vec![];
        let r = measure(&variants, &opts, &mut |k| rounds.push(k)).unwrap();
        assert_eq!(rounds, [1, 2, 3, 4]);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].name.as_str(), r[1].name.as_str()), ("a", "b"));
        for l in &r {
            assert_eq!(l.samples, 6);
            assert!(l.min_ms <= l.p10_ms && l.p10_ms <= l.median_ms);
            assert!(l.median_ms <= l.p90_ms && l.p90_ms <= l.max_ms);
            assert!(l.throughput_per_s > 0.0);
        }
    }

    #[test]
    fn blocked_order_measures_the_same_counts() {
        let plan = relu_plan();
        let x = vec![(
            "x".to_string(),
            Tensor::zeros(DType::F32, vec![1, 4]).unwrap(),
        )];
        let variants = [
            Variant {
                name: "a".into(),
                plan: &plan,
                inputs: vec![x.clone()],
            },
            Variant {
                name: "b".into(),
                plan: &plan,
                inputs: vec![x],
            },
        ];
        let opts = BenchOptions {
            warmup: 2,
            runs: 3,
            order: Order::Blocked,
            ..BenchOptions::default()
        };
        let mut rounds = vec![];
        let r = measure(&variants, &opts, &mut |k| rounds.push(k)).unwrap();
        assert_eq!(rounds, [1, 2, 3, 4, 5]);
        assert!(r.iter().all(|l| l.samples == 3));
        assert_eq!(Order::Blocked.name(), "blocked");
    }

    #[test]
    fn a_failing_run_stops_every_thread_with_an_error() {
        let plan = relu_plan();
        let wrong = vec![(
            "x".to_string(),
            Tensor::zeros(DType::F32, vec![2, 5]).unwrap(),
        )];
        let good = vec![(
            "x".to_string(),
            Tensor::zeros(DType::F32, vec![1, 4]).unwrap(),
        )];
        // the second input set is reached only because rounds cycle through them
        let variants = [Variant {
            name: "bad".into(),
            plan: &plan,
            inputs: vec![good, wrong],
        }];
        let opts = BenchOptions {
            concurrent: 3,
            ..BenchOptions::default()
        };
        let e = measure(&variants, &opts, &mut |_| {}).unwrap_err();
        assert!(matches!(e, StudyError::Sample { .. }), "{e}");
        assert!(e.to_string().contains("input set 2 of 2 (bad)"), "{e}");
        let none = [Variant {
            name: "empty".into(),
            plan: &plan,
            inputs: vec![],
        }];
        let e = measure(&none, &opts, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("`empty` has no input sets"), "{e}");
    }

    #[test]
    fn options_are_checked() {
        assert!(BenchOptions::default().validate().is_ok());
        let e = BenchOptions {
            runs: 0,
            ..BenchOptions::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--runs"), "{e}");
    }

    #[test]
    fn vm_hwm_is_parsed_in_bytes() {
        let s = "Name:\tqport\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(s), Some(1234 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
        if cfg!(target_os = "linux") {
            assert!(peak_rss_bytes().unwrap() > 0);
        }
    }
}
