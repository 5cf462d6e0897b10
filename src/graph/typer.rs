//! Entity typing by the embedder: a softmax regression over the query
//! vectors of an entity's name and of the turn it was said in, so a name no
//! pattern or gazetteer placed ("부산", "Казань", "Whispering Falls") gets a
//! type in any language the embedder knows.
//!
//! - Features: `embed_query(name)` ‖ `embed_query(turn)` (2 × the model's
//!   dimension; the turn is the first of the session whose text holds the
//!   name, clipped to [`CONTEXT_CHARS`] characters).
//! - Model: multinomial logistic regression with an L2 penalty, fitted by
//!   `strata eval graph --fit-types` on the gold entities of the
//!   conversations in [`EntityTyper::fitted_on`] (each with the turn its
//!   evidence names), the penalty chosen by leave-one-conversation-out
//!   accuracy inside that set; standardisation is folded into the weights.
//!   The shipped weights (`src/graph/entity_types.json`) belong to one
//!   embedder ([`EntityTyper::model_id`]): with another, typing is off.
//! - Which entities it types is `graph.entity_typer` (`untyped`: those the
//!   extractor left as `entity`; `all`: every named entity but the
//!   speakers, whose type the conversation gives; `off`).
//!
//! Measured (docs/measurements.md, 2026-12-07 (5)): typed accuracy on the
//! nine gold conversations it was not fitted on 0.43 with the patterns
//! alone, 0.84 with it (`untyped`).

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use crate::config::EntityTyping;
use crate::embed::Embedder;
use crate::error::{Error, Result};
use crate::model::graph::{Extraction, UNKNOWN_TYPE};
use crate::model::TranscriptTurn;

/// The types of named things (the gold's; docs/evaluation.md, "Graph
/// evaluation"): the only types the typer gives or replaces. Value types
/// (role, activity, topic, value) stay as the extractor set them.
pub const NAMED_TYPES: &[&str] = &["person", "pet", "organization", "place", "project", "product", "event", "work"];

/// Longest context turn embedded, in characters (e5 reads 512 word pieces;
/// a LoCoMo turn is rarely over 400 characters).
pub const CONTEXT_CHARS: usize = 600;

/// The fitted typer: one weight row and bias per class over the raw
/// (unstandardised) features.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EntityTyper {
    /// The embedder the features come from ([`Embedder::model_id`]).
    pub model_id: String,
    /// Entity types, one per row of `weights`.
    pub classes: Vec<String>,
    /// `classes.len()` rows of 2 × dimension weights.
    pub weights: Vec<Vec<f32>>,
    /// One bias per class.
    pub bias: Vec<f32>,
    /// The L2 penalty it was fitted with (on standardised features).
    pub lambda: f64,
    /// The gold conversations it was fitted on (they are in-sample for
    /// `strata eval graph`).
    pub fitted_on: Vec<String>,
}

static SHIPPED: LazyLock<Option<EntityTyper>> =
    LazyLock::new(|| serde_json::from_str(include_str!("entity_types.json")).ok());

impl EntityTyper {
    /// The weights shipped with Strata (`src/graph/entity_types.json`), if they parse.
    pub fn shipped() -> Option<&'static EntityTyper> {
        SHIPPED.as_ref()
    }

    /// Class probabilities for one feature vector (softmax of the scores).
    pub fn probabilities(&self, x: &[f32]) -> Vec<f64> {
        let s: Vec<f64> = self
            .weights
            .iter()
            .zip(&self.bias)
            .map(|(w, b)| w.iter().zip(x).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum::<f64>() + f64::from(*b))
            .collect();
        softmax(&s)
    }

    /// The most probable class of `x`.
    pub fn classify(&self, x: &[f32]) -> &str {
        let p = self.probabilities(x);
        let best = (0..p.len()).max_by(|a, b| p[*a].total_cmp(&p[*b])).unwrap_or(0);
        &self.classes[best]
    }

    /// Fits the typer on `samples` (features, class index into `classes`)
    /// with L2 penalty `lambda`: features standardised, full-batch gradient
    /// descent on the mean cross-entropy, [`FIT_STEPS`] steps of
    /// [`FIT_RATE`], then the standardisation folded into the weights.
    ///
    /// # Errors
    /// [`Error::Data`] with no samples, features of unequal length or a
    /// class index out of range.
    pub fn fit(model_id: &str, classes: &[String], samples: &[(Vec<f32>, usize)], lambda: f64, fitted_on: Vec<String>) -> Result<Self> {
        let d = samples.first().map(|s| s.0.len()).ok_or_else(|| Error::Data("no samples to fit the entity typer on".into()))?;
        if samples.iter().any(|(x, c)| x.len() != d || *c >= classes.len()) {
            return Err(Error::Data("entity typer samples: unequal feature lengths or a class out of range".into()));
        }
        let n = samples.len() as f64;
        let k = classes.len();
        let mut mean = vec![0.0f64; d];
        let mut sd = vec![0.0f64; d];
        for (x, _) in samples {
            x.iter().enumerate().for_each(|(j, v)| mean[j] += f64::from(*v) / n);
        }
        for (x, _) in samples {
            x.iter().enumerate().for_each(|(j, v)| sd[j] += (f64::from(*v) - mean[j]).powi(2) / n);
        }
        let sd: Vec<f64> = sd.iter().map(|v| v.sqrt().max(1e-9)).collect();
        let z: Vec<Vec<f64>> = samples
            .iter()
            .map(|(x, _)| x.iter().enumerate().map(|(j, v)| (f64::from(*v) - mean[j]) / sd[j]).collect())
            .collect();
        let mut w = vec![vec![0.0f64; d]; k];
        let mut b = vec![0.0f64; k];
        for _ in 0..FIT_STEPS {
            let mut gw = vec![vec![0.0f64; d]; k];
            let mut gb = vec![0.0f64; k];
            for (zi, (_, yi)) in z.iter().zip(samples) {
                let s: Vec<f64> = (0..k).map(|c| w[c].iter().zip(zi).map(|(a, b)| a * b).sum::<f64>() + b[c]).collect();
                let p = softmax(&s);
                for c in 0..k {
                    let g = (p[c] - if c == *yi { 1.0 } else { 0.0 }) / n;
                    gb[c] += g;
                    gw[c].iter_mut().zip(zi).for_each(|(a, v)| *a += g * v);
                }
            }
            for c in 0..k {
                for j in 0..d {
                    w[c][j] -= FIT_RATE * (gw[c][j] + lambda * w[c][j]);
                }
                b[c] -= FIT_RATE * gb[c];
            }
        }
        // fold the standardisation in: w·(x − μ)/σ + b = (w/σ)·x + (b − Σ w μ/σ)
        let weights: Vec<Vec<f32>> = w.iter().map(|row| row.iter().zip(&sd).map(|(a, s)| (a / s) as f32).collect()).collect();
        let bias: Vec<f32> = (0..k)
            .map(|c| (b[c] - w[c].iter().zip(&mean).zip(&sd).map(|((a, m), s)| a * m / s).sum::<f64>()) as f32)
            .collect();
        Ok(Self { model_id: model_id.to_string(), classes: classes.to_vec(), weights, bias, lambda, fitted_on })
    }
}

/// Gradient steps of [`EntityTyper::fit`] (the held-out accuracy is flat from ~300 on).
pub const FIT_STEPS: usize = 500;

/// Step size of [`EntityTyper::fit`] on standardised features.
pub const FIT_RATE: f64 = 0.5;

fn softmax(s: &[f64]) -> Vec<f64> {
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
    let t: f64 = e.iter().sum();
    e.iter().map(|v| v / t).collect()
}

/// The first turn whose text holds `name` (case-insensitive), clipped to
/// [`CONTEXT_CHARS`] characters; the name itself when no turn does.
pub fn context_of(name: &str, turns: &[TranscriptTurn]) -> String {
    let needle = name.to_lowercase();
    let text = turns.iter().map(|t| t.text.as_str()).find(|t| t.to_lowercase().contains(&needle)).unwrap_or(name);
    text.chars().take(CONTEXT_CHARS).collect()
}

/// The features of names in their contexts. Each text is embedded alone:
/// the int8 query kernel quantises a batch's activations with one scale, so
/// a text's vector would depend on the texts batched with it, and the fit
/// and promotion would see different features for the same name.
///
/// # Errors
/// Embedder errors.
pub async fn features(embedder: &dyn Embedder, pairs: &[(String, String)]) -> Result<Vec<Vec<f32>>> {
    let mut out = Vec::with_capacity(pairs.len());
    for (name, context) in pairs {
        let mut x = embedder.embed_query(std::slice::from_ref(name)).await?.concat();
        x.extend(embedder.embed_query(std::slice::from_ref(context)).await?.concat());
        out.push(x);
    }
    Ok(out)
}

/// Types the entities of `ex` as `mode` says (module docs), with `typer`'s
/// weights over `embedder`'s vectors of each name and its turn; `speakers`
/// keep their type. Returns how many entities it typed. Nothing is done
/// when the typer belongs to another embedder.
///
/// # Errors
/// Embedder errors (the semantic job retries, then parks).
pub async fn retype(
    embedder: &dyn Embedder,
    typer: &EntityTyper,
    mode: EntityTyping,
    turns: &[TranscriptTurn],
    speakers: &[String],
    ex: &mut Extraction,
) -> Result<usize> {
    if mode == EntityTyping::Off || typer.model_id != embedder.model_id() {
        return Ok(0);
    }
    let chosen: Vec<usize> = ex
        .entities
        .iter()
        .enumerate()
        .filter(|(_, e)| !speakers.contains(&e.name))
        .filter(|(_, e)| e.kind == UNKNOWN_TYPE || (mode == EntityTyping::All && NAMED_TYPES.contains(&e.kind.as_str())))
        .map(|(i, _)| i)
        .collect();
    if chosen.is_empty() {
        return Ok(0);
    }
    let pairs: Vec<(String, String)> = chosen.iter().map(|i| (ex.entities[*i].name.clone(), context_of(&ex.entities[*i].name, turns))).collect();
    let x = features(embedder, &pairs).await?;
    for (i, f) in chosen.iter().zip(&x) {
        ex.entities[*i].kind = typer.classify(f).to_string();
    }
    Ok(chosen.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classes() -> Vec<String> {
        ["person", "place", "work"].map(String::from).to_vec()
    }

    /// Three clusters on raw features of very different scales: the folded
    /// standardisation must classify raw vectors as the standardised fit did.
    fn samples() -> Vec<(Vec<f32>, usize)> {
        let mut out = Vec::new();
        for i in 0..30 {
            let j = (i % 5) as f32 * 0.01;
            out.push((vec![100.0 + j, 0.001, 5.0 + j], 0));
            out.push((vec![90.0 - j, 0.003, 5.0], 1));
            out.push((vec![95.0, 0.002 + j / 100.0, 9.0 - j], 2));
        }
        out
    }

    #[test]
    fn a_fit_separates_clusters_and_reads_raw_features() {
        let t = EntityTyper::fit("m", &classes(), &samples(), 0.01, vec!["conv".into()]).unwrap();
        assert_eq!(t.classify(&[100.0, 0.001, 5.0]), "person");
        assert_eq!(t.classify(&[90.0, 0.003, 5.0]), "place");
        assert_eq!(t.classify(&[95.0, 0.002, 9.0]), "work");
        let p = t.probabilities(&[100.0, 0.001, 5.0]);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9 && p[0] > 0.8, "{p:?}");
        // what it was fitted on and with travels with it
        let back: EntityTyper = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!((back.model_id.as_str(), back.fitted_on.as_slice(), back.lambda), ("m", &["conv".to_string()][..], 0.01));
    }

    #[test]
    fn bad_samples_are_refused() {
        assert!(EntityTyper::fit("m", &classes(), &[], 0.01, vec![]).is_err());
        assert!(EntityTyper::fit("m", &classes(), &[(vec![1.0], 0), (vec![1.0, 2.0], 1)], 0.01, vec![]).is_err());
        assert!(EntityTyper::fit("m", &classes(), &[(vec![1.0], 3)], 0.01, vec![]).is_err());
    }

    #[test]
    fn the_shipped_weights_parse_and_belong_to_e5() {
        let t = EntityTyper::shipped().expect("src/graph/entity_types.json parses");
        assert_eq!(t.model_id, crate::embed::e5::MODEL_ID);
        assert_eq!(t.weights.len(), t.classes.len());
        assert_eq!(t.bias.len(), t.classes.len());
        assert!(t.classes.iter().all(|c| NAMED_TYPES.contains(&c.as_str())));
        assert_eq!(t.weights[0].len(), 2 * 384, "name ‖ turn, e5-small's 384 dimensions each");
    }

    #[test]
    fn the_context_is_the_first_turn_naming_it() {
        let turn = |t: &str| TranscriptTurn { speaker: "u".into(), text: t.into(), at: None };
        let turns = [turn("hi"), turn("We flew to OSAKA in May."), turn("Osaka again")];
        assert_eq!(context_of("Osaka", &turns), "We flew to OSAKA in May.");
        assert_eq!(context_of("Kyoto", &turns), "Kyoto", "the name alone when no turn holds it");
        let long = turn(&format!("Osaka {}", "x".repeat(2000)));
        assert_eq!(context_of("Osaka", &[long]).chars().count(), CONTEXT_CHARS);
    }
}
