//! The float16 range guard: nodes a config puts in float16 whose values
//! float16 cannot hold are kept at a wider precision the platform runs.
//!
//! Float16 holds magnitudes up to [`F16_MAX`] (65504); larger values become
//! infinite, and an infinity meets a zero soon enough (`0 · inf = NaN`, as
//! in the additive attention mask of a transformer, a constant near
//! `-3.4e38` multiplied by `1 − mask`). Below [`F16_MIN_NORMAL`] (`2^-14`)
//! it has only subnormals, with fewer significant bits, down to `2^-24`,
//! under which everything is zero.
//!
//! [`float16_guard`] looks at every node whose precision is float16: each
//! input and output value, from the calibration statistics (activations)
//! or the tensor itself (constants). A value overflows when its largest
//! magnitude exceeds [`F16_MAX`]; it underflows when more than
//! [`GuardOptions::underflow_share`] of its nonzero magnitudes are below
//! [`F16_MIN_NORMAL`]. Such a node is moved to float32 when the platform
//! runs float32, else to int16 when it runs int16; each is reported with
//! the observed range ([`Float16Finding`]).

use crate::config::qtype_name;
use crate::observer::{Observer, F16_MIN_NORMAL};
use crate::ptq::Calibration;
use crate::resolve::Resolved;
use crate::types::Precision;
use qport_core::{DType, Tensor};
use qport_onnx::Model;
use qport_platform::Platform;
use serde::Serialize;

/// Float16's largest finite magnitude.
pub const F16_MAX: f32 = 65504.0;

/// Options of [`float16_guard`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardOptions {
    /// Share of a value's nonzero magnitudes below [`F16_MIN_NORMAL`] above
    /// which the value counts as underflowing (default 0.25).
    pub underflow_share: f64,
}

impl Default for GuardOptions {
    fn default() -> Self {
        GuardOptions {
            underflow_share: 0.25,
        }
    }
}

/// What float16 cannot hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Float16Problem {
    /// A magnitude above [`F16_MAX`]: infinite in float16.
    Overflow,
    /// Too many nonzero magnitudes below [`F16_MIN_NORMAL`].
    Underflow,
}

/// A node kept out of float16, with the value that made it so.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Float16Finding {
    /// The node.
    pub node: String,
    /// Its operator.
    pub op_type: String,
    /// The input or output value float16 cannot hold.
    pub value: String,
    /// `true` for a constant (initializer), `false` for an activation
    /// (range from the calibration samples).
    pub constant: bool,
    /// Smallest value observed.
    pub min: f32,
    /// Largest value observed.
    pub max: f32,
    /// Share of the nonzero magnitudes below [`F16_MIN_NORMAL`].
    pub below_normal_share: f64,
    /// What float16 cannot hold.
    pub problem: Float16Problem,
    /// The precision the node runs at instead; `None` when the platform
    /// runs nothing wider (the node stays in float16).
    pub kept_at: Option<Precision>,
}

impl Float16Finding {
    /// One line for people: node, value, range and decision.
    pub fn describe(&self) -> String {
        let what = match self.problem {
            Float16Problem::Overflow => format!(
                "range [{:.4e}, {:.4e}] exceeds float16's ±{F16_MAX}",
                self.min, self.max
            ),
            Float16Problem::Underflow => format!(
                "{:.0}% of its nonzero magnitudes are below float16's smallest normal 2^-14",
                100.0 * self.below_normal_share
            ),
        };
        let kind = if self.constant { "constant" } else { "value" };
        let kept = match self.kept_at {
            Some(p) => format!("kept at {}", qtype_name(p)),
            None => "left in float16: the platform runs nothing wider".into(),
        };
        format!(
            "{} ({}): {kind} '{}' {what}; {kept}",
            self.node, self.op_type, self.value
        )
    }
}

/// Range statistics of one value.
struct Stats {
    min: f32,
    max: f32,
    nonzero: u64,
    below_normal: u64,
}

impl Stats {
    fn of_observer(o: &Observer) -> Option<Stats> {
        // sentinels (a -3.4e38 mask) are exactly what float16 cannot hold
        let (min, max) = o.extremes()?;
        Some(Stats {
            min,
            max,
            nonzero: o.nonzero(),
            below_normal: o.below_f16_normal(),
        })
    }

    fn of_tensor(t: &Tensor) -> Option<Stats> {
        if !matches!(t.dtype(), DType::F32 | DType::F64) || t.is_empty() {
            return None;
        }
        let v = t.to_f32_vec().ok()?;
        let (mut min, mut max) = (f32::INFINITY, f32::NEG_INFINITY);
        let (mut nonzero, mut below_normal) = (0, 0);
        for &x in &v {
            min = min.min(x);
            max = max.max(x);
            if x != 0.0 {
                nonzero += 1;
                below_normal += u64::from(x.abs() < F16_MIN_NORMAL);
            }
        }
        Some(Stats {
            min,
            max,
            nonzero,
            below_normal,
        })
    }

    fn share(&self) -> f64 {
        if self.nonzero == 0 {
            0.0
        } else {
            self.below_normal as f64 / self.nonzero as f64
        }
    }

    fn problem(&self, opts: &GuardOptions) -> Option<Float16Problem> {
        // a float32 value that is itself infinite also overflows
        if !(self.min.abs() <= F16_MAX && self.max.abs() <= F16_MAX) {
            Some(Float16Problem::Overflow)
        } else if self.share() > opts.underflow_share {
            Some(Float16Problem::Underflow)
        } else {
            None
        }
    }
}

/// The precision a node float16 cannot run is moved to on `platform`:
/// float32, else int16, else none.
pub fn wider_than_float16(platform: &Platform) -> Option<Precision> {
    [Precision::Float32, Precision::Int16]
        .into_iter()
        .find(|p| platform.precisions.contains(p))
}

/// Checks every float16 node of `model` (the model `resolved` was resolved
/// for, node for node) against float16's range, using `calib`'s
/// statistics for activations, and moves the nodes that fail to
/// [`wider_than_float16`]; returns one finding per node moved (or left),
/// in graph order. See the [module docs](self).
pub fn float16_guard(
    model: &Model,
    resolved: &mut Resolved,
    calib: &Calibration,
    platform: &Platform,
    opts: &GuardOptions,
) -> Vec<Float16Finding> {
    let g = &model.graph;
    let kept_at = wider_than_float16(platform);
    let mut found = vec![];
    for (n, r) in g.nodes.iter().zip(resolved.nodes.iter_mut()) {
        if r.qtype != Precision::Float16 {
            continue;
        }
        let values = n.inputs.iter().chain(&n.outputs).filter(|v| !v.is_empty());
        let worst = values
            .filter_map(|v| {
                let (stats, constant) = match g.initializers.get(v) {
                    Some(t) => (Stats::of_tensor(t)?, true),
                    None => (Stats::of_observer(calib.observers.get(v)?)?, false),
                };
                let problem = stats.problem(opts)?;
                Some((problem, v, stats, constant))
            })
            // overflow first, then the larger share
            .min_by(|a, b| {
                (a.0 != Float16Problem::Overflow)
                    .cmp(&(b.0 != Float16Problem::Overflow))
                    .then(b.2.share().total_cmp(&a.2.share()))
            });
        let Some((problem, value, stats, constant)) = worst else {
            continue;
        };
        if let Some(p) = kept_at {
            r.qtype = p;
            r.input_types.retain(|_, t| *t != Precision::Float16);
        }
        found.push(Float16Finding {
            node: r.name.clone(),
            op_type: n.op_type.clone(),
            value: value.clone(),
            constant,
            min: stats.min,
            max: stats.max,
            below_normal_share: stats.share(),
            problem,
            kept_at,
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptq::{self, CalibrateOptions, Sample};
    use crate::{resolve, template};
    use qport_onnx::{graph::ModelBuilder, Node};
    use qport_platform::Registry;

    /// `y = relu(x · big) · tiny + x`, x of shape [4]: `big` overflows
    /// float16 as a constant and `x · big` as an activation; `tiny` is
    /// all subnormal in float16.
    fn model(big: f32, tiny: f32) -> Model {
        ModelBuilder::new(17)
            .input("x", DType::F32, &[4])
            .initializer("big", Tensor::scalar(big))
            .initializer("tiny", Tensor::scalar(tiny))
            .node(Node::new("scale", "Mul", ["x", "big"], ["xb"]))
            .node(Node::new("relu", "Relu", ["xb"], ["r"]))
            .node(Node::new("shrink", "Mul", ["r", "tiny"], ["s"]))
            .node(Node::new("add", "Add", ["s", "x"], ["y"]))
            .output("y", DType::F32, &[4])
            .build()
    }

    fn guard(m: &Model, platform: &Platform) -> (Vec<Float16Finding>, Resolved) {
        let base = template::template(platform, template::Template::Default);
        let mut resolved = resolve::resolve(m, platform, &base, None).unwrap();
        let samples = (0..3).map(|i| {
            let x = Tensor::from_vec(vec![4], vec![1.0f32, -2.0, 0.5 * i as f32, 3.0]).unwrap();
            Ok(Sample {
                index: i,
                origin: format!("sample {i}"),
                inputs: vec![("x".into(), x)],
            })
        });
        let calib = ptq::calibrate(
            m,
            &resolved,
            samples,
            &CalibrateOptions::default(),
            &mut |_| {},
        )
        .unwrap();
        let found = float16_guard(m, &mut resolved, &calib, platform, &GuardOptions::default());
        (found, resolved)
    }

    fn qtype(r: &Resolved, node: &str) -> Precision {
        r.nodes.iter().find(|n| n.name == node).unwrap().qtype
    }

    #[test]
    fn out_of_range_nodes_move_to_float32_on_j6p() {
        let reg = Registry::builtin();
        let j6p = reg.get("j6p").unwrap();
        let (found, r) = guard(&model(1e6, 1e-6), j6p);
        let by_node: Vec<(&str, &str, bool, Float16Problem)> = found
            .iter()
            .map(|f| (f.node.as_str(), f.value.as_str(), f.constant, f.problem))
            .collect();
        assert_eq!(
            by_node,
            [
                ("scale", "big", true, Float16Problem::Overflow),
                ("relu", "xb", false, Float16Problem::Overflow),
                ("shrink", "r", false, Float16Problem::Overflow),
            ],
            "{found:#?}"
        );
        assert_eq!(found[1].min, -2e6);
        assert_eq!(found[1].max, 3e6);
        for n in ["scale", "relu", "shrink"] {
            assert_eq!(qtype(&r, n), Precision::Float32, "{n}");
        }
        // `s` = relu(xb) · 1e-6 is back in range
        assert_eq!(qtype(&r, "add"), Precision::Float16);
        assert!(found[0].describe().contains("exceeds float16's ±65504"));
        assert!(found[0].describe().contains("kept at float32"));
    }

    #[test]
    fn in_range_values_stay_in_float16_and_underflow_is_a_share() {
        let reg = Registry::builtin();
        let j6p = reg.get("j6p").unwrap();
        let (found, r) = guard(&model(10.0, 0.5), j6p);
        assert!(found.is_empty(), "{found:#?}");
        assert!(r.nodes.iter().all(|n| n.qtype == Precision::Float16));
        // a constant entirely below 2^-14, and the product it makes
        let (found, _) = guard(&model(10.0, 1e-7), j6p);
        let by_node: Vec<(&str, &str, bool, Float16Problem, f64)> = found
            .iter()
            .map(|f| {
                let (n, v) = (f.node.as_str(), f.value.as_str());
                (n, v, f.constant, f.problem, f.below_normal_share)
            })
            .collect();
        let under = Float16Problem::Underflow;
        assert_eq!(
            by_node,
            [
                ("shrink", "tiny", true, under, 1.0),
                ("add", "s", false, under, 1.0)
            ],
            "{found:#?}"
        );
    }

    #[test]
    fn a_platform_without_wider_precisions_keeps_float16_and_says_so() {
        let reg = Registry::builtin();
        let mut p = reg.get("j6p").unwrap().clone();
        p.precisions = vec![Precision::Int8, Precision::Float16];
        let (found, r) = guard(&model(1e6, 1e-6), &p);
        assert_eq!(found.len(), 3);
        assert!(found.iter().all(|f| f.kept_at.is_none()));
        assert!(r.nodes.iter().all(|n| n.qtype == Precision::Float16));
        assert!(found[0].describe().contains("left in float16"));
        // int16 is the fallback where float32 is not run
        p.precisions = vec![Precision::Int8, Precision::Int16, Precision::Float16];
        assert_eq!(wider_than_float16(&p), Some(Precision::Int16));
        let j6m = reg.get("j6m").unwrap();
        assert_eq!(wider_than_float16(j6m), Some(Precision::Float32));
    }
}
