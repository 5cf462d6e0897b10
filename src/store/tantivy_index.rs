//! tantivy BM25 keyword index over episodes, on disk.
//!
//! Text is analysed by [`super::analyzer::analyze`] before it reaches
//! tantivy, so queries and documents share one analyser and the number of
//! query terms is known for calibration.
//! Scoring is tantivy's BM25
//! (k1 = 1.2, b = 0.75, tantivy defaults, after Robertson & Zaragoza 2009),
//! with two changes to its statistics:
//! - **Per-scope IDF.** Document frequencies are counted inside the scope
//!   searched, not over the whole index: a user's own name is in every one of
//!   their episodes and must weigh nothing, though it is rare among other
//!   users. Measured on LoCoMo dev (docs/measurements.md, "Keyword statistics").
//! - **A prior.** The collection size used for IDF is at least `prior_docs`
//!   (as if the scope also held that many documents without the query's
//!   terms; average length preserved). In a young scope of a few episodes
//!   every term is "common" and BM25 says little; the prior keeps IDF, and so
//!   the calibrated scores, meaningful from the first episode on. A large
//!   prior flattens the IDF of terms common in the scope, so it is kept small
//!   (`recall.bm25_prior_docs`).
//!
//! # Terms carry their scope
//! Every text term is indexed as `scope key` U+001E `term` (the scope key is
//! [`Scope::key`]; ids hold no control characters, so the first U+001E ends
//! the key and two scopes never share a term). So:
//! - a search is a plain union of the scope's own terms: no document of
//!   another scope can match, and with no filter clause beside the terms
//!   tantivy's Block-WAND skips the blocks that cannot reach the top k (a
//!   scope filter clause beside the terms disabled it; docs/measurements.md,
//!   "2026-12-07 (4)": inject's BM25 stage at 100k episodes in one scope went
//!   from 3.9 to 1.6 ms at p50);
//! - a term's per-scope document frequency is its document frequency, read
//!   from the term dictionary (no posting-list intersection per term). Like
//!   the scope's document count it includes deleted documents until segments
//!   merge, as tantivy's own statistics do.
//! The scope also stays a field of its own (`scope`: counts, deletes, ids).
//! Text is handed to tantivy pre-tokenized ([`super::analyzer::analyze`]'s
//! terms with the prefix); indexes of the older layout, one field set without
//! prefixes, fail to open with a request to run `strata reindex`.

use async_trait::async_trait;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::Bm25StatisticsProvider;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::{
    Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term,
};

/// BM25 statistics of one scope: the collection is the scope's documents, so
/// a term every one of a user's episodes holds (their own name, their
/// friend's) weighs nothing, however rare it is among other users. The
/// collection size is floored at a prior (as if the scope also held that many
/// documents without the query's terms; average length preserved), so a young
/// scope of a few episodes still gives rare terms a meaningful IDF. Terms
/// carry their scope (module docs), so a term's document frequency is the
/// scope's.
struct ScopeStats<'a> {
    searcher: &'a Searcher,
    /// Documents of the scope (deleted ones included until segments merge, as tantivy counts them).
    scope_docs: u64,
    prior_docs: u64,
}

impl ScopeStats<'_> {
    fn docs(&self) -> u64 {
        scope_size(self.scope_docs, self.prior_docs)
    }
}

impl Bm25StatisticsProvider for ScopeStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let n = self.searcher.num_docs();
        let tokens = self.searcher.total_num_tokens(field)?;
        // the index's average document length, scaled to the scope's (prior-floored) size
        Ok(if n == 0 {
            0
        } else {
            (tokens as u128 * self.docs() as u128 / n as u128) as u64
        })
    }
    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs())
    }
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.searcher.doc_freq(term)?.min(self.docs()))
    }
}

use super::analyzer::analyze;
use super::{DocKey, Hit, KeywordDoc, KeywordIndex, KeywordQuery, KeywordResult};
use crate::error::{Error, Result};
use crate::model::{EpisodeId, Scope};

/// Merge requests [`KeywordIndex::compact`] makes before giving up (a
/// background merge can take segments from under one).
const COMPACT_ATTEMPTS: usize = 5;

fn kw<E: std::fmt::Display>(e: E) -> Error {
    Error::Keyword(e.to_string())
}

#[derive(Clone, Copy)]
struct Fields {
    id: Field,
    scope: Field,
    summary: Field,
    /// The user turns of the raw transcript.
    user: Field,
    /// The assistant turns of the raw transcript.
    assistant: Field,
    /// The session's days ("8 May 2023"), see [`crate::recall::dates`].
    dates: Field,
    /// The same days as exact tokens (`day20230508 month202305 year2023`).
    date_tokens: Field,
}

/// Scoring parameters of the keyword index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bm25Params {
    /// Weight of the summary field; `recall.summary_boost`.
    pub summary_boost: f32,
    /// Weight of the user turns against the summary field (1.0); `recall.user_text_boost`.
    pub user_boost: f32,
    /// Weight of the assistant turns; `recall.assistant_text_boost`.
    pub assistant_boost: f32,
    /// Weight of a query's resolved relative dates in the date-tokens field;
    /// `recall.relative_date_boost`.
    pub relative_date_boost: f32,
    /// Weight of the session-dates field; `recall.date_boost`.
    pub date_boost: f32,
    /// IDF prior (see the module docs); `recall.bm25_prior_docs`.
    pub prior_docs: u64,
}

/// The collection size IDF counts for a scope of `scope_docs` documents:
/// floored at the prior `prior_docs` (see the module docs) and at 1.
pub(crate) fn scope_size(scope_docs: u64, prior_docs: u64) -> u64 {
    scope_docs.max(prior_docs).max(1)
}

/// tantivy's BM25 idf of a term held by `df` of `n` documents:
/// `ln(1 + (n − df + 0.5) / (df + 0.5))`, `df` capped at `n`. At tf = 1 and
/// average length a term contributes exactly idf × boost.
pub(crate) fn idf(n: u64, df: u64) -> f64 {
    let (n, df) = (n as f64, df.min(n) as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The distinct analysed terms of `query`'s text, and of its resolved date
/// tokens (none when `relative_date_boost` is 0), each sorted: what both
/// keyword indexes search and what calibration counts.
pub(crate) fn query_terms(query: &KeywordQuery<'_>, relative_date_boost: f32) -> (Vec<String>, Vec<String>) {
    let distinct = |text: &str| {
        let mut t = analyze(text);
        t.sort();
        t.dedup();
        t
    };
    let days = if relative_date_boost > 0.0 { distinct(query.date_tokens) } else { Vec::new() };
    (distinct(query.text), days)
}

struct Inner {
    params: Bm25Params,
    reader: IndexReader,
    writer: Mutex<IndexWriter>,
    f: Fields,
}

/// On-disk tantivy index (see module docs).
#[derive(Clone)]
pub struct TantivyIndex<K = EpisodeId> {
    inner: Arc<Inner>,
    _key: std::marker::PhantomData<fn() -> K>,
}

/// Ends the scope key in a term (module docs, "Terms carry their scope").
const SCOPE_END: char = '\u{1e}';

/// `term` of the scope whose key is `scope_key`, as indexed and searched.
fn scoped(scope_key: &str, term: &str) -> String {
    let mut s = String::with_capacity(scope_key.len() + 1 + term.len());
    s.push_str(scope_key);
    s.push(SCOPE_END);
    s.push_str(term);
    s
}

/// `text` analysed, each term scoped, as tantivy's pre-tokenized input (one
/// position per term; no offsets: the fields store neither positions nor text).
fn scoped_tokens(scope_key: &str, text: &str) -> tantivy::tokenizer::PreTokenizedString {
    let tokens = analyze(text)
        .iter()
        .enumerate()
        .map(|(position, t)| tantivy::tokenizer::Token {
            offset_from: 0,
            offset_to: 0,
            position,
            text: scoped(scope_key, t),
            position_length: 1,
        })
        .collect();
    tantivy::tokenizer::PreTokenizedString { text: String::new(), tokens }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    // pre-tokenized (scoped_tokens); the tokenizer named here never runs
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    // the text fields' names changed with the scoped terms, so an index of the
    // older layout fails to open with a request to reindex (module docs)
    let id = b.add_text_field("episode_id", STRING | STORED);
    let scope = b.add_text_field("scope", STRING);
    let summary = b.add_text_field("scoped_summary", text.clone());
    let user = b.add_text_field("scoped_user", text.clone());
    let assistant = b.add_text_field("scoped_assistant", text.clone());
    let dates = b.add_text_field("scoped_dates", text.clone());
    let date_tokens = b.add_text_field("scoped_date_tokens", text);
    (
        b.build(),
        Fields {
            id,
            scope,
            summary,
            user,
            assistant,
            dates,
            date_tokens,
        },
    )
}

impl<K: DocKey> TantivyIndex<K> {
    /// Opens or creates the index in `dir`.
    ///
    /// # Errors
    /// [`Error::Keyword`] when the directory cannot be opened, is locked by
    /// another process, or holds an index with another schema (one written by
    /// an older Strata: `strata reindex` rebuilds it).
    pub fn open(dir: &Path, params: Bm25Params) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let (schema, f) = schema();
        let mmap = tantivy::directory::MmapDirectory::open(dir).map_err(kw)?;
        let index = Index::open_or_create(mmap, schema).map_err(|e| match e {
            tantivy::TantivyError::SchemaError(m) => Error::Keyword(format!(
                "the keyword index in {} has another schema ({m}): it was written by another Strata version; run `strata reindex`",
                dir.display()
            )),
            e => kw(e),
        })?;
        Self::from_index(index, f, params)
    }

    /// An in-RAM index (tests, eval baselines).
    pub fn in_ram(params: Bm25Params) -> Result<Self> {
        let (schema, f) = schema();
        Self::from_index(Index::create_in_ram(schema), f, params)
    }

    fn from_index(index: Index, f: Fields, params: Bm25Params) -> Result<Self> {
        let writer = index.writer_with_num_threads(1, 50_000_000).map_err(|e| match e {
            tantivy::TantivyError::LockFailure(..) => Error::Keyword(
                "the data directory is in use by another strata process (the keyword index is locked); stop it or use another --data-dir".into(),
            ),
            e => kw(e),
        })?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(kw)?;
        Ok(Self {
            inner: Arc::new(Inner {
                params,
                reader,
                writer: Mutex::new(writer),
                f,
            }),
            _key: std::marker::PhantomData,
        })
    }

    /// Every live document as (scope, key): the scope field is indexed but
    /// not stored, so each segment's scope terms are walked and their
    /// postings give the documents, whose stored id is read.
    fn ids_blocking(&self) -> Result<Vec<(Scope, K)>> {
        use tantivy::{DocSet as _, TERMINATED};
        let f = self.inner.f;
        let searcher = self.inner.reader.searcher();
        let mut out = Vec::new();
        for seg in searcher.segment_readers() {
            let inverted = seg.inverted_index(f.scope).map_err(kw)?;
            let store = seg.get_store_reader(16).map_err(kw)?;
            let mut terms = inverted.terms().stream().map_err(kw)?;
            while terms.advance() {
                let key = std::str::from_utf8(terms.key())
                    .map_err(|e| Error::Keyword(format!("scope term is not UTF-8: {e}")))?;
                let scope = Scope::from_key(key)?;
                let mut postings = inverted
                    .read_postings_from_terminfo(terms.value(), IndexRecordOption::Basic)
                    .map_err(kw)?;
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if !seg.is_deleted(doc) {
                        let d: TantivyDocument = store.get(doc).map_err(kw)?;
                        let id = d
                            .get_first(f.id)
                            .and_then(|v| v.as_str())
                            .ok_or_else(|| Error::Keyword("document without an id".into()))?;
                        out.push((scope.clone(), K::parse(id)?));
                    }
                    doc = postings.advance();
                }
            }
        }
        Ok(out)
    }

    fn scope_term(&self, scope: &Scope) -> Term {
        Term::from_field_text(self.inner.f.scope, &scope.key())
    }

    fn scope_and_ids(&self, scope: &Scope, ids: &[K]) -> Box<dyn Query> {
        let f = self.inner.f;
        let id_clauses: Vec<(Occur, Box<dyn Query>)> = ids
            .iter()
            .map(|id| {
                (
                    Occur::Should,
                    Box::new(TermQuery::new(
                        Term::from_field_text(f.id, id.as_str()),
                        IndexRecordOption::Basic,
                    )) as Box<dyn Query>,
                )
            })
            .collect();
        Box::new(BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    self.scope_term(scope),
                    IndexRecordOption::Basic,
                )),
            ),
            (Occur::Must, Box::new(BooleanQuery::new(id_clauses))),
        ]))
    }

    fn commit(&self, w: &mut IndexWriter) -> Result<()> {
        w.commit().map_err(kw)?;
        self.inner.reader.reload().map_err(kw)
    }

    /// Blocking search (callers on the async executor use [`KeywordIndex::search`]).
    pub fn search_blocking(
        &self,
        scope: &Scope,
        query: &KeywordQuery<'_>,
        limit: usize,
    ) -> Result<KeywordResult<K>> {
        let f = self.inner.f;
        let (terms, day_terms) = query_terms(query, self.inner.params.relative_date_boost);
        if (terms.is_empty() && day_terms.is_empty()) || limit == 0 {
            return Ok(KeywordResult {
                hits: Vec::new(),
                query_terms: terms.len(),
                reference_score: 0.0,
            });
        }
        let searcher = self.inner.reader.searcher();
        let p = self.inner.params;
        // (field, weight) searched; the reference score (calibration feature) counts the
        // summary and the user turns; the assistant turns and the dates are bonuses outside it
        let fields: Vec<(Field, f32)> = [
            (f.summary, p.summary_boost),
            (f.user, p.user_boost),
            (f.assistant, p.assistant_boost),
            (f.dates, p.date_boost),
        ]
        .into_iter()
        .filter(|(_, w)| *w > 0.0)
        .collect();
        let key = scope.key();
        let term = |field: Field, t: &str| Term::from_field_text(field, &scoped(&key, t));
        let stats = ScopeStats {
            searcher: &searcher,
            scope_docs: searcher.doc_freq(&Term::from_field_text(f.scope, &key)).map_err(kw)?,
            prior_docs: p.prior_docs,
        };
        let field_idf = |field: Field, t: &str| -> Result<f64> {
            let df = stats.doc_freq(&term(field, t)).map_err(kw)?;
            Ok(idf(stats.docs(), df))
        };
        let mut reference = 0.0f64;
        for t in &terms {
            if p.summary_boost > 0.0 {
                reference += p.summary_boost as f64 * field_idf(f.summary, t)?;
            }
            if p.user_boost > 0.0 {
                reference += p.user_boost as f64 * field_idf(f.user, t)?;
            }
        }
        // a plain union of the scope's terms (module docs): Block-WAND applies
        let boosted = |q: TermQuery, weight: f32| -> (Occur, Box<dyn Query>) {
            let q: Box<dyn Query> = if weight == 1.0 { Box::new(q) } else { Box::new(BoostQuery::new(Box::new(q), weight)) };
            (Occur::Should, q)
        };
        let mut should: Vec<(Occur, Box<dyn Query>)> =
            Vec::with_capacity(terms.len() * fields.len() + day_terms.len());
        for (field, weight) in &fields {
            for t in &terms {
                should.push(boosted(TermQuery::new(term(*field, t), IndexRecordOption::WithFreqs), *weight));
            }
        }
        // resolved relative dates: a bonus outside the reference score, like the dates field
        for t in &day_terms {
            should.push(boosted(
                TermQuery::new(term(f.date_tokens, t), IndexRecordOption::WithFreqs),
                p.relative_date_boost,
            ));
        }
        let q = BooleanQuery::new(should);
        let top = searcher
            .search_with_statistics_provider(
                &q,
                &TopDocs::with_limit(limit).order_by_score(),
                &stats,
            )
            .map_err(kw)?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr).map_err(kw)?;
            if let Some(id) = d.get_first(f.id).and_then(|v| v.as_str()) {
                hits.push(Hit {
                    episode_id: K::parse(id)?,
                    score,
                });
            }
        }
        Ok(KeywordResult {
            hits,
            query_terms: terms.len(),
            reference_score: reference as f32,
        })
    }

    fn upsert_blocking(&self, docs: Vec<KeywordDoc<K>>) -> Result<()> {
        let f = self.inner.f;
        let mut w = self
            .inner
            .writer
            .lock()
            .map_err(|_| Error::Task("tantivy writer mutex poisoned".into()))?;
        for d in &docs {
            w.delete_term(Term::from_field_text(f.id, d.episode_id.as_str()));
            let key = d.scope.key();
            let mut doc = TantivyDocument::new();
            doc.add_text(f.id, d.episode_id.as_str());
            doc.add_text(f.scope, &key);
            for (field, text) in [
                (f.summary, &d.summary),
                (f.user, &d.user_text),
                (f.assistant, &d.assistant_text),
                (f.dates, &d.dates),
                (f.date_tokens, &d.date_tokens),
            ] {
                doc.add_pre_tokenized_text(field, scoped_tokens(&key, text));
            }
            w.add_document(doc).map_err(kw)?;
        }
        self.commit(&mut w)
    }
}

#[async_trait]
impl<K: DocKey> KeywordIndex<K> for TantivyIndex<K> {
    async fn upsert(&self, docs: Vec<KeywordDoc<K>>) -> Result<()> {
        if docs.is_empty() {
            return Ok(());
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.upsert_blocking(docs)).await?
    }

    async fn search(
        &self,
        scope: &Scope,
        query: &KeywordQuery<'_>,
        limit: usize,
    ) -> Result<KeywordResult<K>> {
        let (this, scope) = (self.clone(), scope.clone());
        let (text, dates) = (query.text.to_string(), query.date_tokens.to_string());
        tokio::task::spawn_blocking(move || {
            this.search_blocking(
                &scope,
                &KeywordQuery {
                    text: &text,
                    date_tokens: &dates,
                },
                limit,
            )
        })
        .await?
    }

    async fn delete(&self, scope: &Scope, ids: &[K]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let this = self.clone();
        let q = self.scope_and_ids(scope, ids);
        tokio::task::spawn_blocking(move || {
            let mut w = this
                .inner
                .writer
                .lock()
                .map_err(|_| Error::Task("tantivy writer mutex poisoned".into()))?;
            w.delete_query(q).map_err(kw)?;
            this.commit(&mut w)
        })
        .await?
    }

    async fn compact(&self) -> Result<()> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut w = this
                .inner
                .writer
                .lock()
                .map_err(|_| Error::Task("tantivy writer mutex poisoned".into()))?;
            // merging rewrites the segments without their deleted documents; a
            // background merge that took some of them first makes the request
            // fail, so it is retried on the segments as they then are
            for attempt in 0..COMPACT_ATTEMPTS {
                let ids = w.index().searchable_segment_ids().map_err(kw)?;
                if ids.is_empty() {
                    break;
                }
                match w.merge(&ids).wait() {
                    Ok(_) => break,
                    Err(e) if attempt + 1 < COMPACT_ATTEMPTS => {
                        tracing::debug!(error = %e, "segments changed under the merge; retrying");
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    Err(e) => return Err(kw(e)),
                }
            }
            w.garbage_collect_files().wait().map_err(kw)?;
            this.inner.reader.reload().map_err(kw)?;
            Ok(())
        })
        .await?
    }

    async fn ids(&self) -> Result<Vec<(Scope, K)>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.ids_blocking()).await?
    }

    async fn count(&self, scope: &Scope) -> Result<usize> {
        let q = TermQuery::new(self.scope_term(scope), IndexRecordOption::Basic);
        let searcher = self.inner.reader.searcher();
        searcher.search(&q, &Count).map_err(kw)
    }
}

impl<K> std::fmt::Debug for TantivyIndex<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TantivyIndex")
            .field("docs", &self.inner.reader.searcher().num_docs())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionId;

    #[tokio::test]
    async fn compact_drops_deleted_documents_from_the_segments() {
        let idx = TantivyIndex::in_ram(Bm25Params {
            summary_boost: 1.0,
            user_boost: 2.0,
            assistant_boost: 2.0,
            date_boost: 5.0,
            relative_date_boost: 1.0,
            prior_docs: 0,
        })
        .unwrap();
        let s = Scope::new("u", "a").unwrap();
        let ids: Vec<EpisodeId> = (0..3)
            .map(|i| EpisodeId::for_session(&s, &SessionId::new(format!("s{i}")).unwrap()))
            .collect();
        let docs = ids
            .iter()
            .map(|id| KeywordDoc {
                scope: s.clone(),
                episode_id: id.clone(),
                summary: "secret diary".into(),
                user_text: "secret".into(),
                assistant_text: String::new(),
                dates: "8 May 2023".into(),
                date_tokens: "day20230508 month202305 year2023".into(),
            })
            .collect();
        idx.upsert(docs).await.unwrap();
        idx.delete(&s, &ids[..2]).await.unwrap();
        let deleted = |idx: &TantivyIndex| {
            idx.inner
                .reader
                .searcher()
                .segment_readers()
                .iter()
                .map(|r| r.num_deleted_docs())
                .sum::<u32>()
        };
        assert_eq!(deleted(&idx), 2, "a delete only hides documents");
        idx.compact().await.unwrap();
        assert_eq!(deleted(&idx), 0, "compaction rewrites them away");
        assert_eq!(idx.count(&s).await.unwrap(), 1);
        assert_eq!(
            idx.search(&s, &KeywordQuery::text("secret"), 5)
                .await
                .unwrap()
                .hits
                .len(),
            1
        );
    }

    /// An index that searches the summary field only, without a prior (IDF as counted).
    fn summary_only_index() -> TantivyIndex {
        TantivyIndex::in_ram(Bm25Params {
            summary_boost: 1.0,
            user_boost: 0.0,
            assistant_boost: 0.0,
            date_boost: 0.0,
            relative_date_boost: 1.0,
            prior_docs: 0,
        })
        .unwrap()
    }

    /// Episode `i` of scope `s` with `text` as its summary and nothing else.
    fn summary_doc(s: &Scope, i: usize, text: &str) -> KeywordDoc {
        KeywordDoc {
            scope: s.clone(),
            episode_id: EpisodeId::for_session(s, &SessionId::new(format!("s{i}")).unwrap()),
            summary: text.into(),
            user_text: String::new(),
            assistant_text: String::new(),
            dates: String::new(),
            date_tokens: String::new(),
        }
    }

    #[tokio::test]
    async fn idf_is_counted_inside_the_scope() {
        let idx = summary_only_index();
        let (a, b) = (
            Scope::new("a", "bot").unwrap(),
            Scope::new("b", "bot").unwrap(),
        );
        // user a names Zed in each of their 5 episodes; user b has 100 episodes, one about Zed
        let mut docs: Vec<KeywordDoc> = (0..5)
            .map(|i| summary_doc(&a, i, &format!("Zed and topic{i}")))
            .collect();
        docs.extend((0..100).map(|i| {
            summary_doc(
                &b,
                i,
                if i == 0 {
                    "Zed visited"
                } else {
                    "weather talk"
                },
            )
        }));
        idx.upsert(docs).await.unwrap();
        let in_a = idx
            .search(&a, &KeywordQuery::text("Zed"), 10)
            .await
            .unwrap();
        let in_b = idx
            .search(&b, &KeywordQuery::text("Zed"), 10)
            .await
            .unwrap();
        // idf = ln(1 + (N - df + 0.5) / (df + 0.5)): a has N = df = 5, b has N = 100, df = 1
        assert!(
            (in_a.reference_score - (1.0f32 + 0.5 / 5.5).ln()).abs() < 1e-4,
            "{}",
            in_a.reference_score
        );
        assert!(
            (in_b.reference_score - (1.0f32 + 99.5 / 1.5).ln()).abs() < 1e-4,
            "{}",
            in_b.reference_score
        );
        assert_eq!(in_a.hits.len(), 5);
        assert_eq!(in_b.hits.len(), 1);
    }

    /// Document frequencies are the scope's and follow writes: a term of
    /// another scope never counts, and a new write shows in the next search.
    #[tokio::test]
    async fn document_frequencies_follow_writes_and_stay_in_their_scope() {
        let idx = summary_only_index();
        let (a, b) = (
            Scope::new("a", "bot").unwrap(),
            Scope::new("b", "bot").unwrap(),
        );
        // a: 5 episodes, all about Zed; b: 10 episodes, one about Zed
        let mut docs: Vec<KeywordDoc> = (0..5).map(|i| summary_doc(&a, i, "Zed and more")).collect();
        docs.extend((0..10).map(|i| summary_doc(&b, i, if i == 0 { "Zed visited" } else { "weather" })));
        idx.upsert(docs).await.unwrap();
        let reference = |s: &Scope| {
            let idx = idx.clone();
            let s = s.clone();
            async move {
                idx.search(&s, &KeywordQuery::text("Zed"), 20)
                    .await
                    .unwrap()
                    .reference_score
            }
        };
        let idf = |n: f32, df: f32| (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let first = reference(&a).await;
        assert!((first - idf(5.0, 5.0)).abs() < 1e-4, "{first}");
        let in_b = reference(&b).await;
        assert!((in_b - idf(10.0, 1.0)).abs() < 1e-4, "{in_b}");
        // 3 more Zed episodes and 2 others in a
        let more: Vec<KeywordDoc> = (5..10)
            .map(|i| summary_doc(&a, i, if i < 8 { "Zed again" } else { "weather" }))
            .collect();
        idx.upsert(more).await.unwrap();
        let after = reference(&a).await;
        assert!((after - idf(10.0, 8.0)).abs() < 1e-4, "stale count: {after}");
    }

    /// A scope key that is a prefix of another's, and ids with spaces: the
    /// scoped terms of one never match the other's documents.
    #[tokio::test]
    async fn scoped_terms_never_cross_scopes() {
        let idx = summary_only_index();
        let scopes = [
            Scope::new("ann", "bot").unwrap(),
            Scope::new("ann", "bot 2").unwrap(),
            Scope::new("ann bot", "x").unwrap(),
        ];
        let docs: Vec<KeywordDoc> =
            scopes.iter().enumerate().map(|(i, s)| summary_doc(s, i, &format!("secret{i} shared words"))).collect();
        idx.upsert(docs.clone()).await.unwrap();
        for (i, s) in scopes.iter().enumerate() {
            let r = idx.search(s, &KeywordQuery::text("secret0 secret1 secret2 shared"), 10).await.unwrap();
            let ids: Vec<_> = r.hits.iter().map(|h| h.episode_id.clone()).collect();
            assert_eq!(ids, vec![docs[i].episode_id.clone()], "scope {s:?}");
        }
    }

    #[tokio::test]
    async fn the_users_own_words_outweigh_the_assistants() {
        fn docs(s: &Scope) -> Vec<KeywordDoc> {
            let doc = |i: usize, user: &str, assistant: &str| KeywordDoc {
                scope: s.clone(),
                episode_id: EpisodeId::for_session(s, &SessionId::new(format!("s{i}")).unwrap()),
                summary: String::new(),
                user_text: format!("user: {user}\n"),
                assistant_text: format!("assistant: {assistant}\n"),
                dates: String::new(),
                date_tokens: String::new(),
            };
            // s0: the user names their hamster; s1: an assistant's long answer about hamsters
            let mut d = vec![
                doc(0, "my hamster Biscuit loves carrots", "Nice."),
                doc(1, "any pet tips?", "A hamster needs a big cage. Hamster wheels keep a hamster fit; give a hamster carrots rarely."),
            ];
            d.extend((2..10).map(|i| doc(i, "the weather is nice", "Indeed it is.")));
            d
        }
        async fn first(s: &Scope, assistant_boost: f32) -> EpisodeId {
            let idx = TantivyIndex::in_ram(Bm25Params {
                summary_boost: 1.0,
                user_boost: 2.0,
                assistant_boost,
                date_boost: 0.0,
                relative_date_boost: 0.0,
                prior_docs: 0,
            })
            .unwrap();
            idx.upsert(docs(s)).await.unwrap();
            let r = idx
                .search(s, &KeywordQuery::text("what does my hamster like?"), 5)
                .await
                .unwrap();
            r.hits[0].episode_id.clone()
        }
        let s = Scope::new("u", "a").unwrap();
        assert_eq!(
            first(&s, 2.0).await,
            docs(&s)[1].episode_id,
            "weighed alike, the assistant's repetitions win"
        );
        assert_eq!(
            first(&s, 0.67).await,
            docs(&s)[0].episode_id,
            "at a third of the user's weight they do not"
        );
    }

    #[tokio::test]
    async fn the_summary_field_weighs_by_its_boost_and_counts_in_the_reference() {
        let s = Scope::new("u", "a").unwrap();
        let doc = |i: usize, summary: &str, user: &str| KeywordDoc {
            scope: s.clone(),
            episode_id: EpisodeId::for_session(&s, &SessionId::new(format!("s{i}")).unwrap()),
            summary: summary.to_string(),
            user_text: format!("user: {user}\n"),
            assistant_text: String::new(),
            dates: String::new(),
            date_tokens: String::new(),
        };
        let docs = vec![
            doc(0, "Mina plays the cello", "the weather is nice"),
            doc(1, "", "my cello lesson moved"),
        ];
        let search = |summary_boost: f32| {
            let docs = docs.clone();
            let s = s.clone();
            async move {
                let idx = TantivyIndex::in_ram(Bm25Params {
                    summary_boost,
                    user_boost: 1.0,
                    assistant_boost: 0.0,
                    date_boost: 0.0,
                    relative_date_boost: 0.0,
                    prior_docs: 0,
                })
                .unwrap();
                idx.upsert(docs).await.unwrap();
                idx.search(&s, &KeywordQuery::text("cello"), 5)
                    .await
                    .unwrap()
            }
        };
        let on = search(1.0).await;
        let off = search(0.0).await;
        assert_eq!(on.hits.len(), 2, "{on:?}");
        assert_eq!(
            off.hits.len(),
            1,
            "a summary at boost 0 is not searched: {off:?}"
        );
        assert_eq!(off.hits[0].episode_id, docs[1].episode_id);
        assert!(
            off.reference_score < on.reference_score,
            "the reference counts the summary only when it is searched"
        );
    }

    #[test]
    fn an_index_with_an_older_schema_asks_for_a_reindex() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Schema::builder();
        b.add_text_field("episode_id", STRING | STORED);
        Index::create_in_dir(dir.path(), b.build()).unwrap();
        let e = TantivyIndex::<EpisodeId>::open(
            dir.path(),
            Bm25Params {
                summary_boost: 1.0,
                user_boost: 2.0,
                assistant_boost: 2.0,
                date_boost: 5.0,
                relative_date_boost: 1.0,
                prior_docs: 0,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("strata reindex"), "{e}");
    }
}
