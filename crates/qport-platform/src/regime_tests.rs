//! Tests of the latency regime model against the study's sweep (seed
//! `004_…` Table 5, Figure 3) and of the sweep CSV.

use crate::regime::*;
use crate::regime_csv::parse_sweep;

/// Table 5: output bytes, D2H p50 (ms), measured 3-core scaling.
const TABLE5: [(u64, f64, f64); 5] = [
    (3_920, 0.141, 2.98),
    (256_368, 0.776, 1.99),
    (511_952, 1.367, 1.59),
    (1_000_384, 2.429, 1.21),
    (1_999_984, 8.892, 1.00),
];

fn table5(with_scaling: bool) -> Vec<SweepPoint> {
    TABLE5
        .iter()
        .map(|&(b, d, s)| SweepPoint {
            scaling: with_scaling.then_some(s),
            ..SweepPoint::new(b, d)
        })
        .collect()
}

fn within(x: f64, want: f64, rel: f64) -> bool {
    ((x - want) / want).abs() <= rel
}

#[test]
fn study_thresholds_from_interpolation() {
    let r = Regime::new(2.70, 3).unwrap();
    let a = analyze_sweep(&r, &table5(true), 0.05).unwrap();
    let t = a.thresholds;
    let (o, c, w) = (
        t.onset_bytes.unwrap(),
        t.crossover_bytes.unwrap(),
        t.width_ratio.unwrap(),
    );
    assert!(within(o, 326_377.0, 0.10), "onset {o}");
    assert!(within(c, 1_095_949.0, 0.10), "crossover {c}");
    assert!((w - 3.36).abs() < 0.05, "width ratio {w}");
    // hand-computed: 256368 + (0.9-0.776)/(1.367-0.776) * 255584
    assert!((o - 309_993.6).abs() < 1.0, "onset {o}");
    assert_eq!(a.thresholds_from, "interpolated");
}

#[test]
fn study_classification_per_point() {
    let r = Regime::new(2.70, 3).unwrap();
    let a = analyze_sweep(&r, &table5(true), 0.05).unwrap();
    use RegimeClass::*;
    let got: Vec<_> = a.points.iter().map(|p| p.class).collect();
    // Table 5: plateau, transition band x3, D2H-bound
    assert_eq!(
        got,
        [ComputeBound, Transition, Transition, Transition, D2hBound]
    );
    // the model alone puts 256,368 B (0.776 ms < c/N = 0.9 ms) below the
    // onset: the measured 1.99x shows the link saturating earlier
    let model: Vec<_> = a.points.iter().map(|p| p.model_class).collect();
    assert_eq!(
        model,
        [ComputeBound, ComputeBound, Transition, Transition, D2hBound]
    );
}

#[test]
fn fits_and_residuals() {
    let r = Regime::new(2.70, 3).unwrap();
    let a = analyze_sweep(&r, &table5(false), 0.05).unwrap();
    assert_eq!(a.fits.len(), 2);
    let all = &a.fits[0];
    assert_eq!(all.over, "all");
    assert_eq!(all.residuals_ms.len(), 5);
    // residuals of an OLS line with intercept sum to zero
    assert!(all.residuals_ms.iter().sum::<f64>().abs() < 1e-9);
    // the global line misses the super-linear top end by more than 1 ms
    assert!(all.residuals_ms.iter().any(|r| r.abs() > 1.0));
    let below = &a.fits[1];
    assert_eq!(below.bytes.len(), 4);
    assert!(below.rms_ms < 0.05, "{below:?}");
    assert!(below.link.fixed_ms > 0.0);
    let o = below.thresholds.onset_bytes.unwrap();
    assert!(within(o, 326_377.0, 0.03), "{o}");
}

#[test]
fn link_model_thresholds_and_scaling() {
    let r = Regime::new(3.0, 3).unwrap();
    let link = LinkModel::new(0.0, 1000.0).unwrap();
    let t = r.link_thresholds(&link);
    assert_eq!(t.onset_bytes, Some(1000.0));
    assert_eq!(t.crossover_bytes, Some(3000.0));
    assert_eq!(t.width_ratio, Some(3.0));
    let a = analyze_link(&r, &link, &[500, 2000, 3000, 9000]).unwrap();
    let s: Vec<_> = a.points.iter().map(|p| p.predicted_scaling).collect();
    assert_eq!(s, [3.0, 1.5, 1.0, 1.0]);
    assert_eq!(a.points[2].class, RegimeClass::D2hBound);
    // a fixed cost above c/N: the link is saturated at any size
    let slow = LinkModel::new(1.5, 1000.0).unwrap();
    assert_eq!(r.link_thresholds(&slow).onset_bytes, None);
}

#[test]
fn bad_parameters() {
    assert!(Regime::new(2.7, 0).is_err());
    assert!(Regime::new(0.0, 3).is_err());
    assert!(Regime::new(-1.0, 3).is_err());
    assert!(LinkModel::new(-0.1, 1.0).is_err());
    assert!(LinkModel::new(0.1, 0.0).is_err());
    let r = Regime::new(2.7, 3).unwrap();
    let mut p = table5(false);
    p.swap(1, 2);
    let e = analyze_sweep(&r, &p, 0.05).unwrap_err().to_string();
    assert!(e.contains("strictly increasing"), "{e}");
}

#[test]
fn csv_reads_and_rejects() {
    let ok = "# sweep\noutput_bytes, d2h_p50_ms, throughput_1core, throughput_ncore\n\
              3920,0.141,370,1100\n256368,0.776,370,740\n";
    let p = parse_sweep(ok, "s.csv").unwrap();
    assert_eq!(p.len(), 2);
    assert!((p[1].measured_scaling().unwrap() - 2.0).abs() < 1e-12);
    let err = |t: &str| parse_sweep(t, "s.csv").unwrap_err().to_string();
    let e = err("output_bytes\n1\n2\n");
    assert!(
        e.contains("s.csv") && e.contains("missing column `d2h_p50_ms`"),
        "{e}"
    );
    let e = err("output_bytes,d2h_p50_ms\n10,0.1\n5,0.2\n");
    assert!(
        e.contains("line 3") && e.contains("strictly increasing"),
        "{e}"
    );
    let e = err("output_bytes,d2h_p50_ms\n10,0.1\n20,-0.2\n");
    assert!(e.contains("line 3, column `d2h_p50_ms`"), "{e}");
    let e = err("output_bytes,d2h_p50_ms\n10,0\n20,0.2\n");
    assert!(e.contains("line 2, column `d2h_p50_ms`"), "{e}");
    let e = err("output_bytes,d2h_p50_ms,foo\n");
    assert!(e.contains("unknown column `foo`"), "{e}");
    let e = err("output_bytes,d2h_p50_ms,throughput_1core\n1,1,1\n2,2,2\n");
    assert!(e.contains("come together"), "{e}");
    let e = err("output_bytes,d2h_p50_ms\n1,x\n");
    assert!(e.contains("`x` is not a number"), "{e}");
    let e = err("output_bytes,d2h_p50_ms\n1,1\n");
    assert!(e.contains("at least 2"), "{e}");
}

#[test]
fn log_grid() {
    let v = log_sizes(1000, 1_000_000, 4);
    assert_eq!(v, [1000, 10_000, 100_000, 1_000_000]);
}
