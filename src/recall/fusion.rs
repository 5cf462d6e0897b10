//! Hybrid fusion of keyword (BM25) and vector (cosine) hits.
//!
//! Scores must mean the same thing across queries so that one fixed
//! `min_score` works, so neither retriever's raw score is min-max normalised
//! over the result set (that would give every query's top hit a 1).
//! Instead each raw score is mapped through a fixed Platt scaling
//! (`p = σ(slope·x + intercept)`, Platt 1999), fitted offline on labelled
//! LoCoMo dev candidates (`strata eval calibrate`), into an estimate of
//! P(relevant):
//! - keyword: two features, `x = ln(1 + BM25)` and `r = ln(1 + reference)`,
//!   the reference being the BM25 a document holding every query term once
//!   at average length would get. Raw BM25 grows with query length and term
//!   rarity; fitting the weight of `r` lets the data say how much (a plain
//!   ratio over-penalises long chat turns);
//! - vector feature `x = cosine similarity`.
//!
//! `weighted` fusion: `score = w_text · p_kw + w_vec · p_vec`, with a
//! component of 0 when the episode was not among that retriever's candidates
//! (defaults 0.7 / 0.3, DESIGN.md §2). `rrf` fusion orders by reciprocal rank
//! fusion (Cormack, Clarke & Büttcher 2009: `Σ w / (k + rank)`, k = 60) but
//! reports, and thresholds on, the same calibrated weighted score.

use std::collections::HashMap;

use crate::config::{Calibration, Fusion, RecallConfig};
use crate::model::EpisodeId;
use crate::store::{DocKey, Hit, KeywordResult};

/// A fused candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedHit<K = EpisodeId> {
    /// The document (an episode, or a typed memory of the knowledge index).
    pub episode_id: K,
    /// Calibrated fused score in [0, 1] (what `min_score` is compared to).
    pub score: f64,
    /// Raw BM25 score, when the keyword retriever returned it.
    pub keyword: Option<f32>,
    /// Raw cosine, when the vector retriever returned it.
    pub vector: Option<f32>,
    /// Ordering key (the score for weighted fusion, the RRF sum for rrf).
    pub rank_key: f64,
    /// The vector-alone probability of a candidate in another language than
    /// the query ([`cross_lingual_rescore`]); `None` for the others.
    pub cross_lingual: Option<f64>,
}

/// Which retrievers take part (ablations in `strata eval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retrievers {
    /// Keyword and vector.
    Hybrid,
    /// BM25 only.
    KeywordOnly,
    /// Vectors only.
    VectorOnly,
}

impl Retrievers {
    /// The (keyword, vector) weights of fusion: `recall.text_weight` and
    /// `vector_weight` for [`Retrievers::Hybrid`], or, for a message that is
    /// not surely English (`foreign`, [`crate::recall::evidence::is_foreign`])
    /// when `recall.foreign_text_weight` is set, that and 1 − it.
    pub fn weights(self, cfg: &RecallConfig, foreign: bool) -> (f64, f64) {
        match self {
            Retrievers::Hybrid => match cfg.foreign_text_weight.filter(|_| foreign) {
                Some(w) => (w, 1.0 - w),
                None => (cfg.text_weight, cfg.vector_weight),
            },
            Retrievers::KeywordOnly => (1.0, 0.0),
            Retrievers::VectorOnly => (0.0, 1.0),
        }
    }
}

/// The calibrations one corpus's raw scores go through: episodes and
/// typed knowledge (short facts score differently from whole sessions)
/// have their own fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibrations {
    /// Keyword (BM25) calibration.
    pub keyword: Calibration,
    /// Vector (cosine) calibration.
    pub vector: Calibration,
}

impl Calibrations {
    /// `[recall] keyword_calibration` and `vector_calibration` (episodes).
    pub fn episodes(cfg: &RecallConfig) -> Self {
        Self {
            keyword: cfg.keyword_calibration,
            vector: cfg.vector_calibration(),
        }
    }
    /// `[recall] knowledge_keyword_calibration` and
    /// `knowledge_vector_calibration` (typed facts).
    pub fn knowledge(cfg: &RecallConfig) -> Self {
        Self {
            keyword: cfg.knowledge_keyword_calibration,
            vector: cfg.knowledge_vector_calibration(),
        }
    }
    /// Calibrated keyword probability of a raw BM25 score, given the
    /// query's reference score ([`keyword_features`]).
    pub fn keyword_probability(&self, bm25: f32, reference_score: f32) -> f64 {
        let (x, r) = keyword_features(bm25, reference_score);
        self.keyword.apply2(x, r)
    }
    /// Calibrated vector probability of a cosine similarity.
    pub fn vector_probability(&self, cosine: f32) -> f64 {
        self.vector.apply(cosine as f64)
    }
}

/// Calibrated keyword probability for a raw BM25 score.
pub fn keyword_probability(cfg: &RecallConfig, bm25: f32, reference_score: f32) -> f64 {
    Calibrations::episodes(cfg).keyword_probability(bm25, reference_score)
}

/// The keyword calibration features: `(ln(1 + BM25), ln(1 + reference))`,
/// the reference being [`KeywordResult::reference_score`].
pub fn keyword_features(bm25: f32, reference_score: f32) -> (f64, f64) {
    (
        (1.0 + bm25.max(0.0) as f64).ln(),
        (1.0 + reference_score.max(0.0) as f64).ln(),
    )
}

/// Calibrated vector probability for a cosine similarity.
pub fn vector_probability(cfg: &RecallConfig, cosine: f32) -> f64 {
    Calibrations::episodes(cfg).vector_probability(cosine)
}

/// Fuses both hit lists (each best first) into one list, best first, at
/// `(keyword, vector)` weights ([`Retrievers::weights`]).
/// Does not apply the threshold or the limit.
pub fn fuse<K: DocKey>(
    cfg: &RecallConfig,
    cal: Calibrations,
    keyword: &KeywordResult<K>,
    vector: &[Hit<K>],
    (wt, wv): (f64, f64),
) -> Vec<FusedHit<K>> {
    let mut by_id: HashMap<K, FusedHit<K>> = HashMap::new();
    let mut rrf: HashMap<K, f64> = HashMap::new();
    if wt > 0.0 {
        for (rank, h) in keyword.hits.iter().enumerate() {
            let e = by_id
                .entry(h.episode_id.clone())
                .or_insert_with(|| empty(&h.episode_id));
            e.keyword = Some(h.score);
            e.score += wt * cal.keyword_probability(h.score, keyword.reference_score);
            *rrf.entry(h.episode_id.clone()).or_default() += wt / (cfg.rrf_k + rank as f64 + 1.0);
        }
    }
    if wv > 0.0 {
        for (rank, h) in vector.iter().enumerate() {
            let e = by_id
                .entry(h.episode_id.clone())
                .or_insert_with(|| empty(&h.episode_id));
            e.vector = Some(h.score);
            e.score += wv * cal.vector_probability(h.score);
            *rrf.entry(h.episode_id.clone()).or_default() += wv / (cfg.rrf_k + rank as f64 + 1.0);
        }
    }
    let mut out: Vec<FusedHit<K>> = by_id
        .into_values()
        .map(|mut h| {
            h.rank_key = match cfg.fusion {
                Fusion::Weighted => h.score,
                Fusion::Rrf => rrf[&h.episode_id],
            };
            h
        })
        .collect();
    sort(&mut out);
    out
}

fn empty<K: DocKey>(id: &K) -> FusedHit<K> {
    FusedHit {
        episode_id: id.clone(),
        score: 0.0,
        keyword: None,
        vector: None,
        rank_key: 0.0,
        cross_lingual: None,
    }
}

/// The cross-lingual features of each candidate `language_of` gives a
/// language (`Some`: it is in another language than the message; any key
/// that tells languages apart), from the cosines of all of them:
/// `(cosine, margin)`. The best one's margin is its lead over the second
/// best *of its own language* (inject keys them by script family, so
/// that whatlang's unsure guesses do not split one language): cosines
/// across a language pair have their own level (an English question sits
/// nearer to any short Japanese turn than to a Spanish one), so only a
/// rival of the same pair says whether it stands out. When it has none,
/// [`LONE_MARGIN`] or, if smaller, its lead over the nearest candidate in
/// the message's own language, which may be negative. Every other gets its (negative) distance to the best.
/// Candidates without a cosine get none. Returned in `hits` order.
pub fn cross_lingual_features<K, L: PartialEq>(
    hits: &[FusedHit<K>],
    language_of: impl Fn(&K) -> Option<L>,
) -> Vec<Option<(f64, f64)>> {
    // each candidate's language, asked once (None: the message's own)
    let langs: Vec<Option<L>> = hits.iter().map(|h| language_of(&h.episode_id)).collect();
    let mut cos: Vec<(f64, &L)> = hits
        .iter()
        .zip(&langs)
        .filter_map(|(h, l)| Some((f64::from(h.vector?), l.as_ref()?)))
        .collect();
    cos.sort_by(|a, b| b.0.total_cmp(&a.0));
    let best = cos.first().map(|c| c.0);
    // the best one's rival: the next of its own language
    let rival = cos.first().and_then(|(_, l)| cos.iter().skip(1).find(|(_, m)| m == l)).map(|c| c.0);
    // the closest candidate in the message's own language
    let same = hits
        .iter()
        .zip(&langs)
        .filter(|(_, l)| l.is_none())
        .filter_map(|(h, _)| h.vector.map(f64::from))
        .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c))));
    let lead = match (best, rival, same) {
        (Some(a), Some(b), _) => a - b,
        // alone in its language among the cross-lingual candidates, it has no
        // rival to lead, so it gets LONE_MARGIN, but never more than its lead
        // over the nearest candidate in the message's own language: a lone
        // Korean session must not pass, on its vector alone, an English
        // session nearer to an English question (tests/cli.rs)
        (Some(a), None, Some(s)) => LONE_MARGIN.min(a - s),
        _ => LONE_MARGIN,
    };
    hits.iter()
        .zip(&langs)
        .map(|(h, l)| {
            let c = f64::from(h.vector?);
            l.as_ref()?;
            let best = best?;
            Some((c, if c >= best { lead } else { c - best }))
        })
        .collect()
}

/// Margin feature of a cross-lingual candidate with no other to compare to.
pub const LONE_MARGIN: f64 = 0.03;

/// Lets candidates in another language than the query pass on their vector
/// alone: BM25 cannot match across languages, so a missing keyword score is
/// no evidence against them, and the weighted score (at most
/// `vector_weight`, 0.3, below `min_score`) would never let one in. Each
/// candidate `language_of` gives a language gets `p = σ(slope·cosine + reference_slope·margin
/// + intercept)` from `cal` (`recall.cross_lingual_calibration`, fitted by
/// `strata eval calibrate --cross-lingual`; features from
/// [`cross_lingual_features`]) and keeps the larger of that and its fused
/// score; the list is sorted again. Only ever raises a score.
pub fn cross_lingual_rescore<K: DocKey, L: PartialEq>(
    hits: &mut [FusedHit<K>],
    fusion: Fusion,
    cal: Calibration,
    language_of: impl Fn(&K) -> Option<L>,
) {
    let features = cross_lingual_features(hits, language_of);
    for (h, f) in hits.iter_mut().zip(features) {
        if let Some((c, m)) = f {
            let p = cal.apply2(c, m);
            h.cross_lingual = Some(p);
            if p > h.score {
                h.score = p;
                if fusion == Fusion::Weighted {
                    h.rank_key = p;
                }
            }
        }
    }
    sort(hits);
}

fn sort<K: DocKey>(hits: &mut [FusedHit<K>]) {
    hits.sort_by(|a, b| {
        b.rank_key
            .total_cmp(&a.rank_key)
            .then_with(|| b.score.total_cmp(&a.score))
            .then_with(|| a.episode_id.cmp(&b.episode_id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::{Scope, SessionId};

    #[test]
    fn a_foreign_query_takes_foreign_text_weight_in_hybrid_fusion_only() {
        let mut cfg = Config::default().recall;
        cfg.foreign_text_weight = Some(0.1);
        let w = |r: Retrievers, foreign| r.weights(&cfg, foreign);
        assert_eq!(w(Retrievers::Hybrid, false), (cfg.text_weight, cfg.vector_weight));
        let (t, v) = w(Retrievers::Hybrid, true);
        assert!((t - 0.1).abs() < 1e-12 && (v - 0.9).abs() < 1e-12, "{t} {v}");
        assert_eq!(w(Retrievers::KeywordOnly, true), (1.0, 0.0));
        assert_eq!(w(Retrievers::VectorOnly, true), (0.0, 1.0));
        let mut unset = cfg.clone();
        unset.foreign_text_weight = None;
        assert_eq!(Retrievers::Hybrid.weights(&unset, true), (cfg.text_weight, cfg.vector_weight));
    }

    fn id(n: &str) -> EpisodeId {
        EpisodeId::for_session(&Scope::new("u", "a").unwrap(), &SessionId::new(n).unwrap())
    }

    fn cand(n: &str, score: f64, cosine: Option<f32>) -> FusedHit {
        FusedHit { episode_id: id(n), score, keyword: None, vector: cosine, rank_key: score, cross_lingual: None }
    }

    #[test]
    fn cross_lingual_candidates_can_pass_on_their_vector_and_are_never_lowered() {
        let cal = Calibration { slope: 35.8563, reference_slope: 80.0865, intercept: -31.3083 };
        // x and y are in another language; the best of them leads by 0.04
        let mut hits = vec![cand("same", 0.5, Some(0.90)), cand("x", 0.25, Some(0.86)), cand("y", 0.2, Some(0.82)), cand("z", 0.1, None)];
        let cross = |k: &EpisodeId| (*k == id("x") || *k == id("y") || *k == id("z")).then_some("ko");
        let f = cross_lingual_features(&hits, cross);
        assert_eq!(f[0], None, "same-language candidates get no features");
        let (c, m) = f[1].unwrap();
        assert!((c - 0.86).abs() < 1e-6 && (m - 0.04).abs() < 1e-6, "{f:?}");
        assert!((f[2].unwrap().1 + 0.04).abs() < 1e-6, "the others: distance to the best");
        assert_eq!(f[3], None, "no cosine, no features");
        cross_lingual_rescore(&mut hits, Fusion::Weighted, cal, cross);
        let order: Vec<EpisodeId> = hits.iter().map(|h| h.episode_id.clone()).collect();
        assert_eq!(order, [id("x"), id("same"), id("y"), id("z")], "{hits:?}");
        let x = &hits[0];
        assert!(x.score > 0.8 && x.cross_lingual == Some(x.score) && x.rank_key == x.score);
        // y's vector-alone probability is below its weighted score: kept
        assert_eq!(hits[2].score, 0.2);
        assert!(hits[2].cross_lingual.unwrap() < 0.2);
        assert_eq!(hits[1].cross_lingual, None);
        // a lone cross-lingual candidate gets LONE_MARGIN
        let lone = vec![cand("x", 0.0, Some(0.86))];
        assert_eq!(cross_lingual_features(&lone, |_| Some("ko"))[0], Some((0.8600000143051147, LONE_MARGIN)));
        // ... or its lead over a nearer candidate in the message's language, when smaller
        let near = vec![cand("x", 0.0, Some(0.80)), cand("same", 0.07, Some(0.83))];
        let f = cross_lingual_features(&near, |k| (*k == id("x")).then_some("ko"));
        let (c, m) = f[0].unwrap();
        assert!((m - (c - 0.83)).abs() < 1e-6 && m < 0.0, "{f:?}");
        let far = vec![cand("x", 0.0, Some(0.82)), cand("same", 0.0, Some(0.75))];
        assert_eq!(cross_lingual_features(&far, |k| (*k == id("x")).then_some("ko"))[0].unwrap().1, LONE_MARGIN);
        // the only Japanese session among Korean and Spanish ones leads no rival of its own
        // language: lone, so the nearer session in the message's language caps its margin
        // (before, its 0.03 lead over a Spanish session passed it for an English question
        // about another English session; a new user's catch-all session)
        let mixed = vec![cand("ja", 0.0, Some(0.825)), cand("en", 0.0, Some(0.832)), cand("ko", 0.0, Some(0.795)), cand("es", 0.0, Some(0.78))];
        let lang = |k: &EpisodeId| [("ja", "ja"), ("ko", "ko"), ("es", "es")].into_iter().find(|(n, _)| *k == id(n)).map(|(_, l)| l);
        let f = cross_lingual_features(&mixed, lang);
        let (_, m) = f[0].unwrap();
        assert!((m - (0.825 - 0.832)).abs() < 1e-6, "{f:?}");
        assert!((f[2].unwrap().1 - (0.795 - 0.825)).abs() < 1e-6, "the others: distance to the best");
        // a second Japanese session is a rival: the lead over it
        let mut two = mixed.clone();
        two.push(cand("ja2", 0.0, Some(0.80)));
        let lang2 = |k: &EpisodeId| if *k == id("ja2") { Some("ja") } else { lang(k) };
        assert!((cross_lingual_features(&two, lang2)[0].unwrap().1 - 0.025).abs() < 1e-6);
    }

    #[test]
    fn scores_are_absolute_not_min_max() {
        let cfg = Config::default().recall;
        // a weak top hit stays weak: no normalisation to 1
        let weak = KeywordResult {
            hits: vec![Hit {
                episode_id: id("a"),
                score: 0.2,
            }],
            query_terms: 5,
            reference_score: 20.0,
        };
        let fused = fuse(
            &cfg,
            Calibrations::episodes(&cfg),
            &weak,
            &[Hit {
                episode_id: id("a"),
                score: 0.05,
            }],
            Retrievers::Hybrid.weights(&cfg, false),
        );
        assert!(fused[0].score < cfg.min_score, "{}", fused[0].score);
        let strong = KeywordResult {
            hits: vec![Hit {
                episode_id: id("b"),
                score: 120.0,
            }],
            query_terms: 3,
            reference_score: 60.0,
        };
        let fused = fuse(
            &cfg,
            Calibrations::episodes(&cfg),
            &strong,
            &[Hit {
                episode_id: id("b"),
                score: 0.8,
            }],
            Retrievers::Hybrid.weights(&cfg, false),
        );
        assert!(fused[0].score > cfg.min_score);
        assert!(fused[0].score <= 1.0);
    }

    #[test]
    fn weighted_and_rrf_order() {
        let mut cfg = Config::default().recall;
        let kw = KeywordResult {
            hits: vec![
                Hit {
                    episode_id: id("a"),
                    score: 20.0,
                },
                Hit {
                    episode_id: id("b"),
                    score: 10.0,
                },
            ],
            query_terms: 4,
            reference_score: 20.0,
        };
        let vec_hits = vec![
            Hit {
                episode_id: id("b"),
                score: 0.9,
            },
            Hit {
                episode_id: id("c"),
                score: 0.5,
            },
        ];
        let w = fuse(&cfg, Calibrations::episodes(&cfg), &kw, &vec_hits, Retrievers::Hybrid.weights(&cfg, false));
        assert_eq!(w.len(), 3);
        assert!(w.windows(2).all(|p| p[0].score >= p[1].score));
        cfg.fusion = Fusion::Rrf;
        let r = fuse(&cfg, Calibrations::episodes(&cfg), &kw, &vec_hits, Retrievers::Hybrid.weights(&cfg, false));
        assert_eq!(r[0].episode_id, id("b"), "b is in both lists");
        let k = fuse(&cfg, Calibrations::episodes(&cfg), &kw, &vec_hits, Retrievers::KeywordOnly.weights(&cfg, false));
        assert_eq!(k.len(), 2);
        assert!(k.iter().all(|h| h.vector.is_none()));
    }
}
