//! Tests of [`crate::measure`], [`crate::sensitivity`] and [`crate::tune`]
//! on a two-layer model whose first MatMul reads an input with a rare
//! outlier channel (int8 loses it, int16 does not).

use super::*;
use crate::measure::{Metric, Scorer};
use crate::ptq::{self, CalibrateOptions, Calibration, Sample};
use crate::sensitivity;
use crate::sensitivity::{analyze, Granularity, SensitivityOptions};
use crate::types::CalibMethod;
use crate::{resolve, template};
use qport_core::compare::OutputChoice;
use qport_core::{DType, Tensor};
use qport_onnx::{graph::ModelBuilder, Model, Node};
use qport_platform::Registry;

/// `y = relu(x · w1) · w2`, x [1, 8]; row 0 of `w1` is zero, so the
/// outlier in x's channel 0 only widens x's range.
fn model() -> Model {
    let w1: Vec<f32> = (0..8 * 16)
        .map(|i| {
            if i < 16 {
                0.0
            } else {
                ((i * 37 % 23) as f32 - 11.0) / 10.0
            }
        })
        .collect();
    let w2: Vec<f32> = (0..16 * 4)
        .map(|i| ((i * 29 % 17) as f32 - 8.0) / 8.0)
        .collect();
    ModelBuilder::new(17)
        .input("x", DType::F32, &[1, 8])
        .initializer("w1", Tensor::from_vec(vec![8, 16], w1).unwrap())
        .initializer("w2", Tensor::from_vec(vec![16, 4], w2).unwrap())
        .node(Node::new("mm1", "MatMul", ["x", "w1"], ["h"]))
        .node(Node::new("relu", "Relu", ["h"], ["r"]))
        .node(Node::new("mm2", "MatMul", ["r", "w2"], ["y"]))
        .output("y", DType::F32, &[1, 4])
        .build()
}

fn samples(n: usize) -> Vec<Sample> {
    (0..n)
        .map(|i| {
            let x: Vec<f32> = (0..8)
                .map(|c| {
                    if c == 0 && i == 0 {
                        1000.0
                    } else {
                        (((i * 7 + c * 13) % 19) as f32 - 9.0) / 4.0
                    }
                })
                .collect();
            Sample {
                index: i,
                origin: format!("sample {i}"),
                inputs: vec![("x".into(), Tensor::from_vec(vec![1, 8], x).unwrap())],
            }
        })
        .collect()
}

fn calibrate(m: &Model, platform: &str) -> (resolve::Resolved, Calibration) {
    let reg = Registry::builtin();
    let p = reg.get(platform).unwrap();
    let base = template::template(p, template::Template::Default);
    let r = resolve::resolve(m, p, &base, None).unwrap();
    let r = ptq::narrow(&r, CalibMethod::Max, false);
    let c = ptq::calibrate(
        m,
        &r,
        samples(8).into_iter().map(Ok),
        &CalibrateOptions::default(),
        &mut |_| {},
    )
    .unwrap();
    (r, c)
}

fn scorer<'a>(
    m: &'a Model,
    r: &resolve::Resolved,
    c: &'a Calibration,
    threads: usize,
) -> Scorer<'a> {
    Scorer::new(
        m,
        c,
        r.clone(),
        samples(8),
        &OutputChoice::default(),
        threads,
    )
    .unwrap()
}

#[test]
fn scores_do_not_depend_on_the_thread_count() {
    let m = model();
    let (r, c) = calibrate(&m, "j6m");
    let one = scorer(&m, &r, &c, 1);
    let three = scorer(&m, &r, &c, 3);
    let prec = one.base_precisions();
    let (a, b) = (one.score(&prec).unwrap(), three.score(&prec).unwrap());
    assert_eq!(a.cosine.to_bits(), b.cosine.to_bits());
    assert_eq!(a.mse.to_bits(), b.mse.to_bits());
    assert_eq!(a.sqnr_db.map(f64::to_bits), b.sqnr_db.map(f64::to_bits));
    assert_eq!(a.top1, b.top1);
    // the int8 model loses accuracy; all float32 is exact
    assert!(a.cosine < 0.999, "{a:?}");
    let float = sensitivity::promote_where(&prec, Precision::Float32, |_| true);
    let f = one.score(&float).unwrap();
    assert_eq!((f.cosine, f.sqnr_db, f.mse), (1.0, None, 0.0));
    let la = one.layer_errors(&prec).unwrap();
    let lb = three.layer_errors(&prec).unwrap();
    assert_eq!(la, lb);
    assert_eq!(
        la.iter().map(|l| l.node.as_str()).collect::<Vec<_>>(),
        ["mm1", "relu", "mm2"]
    );
}

#[test]
fn the_outlier_node_ranks_first_and_its_activations_are_to_blame() {
    let m = model();
    let (r, c) = calibrate(&m, "j6m");
    let s = scorer(&m, &r, &c, 2);
    let opts = SensitivityOptions {
        metric: Metric::Cosine,
        granularity: Granularity::WeightActivation,
        high: Precision::Int16,
        layers: true,
    };
    let mut calls = 0;
    let res = analyze(&s, &opts, &mut |_, _| calls += 1).unwrap();
    let names: Vec<&str> = res.nodes.iter().map(|n| n.node.as_str()).collect();
    assert_eq!(names, ["mm1", "mm2"], "{res:#?}");
    let mm1 = &res.nodes[0];
    assert_eq!(mm1.op_type, "MatMul");
    assert!((mm1.mac_share - 128.0 / 192.0).abs() < 1e-12);
    assert!(mm1.alone_loss > res.nodes[1].alone_loss);
    assert!(mm1.promotion_gain.unwrap() > 0.0, "{mm1:#?}");
    let split = mm1.split.as_ref().unwrap();
    let (w, a) = (
        split.weights_alone.unwrap(),
        split.activations_alone.unwrap(),
    );
    assert!(w.cosine > a.cosine, "{split:#?}");
    assert!(res.high_all.cosine > res.base.cosine);
    assert_eq!(res.layers.len(), 3);
    assert!(calls > 4);
    let total: f64 = res.base_mac_share.values().sum();
    assert!((total - 1.0).abs() < 1e-12);
}

#[test]
fn targets_and_budgets_parse_or_say_why() {
    let t = Target::parse("top1>=98%", false).unwrap();
    assert_eq!((t.metric, t.min), (Metric::Top1, 0.98));
    assert_eq!(Target::parse("cosine>=0.995", false).unwrap().min, 0.995);
    assert_eq!(Target::parse("sqnr>=30dB", false).unwrap().min, 30.0);
    assert_eq!(
        Target::parse("top1>>9", false),
        Err(TuneError::Target("top1>>9".into()))
    );
    assert!(matches!(
        Target::parse("drop<=0.5", false),
        Err(TuneError::NeedsLabels(_))
    ));
    assert!(Target::parse("cosine>=2", false).is_err());
    // with labels: top1 is accuracy, drop is accepted and resolved
    let a = Target::parse("top1>=75%", true).unwrap();
    assert_eq!((a.metric, a.min, a.drop), (Metric::Accuracy, 0.75, None));
    let d = Target::parse("drop<=0.5", true).unwrap();
    assert_eq!((d.metric, d.drop), (Metric::Accuracy, Some(0.005)));
    let r = d.resolve(Some(0.8)).unwrap();
    assert!((r.min - 0.795).abs() < 1e-12, "{r:?}");
    assert_eq!(r.to_string(), "drop<=0.5pt");
    assert!(d.resolve(None).is_err());
    assert!(Target::parse("drop<=x", true).is_err());
    assert!(Target::parse("drop<=101", true).is_err());
    let b = Budget::parse("int16<=25%").unwrap();
    assert_eq!((b.precision, b.max_share), (Precision::Int16, 0.25));
    assert!(Budget::parse("int16<=150%").is_err());
    assert!(Budget::parse("float16<=5%").is_err());
    let zero = Budget::parse("int16<=0%").unwrap();
    let e = zero.check(&t, "int16<=0%").unwrap_err().to_string();
    assert!(e.contains("contradicts the target"), "{e}");
    // ranking noise: units that add up over independent error sources
    let sc = crate::measure::Score {
        cosine: 0.999,
        sqnr_db: Some(30.0),
        mse: 0.25,
        top1: Some(0.5),
        accuracy: None,
        non_finite_samples: 0,
    };
    assert!((noise(Metric::Sqnr, &sc) - 1e-3).abs() < 1e-15);
    assert!((noise(Metric::Top1, &sc) - 1e-3).abs() < 1e-12);
    assert_eq!(noise(Metric::Mse, &sc), 0.25);
    let bad = crate::measure::Score {
        non_finite_samples: 1,
        ..sc
    };
    assert_eq!(noise(Metric::Cosine, &bad), f64::INFINITY);
    assert_eq!(priority(0.01, 0, 100), 0.01 / MIN_COST);
    assert_eq!(priority(0.01, 50, 100), 0.02);
    let reg = Registry::builtin();
    let e = high_precision(reg.get("x86-avx2").unwrap()).unwrap_err();
    assert!(e.to_string().contains("does not run int16"), "{e}");
    assert_eq!(
        high_precision(reg.get("j6p").unwrap()),
        Ok(Precision::Int16)
    );
}

fn run_tune(s: &Scorer<'_>, target: &str, budget: Option<&str>) -> Tuned {
    let opts = TuneOptions {
        target: Target::parse(target, s.fp32_accuracy().is_some()).unwrap(),
        budget: budget.map(|b| Budget::parse(b).unwrap()),
        high: Precision::Int16,
        rank_samples: 4,
    };
    tune(s, &opts, &mut |_| {}, &mut |_, _| {}).unwrap()
}

#[test]
fn tune_promotes_the_outlier_node_and_returns_what_is_not_needed() {
    let m = model();
    let (r, c) = calibrate(&m, "j6m");
    let s = scorer(&m, &r, &c, 2);
    let base = s.score(&s.base_precisions()).unwrap();
    // a target between the baseline and the upper bound
    let t = run_tune(&s, "cosine>=0.9995", None);
    assert!(base.cosine < 0.9995, "{base:?}");
    assert_eq!(t.outcome, Outcome::Reached, "{t:#?}");
    assert_eq!(t.trajectory[0].kind, StepKind::Baseline);
    assert_eq!(t.trajectory[1].kind, StepKind::UpperBound);
    assert_eq!(t.ranking[0].node, "mm1");
    // ranked by error per MAC share, a node without MACs costing MIN_COST
    for w in t.ranking.windows(2) {
        assert!(w[0].priority >= w[1].priority, "{:?}", t.ranking);
    }
    for r in &t.ranking {
        let want = r.loss / r.mac_share.max(MIN_COST);
        assert!(
            (r.priority - want).abs() <= 1e-12 * want.abs().max(1.0),
            "{r:?}"
        );
        assert!(r.loss >= 0.0);
    }
    assert!(t.ranking[0].loss > 0.0, "the outlier node adds error alone");
    let fin = t.final_config();
    assert!(fin.holds && fin.kept);
    assert_eq!(fin.promoted, ["mm1"], "{t:#?}");
    assert_eq!(t.precisions[0].qtype, Precision::Int16);
    assert_eq!(t.precisions[2].qtype, Precision::Int8);
    assert!((fin.mac_share["int16"] - 128.0 / 192.0).abs() < 1e-12);
    assert!(t.pareto.iter().any(|p| p.optimal && p.step == t.final_step));
    // same result with another thread count
    let s1 = scorer(&m, &r, &c, 1);
    assert_eq!(run_tune(&s1, "cosine>=0.9995", None), t);
}

#[test]
fn tune_reports_an_unreachable_target_and_a_budget_that_wins() {
    let m = model();
    let (r, c) = calibrate(&m, "j6m");
    let s = scorer(&m, &r, &c, 1);
    let t = run_tune(&s, "sqnr>=500dB", None);
    let Outcome::Unreachable {
        baseline,
        upper_bound,
    } = t.outcome
    else {
        panic!("{t:#?}")
    };
    assert!(upper_bound > baseline && upper_bound < 500.0);
    assert_eq!(t.trajectory.len(), 2);
    // mm1 holds 2/3 of the MACs: a 50% budget leaves only mm2
    let t = run_tune(&s, "cosine>=0.9995", Some("int16<=50%"));
    assert!(matches!(t.outcome, Outcome::BudgetWon { .. }), "{t:#?}");
    assert!(t.ranking.iter().any(|r| r.node == "mm1" && r.over_budget));
    assert!(
        t.final_config()
            .mac_share
            .get("int16")
            .copied()
            .unwrap_or(0.0)
            <= 0.5
    );
}

/// FP32's class of every sample, from a scorer without labels.
fn fp32_classes(m: &Model) -> Vec<usize> {
    let plan = qport_engine::Plan::new(m).unwrap();
    samples(8)
        .into_iter()
        .map(|s| {
            let out = plan.run(s.inputs).unwrap();
            qport_core::metrics::argmax(&out[0].1.to_f32_vec().unwrap()).unwrap()
        })
        .collect()
}

#[test]
fn labels_give_accuracy_and_a_drop_target() {
    let m = model();
    let (r, c) = calibrate(&m, "j6m");
    let mut classes = fp32_classes(&m);
    // one label FP32 gets wrong: FP32 accuracy 7/8
    classes[3] = (classes[3] + 1) % 4;
    let s = scorer(&m, &r, &c, 1).with_labels(&classes).unwrap();
    assert_eq!(s.fp32_accuracy(), Some(7.0 / 8.0));
    let up = s
        .score(&sensitivity::promote_where(
            &s.base_precisions(),
            Precision::Int16,
            |_| true,
        ))
        .unwrap();
    assert_eq!(up.accuracy, Some(7.0 / 8.0), "{up:?}");
    assert!(s.check_metric(Metric::Accuracy).is_ok());
    // the prefix scorer keeps its labels and FP32's accuracy on them
    assert_eq!(s.first(2).fp32_accuracy(), Some(1.0));
    let t = run_tune(&s, "drop<=0", None);
    assert_eq!(t.target.metric, Metric::Accuracy);
    assert!((t.target.min - 7.0 / 8.0).abs() < 1e-12, "{:?}", t.target);
    assert_eq!(t.fp32_accuracy, Some(7.0 / 8.0));
    assert!(t.outcome.reached(), "{t:#?}");
    assert!(t.final_config().score.accuracy.unwrap() >= 7.0 / 8.0);
    // bad labels
    let plain = || scorer(&m, &r, &c, 1);
    let e = plain()
        .with_labels(&classes[..7])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("7 labels for 8 samples"), "{e}");
    let e = plain().with_labels(&[9; 8]).err().unwrap().to_string();
    assert!(
        e.contains("label 9 is not a class of output 'y' (4 classes"),
        "{e}"
    );
    let e = plain()
        .check_metric(Metric::Accuracy)
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs labels"), "{e}");
}

#[test]
fn on_j6p_the_gemms_are_the_candidates() {
    let m = model();
    let (r, c) = calibrate(&m, "j6p");
    let s = scorer(&m, &r, &c, 1);
    let cands = sensitivity::promotion_candidates(&s);
    assert_eq!(cands, [0, 2]);
    assert_eq!(r.nodes[1].qtype, Precision::Float16);
}

/// [`model`] with a second MatMul on the Relu's output and an Add of the
/// two results: the Add has activations and no weights.
fn model_with_add() -> Model {
    let w3: Vec<f32> = (0..16 * 4)
        .map(|i| ((i * 13 % 11) as f32 - 5.0) / 6.0)
        .collect();
    let mut m = model();
    let g = &mut m.graph;
    g.initializers
        .insert("w3".into(), Tensor::from_vec(vec![16, 4], w3).unwrap());
    g.nodes[2].outputs = vec!["y0".into()];
    g.nodes
        .push(Node::new("mm3", "MatMul", ["r", "w3"], ["y1"]));
    g.nodes.push(Node::new("add", "Add", ["y0", "y1"], ["y"]));
    m
}

/// The number of runs announced before the first measurement is the number
/// made: counted from the result's scores, for both granularities, with
/// and without the layer errors.
#[test]
fn run_count_is_announced_first_and_is_the_number_of_measurements() {
    let m = model_with_add();
    let (r, c) = calibrate(&m, "j6m");
    let s = scorer(&m, &r, &c, 2);
    for granularity in [Granularity::Node, Granularity::WeightActivation] {
        for layers in [false, true] {
            let opts = SensitivityOptions {
                metric: Metric::Cosine,
                granularity,
                high: Precision::Int16,
                layers,
            };
            let mut calls = vec![];
            let res = analyze(&s, &opts, &mut |d, t| calls.push((d, t))).unwrap();
            let ctx = format!("{granularity:?}, layers {layers}: {calls:?}");
            let per_node = |n: &sensitivity::NodeSensitivity| {
                let split = n.split.as_ref().map_or(0, |sp| {
                    [
                        sp.weights_alone,
                        sp.activations_alone,
                        sp.weights_promoted,
                        sp.activations_promoted,
                    ]
                    .iter()
                    .filter(|x| x.is_some())
                    .count()
                });
                1 + usize::from(n.promoted.is_some()) + split
            };
            // base, every int8 node promoted, the nodes, the layer errors
            let made = 2 + res.nodes.iter().map(per_node).sum::<usize>() + usize::from(layers);
            assert_eq!(sensitivity::run_count(&s, &opts), made, "{ctx}");
            let want: Vec<(usize, usize)> = (0..=made).map(|d| (d, made)).collect();
            assert_eq!(calls, want, "{ctx}");
            let add = res.nodes.iter().find(|n| n.node == "add").expect(&ctx);
            if let Some(sp) = &add.split {
                // no weights: only the activation measurements
                assert!(sp.weights_alone.is_none() && sp.activations_alone.is_some());
            }
        }
    }
}
