//! The measured-sweep CSV of [`crate::regime`]: a header row naming the
//! columns, then one point a row; blank lines and lines starting with `#`
//! are skipped. Every error names the file, the line and the column.
//!
//! | column | unit | |
//! |---|---|---|
//! | `output_bytes` | bytes | required, strictly increasing |
//! | `d2h_p50_ms` | ms | required, > 0 |
//! | `throughput_1core` | inferences/s | optional, > 0 (with `throughput_ncore`) |
//! | `throughput_ncore` | inferences/s | optional, > 0 (with `throughput_1core`) |
//! | `scaling` | N-core / 1-core | optional, > 0 |
//!
//! ```
//! use qport_platform::regime_csv::parse_sweep;
//! let p = parse_sweep("output_bytes,d2h_p50_ms\n3920,0.141\n256368,0.776\n", "s.csv").unwrap();
//! assert_eq!((p[1].bytes, p[1].d2h_ms), (256_368, 0.776));
//! ```

use crate::regime::{RegimeError, SweepPoint};

/// Required columns.
pub const REQUIRED: [&str; 2] = ["output_bytes", "d2h_p50_ms"];
/// Optional columns.
pub const OPTIONAL: [&str; 3] = ["throughput_1core", "throughput_ncore", "scaling"];

/// Parses a sweep CSV (`file` names it in errors).
pub fn parse_sweep(text: &str, file: &str) -> Result<Vec<SweepPoint>, RegimeError> {
    let bad = |reason: String| RegimeError::BadCsv {
        file: file.to_string(),
        reason,
    };
    let mut rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let (_, header) = rows
        .next()
        .ok_or_else(|| bad("no header row (the file is empty)".into()))?;
    let names: Vec<String> = header.split(',').map(|c| c.trim().to_string()).collect();
    for n in &names {
        if !REQUIRED.contains(&n.as_str()) && !OPTIONAL.contains(&n.as_str()) {
            return Err(bad(format!(
                "line 1: unknown column `{n}`; columns: {} (required), {} (optional)",
                REQUIRED.join(", "),
                OPTIONAL.join(", ")
            )));
        }
    }
    let col = |name: &str| names.iter().position(|n| n == name);
    for r in REQUIRED {
        if col(r).is_none() {
            return Err(bad(format!(
                "missing column `{r}` (header: {}); required columns: {}",
                names.join(", "),
                REQUIRED.join(", ")
            )));
        }
    }
    if col("throughput_1core").is_some() != col("throughput_ncore").is_some() {
        return Err(bad(
            "columns `throughput_1core` and `throughput_ncore` come together; give both or neither"
                .into(),
        ));
    }
    let mut points: Vec<(usize, SweepPoint)> = vec![];
    for (line, row) in rows {
        let cells: Vec<&str> = row.split(',').map(str::trim).collect();
        if cells.len() != names.len() {
            return Err(bad(format!(
                "line {line}: {} cells, the header has {} columns",
                cells.len(),
                names.len()
            )));
        }
        let num = |name: &str| -> Result<Option<f64>, RegimeError> {
            let Some(i) = col(name) else { return Ok(None) };
            let v: f64 = cells[i].parse().map_err(|_| {
                bad(format!(
                    "line {line}, column `{name}`: `{}` is not a number",
                    cells[i]
                ))
            })?;
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(format!(
                    "line {line}, column `{name}`: must be a positive number, got {}",
                    cells[i]
                )));
            }
            Ok(Some(v))
        };
        let i = col("output_bytes").unwrap_or(0);
        let bytes: u64 = cells[i].parse().map_err(|_| {
            bad(format!(
                "line {line}, column `output_bytes`: `{}` is not a whole number of bytes",
                cells[i]
            ))
        })?;
        if let Some((prev_line, prev)) = points.last() {
            if bytes <= prev.bytes {
                return Err(bad(format!(
                    "line {line}, column `output_bytes`: {bytes} is not larger than {} on line \
                     {prev_line}; sizes must be strictly increasing",
                    prev.bytes
                )));
            }
        }
        let p = SweepPoint {
            bytes,
            d2h_ms: num("d2h_p50_ms")?.unwrap_or(0.0),
            throughput_1: num("throughput_1core")?,
            throughput_n: num("throughput_ncore")?,
            scaling: num("scaling")?,
        };
        points.push((line, p));
    }
    if points.len() < 2 {
        return Err(bad(format!(
            "{} data row(s); a sweep needs at least 2",
            points.len()
        )));
    }
    Ok(points.into_iter().map(|(_, p)| p).collect())
}
