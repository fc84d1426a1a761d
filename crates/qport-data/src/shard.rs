//! Splitting a dataset between the tasks of a job ([`Shard`]): shard `I`
//! of `N` takes a contiguous slice of the samples ([`Shard::range`]), so
//! the `N` slices cover every sample once, in order, and each task knows
//! the dataset-wide index of its samples. A study or a calibration run on
//! the slices and merged exactly gives the result of one run over all the
//! samples (`qport_study::agree::shard`, `qport_quant::shard`).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::Range;
use std::str::FromStr;

/// Shard `index` of `count`, numbered from 0 (`0/3`, `1/3`, `2/3`): the
/// index a Kubernetes Indexed Job (`JOB_COMPLETION_INDEX`) or a Slurm job
/// array started with `--array=0-(N-1)` (`SLURM_ARRAY_TASK_ID`) hands each
/// task. Written and parsed as `I/N`.
///
/// ```
/// use qport_data::shard::Shard;
/// let s: Shard = "1/3".parse().unwrap();
/// assert_eq!(s.range(10), 3..6);
/// assert!("3/3".parse::<Shard>().unwrap_err().contains("numbered from 0"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shard {
    /// Which shard, `0 <= index < count`.
    pub index: usize,
    /// How many shards the study is split into (at least 1).
    pub count: usize,
}

impl Shard {
    /// Shard `index` of `count`; an error saying what is wrong unless
    /// `count >= 1` and `index < count`.
    pub fn new(index: usize, count: usize) -> Result<Shard, String> {
        if count == 0 {
            return Err(format!(
                "shard {index}/{count}: the number of shards must be at least 1"
            ));
        }
        if index >= count {
            return Err(format!(
                "shard {index}/{count}: shards are numbered from 0, so with {count} shard{} \
                 the index is 0 to {} (0/{count} .. {}/{count})",
                if count == 1 { "" } else { "s" },
                count - 1,
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// The whole study as one shard (`0/1`).
    pub fn whole() -> Shard {
        Shard { index: 0, count: 1 }
    }

    /// The study-wide indices of this shard's samples out of `total`: the
    /// contiguous slice `[index·total/count, (index+1)·total/count)`.
    /// Shards differ in size by at most one sample; with fewer samples
    /// than shards some are empty.
    pub fn range(&self, total: usize) -> Range<usize> {
        let at = |i: usize| ((i as u128 * total as u128) / self.count as u128) as usize;
        at(self.index)..at(self.index + 1)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses `I/N` (shard `I` of `N`, numbered from 0).
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!("'{s}' is not a shard: write I/N, shard I of N numbered from 0 (0/4 .. 3/4)")
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i: usize = i.trim().parse().map_err(|_| bad())?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        Shard::new(i, n)
    }
}

/// What identifies the run a shard belongs to: named entries (settings,
/// a file's sha256, the data's fingerprint) every shard of one run has in
/// common.
pub type Identity = std::collections::BTreeMap<String, String>;

/// Checks that `shards` (in any order) are every shard `0/N .. N-1/N` of
/// one split, once each, and returns their positions in `shards` in shard
/// order. The error names the problem: no shards, shards of different
/// splits, a shard given twice, the shards missing.
pub fn check_complete(shards: &[Shard]) -> Result<Vec<usize>, String> {
    let Some(first) = shards.first() else {
        return Err("no shards to merge".into());
    };
    for s in shards {
        Shard::new(s.index, s.count)?;
    }
    let count = first.count;
    if let Some(other) = shards.iter().find(|s| s.count != count) {
        return Err(format!(
            "shards of different splits: {first} and {other} (every shard of one run has the \
             same N)"
        ));
    }
    let mut order: Vec<usize> = (0..shards.len()).collect();
    order.sort_by_key(|&i| shards[i].index);
    for w in order.windows(2) {
        if shards[w[0]].index == shards[w[1]].index {
            return Err(format!("shard {} is given twice", shards[w[0]]));
        }
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !shards.iter().any(|s| s.index == *i))
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        let one = missing.len() == 1;
        return Err(format!(
            "shard{} {} {} missing: every shard 0/{count} .. {}/{count} is needed",
            if one { "" } else { "s" },
            missing.join(", "),
            if one { "is" } else { "are" },
            count - 1
        ));
    }
    Ok(order)
}

/// Checks that shards `a` and `b` belong to the same run: every entry of
/// their identities is the same. The error names the first entry that
/// differs, with both values.
pub fn check_same_run(a: (Shard, &Identity), b: (Shard, &Identity)) -> Result<(), String> {
    let keys: std::collections::BTreeSet<&String> = a.1.keys().chain(b.1.keys()).collect();
    for k in keys {
        let (x, y) = (a.1.get(k), b.1.get(k));
        if x != y {
            let show = |v: Option<&String>| v.map_or("nothing".to_string(), |v| format!("'{v}'"));
            return Err(format!(
                "shards {} and {} are not from the same run: {k} differs ({} in {}, {} in {})",
                a.0,
                b.0,
                show(x),
                a.0,
                show(y),
                b.0
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_cover_every_sample_once() {
        assert_eq!("0/1".parse::<Shard>(), Ok(Shard::whole()));
        assert_eq!(" 2 / 5 ".parse::<Shard>(), Shard::new(2, 5));
        for bad in ["", "1", "a/b", "1/", "-1/3", "1/3/4", "1.5/3"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("write I/N"), "{bad}: {e}");
        }
        let e = "0/0".parse::<Shard>().unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        let e = "3/2".parse::<Shard>().unwrap_err();
        assert!(e.contains("numbered from 0") && e.contains("0 to 1"), "{e}");
        assert!("2/2".parse::<Shard>().is_err());
        for total in [0, 1, 2, 7, 10, 11] {
            for count in 1..=4 {
                let mut next = 0;
                for i in 0..count {
                    let r = Shard::new(i, count).unwrap().range(total);
                    assert_eq!(r.start, next, "{i}/{count} of {total}");
                    assert!(r.len() == total / count || r.len() == total / count + 1);
                    next = r.end;
                }
                assert_eq!(next, total);
            }
        }
        assert_eq!(Shard::new(1, 3).unwrap().to_string(), "1/3");
    }

    #[test]
    fn complete_sets_of_shards() {
        let sh = |i, n| Shard::new(i, n).unwrap();
        assert_eq!(
            check_complete(&[sh(2, 3), sh(0, 3), sh(1, 3)]),
            Ok(vec![1, 2, 0])
        );
        assert_eq!(check_complete(&[sh(0, 1)]), Ok(vec![0]));
        let e = |v: &[Shard]| check_complete(v).unwrap_err();
        assert!(e(&[]).contains("no shards"));
        assert!(e(&[sh(0, 2), sh(0, 2)]).contains("shard 0/2 is given twice"));
        assert!(e(&[sh(0, 3)]).contains("shards 1/3, 2/3 are missing"));
        assert!(e(&[sh(0, 2), sh(1, 3)]).contains("different splits"));
        let a: Identity = [("model".to_string(), "x".to_string())].into();
        let b: Identity = [("model".to_string(), "y".to_string())].into();
        assert_eq!(check_same_run((sh(0, 2), &a), (sh(1, 2), &a)), Ok(()));
        let m = check_same_run((sh(0, 2), &a), (sh(1, 2), &b)).unwrap_err();
        assert!(m.contains("model differs ('x' in 0/2, 'y' in 1/2)"), "{m}");
        let m = check_same_run((sh(0, 2), &a), (sh(1, 2), &Identity::new())).unwrap_err();
        assert!(m.contains("nothing in 1/2"), "{m}");
    }
}
