//! L0 `inject` and L1 `memory_search`: BM25 and vector retrieval of
//! episodes and typed knowledge, calibrated fusion, the `min_score` cut,
//! hydration from the system of record.

use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};

use super::context::render_context;
use super::stages::{record_stage, Stage, StageClock};
use super::{
    Candidate, CandidateOutcome, Episodic, InjectResult, KnowledgeHit, SearchHit, SearchOptions,
    SearchResult, FACT_ABSTRACT_CHARS, MAX_TOP_K,
};
use crate::config::RecallConfig;
use crate::error::{Error, Result};
use crate::model::typed::{MemoryId, StoredMemory, Visibility};
use crate::model::{check_query, Episode, EpisodeId, Scope, SessionId};
use crate::recall::fusion::{cross_lingual_rescore, fuse, Calibrations, FusedHit, Retrievers};
use crate::recall::evidence::{self, session_evidence, Features, Question, Scores, SessionEvidence};
use crate::recall::language;
use crate::recall::query::{build_query, combine_keyword, is_dependent};
use crate::recall::snippet::{best_snippet_for, Turn};
use crate::store::{Hit, KeywordQuery, KeywordResult};

/// What one recall's searches found, before the episodes are fused.
struct Raw {
    /// Episode keyword results, one per keyword text asked for.
    keyword: Vec<KeywordResult>,
    /// Episode vector hits, one per vector set asked for (empty lists when
    /// the vector half is off or timed out).
    vector: Vec<Vec<Hit>>,
    /// Knowledge candidates of every store read (first keyword text, first
    /// vector set), each with its store, fused, best first.
    knowledge: Vec<(Visibility, FusedHit<MemoryId>)>,
    /// How long each half took ([`Stage::Keyword`], [`Stage::Embedding`],
    /// [`Stage::Vector`]; they run side by side); zero for a half that did
    /// not run.
    timings: [(Stage, std::time::Duration); 3],
}

impl Episodic {
    /// L0 auto-injection for one user turn: the section to add to the system
    /// prompt. Uses the session's last `recall.recent_turns` recorded user
    /// turns as context, searched apart from the message so a stale topic is
    /// not injected ([`crate::recall::query`], "Topic switches"); one short
    /// text, the message, is embedded per turn (earlier turns hit the
    /// embedding cache). Each injected episode carries its evidence snippet
    /// ([`crate::recall::snippet`]) when `recall.evidence_snippets` is on.
    /// Call it before `record`ing the turn.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty or over-long message.
    pub async fn inject(
        &self,
        scope: &Scope,
        session: &SessionId,
        user_message: &str,
    ) -> Result<InjectResult> {
        self.inject_with(
            scope,
            session,
            user_message,
            SearchOptions {
                apply_threshold: true,
                ..Default::default()
            },
        )
        .await
    }

    /// [`Episodic::inject`] with retriever/fusion choices (ablations and
    /// benches, e.g. a keyword-only inject that never embeds). The threshold
    /// is always applied.
    ///
    /// # Errors
    /// As [`Episodic::inject`].
    pub async fn inject_with(
        &self,
        scope: &Scope,
        session: &SessionId,
        user_message: &str,
        opts: SearchOptions,
    ) -> Result<InjectResult> {
        check_query(user_message)?;
        let tunables = self.rt.tunables();
        // a trivial message reads nothing
        let previous = if tunables.trivial.is_trivial(user_message) {
            Vec::new()
        } else {
            let started = std::time::Instant::now();
            let turns = self.rt.records.recent_user_turns(scope, session, tunables.recall.recent_turns).await?;
            record_stage(Stage::RecentTurns, started.elapsed());
            turns
        };
        self.inject_after(scope, previous, user_message, opts).await
    }

    /// [`Episodic::inject_with`] after the given earlier user turns (oldest
    /// first; the last `recall.recent_turns` count) instead of the session's:
    /// the console's playground tries a message with a history it typed,
    /// without recording anything.
    ///
    /// # Errors
    /// As [`Episodic::inject`].
    pub async fn inject_after(
        &self,
        scope: &Scope,
        mut previous: Vec<String>,
        user_message: &str,
        opts: SearchOptions,
    ) -> Result<InjectResult> {
        check_query(user_message)?;
        let started = std::time::Instant::now();
        let tunables = self.rt.tunables();
        let cfg = &tunables.recall;
        if previous.len() > cfg.recent_turns {
            previous.drain(..previous.len() - cfg.recent_turns);
        }
        if tunables.trivial.is_trivial(user_message) {
            metrics::counter!("strata_inject_trivial_total").increment(1);
            return Ok(InjectResult {
                section: String::new(),
                injected: 0,
                top_score: 0.0,
                entries: vec![],
                knowledge: vec![],
                trivial: true,
                query: String::new(),
                dependent: false,
                explain: opts.explain.then(Vec::new),
            });
        }
        let query = build_query(&previous, user_message, cfg.recent_chars);
        let limit = cfg.max_entries;
        // the message and the earlier turns are searched apart (topic switches,
        // crate::recall::query): BM25 on each, vectors of the message alone and,
        // when there are earlier turns, the 0.6 / 0.4 mix with their embeddings
        // (cache hits: each was the current message once), so an inject embeds
        // one short text
        let clip = |t: &str| crate::text::clip_tail(t.trim(), cfg.recent_chars).to_string();
        let prev: Vec<&String> = previous.iter().filter(|t| !t.trim().is_empty()).collect();
        let message = clip(user_message);
        let context = clip(&prev.iter().map(|t| t.trim()).collect::<Vec<_>>().join(crate::recall::query::SEPARATOR));
        let mut sets = vec![vec![(message.clone(), 1.0f32)]];
        let mut texts = vec![message.as_str()];
        if !prev.is_empty() {
            let mut mix: Vec<(String, f32)> = prev.iter().map(|t| (clip(t), 0.4 / prev.len() as f32)).collect();
            mix.push((message.clone(), 0.6));
            sets.push(mix);
            texts.push(context.as_str());
        }
        let Raw {
            keyword,
            vector,
            knowledge,
            timings,
        } = self
            .retrieve(scope, &texts, &sets, limit * cfg.overfetch, opts, cfg)
            .await?;
        // a half that did not run (keyword-only, vector-only) records nothing
        for (stage, took) in timings.into_iter().filter(|(_, t)| !t.is_zero()) {
            record_stage(stage, took);
        }
        let mut clock = StageClock::start();
        let cal = Calibrations::episodes(cfg);
        // the global weights whatever the language: the acceptor is fitted on
        // them (`recall.foreign_text_weight` is memory_search's)
        let weights = opts.retrievers.weights(cfg, false);
        let own = fuse(cfg, cal, &keyword[0], &vector[0], weights);
        let dependent = is_dependent(
            !prev.is_empty(),
            keyword[0].query_terms,
            own.first().map(|h| h.score).unwrap_or(0.0),
            cfg.min_score,
        );
        let (mut fused, reference, mut evidence) = if prev.is_empty() {
            let reference = keyword[0].reference_score;
            (own, reference, None)
        } else {
            let weight = if dependent { 1.0 } else { cfg.context_weight };
            let kw = combine_keyword(&keyword[0], &keyword[1], weight);
            let vec = if dependent { &vector[1] } else { &vector[0] };
            let fused = fuse(cfg, cal, &kw, vec, weights);
            let evidence: HashMap<EpisodeId, f64> = own.into_iter().map(|h| (h.episode_id, h.score)).collect();
            (fused, kw.reference_score, (!dependent).then_some(evidence))
        };
        let asked = language::identify(user_message);
        let episodes = self
            .cross_lingual(scope, cfg, asked, &mut fused, evidence.as_mut())
            .await?;
        let top_score = fused
            .first()
            .map(|h| h.score)
            .unwrap_or(0.0)
            .max(knowledge.first().map(|h| h.1.score).unwrap_or(0.0));
        let gate = evidence.as_ref().map(|e| (e, cfg.message_evidence_min));
        let accepting = cfg.acceptor.enabled;
        // with the acceptor, min_score does not cut: the first max_entries
        // candidates the gate lets through are the pool it judges
        let (kept, mut explain) = select(
            cfg,
            &fused,
            reference,
            (!accepting).then_some(cfg.min_score),
            gate,
            (cfg.relative_cut > 0.0).then_some(cfg.relative_cut),
            limit,
            opts.explain,
        );
        clock.lap(Stage::Fusion);
        let mut entries = self.hydrate(scope, kept.clone(), episodes).await?;
        mark_expired(&mut explain, &entries);
        clock.lap(Stage::Hydration);
        // sessions read for the acceptor serve the snippets too (aligned with
        // `entries`; None where not read)
        let mut read: Vec<Option<Vec<crate::model::Message>>> = vec![None; entries.len()];
        let question = Question::new(user_message);
        if accepting {
            let cal = Calibrations::episodes(cfg);
            let by_id: HashMap<&EpisodeId, &FusedHit> = kept.iter().map(|h| (&h.episode_id, h)).collect();
            let scores: Vec<Scores> = entries
                .iter()
                .map(|e| {
                    let h = by_id[&e.id];
                    Scores {
                        score: h.score,
                        own: evidence.as_ref().map_or(h.score, |own| own.get(&e.id).copied().unwrap_or(0.0)),
                        keyword: h.keyword.map_or(0.0, |k| cal.keyword_probability(k, reference)),
                        vector: h.vector.map_or(0.0, |v| cal.vector_probability(v)),
                        cross_lingual: h.cross_lingual,
                    }
                })
                .collect();
            let foreign = evidence::is_foreign(asked);
            let model = cfg.acceptor.model(foreign || scores.first().is_some_and(|s| s.cross_lingual.is_some()));
            // the decision weighs the best candidate's session evidence only:
            // its session is read when a weight uses it and the evidence can
            // still change the outcome (the scores alone do not already put
            // every possible evidence on one side of accept_min); explain
            // reads every judged one, to show their features
            let upto = if opts.explain {
                entries.len()
            } else {
                usize::from(evidence::needs_session(&model, &scores, foreign, &question))
            };
            for (slot, messages) in read.iter_mut().zip(self.sessions_of(scope, &entries[..upto]).await?) {
                *slot = Some(messages);
            }
            let found: Vec<SessionEvidence> = read
                .iter()
                .map(|m| m.as_ref().map_or_else(SessionEvidence::default, |m| session_evidence(&question, &turns(m))))
                .collect();
            let features = evidence::features(&scores, &found, foreign);
            // one decision per message, on the best candidate (unread, its
            // evidence counts as none: within the bounds, on the decided side);
            // the rest join an accepted one by their score
            let accepted: Vec<(f64, Features)> =
                features.into_iter().map(|f| (evidence::acceptance(&model, &f), f)).collect();
            let speaks = accepted.first().is_some_and(|(a, _)| *a >= model.accept_min);
            let keep = |i: usize| speaks && (i == 0 || scores[i].score >= cfg.acceptor.companion_min_score);
            if let Some(ex) = explain.as_mut() {
                for c in ex.iter_mut() {
                    if let Some(i) = entries.iter().position(|e| e.id == c.id) {
                        c.acceptance = Some(accepted[i].0);
                        c.session_id = Some(entries[i].session_id.clone());
                        c.features = Some(accepted[i].1);
                        if !speaks {
                            c.outcome = CandidateOutcome::NotAccepted;
                        } else if !keep(i) {
                            c.outcome = CandidateOutcome::BelowMinScore;
                        }
                    }
                }
            }
            entries = entries.into_iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, e)| e).collect();
            read = read.into_iter().enumerate().filter(|(i, _)| keep(*i)).map(|(_, m)| m).collect();
        }
        clock.lap(Stage::Acceptor);
        if cfg.evidence_snippets {
            let missing: Vec<SearchHit> =
                entries.iter().zip(&read).filter(|(_, m)| m.is_none()).map(|(e, _)| e.clone()).collect();
            let mut fetched = self.sessions_of(scope, &missing).await?.into_iter();
            let sessions: Vec<Vec<crate::model::Message>> =
                read.into_iter().map(|m| m.or_else(|| fetched.next()).unwrap_or_default()).collect();
            add_snippets(&mut entries, &sessions, &question, &previous.join("\n"), cfg.snippet_turn_chars);
        }
        clock.lap(Stage::Snippets);
        // facts compete with episodes for the max_entries slots, by calibrated score
        let mut facts = self
            .hydrate_knowledge(scope, &knowledge, Some(cfg.knowledge_min_score), limit)
            .await?;
        while entries.len() + facts.len() > limit {
            let last_ep = entries.last().map(|e| e.score).unwrap_or(f64::INFINITY);
            let last_fact = facts.last().map(|f| f.score).unwrap_or(f64::INFINITY);
            if last_fact <= last_ep {
                facts.pop();
            } else {
                entries.pop();
            }
        }
        let section = render_context(&entries, &facts);
        clock.lap(Stage::Render);
        metrics::histogram!("strata_inject_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        metrics::histogram!("strata_inject_entries").record(entries.len() as f64);
        metrics::histogram!("strata_inject_top_score").record(top_score);
        Ok(InjectResult {
            injected: entries.len() + facts.len(),
            section,
            top_score,
            entries,
            knowledge: facts,
            trivial: false,
            query,
            dependent,
            explain,
        })
    }

    /// L1 `memory_search`: the `top_k` best episodes for `query` (ids,
    /// abstracts, calibrated scores, dates), without a threshold.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty query or `top_k` outside 1..=100.
    pub async fn memory_search(
        &self,
        scope: &Scope,
        query: &str,
        top_k: usize,
    ) -> Result<Vec<SearchHit>> {
        self.memory_search_with(scope, query, top_k, SearchOptions::default())
            .await
    }

    /// [`Episodic::memory_search`] with ablation options.
    pub async fn memory_search_with(
        &self,
        scope: &Scope,
        query: &str,
        top_k: usize,
        opts: SearchOptions,
    ) -> Result<Vec<SearchHit>> {
        Ok(self
            .memory_search_explained(scope, query, top_k, opts)
            .await?
            .results)
    }

    /// [`Episodic::memory_search`] that can also return every candidate with
    /// its scores and outcome (`opts.explain`).
    ///
    /// # Errors
    /// As [`Episodic::memory_search`].
    pub async fn memory_search_explained(
        &self,
        scope: &Scope,
        query: &str,
        top_k: usize,
        opts: SearchOptions,
    ) -> Result<SearchResult> {
        check_query(query)?;
        if top_k == 0 || top_k > MAX_TOP_K {
            return Err(Error::InvalidInput(format!(
                "top_k must be within 1..={MAX_TOP_K}, got {top_k}"
            )));
        }
        let tunables = self.rt.tunables();
        let cfg = &tunables.recall;
        let sets = [vec![(query.to_string(), 1.0)]];
        let Raw {
            keyword,
            vector,
            knowledge,
            ..
        } = self
            .retrieve(scope, &[query], &sets, top_k * cfg.overfetch, opts, cfg)
            .await?;
        let asked = language::identify(query);
        let weights = opts.retrievers.weights(cfg, evidence::is_foreign(asked));
        let mut fused = fuse(cfg, Calibrations::episodes(cfg), &keyword[0], &vector[0], weights);
        let episodes = self.cross_lingual(scope, cfg, asked, &mut fused, None).await?;
        let reference = keyword[0].reference_score;
        let min = opts.apply_threshold.then_some(cfg.min_score);
        // over-fetch covers episodes dropped in hydration (expired between prunes):
        // hydrate every candidate above the threshold, then cut to top_k
        let (kept, mut explain) = select(cfg, &fused, reference, min, None, None, fused.len(), opts.explain);
        let mut hits = self.hydrate(scope, kept, episodes).await?;
        mark_expired(&mut explain, &hits);
        if let Some(ex) = explain.as_mut() {
            let mut returned = 0;
            for c in ex
                .iter_mut()
                .filter(|c| c.outcome == CandidateOutcome::Kept)
            {
                returned += 1;
                if returned > top_k {
                    c.outcome = CandidateOutcome::OverLimit;
                }
            }
        }
        hits.truncate(top_k);
        let kmin = opts.apply_threshold.then_some(cfg.knowledge_min_score);
        let knowledge = self
            .hydrate_knowledge(scope, &knowledge, kmin, top_k)
            .await?;
        Ok(SearchResult {
            results: hits,
            knowledge,
            explain,
        })
    }

    /// Keyword search on each of `texts` (the first with its resolved
    /// relative dates) and vector search on each set's normalised weighted
    /// sum of embeddings (text, weight), every distinct text embedded once;
    /// typed knowledge on the first text and the first set.
    async fn retrieve(
        &self,
        scope: &Scope,
        texts: &[&str],
        sets: &[Vec<(String, f32)>],
        limit: usize,
        opts: SearchOptions,
        recall: &RecallConfig,
    ) -> Result<Raw> {
        let s = &self.rt;
        let knowledge = self.typed.knowledge_indexes(scope, opts.visibility)?;
        let want_kw = opts.retrievers != Retrievers::VectorOnly;
        let want_vec = opts.retrievers != Retrievers::KeywordOnly && recall.vector_weight > 0.0
            || opts.retrievers == Retrievers::VectorOnly;
        let no_facts = || vec![KeywordResult::default(); knowledge.len()];
        // each half times itself (they run side by side)
        // (nanoseconds; atomics, as the future must stay Send)
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        let (keyword_took, embedding_took, vector_took) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
        let nanos = |d: std::time::Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let kw = async {
            if !want_kw {
                return Ok((vec![KeywordResult::default(); texts.len()], no_facts()));
            }
            let started = std::time::Instant::now();
            let date_tokens = if s.config.recall.relative_date_boost > 0.0 {
                crate::recall::dates::resolve_relative(texts[0], opts.as_of.unwrap_or_else(Utc::now))
            } else {
                String::new()
            };
            let queries: Vec<KeywordQuery> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| KeywordQuery {
                    text: t,
                    date_tokens: if i == 0 { &date_tokens } else { "" },
                })
                .collect();
            let fq = KeywordQuery::text(texts[0]);
            let episodes = futures::future::try_join_all(queries.iter().map(|q| s.keyword.search(scope, q, limit)));
            let facts = futures::future::try_join_all(
                knowledge.iter().map(|(_, k, ks)| k.keyword.search(ks, &fq, limit)),
            );
            let found = tokio::try_join!(episodes, facts);
            keyword_took.store(nanos(started.elapsed()), Relaxed);
            found
        };
        let vec = async {
            if !want_vec {
                return Ok((vec![Vec::new(); sets.len()], vec![Vec::new(); knowledge.len()]));
            }
            let mut distinct: Vec<String> = Vec::new();
            for (t, _) in sets.iter().flatten() {
                if !distinct.contains(t) {
                    distinct.push(t.clone());
                }
            }
            let started = std::time::Instant::now();
            let vecs = s.embedder.embed_query(&distinct).await?;
            embedding_took.store(nanos(started.elapsed()), Relaxed);
            let started = std::time::Instant::now();
            let mut queries = Vec::with_capacity(sets.len());
            for set in sets {
                let mut v = vec![0f32; s.embedder.dim()];
                for (t, w) in set {
                    let i = distinct.iter().position(|d| d == t).unwrap_or(0);
                    for (acc, x) in v.iter_mut().zip(&vecs[i]) {
                        *acc += w * x;
                    }
                }
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if norm == 0.0 {
                    return Err(Error::Embedder("no vector returned".into()));
                }
                v.iter_mut().for_each(|x| *x /= norm);
                queries.push(v);
            }
            let episodes = futures::future::try_join_all(queries.iter().map(|v| s.vectors.search(scope, v, limit)));
            let facts = futures::future::try_join_all(
                knowledge.iter().map(|(_, k, ks)| k.vectors.search(ks, &queries[0], limit)),
            );
            let found = tokio::try_join!(episodes, facts);
            vector_took.store(nanos(started.elapsed()), Relaxed);
            found
        };
        // the request path never waits long on an embedder (a remote one may be
        // slow or down): past embedding.query_timeout_ms, or on an error, hybrid
        // recall goes on with the keyword half alone
        let budget = std::time::Duration::from_millis(s.config.embedding.query_timeout_ms);
        let hybrid = opts.retrievers == Retrievers::Hybrid;
        let none = || (vec![Vec::new(); sets.len()], vec![Vec::new(); knowledge.len()]);
        let vec = async {
            match tokio::time::timeout(budget, vec).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) if hybrid => {
                    tracing::warn!(error = %e, "vector half of recall failed; keyword results only");
                    Ok(none())
                }
                Ok(Err(e)) => Err(e),
                Err(_) if hybrid => {
                    tracing::warn!(
                        timeout_ms = budget.as_millis() as u64,
                        "query embedding too slow; keyword results only"
                    );
                    Ok(none())
                }
                Err(_) => Err(Error::Embedder(format!(
                    "query embedding took longer than {} ms",
                    budget.as_millis()
                ))),
            }
        };
        let ((kw, kkw), (vec, kvec)) = tokio::try_join!(kw, vec)?;
        let cfg = match opts.fusion {
            Some(f) if f != recall.fusion => {
                let mut cfg = recall.clone();
                cfg.fusion = f;
                std::borrow::Cow::Owned(cfg)
            }
            _ => std::borrow::Cow::Borrowed(recall),
        };
        // each store's facts are fused on their own (BM25 statistics are per
        // index), then merged by the calibrated score, which means the same
        // in every store
        let kcal = Calibrations::knowledge(&cfg);
        let mut facts: Vec<(Visibility, FusedHit<MemoryId>)> = Vec::new();
        for (((v, _, _), k), hits) in knowledge.iter().zip(&kkw).zip(&kvec) {
            facts.extend(
                fuse(&cfg, kcal, k, hits, opts.retrievers.weights(&cfg, false))
                    .into_iter()
                    .map(|h| (v.clone(), h)),
            );
        }
        facts.sort_by(|a, b| {
            b.1.rank_key
                .total_cmp(&a.1.rank_key)
                .then_with(|| b.1.score.total_cmp(&a.1.score))
                .then_with(|| a.1.episode_id.cmp(&b.1.episode_id))
        });
        let took = |a: &AtomicU64| std::time::Duration::from_nanos(a.load(Relaxed));
        Ok(Raw {
            keyword: kw,
            vector: vec,
            knowledge: facts,
            timings: [
                (Stage::Keyword, took(&keyword_took)),
                (Stage::Embedding, took(&embedding_took)),
                (Stage::Vector, took(&vector_took)),
            ],
        })
    }

    /// Knowledge hits with a calibrated score of at least `min` (when
    /// given), at most `limit`, read from the system of record (superseded
    /// and deleted facts drop out); counts each as recalled.
    async fn hydrate_knowledge(
        &self,
        scope: &Scope,
        fused: &[(Visibility, FusedHit<MemoryId>)],
        min: Option<f64>,
        limit: usize,
    ) -> Result<Vec<KnowledgeHit>> {
        let cand: Vec<&(Visibility, FusedHit<MemoryId>)> = fused
            .iter()
            .filter(|(_, h)| min.is_none_or(|m| h.score >= m))
            .collect();
        if cand.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut wanted: BTreeMap<String, (Visibility, Vec<MemoryId>)> = BTreeMap::new();
        for (v, h) in &cand {
            wanted
                .entry(v.label())
                .or_insert_with(|| (v.clone(), Vec::new()))
                .1
                .push(h.episode_id.clone());
        }
        // superseded and deleted facts drop out here, in each fact's own store
        let mut by_id: HashMap<(String, MemoryId), StoredMemory> = HashMap::new();
        for (label, (v, ids)) in wanted {
            for m in self.typed.live(scope, &v, ids).await? {
                by_id.insert((label.clone(), m.id.clone()), m);
            }
        }
        let mut hits = Vec::new();
        for (v, h) in cand {
            if hits.len() == limit {
                break;
            }
            let Some(m) = by_id.get_mut(&(v.label(), h.episode_id.clone())) else {
                continue;
            };
            // only what is returned counts as recalled, each in its own store
            self.typed.recalled(v, scope, std::slice::from_mut(m));
            hits.push(KnowledgeHit {
                id: m.id.clone(),
                memory_type: m.memory_type,
                // a fact's abstract is its content, clipped as an episode's abstract is
                abstract_: crate::text::clip_with_ellipsis(m.content.trim(), FACT_ABSTRACT_CHARS),
                score: h.score,
                when: m
                    .metadata
                    .get("observed_at")
                    .and_then(|t| t.as_str())
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or(m.created_at),
                source: v.clone(),
            });
        }
        Ok(hits)
    }

    /// The raw sessions of `entries`, in their order, read concurrently
    /// from the system of record.
    async fn sessions_of(&self, scope: &Scope, entries: &[SearchHit]) -> Result<Vec<Vec<crate::model::Message>>> {
        futures::future::try_join_all(entries.iter().map(|e| self.rt.records.messages(scope, &e.session_id))).await
    }

    /// Reads the live episodes of `ids` from the system of record.
    async fn episodes(&self, scope: &Scope, ids: &[EpisodeId]) -> Result<HashMap<EpisodeId, Episode>> {
        Ok(self
            .rt
            .records
            .episodes(scope, ids, Utc::now())
            .await?
            .into_iter()
            .map(|e| (e.id.clone(), e))
            .collect())
    }

    /// With `recall.cross_lingual` on, reads the candidates that only the
    /// vector search found (they are needed for their abstracts' language)
    /// and lets those in another language than the message's (`asked`) pass
    /// on their vector alone ([`crate::recall::fusion::cross_lingual_rescore`]),
    /// in the fused list and in the message-only scores of the evidence gate.
    /// Returns the episodes read, for hydration (empty when off, without
    /// vectors, or when BM25 matched every candidate).
    async fn cross_lingual(
        &self,
        scope: &Scope,
        cfg: &RecallConfig,
        asked: language::Language,
        fused: &mut [FusedHit],
        own: Option<&mut HashMap<EpisodeId, f64>>,
    ) -> Result<HashMap<EpisodeId, Episode>> {
        // a message without letters (a date, a number) is never cross-lingual
        if !cfg.cross_lingual() || asked.script.is_none() || !fused.iter().any(|h| h.vector.is_some()) {
            return Ok(HashMap::new());
        }
        // an episode BM25 matched shares words with the message, whatever the
        // language of its abstract (a session in two languages): its keyword
        // score is evidence, so it is not rescored on its vector alone (the
        // demo's English session with one Korean turn took a calibrated 1.00
        // for a Korean question the Korean session answers), and it is not
        // read here
        let unmatched: Vec<EpisodeId> = fused
            .iter()
            .filter(|h| h.vector.is_some() && !h.keyword.is_some_and(|k| k > 0.0))
            .map(|h| h.episode_id.clone())
            .collect();
        if unmatched.is_empty() {
            return Ok(HashMap::new());
        }
        let episodes = self.episodes(scope, &unmatched).await?;
        // each episode's language when it is another than the message's
        let cross: HashMap<&EpisodeId, language::Language> = episodes
            .iter()
            .filter_map(|(id, e)| {
                let l = language::identify_abstract(&e.abstract_);
                language::cross_lingual(asked, l).then_some((id, l))
            })
            .collect();
        if cross.is_empty() {
            return Ok(episodes);
        }
        let language_of = |id: &EpisodeId| cross.get(id).map(|l| language::script_family(*l));
        cross_lingual_rescore(fused, cfg.fusion, cfg.cross_lingual_calibration(), language_of);
        if let Some(own) = own {
            // the gate's message-only score: a cross-lingual episode's own
            // evidence is its vector
            for h in fused.iter() {
                if let Some(p) = h.cross_lingual {
                    let e = own.entry(h.episode_id.clone()).or_insert(0.0);
                    *e = e.max(p);
                }
            }
        }
        Ok(episodes)
    }

    /// Search hits of `fused`, read from `known` or else from the system of
    /// record (dropped when expired).
    async fn hydrate(&self, scope: &Scope, fused: Vec<FusedHit>, mut known: HashMap<EpisodeId, Episode>) -> Result<Vec<SearchHit>> {
        let missing: Vec<EpisodeId> = fused.iter().filter(|h| !known.contains_key(&h.episode_id)).map(|h| h.episode_id.clone()).collect();
        if !missing.is_empty() {
            known.extend(self.episodes(scope, &missing).await?);
        }
        Ok(fused
            .into_iter()
            .filter_map(|h| {
                known.get(&h.episode_id).map(|e| SearchHit {
                    id: e.id.clone(),
                    session_id: e.session_id.clone(),
                    abstract_: e.abstract_.clone(),
                    score: h.score,
                    when: e.started_at,
                    snippet: None,
                })
            })
            .collect())
    }
}

/// The turns of a stored session, as snippets and evidence read them.
fn turns(messages: &[crate::model::Message]) -> Vec<Turn<'_>> {
    messages
        .iter()
        .map(|m| Turn {
            role: m.message.role,
            name: m.message.name.as_deref(),
            text: &m.message.content,
            at: Some(m.message.timestamp),
        })
        .collect()
}

/// Sets each entry's evidence snippet from its raw session (`sessions`, in
/// the entries' order; [`crate::recall::snippet::best_snippet`]).
fn add_snippets(
    entries: &mut [SearchHit],
    sessions: &[Vec<crate::model::Message>],
    question: &Question,
    context: &str,
    turn_chars: usize,
) {
    for (i, (e, messages)) in entries.iter_mut().zip(sessions).enumerate() {
        let whole = if i == 0 { turn_chars } else { 0 };
        e.snippet = best_snippet_for(&turns(messages), question, context, &e.abstract_, whole).map(|s| s.render());
    }
}

/// Message-only scores by episode and the least one an injected episode needs.
type Gate<'a> = (&'a HashMap<EpisodeId, f64>, f64);

/// Cuts fused candidates (best first) at `min`, at the message-evidence
/// `gate` when given, below `relative` × the first kept score when given,
/// and at `limit`; with `explain`, also describes every candidate (expired
/// ones are marked after hydration).
#[allow(clippy::too_many_arguments)]
fn select(
    cfg: &RecallConfig,
    fused: &[FusedHit],
    reference: f32,
    min: Option<f64>,
    gate: Option<Gate<'_>>,
    relative: Option<f64>,
    limit: usize,
    explain: bool,
) -> (Vec<FusedHit>, Option<Vec<Candidate>>) {
    let mut kept: Vec<FusedHit> = Vec::new();
    let mut out = explain.then(|| Vec::with_capacity(fused.len()));
    for h in fused {
        let outcome = if min.is_some_and(|m| h.score < m) {
            CandidateOutcome::BelowMinScore
        } else if gate.is_some_and(|(own, least)| own.get(&h.episode_id).copied().unwrap_or(0.0) < least) {
            CandidateOutcome::NoMessageEvidence
        } else if relative.zip(kept.first()).is_some_and(|(r, best)| h.score < r * best.score) {
            CandidateOutcome::BelowRelativeCut
        } else if kept.len() >= limit {
            CandidateOutcome::OverLimit
        } else {
            kept.push(h.clone());
            CandidateOutcome::Kept
        };
        if let Some(out) = out.as_mut() {
            out.push(Candidate {
                id: h.episode_id.clone(),
                bm25: h.keyword,
                keyword_probability: h
                    .keyword
                    .map(|k| crate::recall::fusion::keyword_probability(cfg, k, reference)),
                cosine: h.vector,
                vector_probability: h
                    .vector
                    .map(|v| crate::recall::fusion::vector_probability(cfg, v)),
                cross_lingual_probability: h.cross_lingual,
                score: h.score,
                acceptance: None,
                session_id: None,
                features: None,
                outcome,
            });
        }
    }
    (kept, out)
}

/// Marks kept candidates that hydration dropped (expired) as such.
fn mark_expired(explain: &mut Option<Vec<Candidate>>, hits: &[SearchHit]) {
    if let Some(ex) = explain.as_mut() {
        for c in ex.iter_mut() {
            if c.outcome == CandidateOutcome::Kept && !hits.iter().any(|h| h.id == c.id) {
                c.outcome = CandidateOutcome::Expired;
            }
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn hit(name: &str, score: f64) -> FusedHit {
        let scope = Scope::new("u", "a").unwrap();
        FusedHit {
            episode_id: EpisodeId::for_session(&scope, &SessionId::new(name).unwrap()),
            score,
            keyword: Some(1.0),
            vector: None,
            rank_key: score,
            cross_lingual: None,
        }
    }

    #[test]
    fn select_cuts_at_min_score_then_message_evidence_then_relative_cut_then_limit() {
        let cfg = Config::default().recall;
        let fused = [hit("a", 0.9), hit("b", 0.8), hit("c", 0.6), hit("d", 0.5), hit("e", 0.4), hit("f", 0.2)];
        // b has no evidence of the message itself
        let own: HashMap<EpisodeId, f64> = fused.iter().filter(|h| h.score != 0.8).map(|h| (h.episode_id.clone(), 0.5)).collect();
        let (kept, explain) = select(&cfg, &fused, 10.0, Some(0.3), Some((&own, 0.15)), Some(0.6), 2, true);
        let outcomes: Vec<CandidateOutcome> = explain.unwrap().into_iter().map(|c| c.outcome).collect();
        use CandidateOutcome::*;
        assert_eq!(outcomes, [Kept, NoMessageEvidence, Kept, BelowRelativeCut, BelowRelativeCut, BelowMinScore]);
        assert_eq!(kept.iter().map(|h| h.score).collect::<Vec<_>>(), [0.9, 0.6]);
        // without the gate and the relative cut, only min_score and the limit apply
        let (kept, explain) = select(&cfg, &fused, 10.0, Some(0.3), None, None, 3, true);
        assert_eq!(kept.len(), 3);
        assert_eq!(explain.unwrap().iter().filter(|c| c.outcome == OverLimit).count(), 2);
    }
}
