//! The running state of an agreement study ([`Tally`]): every pair's
//! accumulator, the per-sample records, the samples that flip and the
//! integer coverage, for one run of consecutive samples. [`AgreeStudy::run`]
//! finishes it into an [`Agreement`]; a shard of a study serialises it
//! (inside a [`super::PartialAgreement`]) and the merge folds the shards'
//! tallies together in sample order ([`Tally::merge`]) before finishing.
//! Every part merges exactly (counts, extremes, exact sums, lists in
//! sample order), so the merged result is bit-identical to the unsharded
//! one.
//!
//! [`AgreeStudy::run`]: super::AgreeStudy::run

use super::{margin_auc, Agreement, AnyFlip, OutputInfo, PairAcc, PairStats, SampleRecord};
use crate::coverage::CoverageJson;
use crate::StudyError;
use qport_core::compare::OutputSpec;
use serde::{Deserialize, Serialize};

/// The statistics of the samples `first..first + records.len()` of a study.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Tally {
    /// Study-wide index of the first sample.
    pub first: usize,
    /// Profile names, in study order.
    pub profiles: Vec<String>,
    /// The chosen outputs (index among the quantized model's outputs, and
    /// how each is compared), decided on the first sample; empty before.
    pub specs: Vec<(usize, OutputSpec)>,
    /// Every pair of different profiles `(i, j)`, `i < j`.
    pub pairs: Vec<(usize, usize, PairAcc)>,
    /// Each profile against its second run.
    pub selves: Vec<PairAcc>,
    /// Each profile against `fp32`.
    pub vs_fp32: Vec<PairAcc>,
    /// The FP32 controls.
    pub controls: Vec<PairAcc>,
    /// Every sample, in order.
    #[serde(with = "exact_records")]
    pub records: Vec<SampleRecord>,
    /// Study-wide indices of the samples on which some pair of profiles
    /// flips.
    pub any_flips: Vec<usize>,
    /// The integer coverage, measured on the first sample of this run.
    pub coverage: Option<Vec<CoverageJson>>,
}

/// [`SampleRecord`]s in JSON with their margins written exactly
/// ([`qport_core::exact::f32_json`]).
mod exact_records {
    use super::SampleRecord;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct R {
        id: String,
        fp32_top1: Vec<usize>,
        #[serde(with = "qport_core::exact::f32_json")]
        fp32_margin: f32,
        top1: Vec<Vec<usize>>,
    }

    pub fn serialize<S: Serializer>(v: &[SampleRecord], s: S) -> Result<S::Ok, S::Error> {
        let r: Vec<R> = v
            .iter()
            .map(|r| R {
                id: r.id.clone(),
                fp32_top1: r.fp32_top1.clone(),
                fp32_margin: r.fp32_margin,
                top1: r.top1.clone(),
            })
            .collect();
        r.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<SampleRecord>, D::Error> {
        let r: Vec<R> = Vec::deserialize(d)?;
        Ok(r.into_iter()
            .map(|r| SampleRecord {
                id: r.id,
                fp32_top1: r.fp32_top1,
                fp32_margin: r.fp32_margin,
                top1: r.top1,
            })
            .collect())
    }
}

impl Tally {
    /// No samples yet; the next one has index `first`.
    pub fn empty(first: usize) -> Tally {
        Tally {
            first,
            profiles: vec![],
            specs: vec![],
            pairs: vec![],
            selves: vec![],
            vs_fp32: vec![],
            controls: vec![],
            records: vec![],
            any_flips: vec![],
            coverage: None,
        }
    }

    /// Index one past the last sample.
    pub fn end(&self) -> usize {
        self.first + self.records.len()
    }

    /// Folds in `next`, the tally of the samples that follow this one's
    /// (`next.first == self.end()`). Fails when `next` does not follow on,
    /// or compares other profiles or outputs.
    pub fn merge(&mut self, next: Tally) -> Result<(), String> {
        if next.first != self.end() {
            return Err(format!(
                "samples {}..{} do not follow samples {}..{}",
                next.first,
                next.end(),
                self.first,
                self.end()
            ));
        }
        if next.records.is_empty() {
            return Ok(());
        }
        if self.records.is_empty() {
            let first = self.first;
            *self = next;
            self.first = first;
            return Ok(());
        }
        if self.profiles != next.profiles {
            return Err(format!(
                "profiles {} in one part, {} in the other",
                self.profiles.join(","),
                next.profiles.join(",")
            ));
        }
        if self.specs != next.specs {
            let names = |s: &[(usize, OutputSpec)]| {
                s.iter()
                    .map(|(_, o)| format!("'{}' (top-1 axis {:?})", o.name, o.argmax_axis))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "the compared outputs differ: {} from sample {}, {} from sample {} (the \
                 outputs' shapes differ between samples; give --output and --argmax-axis)",
                names(&self.specs),
                self.first,
                names(&next.specs),
                next.first
            ));
        }
        for ((_, _, x), (_, _, y)) in self.pairs.iter_mut().zip(&next.pairs) {
            x.merge(y)?;
        }
        for (x, y) in self
            .selves
            .iter_mut()
            .chain(&mut self.vs_fp32)
            .chain(&mut self.controls)
            .zip(
                next.selves
                    .iter()
                    .chain(&next.vs_fp32)
                    .chain(&next.controls),
            )
        {
            x.merge(y)?;
        }
        self.records.extend(next.records);
        self.any_flips.extend(next.any_flips);
        // the coverage of the study is the one measured on its first sample
        if self.coverage.is_none() {
            self.coverage = next.coverage;
        }
        Ok(())
    }

    /// The study's result; `threads` is recorded as given. Fails without
    /// samples, and when the tally does not start at the study's first
    /// sample.
    pub fn finish(self, threads: usize) -> Result<Agreement, StudyError> {
        if self.records.is_empty() {
            return Err(StudyError::Input(
                "no samples: the agreement study needs at least one input".into(),
            ));
        }
        if self.first != 0 {
            return Err(StudyError::Inconsistent(format!(
                "an agreement study finished from sample {}, not 0",
                self.first
            )));
        }
        let margins: Vec<f32> = self.records.iter().map(|r| r.fp32_margin).collect();
        let mut flipped = vec![false; self.records.len()];
        for &i in &self.any_flips {
            if let Some(f) = flipped.get_mut(i) {
                *f = true;
            }
        }
        let finish = |v: Vec<PairAcc>| -> Vec<PairStats> {
            v.into_iter().map(|a| a.finish(&margins)).collect()
        };
        let vs_fp32 = finish(self.vs_fp32);
        let outputs = self
            .specs
            .iter()
            .zip(&vs_fp32[0].outputs)
            .map(|((_, spec), o)| OutputInfo {
                name: o.name.clone(),
                kind: o.kind,
                passes_input: o.passes_input.clone(),
                dtype: o.dtype.clone(),
                shape: o.shape.clone(),
                argmax_axis: spec.argmax_axis,
                step: spec.step,
            })
            .collect();
        Ok(Agreement {
            outputs,
            profiles: self.profiles,
            threads,
            pairs: finish(self.pairs.into_iter().map(|(_, _, a)| a).collect()),
            selves: finish(self.selves),
            vs_fp32,
            fp32_controls: finish(self.controls),
            any_flip: AnyFlip {
                margin_auc: margin_auc(&margins, &flipped),
                samples: self.any_flips,
            },
            samples: self.records,
            integer_coverage: self
                .coverage
                .ok_or_else(|| StudyError::Input("no samples".into()))?,
        })
    }
}
