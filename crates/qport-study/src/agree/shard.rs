//! An agreement study split into shards and merged exactly: shard `I` of
//! `N` ([`Shard`], numbered from 0) runs a contiguous slice of the
//! samples ([`Shard::range`]) with [`AgreeStudy::run_shard`] and produces a
//! [`PartialAgreement`], a versioned JSON document (schema
//! [`SHARD_SCHEMA`]) holding the slice's statistics in a mergeable form;
//! [`merge`] checks that the parts are the `N` shards of one run and
//! combines them into the [`Agreement`] the unsharded study gives, bit for
//! bit (timing apart). Each shard knows the study-wide index of its
//! samples, so `--repeat`, flip indices, the margin ROC-AUC and the
//! integer coverage (measured on the study's first sample) come out as in
//! one run.
//!
//! A study is a pure function of (artifact, data slice, profiles), so this
//! is all a scheduler needs: Slurm job arrays, Kubernetes Indexed Jobs or
//! Ray tasks run the shards, and one merge runs at the end
//! (`docs/scale-out.md`).
//!
//! ```no_run
//! use qport_study::agree::{merge, AgreeOptions, AgreeStudy, Shard};
//! # let (qdq, fp32, profiles): (qport_onnx::Model, qport_onnx::Model, Vec<qport_core::arith::ArithProfile>) = unimplemented!();
//! # let dataset: qport_data::dataset::Dataset = unimplemented!();
//! let study = AgreeStudy::new(&qdq, &fp32, &profiles, AgreeOptions::default()).unwrap();
//! let total = dataset.len();
//! let mut parts = vec![];
//! for index in 0..3 {
//!     // each of these would run on its own machine, and travel as JSON
//!     let shard = Shard::new(index, 3).unwrap();
//!     let samples = dataset.samples_in(shard.range(total));
//!     let part = study.run_shard(shard, total, samples, &mut |_| {}).unwrap();
//!     parts.push(serde_json::to_string(&part).unwrap());
//! }
//! let parts = parts.iter().map(|j| serde_json::from_str(j).unwrap()).collect();
//! let merged = merge(parts).unwrap();
//! println!("{} samples", merged.agreement.n());
//! ```

use super::report::Provenance;
use super::{AgreeStudy, Agreement, Tally};
use crate::StudyError;
use qport_core::compare::Thresholds;
use qport_data::{DataError, Sample};
use serde::{Deserialize, Serialize};
use std::ops::Range;

pub use qport_data::shard::Shard;
use qport_data::shard::{check_complete, check_same_run, Identity};

/// The `schema` of a [`PartialAgreement`].
pub const SHARD_SCHEMA: &str = "qport.agree-shard/1";

/// What the report of a sharded study needs besides the statistics: its
/// provenance (with the command line of the run, without `--shard`) and
/// the checks asked for. Carried by every shard, the same in each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardContext {
    /// The files, data, profiles and warnings of the study.
    pub provenance: Provenance,
    /// The minimum top-1 agreement asked for (`--min-agreement`).
    pub min_agreement: Option<f64>,
    /// `--min-cosine` / `--min-sqnr` of each profile against `fp32`.
    pub thresholds: Thresholds,
    /// The smallest share of MACs in integers asked for
    /// (`--min-integer-coverage`).
    pub min_integer_coverage: Option<f64>,
}

/// One shard's share of an agreement study (schema [`SHARD_SCHEMA`],
/// documented in `docs/cli-json.md`): what its samples contributed to every
/// statistic, in a form [`merge`] combines exactly, and what identifies
/// the run it belongs to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartialAgreement {
    /// [`SHARD_SCHEMA`].
    pub schema: String,
    /// Version of qport that wrote it; only the same version merges it.
    pub qport_version: String,
    /// Which shard.
    pub shard: Shard,
    /// Samples in the whole study (every shard).
    pub total: usize,
    /// The study-wide indices of this shard's samples
    /// ([`Shard::range`]).
    pub samples: Range<usize>,
    /// What every shard of one run has in common, by name: the study's
    /// settings (profiles, `repeat`, compared outputs, sample count) and
    /// whatever the caller adds ([`PartialAgreement::identify`]); shards
    /// that differ in any entry are not merged.
    pub identity: Identity,
    /// Worker threads used (informational).
    pub threads: usize,
    /// Wall time of the shard, in seconds (set by the caller; 0 when not).
    pub seconds: f64,
    /// The report's provenance and checks, when the caller records them.
    pub context: Option<ShardContext>,
    /// The statistics.
    tally: Tally,
}

impl PartialAgreement {
    /// Adds `key = value` to what identifies the run (a file's sha256, the
    /// data's fingerprint): shards that differ in it are not merged.
    pub fn identify(&mut self, key: &str, value: impl Into<String>) {
        self.identity.insert(key.to_string(), value.into());
    }

    /// Samples this shard ran.
    pub fn n(&self) -> usize {
        self.samples.len()
    }
}

impl AgreeStudy {
    /// Runs shard `shard` of a study of `total` samples: `samples` must be
    /// exactly the samples at the study-wide indices `shard.range(total)`,
    /// in order (`qport_data::Dataset::samples_in` reads them). An empty
    /// shard (more shards than samples) gives an empty part. Fails as
    /// [`AgreeStudy::run`] does, and when the number of samples given is
    /// not the shard's.
    pub fn run_shard<I>(
        &self,
        shard: Shard,
        total: usize,
        samples: I,
        progress: &mut dyn FnMut(usize),
    ) -> Result<PartialAgreement, StudyError>
    where
        I: IntoIterator<Item = Result<Sample, DataError>>,
    {
        let range = shard.range(total);
        let tally = self.tally(samples, range.start, progress)?;
        if tally.records.len() != range.len() {
            return Err(StudyError::Input(format!(
                "shard {shard} of {total} samples holds samples {}..{} ({} samples), but {} \
                 were given",
                range.start,
                range.end,
                range.len(),
                tally.records.len()
            )));
        }
        let mut identity = Identity::new();
        let profiles: Vec<&str> = self.profiles.iter().map(|p| p.name.as_str()).collect();
        identity.insert("profiles".to_string(), profiles.join(","));
        identity.insert("samples".to_string(), total.to_string());
        identity.insert(
            "repeat".to_string(),
            match self.repeat {
                usize::MAX => "every sample".to_string(),
                r => r.to_string(),
            },
        );
        identity.insert("outputs".to_string(), format!("{:?}", self.choice));
        Ok(PartialAgreement {
            schema: SHARD_SCHEMA.to_string(),
            qport_version: env!("CARGO_PKG_VERSION").to_string(),
            shard,
            total,
            samples: range,
            identity,
            threads: self.threads,
            seconds: 0.0,
            context: None,
            tally,
        })
    }
}

/// The merged study: the [`Agreement`] the unsharded study gives, with the
/// first shard's context and the shards' total time.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The result, identical to the unsharded study's.
    pub agreement: Agreement,
    /// Shard 0's context (the same in every shard).
    pub context: Option<ShardContext>,
    /// Sum of the shards' wall times, in seconds.
    pub seconds: f64,
}

/// Combines the `N` shards of one study (in any order) into the result of
/// the unsharded study. Fails with [`StudyError::Input`] naming the
/// problem when the list is empty, when a part is not a shard of this
/// qport version, when the parts were split differently (`1/3` and
/// `1/4`), when a shard is given twice or is missing, or when two parts
/// differ in what identifies their run (model, data, profiles, settings:
/// [`PartialAgreement::identity`] and the context's provenance).
pub fn merge(parts: Vec<PartialAgreement>) -> Result<Merged, StudyError> {
    let bad = |m: String| StudyError::Input(m);
    for p in &parts {
        if p.schema != SHARD_SCHEMA {
            return Err(bad(format!(
                "not an agreement shard: schema '{}' (expected '{SHARD_SCHEMA}')",
                p.schema
            )));
        }
        if p.qport_version != env!("CARGO_PKG_VERSION") {
            return Err(bad(format!(
                "shard {} was written by qport {}, this is qport {}: merge with the version \
                 that ran the shards",
                p.shard,
                p.qport_version,
                env!("CARGO_PKG_VERSION")
            )));
        }
    }
    let shards: Vec<Shard> = parts.iter().map(|p| p.shard).collect();
    let order = check_complete(&shards).map_err(bad)?;
    let mut slots: Vec<Option<PartialAgreement>> = parts.into_iter().map(Some).collect();
    let parts: Vec<PartialAgreement> = order.iter().filter_map(|&i| slots[i].take()).collect();
    let head = &parts[0];
    for p in &parts {
        same_run(head, p).map_err(bad)?;
    }
    let threads = head.threads;
    let total = head.total;
    let context = head.context.clone();
    let seconds = parts.iter().map(|p| p.seconds).sum();
    let mut tally = Tally::empty(0);
    for p in parts {
        let shard = p.shard;
        tally
            .merge(p.tally)
            .map_err(|e| bad(format!("shard {shard}: {e}")))?;
    }
    if tally.end() != total {
        return Err(bad(format!(
            "the shards hold {} samples, not the study's {total}",
            tally.end()
        )));
    }
    Ok(Merged {
        agreement: tally.finish(threads)?,
        context,
        seconds,
    })
}

/// Checks that `p` is a shard of the same run as `head`, naming the first
/// thing that differs.
fn same_run(head: &PartialAgreement, p: &PartialAgreement) -> Result<(), String> {
    let differ = |what: &str, a: &str, b: &str| {
        Err(format!(
            "shards {} and {} are not from the same run: {what} differs ({a} in {}, {b} in {})",
            head.shard, p.shard, head.shard, p.shard
        ))
    };
    check_same_run((head.shard, &head.identity), (p.shard, &p.identity))?;
    if p.samples != p.shard.range(p.total) {
        return Err(format!(
            "shard {} holds samples {:?}, not its share {:?} of {}",
            p.shard,
            p.samples,
            p.shard.range(p.total),
            p.total
        ));
    }
    match (&head.context, &p.context) {
        (None, None) => Ok(()),
        (Some(x), Some(y)) => {
            // the command lines may differ (--out, --threads); nothing else
            let strip = |c: &ShardContext| {
                let mut c = c.clone();
                c.provenance.header.command = None;
                serde_json::to_value(&c).unwrap_or_default()
            };
            let (a, b) = (strip(x), strip(y));
            let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
                return Ok(());
            };
            for (k, va) in a {
                let vb = b.get(k).cloned().unwrap_or_default();
                if *va == vb {
                    continue;
                }
                // name the field inside the provenance that differs
                if let (Some(ia), Some(ib)) = (va.as_object(), vb.as_object()) {
                    for (f, fa) in ia {
                        let fb = ib.get(f).cloned().unwrap_or_default();
                        if *fa != fb {
                            return differ(f, &fa.to_string(), &fb.to_string());
                        }
                    }
                }
                return differ(k, &va.to_string(), &vb.to_string());
            }
            Ok(())
        }
        _ => differ(
            "the recorded provenance",
            if head.context.is_some() {
                "present"
            } else {
                "absent"
            },
            if p.context.is_some() {
                "present"
            } else {
                "absent"
            },
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_refuses_bad_sets_of_shards() {
        let part = |i: usize, n: usize| PartialAgreement {
            schema: SHARD_SCHEMA.into(),
            qport_version: env!("CARGO_PKG_VERSION").into(),
            shard: Shard::new(i, n).unwrap(),
            total: 0,
            samples: 0..0,
            identity: Identity::new(),
            threads: 1,
            seconds: 0.0,
            context: None,
            tally: Tally::empty(0),
        };
        let msg = |v: Vec<PartialAgreement>| match merge(v) {
            Err(StudyError::Input(m)) => m,
            other => panic!("expected an input error, got {other:?}"),
        };
        assert!(msg(vec![]).contains("no shards"));
        assert!(msg(vec![part(0, 2), part(0, 2)]).contains("shard 0/2 is given twice"));
        assert!(msg(vec![part(0, 3), part(2, 3)]).contains("shard 1/3 is missing"));
        assert!(msg(vec![part(0, 2), part(1, 3)]).contains("different splits"));
        let mut other = part(1, 2);
        other.identify("model sha256", "abc");
        let m = msg(vec![part(0, 2), other]);
        assert!(
            m.contains("not from the same run: model sha256 differs"),
            "{m}"
        );
        let mut v = part(0, 1);
        v.qport_version = "0.0.0-other".into();
        assert!(msg(vec![v]).contains("written by qport 0.0.0-other"));
        let mut s = part(0, 1);
        s.schema = "qport.agree/2".into();
        assert!(msg(vec![s]).contains("not an agreement shard"));
        // all there, but no samples at all
        assert!(msg(vec![part(0, 2), part(1, 2)]).contains("no samples"));
    }
}
