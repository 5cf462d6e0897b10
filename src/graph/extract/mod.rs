//! Graph extraction: a session's turns → the entities and relations the
//! semantic worker applies to the [`crate::graph::GraphStore`], behind
//! [`GraphExtractor`] so a chat model can replace or add to the offline
//! patterns.
//!
//! - [`offline`]: speaker names, capitalised name spans and lexical
//!   patterns, no model ([`OfflineExtractor`], the default).
//! - [`model::ModelExtractor`]: an OpenAI-compatible chat model
//!   (`prompts/extract_entities_relations`), its names checked against the
//!   text, combined with the offline result by [`combine`] unless
//!   `graph.combine_offline = false`; it also judges ambiguous duplicate
//!   pairs for [`crate::graph::dedup`] (`prompts/dedup_entities`).

#[doc(hidden)]
pub mod combine;
pub mod frames;
pub mod voices;
pub mod model;
#[doc(hidden)]
pub mod offline;

use std::sync::Arc;

use async_trait::async_trait;

pub use offline::{extract, type_cue, MAX_COOCCURRING_NAMES, MAX_NAME_WORDS};

use crate::config::Config;
use crate::error::Result;
use crate::llm::openai::OpenAiChat;
use crate::llm::CallLog;
use crate::model::graph::{Entity, Extraction};
use crate::model::TranscriptTurn;

/// Extracts a session's entities and relations, and judges whether two
/// entities are one (the semantic and dedup workers' tasks).
#[async_trait]
pub trait GraphExtractor: Send + Sync + 'static {
    /// A stable id such as `offline:patterns` or `openai:gpt-4o-mini`.
    fn id(&self) -> String;

    /// The entities and relations of one session: its `turns` (speaker
    /// and text), the names of its `speakers` in order of appearance, its
    /// episode `summary` (what a model reads when the turns are gone) and
    /// its first message's date `started_at` (`YYYY-MM-DD`). Every LLM
    /// request made, failed or not, is appended to `log`.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] when the model fails after its retries (the
    /// worker retries the job, then parks it).
    async fn extract(
        &self,
        summary: &str,
        turns: &[TranscriptTurn],
        speakers: &[String],
        started_at: &str,
        log: &CallLog,
    ) -> Result<Extraction>;

    /// For each ambiguous pair (similar enough to ask, not to merge), whether
    /// both entities are the same thing. `None` = this extractor cannot judge;
    /// the pairs stay apart.
    ///
    /// # Errors
    /// [`crate::Error::Chat`] after the model's retries.
    async fn confirm_same(&self, _pairs: &[(Entity, Entity)], _log: &CallLog) -> Result<Option<Vec<bool>>> {
        Ok(None)
    }
}

/// The offline [`GraphExtractor`]: [`offline::extract`] over the turns; it
/// makes no request and cannot judge duplicates.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineExtractor;

#[async_trait]
impl GraphExtractor for OfflineExtractor {
    fn id(&self) -> String {
        "offline:patterns".into()
    }

    async fn extract(
        &self,
        _summary: &str,
        turns: &[TranscriptTurn],
        _speakers: &[String],
        _started_at: &str,
        _log: &CallLog,
    ) -> Result<Extraction> {
        Ok(offline::extract(turns))
    }
}

/// The extractor for `config`: the model's when `chat` is a client
/// ([`crate::llm::load::chat`]; combined with the offline patterns when
/// `graph.combine_offline`), else [`OfflineExtractor`].
pub fn load(config: &Config, chat: Option<Arc<OpenAiChat>>) -> Arc<dyn GraphExtractor> {
    match chat {
        Some(chat) => Arc::new(model::ModelExtractor::new(chat, config.graph.combine_offline)),
        None => Arc::new(OfflineExtractor),
    }
}
