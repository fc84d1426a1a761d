//! Observer behaviour: exact histogram growth, EMA, merging, rejection of
//! non-finite data, per-channel layout.

use proptest::prelude::*;
use qport_quant::observer::{ChannelObserver, NonFinite, Observer, ObserverOptions};

fn opts(bins: usize) -> ObserverOptions {
    ObserverOptions {
        hist_bins: bins,
        ..Default::default()
    }
}

/// Everything but the EMA, which depends on batching by design.
#[allow(clippy::type_complexity)]
fn snapshot(o: &Observer) -> (Option<f32>, Option<f32>, u64, Vec<u64>, Vec<u64>, u64, f64) {
    let h = o.histogram();
    (
        o.min(),
        o.max(),
        o.count(),
        h.positive().to_vec(),
        h.negative().to_vec(),
        h.zeros(),
        h.range(),
    )
}

fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        -1.0f32..1.0,
        -1e4f32..1e4,
        (-30i32..30, -1.0f32..1.0).prop_map(|(e, m)| m * 2f32.powi(e)),
    ]
}

proptest! {
    #[test]
    fn histogram_is_order_and_batching_independent(
        values in prop::collection::vec(value(), 1..400),
        cuts in prop::collection::vec(0usize..400, 0..8),
        bins in prop_oneof![Just(2usize), Just(7), Just(64), Just(2048)],
        seed in any::<u64>(),
    ) {
        let mut whole = Observer::new(opts(bins));
        whole.observe(&values).unwrap();

        // Shuffled (deterministic Fisher-Yates), then split at random cuts.
        let mut shuffled = values.clone();
        let mut s = seed;
        for i in (1..shuffled.len()).rev() {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (s >> 33) as usize % (i + 1));
        }
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (shuffled.len() + 1)).collect();
        cuts.push(0);
        cuts.push(shuffled.len());
        cuts.sort_unstable();
        let mut batched = Observer::new(opts(bins));
        let mut left = Observer::new(opts(bins));
        let mut right = Observer::new(opts(bins));
        for (k, w) in cuts.windows(2).enumerate() {
            let batch = &shuffled[w[0]..w[1]];
            batched.observe(batch).unwrap();
            if k % 2 == 0 { left.observe(batch).unwrap() } else { right.observe(batch).unwrap() }
        }
        left.merge(&right);

        prop_assert_eq!(snapshot(&batched), snapshot(&whole));
        prop_assert_eq!(snapshot(&left), snapshot(&whole));
        prop_assert_eq!(whole.histogram().total(), whole.count());
        let amax = values.iter().fold(0.0f32, |a, v| a.max(v.abs())) as f64;
        let r = whole.histogram().range();
        if amax > 0.0 {
            // R is the smallest power of two above max|x|.
            prop_assert!(amax < r && r <= 2.0 * amax);
        }
    }
}

#[test]
fn counts_sum_to_count_and_edges_cover_range() {
    let mut o = Observer::default();
    o.observe(&[0.0, 0.0, 1.5, -2.25, 3.0]).unwrap();
    o.observe(&[100.0, -0.001]).unwrap();
    let h = o.histogram();
    assert_eq!(h.total(), 7);
    assert_eq!(h.zeros(), 2);
    assert_eq!(h.abs_counts().iter().sum::<u64>(), 5);
    assert_eq!(h.range(), 128.0);
    let e = h.edges();
    assert_eq!((e.len(), e[0], e[2048]), (2049, 0.0, 128.0));
    assert_eq!(h.bin_width(), 128.0 / 2048.0);
}

#[test]
fn min_max_exact_and_ema_by_hand() {
    let mut o = Observer::default();
    assert_eq!(
        (o.min(), o.max(), o.ema_min(), o.count()),
        (None, None, None, 0)
    );
    o.observe(&[1.0, 2.0]).unwrap();
    o.observe(&[-1.0, 5.0]).unwrap();
    o.observe(&[]).unwrap(); // ignored, not a batch
    o.observe(&[0.0, 3.0]).unwrap();
    assert_eq!(
        (o.min(), o.max(), o.count(), o.batches()),
        (Some(-1.0), Some(5.0), 6, 3)
    );
    // min: 1 → 0.9·1 + 0.1·(-1) = 0.8 → 0.9·0.8 + 0.1·0 = 0.72
    // max: 2 → 0.9·2 + 0.1·5 = 2.3 → 0.9·2.3 + 0.1·3 = 2.37
    assert!((o.ema_min().unwrap() - 0.72).abs() < 1e-6);
    assert!((o.ema_max().unwrap() - 2.37).abs() < 1e-6);
}

#[test]
fn non_finite_batch_is_rejected_whole() {
    let mut o = Observer::default();
    o.observe(&[1.0, -1.0]).unwrap();
    let before = o.clone();
    let err = o.observe(&[2.0, f32::NAN, f32::INFINITY, -50.0, f32::NEG_INFINITY]);
    assert_eq!(err, Err(NonFinite { count: 3 }));
    assert_eq!(o, before);
}

#[test]
fn merge_combines_ema_by_batch_weight() {
    let mut a = Observer::default();
    a.observe(&[0.0, 1.0]).unwrap();
    let mut b = Observer::default();
    b.observe(&[-4.0, 4.0]).unwrap();
    b.observe(&[-4.0, 4.0]).unwrap();
    a.merge(&b);
    assert_eq!(
        (a.min(), a.max(), a.count(), a.batches()),
        (Some(-4.0), Some(4.0), 6, 3)
    );
    assert!((a.ema_max().unwrap() - 3.0).abs() < 1e-6);
    assert!((a.ema_min().unwrap() + 8.0 / 3.0).abs() < 1e-6);
    // Merging into an empty observer copies.
    let mut e = Observer::default();
    e.merge(&b);
    assert_eq!(e, b);
}

#[test]
fn merge_with_other_bin_count_keeps_counts() {
    let mut a = Observer::new(opts(64));
    a.observe(&[0.5, -0.25]).unwrap();
    let mut b = Observer::new(opts(100));
    b.observe(&[3.0, -7.0, 0.0, 1.0]).unwrap();
    a.merge(&b);
    assert_eq!(a.histogram().total(), 6);
    assert_eq!(a.histogram().range(), 8.0);
    assert_eq!(a.histogram().negative().iter().sum::<u64>(), 2);
}

#[test]
fn options_clamped_or_validated() {
    let bad = ObserverOptions {
        ema_momentum: 1.5,
        hist_bins: 1,
    };
    assert_eq!(bad.validate().unwrap_err().field, "ema_momentum");
    let o = Observer::new(bad);
    assert_eq!((o.momentum(), o.histogram().bins()), (1.0, 2));
    assert!(ObserverOptions::default().validate().is_ok());
}

#[test]
fn channel_observer_merges_and_rejects_nan_atomically() {
    let mut a = ChannelObserver::new(ObserverOptions::default());
    a.observe(&[1.0, 2.0, 3.0, 4.0], &[2, 2], 1).unwrap();
    let before = a.clone();
    assert!(a.observe(&[1.0, f32::NAN, 3.0, 4.0], &[2, 2], 1).is_err());
    assert_eq!(a, before);
    let mut b = ChannelObserver::new(ObserverOptions::default());
    b.observe(&[-1.0, 20.0], &[1, 2], 1).unwrap();
    a.merge(&b).unwrap();
    let ch = a.channels();
    assert_eq!(
        (ch[0].min(), ch[0].max(), ch[0].count()),
        (Some(-1.0), Some(3.0), 3)
    );
    assert_eq!(
        (ch[1].min(), ch[1].max(), ch[1].count()),
        (Some(2.0), Some(20.0), 3)
    );
    assert!(a.observe(&[1.0], &[1], 1).is_err()); // axis out of range
}
