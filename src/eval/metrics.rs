//! Retrieval and latency metrics for the evaluation harness.

use std::collections::BTreeMap;

/// Order-preserving dedup of the first `k` distinct items of `ranked`.
pub fn top_k_distinct<T: PartialEq + Clone>(ranked: &[T], k: usize) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(k.min(ranked.len()));
    for item in ranked {
        if out.len() >= k {
            break;
        }
        if !out.contains(item) {
            out.push(item.clone());
        }
    }
    out
}

fn distinct<T: PartialEq + Clone>(items: &[T]) -> Vec<T> {
    top_k_distinct(items, usize::MAX)
}

/// recall@k for one query: fraction of gold units found in the first k of
/// `ranked` (ranked may contain duplicates: dedup preserving order before
/// cutting; duplicate gold units count once). Empty gold -> None.
pub fn recall_at_k<T: PartialEq + Clone>(ranked: &[T], gold: &[T], k: usize) -> Option<f64> {
    let gold = distinct(gold);
    if gold.is_empty() {
        return None;
    }
    let top = top_k_distinct(ranked, k);
    let hits = gold.iter().filter(|g| top.contains(g)).count();
    Some(hits as f64 / gold.len() as f64)
}

/// all@k: 1.0 if every gold unit is in the first k (after the same dedup as
/// [`recall_at_k`]), else 0.0. Empty gold -> None.
pub fn all_at_k<T: PartialEq + Clone>(ranked: &[T], gold: &[T], k: usize) -> Option<f64> {
    recall_at_k(ranked, gold, k).map(|r| if r >= 1.0 { 1.0 } else { 0.0 })
}

/// Nearest-rank percentile of a sample (p in 0..=100); None when empty.
/// The value at rank `ceil(p/100 · n)` (1-based, at least 1) of the sorted
/// sample; `p` is clamped to 0..=100, NaN samples are ignored, NaN `p` gives
/// None.
pub fn percentile(samples: &[f64], p: f64) -> Option<f64> {
    if p.is_nan() {
        return None;
    }
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let p = p.clamp(0.0, 100.0);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

/// Running mean accumulator keyed by a label (e.g. category) -> (sum, count).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeanByKey {
    acc: BTreeMap<String, (f64, usize)>,
}

impl MeanByKey {
    /// Empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one observation `v` under `key`.
    pub fn add(&mut self, key: &str, v: f64) {
        let e = self.acc.entry(key.to_string()).or_insert((0.0, 0));
        e.0 += v;
        e.1 += 1;
    }

    /// Mean of the observations under `key`; None when there are none.
    pub fn mean(&self, key: &str) -> Option<f64> {
        self.acc
            .get(key)
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| s / *n as f64)
    }

    /// Number of observations under `key`.
    pub fn count(&self, key: &str) -> usize {
        self.acc.get(key).map_or(0, |(_, n)| *n)
    }

    /// Keys seen so far, sorted.
    pub fn keys(&self) -> Vec<&str> {
        self.acc.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recall_dedups_ranked_before_cut() {
        let ranked = [3, 3, 3, 1, 2];
        assert_eq!(recall_at_k(&ranked, &[1, 2], 2), Some(0.5));
        assert_eq!(recall_at_k(&ranked, &[1, 2], 3), Some(1.0));
        assert_eq!(recall_at_k(&ranked, &[9], 10), Some(0.0));
        assert_eq!(recall_at_k(&ranked, &[1, 1], 2), Some(1.0));
        assert_eq!(recall_at_k(&ranked, &[1], 0), Some(0.0));
        assert_eq!(recall_at_k::<i32>(&ranked, &[], 5), None);
        assert_eq!(recall_at_k::<i32>(&[], &[1], 5), Some(0.0));
    }

    #[test]
    fn all_at_k_is_binary() {
        let ranked = ["a", "b", "c"];
        assert_eq!(all_at_k(&ranked, &["a", "c"], 2), Some(0.0));
        assert_eq!(all_at_k(&ranked, &["a", "c"], 3), Some(1.0));
        assert_eq!(all_at_k::<&str>(&ranked, &[], 3), None);
    }

    #[test]
    fn nearest_rank_percentile() {
        let s = [15.0, 20.0, 35.0, 40.0, 50.0];
        assert_eq!(percentile(&s, 30.0), Some(20.0));
        assert_eq!(percentile(&s, 40.0), Some(20.0));
        assert_eq!(percentile(&s, 50.0), Some(35.0));
        assert_eq!(percentile(&s, 100.0), Some(50.0));
        assert_eq!(percentile(&s, 0.0), Some(15.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&s, f64::NAN), None);
    }

    #[test]
    fn mean_by_key() {
        let mut m = MeanByKey::new();
        m.add("b", 1.0);
        m.add("a", 0.0);
        m.add("b", 0.0);
        assert_eq!(m.mean("b"), Some(0.5));
        assert_eq!(m.count("b"), 2);
        assert_eq!(m.count("z"), 0);
        assert_eq!(m.mean("z"), None);
        assert_eq!(m.keys(), vec!["a", "b"]);
    }
}
