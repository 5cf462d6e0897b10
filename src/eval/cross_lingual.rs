//! `strata eval calibrate --cross-lingual`: fits `[recall]
//! cross_lingual_calibration`, the Platt scaling that lets an episode in
//! another language than the query pass on its vector alone
//! ([`crate::recall::fusion::cross_lingual_rescore`]).
//!
//! Source: `--features` files of `strata eval multilingual` (each line a
//! question with its candidates' raw scores, `"cross_lingual"` — the
//! candidates inject would call cross-lingual — and `"gold"`). Every
//! cross-lingual candidate with a cosine is one row, its features those of
//! [`crate::recall::fusion::cross_lingual_features`], relevant when gold;
//! unanswerable questions (empty gold) give negatives only, which is what
//! teaches the fit to stay quiet on them. `--users` keeps the questions of
//! some users only, for a held-out fit (the eval's `--users` then measures
//! the others).

use std::path::PathBuf;

use crate::config::Calibration;
use crate::error::{Error, Result};
use crate::recall::fusion::{cross_lingual_features, FusedHit};

/// Rows of one features line: `([cosine, margin], relevant)` per
/// cross-lingual candidate with a cosine.
///
/// # Errors
/// [`Error::Data`] when the line lacks `candidates`, `gold` or `cross_lingual`.
pub fn rows(line: &serde_json::Value) -> Result<Vec<(Vec<f64>, bool)>> {
    let bad = |what: &str| Error::Data(format!("features line without {what}"));
    let names = |key: &str| -> Result<Vec<String>> {
        Ok(line[key]
            .as_array()
            .ok_or_else(|| bad(key))?
            .iter()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect())
    };
    let gold = names("gold")?;
    let cross = names("cross_lingual")?;
    let cands = line["candidates"].as_object().ok_or_else(|| bad("candidates"))?;
    let hits: Vec<FusedHit<String>> = cands
        .iter()
        .filter_map(|(name, v)| {
            let c = v.get(1).and_then(|x| x.as_f64())?;
            Some(FusedHit { episode_id: name.clone(), score: 0.0, keyword: None, vector: Some(c as f32), rank_key: 0.0, cross_lingual: None })
        })
        .collect();
    // each cross-lingual candidate's script family (`"families"`, by session), the
    // key inject compares rivals by; a line written before it existed puts them in one
    let families = &line["families"];
    let language_of = |name: &String| cross.contains(name).then(|| families[name.as_str()].as_str().unwrap_or("").to_string());
    let features = cross_lingual_features(&hits, language_of);
    Ok(hits
        .iter()
        .zip(features)
        .filter_map(|(h, f)| f.map(|(c, m)| (vec![c, m], gold.contains(&h.episode_id))))
        .collect())
}

/// Fits the calibration on the rows of every `features` file (lines of
/// `users` only, when given: a line's `"user"`), each file weighing the
/// same, and prints the TOML line.
///
/// # Errors
/// [`Error::Data`] for an unreadable file or line, or no cross-lingual row
/// with both labels.
pub fn run(features: &[PathBuf], users: &[String]) -> Result<Calibration> {
    let (mut samples, mut weights) = (Vec::new(), Vec::new());
    for path in features {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Data(format!("cannot read {}: {e}", path.display())))?;
        let mut mine = Vec::new();
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let row: serde_json::Value = serde_json::from_str(line).map_err(|e| Error::Data(format!("{}:{}: {e}", path.display(), i + 1)))?;
            if !users.is_empty() && !row["user"].as_str().is_some_and(|u| users.iter().any(|x| x == u)) {
                continue;
            }
            mine.extend(rows(&row).map_err(|e| Error::Data(format!("{}:{}: {e}", path.display(), i + 1)))?);
        }
        println!("# {}: {} cross-lingual candidates, {} relevant", path.display(), mine.len(), mine.iter().filter(|r| r.1).count());
        weights.extend(std::iter::repeat_n(1.0 / mine.len().max(1) as f64, mine.len()));
        samples.extend(mine);
    }
    if !samples.iter().any(|r| r.1) || samples.iter().all(|r| r.1) {
        return Err(Error::Data("the features hold no cross-lingual candidate of both labels (run `strata eval multilingual --features`)".into()));
    }
    let (w, b) = super::logistic::fit_logistic_weighted(&samples, &weights);
    let cal = Calibration { slope: w[0], reference_slope: w[1], intercept: b };
    println!(
        "cross_lingual_calibration = {{ slope = {:.4}, reference_slope = {:.4}, intercept = {:.4} }}",
        cal.slope, cal.reference_slope, cal.intercept
    );
    Ok(cal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_cross_lingual_candidates_with_a_cosine_and_label_gold() {
        let line = serde_json::json!({
            "candidates": {"a": [null, 0.84], "b": [3.0, 0.80], "c": [2.0, null], "d": [1.0, 0.90]},
            "gold": ["a"], "cross_lingual": ["a", "b", "c"]
        });
        let mut r = rows(&line).unwrap();
        r.sort_by(|x, y| y.0[0].total_cmp(&x.0[0]));
        assert_eq!(r.len(), 2, "d is same-language, c has no cosine");
        assert!(r[0].1 && !r[1].1);
        assert!((r[0].0[1] - 0.04).abs() < 1e-6, "the best leads the second by 0.04: {r:?}");
        assert!((r[1].0[1] + 0.04).abs() < 1e-6);
        // b in another script family is no rival of a: a is lone, and d (the message's
        // language, nearer) caps its margin at 0.84 - 0.90
        let mut split = line.clone();
        split["families"] = serde_json::json!({"a": "Hangul", "b": "Latin", "c": "Hangul", "d": "Latin"});
        let r = rows(&split).unwrap();
        let a = r.iter().find(|x| x.1).unwrap();
        assert!((a.0[1] - (0.84 - 0.90)).abs() < 1e-6, "{r:?}");
        assert!(rows(&serde_json::json!({"candidates": {}, "gold": []})).is_err());
    }
}
