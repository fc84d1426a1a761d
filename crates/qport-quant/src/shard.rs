//! Calibration split into shards and merged exactly: shard `I` of `N`
//! ([`Shard`], numbered from 0) observes a contiguous slice of the
//! calibration samples ([`calibrate_shard`]) and produces a
//! [`PartialCalibration`], a versioned JSON document (schema
//! [`CALIB_SHARD_SCHEMA`]) holding its observers; [`merge`] checks that the
//! parts are the `N` shards of one run and folds the observers together
//! into the [`Calibration`] one pass over every sample gives, so the
//! scales, the exported artifact and its `quant_config` are the unsharded
//! run's, byte for byte.
//!
//! Which statistics merge exactly ([`crate::observer`]): the minimum,
//! maximum, counts, the histogram (bins merge exactly at any range), the
//! float16 counts, sentinels and the distinct levels of a model input; so
//! every calibrator built on them (`max`, `percentile`, `kl`, `mse`) and
//! per-channel `max`. The EMA of per-sample extremes does not: it depends
//! on the order of every sample, and merging averages two EMAs. A
//! configuration that uses `ema` (for any tensor) is therefore refused
//! ([`check_mergeable`]) instead of giving different scales.
//!
//! The samples kept to choose between calibrators are the study's first
//! ones; the merge takes them from the caller (read again from the data:
//! [`crate::ptq::CalibrateOptions::keep_for_selection`] of them).
//!
//! ```no_run
//! use qport_quant::{ptq, shard};
//! # let (model, resolved): (qport_onnx::Model, qport_quant::resolve::Resolved) = unimplemented!();
//! # let dataset: qport_data::Dataset = unimplemented!();
//! let total = dataset.len();
//! let mut parts = vec![];
//! for index in 0..4 {
//!     let s = shard::Shard::new(index, 4).unwrap();
//!     let samples = dataset.samples_in(s.range(total)).map(|r| r.map_err(Into::into));
//!     parts.push(shard::calibrate_shard(&model, &resolved, s, total, samples, &mut |_| {}).unwrap());
//! }
//! let keep = ptq::CalibrateOptions::default().keep_for_selection;
//! let selection = dataset.samples_in(0..keep).collect::<Result<Vec<_>, _>>().unwrap();
//! let calib = shard::merge(parts, selection).unwrap();
//! let chosen = ptq::quantize(&model, &resolved, &calib, None).unwrap();
//! ```

use crate::observer::{ChannelObserver, Observer};
use crate::ptq::{self, CalibrateOptions, Calibration, Sample};
use crate::resolve::Resolved;
use crate::{CalibMethod, QuantError};
use qport_core::DType;
use qport_data::shard::{check_complete, check_same_run};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Range;

pub use qport_data::shard::{Identity, Shard};

/// The `schema` of a [`PartialCalibration`].
pub const CALIB_SHARD_SCHEMA: &str = "qport.calib-shard/1";

/// One shard's observers of a calibration (schema [`CALIB_SHARD_SCHEMA`],
/// documented in `docs/cli-json.md`), and what identifies its run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartialCalibration {
    /// [`CALIB_SHARD_SCHEMA`].
    pub schema: String,
    /// Version of qport that wrote it; only the same version merges it.
    pub qport_version: String,
    /// Which shard.
    pub shard: Shard,
    /// Calibration samples in the whole run (every shard).
    pub total: usize,
    /// The run-wide indices of this shard's samples ([`Shard::range`]).
    pub samples: Range<usize>,
    /// What every shard of one run has in common, by name: the
    /// calibration settings, the sample count and whatever the caller adds
    /// ([`PartialCalibration::identify`]: the model's sha256, the data's
    /// fingerprint); shards that differ in any entry are not merged.
    pub identity: Identity,
    /// Wall time of the shard, in seconds (set by the caller).
    pub seconds: f64,
    /// One observer per float value.
    observers: BTreeMap<String, Observer>,
    /// Per-channel observers (when the config asks for them).
    channels: BTreeMap<String, ChannelObserver>,
    /// Dtype name and shape of every run-time value, from the shard's
    /// first sample.
    values: BTreeMap<String, (String, Vec<usize>)>,
}

impl PartialCalibration {
    /// Adds `key = value` to what identifies the run: shards that differ
    /// in it are not merged.
    pub fn identify(&mut self, key: &str, value: impl Into<String>) {
        self.identity.insert(key.to_string(), value.into());
    }

    /// Samples this shard observed.
    pub fn n(&self) -> usize {
        self.samples.len()
    }
}

/// Fails with [`QuantError::Shard`] when `resolved` calibrates some tensor
/// with `ema`, whose statistics do not merge exactly (see the module docs).
pub fn check_mergeable(resolved: &Resolved) -> Result<(), QuantError> {
    let ema = resolved.activation.methods.contains(&CalibMethod::Ema)
        || resolved
            .tensor_overrides
            .values()
            .any(|o| o.method == Some(CalibMethod::Ema));
    if ema {
        return Err(QuantError::Shard(
            "calibration `ema` cannot be sharded: its moving average depends on the order of \
             every sample, so merged shards would give other scales; use max, percentile, kl \
             or mse (they merge exactly), or calibrate in one run"
                .into(),
        ));
    }
    Ok(())
}

/// What identifies a calibration of `total` samples under `resolved`
/// (every [`PartialCalibration`] of the run starts with these entries): the
/// sample count and the activation calibration settings.
pub fn run_identity(resolved: &Resolved, total: usize) -> Identity {
    let mut identity = Identity::new();
    identity.insert("samples".into(), total.to_string());
    identity.insert(
        "activation calibration".into(),
        format!("{:?}", resolved.activation),
    );
    identity
}

/// Observes shard `shard` of a calibration set of `total` samples:
/// `samples` must be exactly the samples at the run-wide indices
/// `shard.range(total)`, in order. An empty shard gives an empty part.
/// Fails as [`ptq::calibrate`] does, with [`QuantError::Shard`] for a
/// configuration that does not merge exactly ([`check_mergeable`]) and
/// when the number of samples given is not the shard's.
pub fn calibrate_shard(
    model: &qport_onnx::Model,
    resolved: &Resolved,
    shard: Shard,
    total: usize,
    samples: impl Iterator<Item = Result<Sample, QuantError>>,
    progress: &mut dyn FnMut(usize),
) -> Result<PartialCalibration, QuantError> {
    check_mergeable(resolved)?;
    let range = shard.range(total);
    let mut samples = samples.peekable();
    let (observers, channels, values, n) = if samples.peek().is_none() {
        (BTreeMap::new(), BTreeMap::new(), BTreeMap::new(), 0)
    } else {
        let opts = CalibrateOptions {
            keep_for_selection: 0,
        };
        let c = ptq::calibrate(model, resolved, samples, &opts, progress)?;
        let values = c
            .values
            .iter()
            .map(|(k, (d, s))| (k.clone(), (d.name().to_string(), s.clone())))
            .collect();
        (c.observers, c.channels, values, c.samples)
    };
    if n != range.len() {
        return Err(QuantError::Shard(format!(
            "shard {shard} of {total} samples holds samples {}..{} ({} samples), but {n} were \
             given",
            range.start,
            range.end,
            range.len()
        )));
    }
    let identity = run_identity(resolved, total);
    Ok(PartialCalibration {
        schema: CALIB_SHARD_SCHEMA.to_string(),
        qport_version: env!("CARGO_PKG_VERSION").to_string(),
        shard,
        total,
        samples: range,
        identity,
        seconds: 0.0,
        observers,
        channels,
        values,
    })
}

/// Folds the `N` shards of one calibration (in any order) into the
/// [`Calibration`] one pass over every sample gives; `selection` becomes
/// its [`Calibration::selection`] (the run's first samples, to choose
/// between calibrators). Fails with [`QuantError::Shard`] naming the
/// problem when the list is empty, a part is not a calibration shard of
/// this qport version, the parts were split differently, a shard is given
/// twice or is missing, or two parts differ in what identifies their run.
pub fn merge(
    parts: Vec<PartialCalibration>,
    selection: Vec<Sample>,
) -> Result<Calibration, QuantError> {
    let bad = QuantError::Shard;
    for p in &parts {
        if p.schema != CALIB_SHARD_SCHEMA {
            return Err(bad(format!(
                "not a calibration shard: schema '{}' (expected '{CALIB_SHARD_SCHEMA}')",
                p.schema
            )));
        }
        if p.qport_version != env!("CARGO_PKG_VERSION") {
            return Err(bad(format!(
                "shard {} was written by qport {}, this is qport {}",
                p.shard,
                p.qport_version,
                env!("CARGO_PKG_VERSION")
            )));
        }
    }
    let shards: Vec<Shard> = parts.iter().map(|p| p.shard).collect();
    let order = check_complete(&shards).map_err(bad)?;
    let mut slots: Vec<Option<PartialCalibration>> = parts.into_iter().map(Some).collect();
    let parts: Vec<PartialCalibration> = order.iter().filter_map(|&i| slots[i].take()).collect();
    let head = &parts[0];
    for p in &parts {
        check_same_run((head.shard, &head.identity), (p.shard, &p.identity)).map_err(bad)?;
        if p.samples != p.shard.range(p.total) {
            return Err(bad(format!(
                "shard {} holds samples {:?}, not its share {:?} of {}",
                p.shard,
                p.samples,
                p.shard.range(p.total),
                p.total
            )));
        }
    }
    let mut observers: BTreeMap<String, Observer> = BTreeMap::new();
    let mut channels: BTreeMap<String, ChannelObserver> = BTreeMap::new();
    let mut values = None;
    let mut samples = 0;
    for p in parts.into_iter().filter(|p| p.n() > 0) {
        samples += p.n();
        if values.is_none() {
            values = Some(p.values);
        }
        for (name, o) in p.observers {
            match observers.get_mut(&name) {
                Some(x) => x.merge(&o),
                None => {
                    observers.insert(name, o);
                }
            }
        }
        for (name, c) in p.channels {
            match channels.get_mut(&name) {
                Some(x) => x
                    .merge(&c)
                    .map_err(|e| bad(format!("shard {}: '{name}': {e}", p.shard)))?,
                None => {
                    channels.insert(name, c);
                }
            }
        }
    }
    if samples == 0 {
        return Err(QuantError::EmptyCalibration);
    }
    let values = values
        .unwrap_or_default()
        .into_iter()
        .map(|(k, (d, s))| {
            DType::from_name(&d)
                .map(|d| (k.clone(), (d, s)))
                .ok_or_else(|| bad(format!("value '{k}' has an unknown dtype '{d}'")))
        })
        .collect::<Result<_, _>>()?;
    Ok(Calibration {
        observers,
        values,
        channels,
        samples,
        selection,
    })
}
