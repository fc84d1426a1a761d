//! Mixed precision to an accuracy target: start from the platform's base
//! config, promote the nodes that matter to int16 until the target holds,
//! then return the ones that turn out not to matter.
//!
//! The search ([`tune`]), every configuration scored by a [`Scorer`]
//! (one calibration, shared):
//!
//! 1. **baseline**: the base config (J6E/M/B: int8; J6H/P/S6P: float16
//!    with int8 GEMMs, after the caller's float16 range guard). If it
//!    meets the target, nothing is promoted.
//! 2. **upper bound**: every promotion candidate (a node at int8 whose
//!    inputs are quantized, [`promotion_candidates`]) at int16. If even
//!    that misses the target, the search stops ([`Outcome::Unreachable`]).
//! 3. **ranking**: each candidate returned alone to its base precision
//!    from the upper bound, scored on the first `rank_samples` samples:
//!    the error it adds there ([`noise`] of [`ranking_metric`]: `1 −
//!    cosine` for a top-1 target) is what promoting it removes. Measured
//!    against a model where everything else is precise, this is not
//!    drowned by the other nodes' error, as a promotion from the noisy
//!    baseline is. Candidates are ordered by that error per share of MACs
//!    ([`priority`]), largest first (ties in graph order): the search
//!    spends the high-precision MACs where they remove the most error.
//! 4. **greedy promotion**: the ranked candidates that fit the budget
//!    (skipping any whose MACs would exceed it), promoted as a growing
//!    prefix of the ranking: 1, 2, 4, ... nodes until the target holds,
//!    then the smallest holding prefix between the last two by bisection.
//! 5. **fall back**: each promoted node, lowest priority first, returned
//!    to its base precision when the target still holds without it.
//!
//! Every scored configuration is a [`Step`] of the trajectory; the
//! [`Pareto`] table lists them by metric and high-precision MAC share.

use crate::measure::{mac_shares, Metric, Score, Scorer};
use crate::qdq::NodePrecision;
use crate::sensitivity::{promote_where, promotion_candidates};
use crate::types::Precision;
use crate::QuantError;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Errors of parsing a target or a budget.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TuneError {
    /// The target expression does not parse.
    #[error("cannot parse target '{0}'; write one of cosine>=0.995, top1>=98%, sqnr>=30dB, drop<=0.5 (points of labelled accuracy)")]
    Target(String),
    /// The target needs labels (`drop<=...`).
    #[error("target '{0}' is a drop in labelled accuracy: give the evaluation samples' classes with --labels (or use top1>=P%, agreement with FP32)")]
    NeedsLabels(String),
    /// The budget expression does not parse.
    #[error("cannot parse budget '{0}'; write PRECISION<=P%, e.g. int16<=25%")]
    Budget(String),
    /// The budget rules out what the target asks for.
    #[error("budget '{budget}' contradicts the target: {why}")]
    Contradiction {
        /// The budget as given.
        budget: String,
        /// Why.
        why: String,
    },
    /// The platform cannot run the high precision.
    #[error("platform {platform} does not run {precision}: there is nothing to promote nodes to (precisions: {available})")]
    NoHighPrecision {
        /// Platform name.
        platform: String,
        /// The precision asked for.
        precision: String,
        /// What the platform runs.
        available: String,
    },
}

/// An accuracy target: a metric and the bound it must reach.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Target {
    /// The metric.
    pub metric: Metric,
    /// Smallest acceptable value (top-1 and accuracy as a fraction). For
    /// a `drop` target, set by [`Target::resolve`] from FP32's accuracy.
    pub min: f64,
    /// The largest accepted drop of accuracy below FP32's, as a fraction
    /// (`drop<=0.5` is 0.005); `None` for a fixed bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop: Option<f64>,
}

impl Target {
    /// Parses `cosine>=0.995`, `top1>=98%` (or `top1>=0.98`),
    /// `sqnr>=30dB` or `drop<=0.5` (points of accuracy). With `labelled`
    /// (the samples have class labels), `top1` is accuracy against the
    /// labels ([`Metric::Accuracy`]) instead of agreement with FP32, and
    /// `drop` is accepted; a `drop` target is completed by
    /// [`Target::resolve`].
    pub fn parse(s: &str, labelled: bool) -> Result<Target, TuneError> {
        let t = s.trim().to_ascii_lowercase().replace(' ', "");
        let bad = || TuneError::Target(s.to_string());
        if let Some(v) = t.strip_prefix("drop<=") {
            if !labelled {
                return Err(TuneError::NeedsLabels(s.to_string()));
            }
            let v = v.strip_suffix("pt").unwrap_or(v);
            let points: f64 = v.parse().map_err(|_| bad())?;
            if !(0.0..=100.0).contains(&points) {
                return Err(bad());
            }
            return Ok(Target {
                metric: Metric::Accuracy,
                min: 0.0,
                drop: Some(points / 100.0),
            });
        }
        let (name, value) = t.split_once(">=").ok_or_else(bad)?;
        let metric = match name {
            "cosine" | "cos" => Metric::Cosine,
            "top1" | "top-1" if labelled => Metric::Accuracy,
            "top1" | "top-1" => Metric::Top1,
            "sqnr" => Metric::Sqnr,
            _ => return Err(bad()),
        };
        let (num, scale) = match metric {
            Metric::Top1 | Metric::Accuracy => match value.strip_suffix('%') {
                Some(v) => (v, 0.01),
                None => (value, 1.0),
            },
            Metric::Sqnr => (value.strip_suffix("db").unwrap_or(value), 1.0),
            _ => (value, 1.0),
        };
        let v: f64 = num.parse().map_err(|_| bad())?;
        let min = v * scale;
        let ok = match metric {
            Metric::Cosine => (-1.0..=1.0).contains(&min),
            Metric::Top1 | Metric::Accuracy => (0.0..=1.0).contains(&min),
            _ => min.is_finite(),
        };
        if !ok {
            return Err(bad());
        }
        Ok(Target {
            metric,
            min,
            drop: None,
        })
    }

    /// A `drop` target's bound set from FP32's accuracy (`None`: no
    /// labels); other targets unchanged.
    pub fn resolve(self, fp32_accuracy: Option<f64>) -> Result<Target, QuantError> {
        let Some(drop) = self.drop else {
            return Ok(self);
        };
        let fp32 = fp32_accuracy
            .ok_or_else(|| QuantError::Outputs("a drop target needs labels".into()))?;
        Ok(Target {
            min: (fp32 - drop).max(0.0),
            ..self
        })
    }

    /// True when `s` meets the target.
    pub fn holds(&self, s: &Score) -> bool {
        self.metric.value(s) >= self.min
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.metric, self.drop) {
            (_, Some(d)) => write!(f, "drop<={}pt", d * 100.0),
            (Metric::Top1, _) => write!(f, "top1>={}%", self.min * 100.0),
            (Metric::Accuracy, _) => write!(f, "accuracy>={}%", self.min * 100.0),
            (Metric::Sqnr, _) => write!(f, "sqnr>={}dB", self.min),
            (m, _) => write!(f, "{m}>={}", self.min),
        }
    }
}

/// A cap on the share of MACs at one precision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    /// The precision capped.
    pub precision: Precision,
    /// Largest share of MACs at it, in `0..=1`.
    pub max_share: f64,
}

impl Budget {
    /// Parses `int16<=25%` (or `int16<=0.25`).
    pub fn parse(s: &str) -> Result<Budget, TuneError> {
        let t = s.trim().to_ascii_lowercase().replace(' ', "");
        let bad = || TuneError::Budget(s.to_string());
        let (name, value) = t.split_once("<=").ok_or_else(bad)?;
        let precision = match name {
            "int16" => Precision::Int16,
            _ => return Err(bad()),
        };
        let share = match value.strip_suffix('%') {
            Some(v) => v.parse::<f64>().map_err(|_| bad())? / 100.0,
            None => value.parse::<f64>().map_err(|_| bad())?,
        };
        if !(0.0..=1.0).contains(&share) {
            return Err(bad());
        }
        Ok(Budget {
            precision,
            max_share: share,
        })
    }

    /// Checks the budget against a target before any work: a budget of
    /// 0% forbids every promotion, so tuning could only report the base.
    pub fn check(&self, target: &Target, text: &str) -> Result<(), TuneError> {
        if self.max_share <= 0.0 {
            return Err(TuneError::Contradiction {
                budget: text.to_string(),
                why: format!(
                    "it allows no MACs at {}, so no node can be promoted towards {target}",
                    crate::config::qtype_name(self.precision)
                ),
            });
        }
        Ok(())
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}<={}%",
            crate::config::qtype_name(self.precision),
            self.max_share * 100.0
        )
    }
}

/// The high precision of `platform`, or the error saying it has none.
pub fn high_precision(platform: &qport_platform::Platform) -> Result<Precision, TuneError> {
    if platform.precisions.contains(&Precision::Int16) {
        return Ok(Precision::Int16);
    }
    Err(TuneError::NoHighPrecision {
        platform: platform.name.clone(),
        precision: "int16".into(),
        available: platform
            .precisions
            .iter()
            .map(|p| crate::config::qtype_name(*p))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// What a step of the search did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// The base config.
    Baseline,
    /// Every candidate promoted.
    UpperBound,
    /// A prefix of the ranking promoted.
    Promote,
    /// One promoted node returned to its base precision.
    FallBack,
}

/// One scored configuration of the search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// What the step tried.
    pub kind: StepKind,
    /// The change, for people (`promote 4 nodes: a, b, c, d`).
    pub change: String,
    /// Nodes at the high precision in this configuration, in ranking order.
    pub promoted: Vec<String>,
    /// Its score.
    pub score: Score,
    /// The target metric's value.
    pub value: f64,
    /// Whether the target holds.
    pub holds: bool,
    /// Share of MACs per precision.
    pub mac_share: BTreeMap<String, f64>,
    /// Whether the search kept this configuration (a fall-back that holds,
    /// the holding prefix).
    pub kept: bool,
}

/// A candidate in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranked {
    /// Node name.
    pub node: String,
    /// Op type.
    pub op_type: String,
    /// Share of the model's MACs.
    pub mac_share: f64,
    /// The error the node adds alone at its base precision, every other
    /// candidate at the high precision ([`noise`] of [`ranking_metric`]
    /// above the upper bound's, ranking samples; 0 when below).
    pub loss: f64,
    /// [`priority`]: `loss` per share of MACs; the ranking's order.
    pub priority: f64,
    /// Left out of the promotion: it would exceed the budget.
    pub over_budget: bool,
}

/// How the search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Outcome {
    /// The base config already meets the target.
    BaselineHolds,
    /// The target holds with the final config.
    Reached,
    /// Even every candidate promoted misses the target.
    Unreachable {
        /// The baseline's value.
        baseline: f64,
        /// The upper bound's value.
        upper_bound: f64,
    },
    /// The budget left out nodes the target needed: the best configuration
    /// within the budget misses it.
    BudgetWon {
        /// The best value within the budget.
        best: f64,
        /// The upper bound's value (without the budget).
        upper_bound: f64,
    },
}

impl Outcome {
    /// True when the final config meets the target.
    pub fn reached(&self) -> bool {
        matches!(self, Outcome::BaselineHolds | Outcome::Reached)
    }
}

/// A configuration of the Pareto table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pareto {
    /// Index of the step in the trajectory.
    pub step: usize,
    /// The target metric's value.
    pub value: f64,
    /// Share of MACs at the high precision.
    pub high_share: f64,
    /// No other configuration is at least as good on both with one better.
    pub optimal: bool,
}

/// The result of [`tune`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tuned {
    /// The target (a `drop` target with its bound resolved).
    pub target: Target,
    /// FP32's accuracy on the labels (`None` without labels).
    pub fp32_accuracy: Option<f64>,
    /// The budget, if any.
    pub budget: Option<Budget>,
    /// The high precision.
    pub high: Precision,
    /// Samples the target is checked on.
    pub samples: usize,
    /// Samples the ranking used.
    pub rank_samples: usize,
    /// Candidates in ranking order.
    pub ranking: Vec<Ranked>,
    /// Every scored configuration, in order.
    pub trajectory: Vec<Step>,
    /// The trajectory's configurations by value and high-precision share.
    pub pareto: Vec<Pareto>,
    /// Index in the trajectory of the final configuration.
    pub final_step: usize,
    /// How it ended.
    pub outcome: Outcome,
    /// The final per-node precisions (graph order).
    #[serde(skip)]
    pub precisions: Vec<NodePrecision>,
}

impl Tuned {
    /// The final configuration's step.
    pub fn final_config(&self) -> &Step {
        &self.trajectory[self.final_step]
    }
}

/// Options of [`tune`].
#[derive(Debug, Clone, Copy)]
pub struct TuneOptions {
    /// The target.
    pub target: Target,
    /// A cap on the high precision's MAC share.
    pub budget: Option<Budget>,
    /// The precision nodes are promoted to.
    pub high: Precision,
    /// Samples the ranking is scored on (the first ones; at least 1).
    pub rank_samples: usize,
}

struct Search<'s, 'a> {
    scorer: &'s Scorer<'a>,
    base: Vec<NodePrecision>,
    macs: Vec<u64>,
    high: Precision,
    target: Target,
    steps: Vec<Step>,
    progress: &'s mut dyn FnMut(&Step),
}

impl Search<'_, '_> {
    fn config(&self, promoted: &[usize]) -> Vec<NodePrecision> {
        promote_where(&self.base, self.high, |k| promoted.contains(&k))
    }

    fn run(
        &mut self,
        kind: StepKind,
        change: String,
        promoted: &[usize],
    ) -> Result<usize, QuantError> {
        let prec = self.config(promoted);
        let score = self.scorer.score(&prec)?;
        let value = self.target.metric.value(&score);
        let step = Step {
            kind,
            change,
            promoted: promoted
                .iter()
                .map(|&k| self.scorer.base().nodes[k].name.clone())
                .collect(),
            value,
            holds: self.target.holds(&score),
            score,
            mac_share: mac_shares(&prec, &self.macs),
            kept: false,
        };
        (self.progress)(&step);
        self.steps.push(step);
        Ok(self.steps.len() - 1)
    }

    fn names(&self, nodes: &[usize]) -> String {
        const SHOWN: usize = 4;
        let mut v: Vec<&str> = nodes
            .iter()
            .take(SHOWN)
            .map(|&k| self.scorer.base().nodes[k].name.as_str())
            .collect();
        if nodes.len() > SHOWN {
            v.push("...");
        }
        v.join(", ")
    }
}

/// The metric candidates are ranked by: the target's, except top-1,
/// whose agreement on a few ranking samples rarely moves when one node
/// changes; mean cosine ranks those.
pub fn ranking_metric(target: Metric) -> Metric {
    match target {
        Metric::Top1 | Metric::Accuracy => Metric::Cosine,
        m => m,
    }
}

/// A score's error on `m` in units that add up over independent error
/// sources: `1 − cosine` (for small errors, the noise-to-signal power
/// ratio over two), MSE, the noise-to-signal power ratio `10^(−SQNR/10)`;
/// top-1 is ranked by cosine ([`ranking_metric`]). Non-finite outputs
/// count as the largest error.
pub fn noise(m: Metric, s: &Score) -> f64 {
    if s.non_finite_samples > 0 {
        return f64::INFINITY;
    }
    match m {
        Metric::Cosine | Metric::Top1 | Metric::Accuracy => 1.0 - s.cosine,
        Metric::Mse => s.mse,
        Metric::Sqnr => s.sqnr_db.map_or(0.0, |db| 10f64.powf(-db / 10.0)),
    }
}

/// The order of promotion: `loss` removed per share of MACs promoted, a
/// node without MACs counted as [`MIN_COST`] of them, so that among
/// nodes that matter equally the cheaper goes first.
pub fn priority(loss: f64, macs: u64, total: u64) -> f64 {
    let share = if total == 0 {
        0.0
    } else {
        macs as f64 / total as f64
    };
    loss / share.max(MIN_COST)
}

/// The smallest MAC share [`priority`] divides by (0.2%).
pub const MIN_COST: f64 = 0.002;

fn share_of(prec: &[NodePrecision], macs: &[u64], q: Precision) -> f64 {
    mac_shares(prec, macs)
        .get(crate::config::qtype_name(q))
        .copied()
        .unwrap_or(0.0)
}

/// Runs the search (see the [module docs](self)) with `scorer` checking
/// the target and its first `rank_samples` samples ranking the candidates.
/// `progress` is called after every scored configuration, `ranked(done,
/// total)` during the ranking.
pub fn tune(
    scorer: &Scorer<'_>,
    opts: &TuneOptions,
    progress: &mut dyn FnMut(&Step),
    ranked: &mut dyn FnMut(usize, usize),
) -> Result<Tuned, QuantError> {
    scorer.check_metric(opts.target.metric)?;
    let target = opts.target.resolve(scorer.fp32_accuracy())?;
    let macs = scorer.node_macs();
    let total: u64 = macs.iter().sum();
    let candidates = promotion_candidates(scorer);
    let mut s = Search {
        scorer,
        base: scorer.base_precisions(),
        macs: macs.clone(),
        high: opts.high,
        target,
        steps: vec![],
        progress,
    };
    let hq = crate::config::qtype_name(opts.high);
    let base_step = s.run(StepKind::Baseline, "base config".into(), &[])?;
    if s.steps[base_step].holds {
        s.steps[base_step].kept = true;
        return finish(s, opts, vec![], base_step, Outcome::BaselineHolds);
    }
    let upper = s.run(
        StepKind::UpperBound,
        format!("every candidate at {hq} ({} nodes)", candidates.len()),
        &candidates,
    )?;
    let upper_value = s.steps[upper].value;
    if !s.steps[upper].holds {
        let baseline = s.steps[base_step].value;
        return finish(
            s,
            opts,
            vec![],
            base_step,
            Outcome::Unreachable {
                baseline,
                upper_bound: upper_value,
            },
        );
    }
    // ranking: each candidate returned alone to its base precision from
    // the upper bound, on the ranking samples; the error it adds there,
    // per share of MACs, orders the promotion
    let rank_scorer = scorer.first(opts.rank_samples);
    let upper_prec = s.config(&candidates);
    let rank_metric = ranking_metric(target.metric);
    let rank_upper = noise(rank_metric, &rank_scorer.score(&upper_prec)?);
    let mut losses = Vec::with_capacity(candidates.len());
    for (i, &k) in candidates.iter().enumerate() {
        let rest: Vec<usize> = candidates.iter().copied().filter(|&c| c != k).collect();
        let sc = rank_scorer.score(&s.config(&rest))?;
        losses.push((noise(rank_metric, &sc) - rank_upper).max(0.0));
        ranked(i + 1, candidates.len());
    }
    let priorities: Vec<f64> = candidates
        .iter()
        .zip(&losses)
        .map(|(&k, &l)| priority(l, macs[k], total))
        .collect();
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by(|&a, &b| priorities[b].total_cmp(&priorities[a]));
    // the budget: walk the ranking, skip what would exceed it
    let mut used = 0u64;
    let mut allowed = vec![];
    let mut ranking = vec![];
    for &i in &order {
        let k = candidates[i];
        let over = opts.budget.is_some_and(|b| {
            b.precision == opts.high
                && total > 0
                && (used + macs[k]) as f64 / total as f64 > b.max_share + 1e-12
        });
        if !over {
            used += macs[k];
            allowed.push(k);
        }
        ranking.push(Ranked {
            node: scorer.base().nodes[k].name.clone(),
            op_type: scorer.base().nodes[k].op_type.clone(),
            mac_share: crate::ptq::fraction(macs[k] as usize, total as usize, 0.0),
            loss: losses[i],
            priority: priorities[i],
            over_budget: over,
        });
    }
    // greedy promotion: growing prefixes, then bisection
    let mut tried: BTreeMap<usize, usize> = BTreeMap::new();
    let mut try_prefix = |s: &mut Search<'_, '_>, n: usize| -> Result<usize, QuantError> {
        if let Some(&i) = tried.get(&n) {
            return Ok(i);
        }
        let nodes = &allowed[..n];
        let i = s.run(
            StepKind::Promote,
            format!(
                "promote the first {n} of the ranking to {hq}: {}",
                s.names(nodes)
            ),
            nodes,
        )?;
        tried.insert(n, i);
        Ok(i)
    };
    let (mut lo, mut hi) = (0usize, None);
    let mut n = 1usize;
    while n <= allowed.len() {
        let i = try_prefix(&mut s, n)?;
        if s.steps[i].holds {
            hi = Some(n);
            break;
        }
        lo = n;
        if n == allowed.len() {
            break;
        }
        n = (n * 2).min(allowed.len());
    }
    let Some(mut hi) = hi else {
        // the budget won: keep the best configuration tried within it
        let best = s
            .steps
            .iter()
            .enumerate()
            .filter(|(_, st)| st.kind != StepKind::UpperBound)
            .max_by(|a, b| a.1.value.total_cmp(&b.1.value).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i)
            .unwrap_or(base_step);
        s.steps[best].kept = true;
        let best_value = s.steps[best].value;
        return finish(
            s,
            opts,
            ranking,
            best,
            Outcome::BudgetWon {
                best: best_value,
                upper_bound: upper_value,
            },
        );
    };
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let i = try_prefix(&mut s, mid)?;
        if s.steps[i].holds {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut current = tried[&hi];
    s.steps[current].kept = true;
    let mut promoted: Vec<usize> = allowed[..hi].to_vec();
    // fall back: lowest priority first (the most MACs per error removed)
    let priority_of = |k: usize| {
        candidates
            .iter()
            .position(|&c| c == k)
            .map_or(0.0, |i| priorities[i])
    };
    let mut by_priority = promoted.clone();
    by_priority.sort_by(|&a, &b| priority_of(a).total_cmp(&priority_of(b)));
    if promoted.len() > 1 {
        for k in by_priority {
            let rest: Vec<usize> = promoted.iter().copied().filter(|&p| p != k).collect();
            let name = scorer.base().nodes[k].name.clone();
            let i = s.run(
                StepKind::FallBack,
                format!("return {name} to its base precision"),
                &rest,
            )?;
            if s.steps[i].holds {
                s.steps[i].kept = true;
                promoted = rest;
                current = i;
            }
        }
    }
    finish(s, opts, ranking, current, Outcome::Reached)
}

fn finish(
    s: Search<'_, '_>,
    opts: &TuneOptions,
    ranking: Vec<Ranked>,
    final_step: usize,
    outcome: Outcome,
) -> Result<Tuned, QuantError> {
    let scorer = s.scorer;
    let names: Vec<&str> = s.steps[final_step]
        .promoted
        .iter()
        .map(|x| x.as_str())
        .collect();
    let promoted: Vec<usize> = scorer
        .base()
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| names.contains(&n.name.as_str()))
        .map(|(k, _)| k)
        .collect();
    let precisions = s.config(&promoted);
    let points: Vec<(f64, f64)> = s
        .steps
        .iter()
        .map(|st| {
            let prec = s.config(
                &scorer
                    .base()
                    .nodes
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| st.promoted.contains(&n.name))
                    .map(|(k, _)| k)
                    .collect::<Vec<_>>(),
            );
            (st.value, share_of(&prec, &s.macs, opts.high))
        })
        .collect();
    let better = |a: (f64, f64), b: (f64, f64)| -> bool {
        // a dominates b
        a.0 >= b.0 && a.1 <= b.1 && (a.0 > b.0 || a.1 < b.1)
    };
    let pareto = points
        .iter()
        .enumerate()
        .map(|(i, &p)| Pareto {
            step: i,
            value: p.0,
            high_share: p.1,
            optimal: !points.iter().any(|&q| better(q, p)),
        })
        .collect();
    Ok(Tuned {
        target: s.target,
        fp32_accuracy: scorer.fp32_accuracy(),
        budget: opts.budget,
        high: opts.high,
        samples: scorer.samples(),
        rank_samples: opts.rank_samples.clamp(1, scorer.samples()),
        ranking,
        trajectory: s.steps,
        pareto,
        final_step,
        outcome,
        precisions,
    })
}

#[cfg(test)]
#[path = "tune_tests.rs"]
mod tests;
