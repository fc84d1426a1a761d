//! `qport merge`: combines the shard directories of a study run in
//! pieces (`qport agree --shard I/N --out DIR`, one process or machine
//! each) into exactly what the unsharded command writes: `OUT/agree.json`,
//! bit-identical to one run's except the timing (`seconds`, the sum of the
//! shards' wall times) and `command` (the shards' command line without
//! `--shard`, so its `--out` is shard 0's). The shards must be every shard
//! `0/N .. N-1/N` of one run (same model, data, profiles and settings);
//! anything else is refused with exit 2 naming what is wrong.

use crate::agree::{self, Checks, SHARD_FILE};
use crate::out_dir::OutDirArg;
use crate::output::{Format, Ui};
use crate::ExitStatus;
use anyhow::{bail, Context, Result};
use clap::Args;
use qport_study::agree::PartialAgreement;
use std::path::PathBuf;
use std::time::Instant;

/// Examples shown by `qport merge --help`.
pub const AFTER_HELP: &str = "\
Examples:
  for i in 0 1 2; do
    qport agree q/model.qdq.onnx --data photos/ --preprocess effnet-lite \\
        --shard $i/3 --out parts/$i &
  done; wait
  qport merge parts/0 parts/1 parts/2 --out agree/

Each DIR is the --out of one `qport agree ... --shard I/N` and holds its
agree.shard.json (schema qport.agree-shard/1, docs/cli-json.md). Shards are
numbered from 0 and cover contiguous slices of the samples; every shard
0/N .. N-1/N of one run must be given, once each, in any order. The shards
must come from the same qport version, model, FP32 model, data, profiles
and settings (--n, --repeat, --output, --pot, the checks); a missing,
duplicate or foreign shard is an input error (exit 2) that names it.

Writes OUT/agree.json: the document the unsharded `qport agree` writes
(schema qport.agree/2), identical except `seconds` (the sum of the shards'
wall times) and `command` (the shards' command line without --shard).
Exit codes as for `qport agree`: 1 when a check recorded by the shards
(--min-agreement, --min-cosine, --min-sqnr, --min-integer-coverage) fails,
2 input error. Recipes for Slurm job arrays and Kubernetes Indexed Jobs:
docs/scale-out.md.";

/// `qport merge` arguments.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The shard directories (each the --out of `qport agree --shard I/N`),
    /// in any order.
    #[arg(required = true, value_name = "DIR")]
    pub shards: Vec<PathBuf>,
    #[command(flatten)]
    pub out: OutDirArg,
    /// Output format on stdout.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

/// Reads the shard in `dir`.
fn read_part(dir: &std::path::Path) -> Result<PartialAgreement> {
    let path = dir.join(SHARD_FILE);
    if !path.is_file() {
        bail!(
            "'{}' holds no {SHARD_FILE}: give the --out directories of `qport agree ... --shard I/N`",
            dir.display()
        );
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read '{}'", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "'{}' is not an agreement shard (schema {})",
            path.display(),
            qport_study::agree::SHARD_SCHEMA
        )
    })
}

/// Runs `qport merge`.
pub fn run(args: &MergeArgs, ui: &Ui) -> Result<ExitStatus> {
    let t0 = Instant::now();
    let out_dir = args.out.check(&["agree.json"])?;
    let mut parts = Vec::with_capacity(args.shards.len());
    let mut seen: Vec<(qport_study::agree::Shard, &PathBuf)> = vec![];
    for dir in &args.shards {
        let part = read_part(dir)?;
        if let Some((_, other)) = seen.iter().find(|(s, _)| *s == part.shard) {
            bail!(
                "shard {} is given twice: '{}' and '{}'",
                part.shard,
                other.display(),
                dir.display()
            );
        }
        seen.push((part.shard, dir));
        parts.push(part);
    }
    let merged = qport_study::agree::merge(parts).with_context(|| {
        format!(
            "cannot merge {}",
            args.shards
                .iter()
                .map(|d| format!("'{}'", d.display()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let Some(ctx) = merged.context else {
        bail!("the shards record no provenance (they were not written by `qport agree --shard`)");
    };
    let checks = Checks {
        min_agreement: ctx.min_agreement,
        thresholds: ctx.thresholds,
        coverage: crate::args::CoverageArg {
            min_integer_coverage: ctx.min_integer_coverage,
        },
    };
    agree::write_report(
        &merged.agreement,
        ctx.provenance,
        &checks,
        merged.seconds + t0.elapsed().as_secs_f64(),
        out_dir,
        args.format,
        ui,
    )
}
