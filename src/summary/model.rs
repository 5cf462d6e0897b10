//! The LLM summariser: a session too long for the model's context is cut
//! into pieces on turn boundaries ([`crate::llm::openai::split_transcript`]),
//! each piece summarised (`prompts/summarize`), and the summaries merged in
//! groups that fit the context (`prompts/merge_summaries`) until one is
//! left, clipped to `llm.max_summary_chars` graphemes on a sentence boundary.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;

use super::{Summarizer, Summary};
use crate::error::Result;
use crate::llm::openai::{estimate_tokens, split_transcript, OpenAiChat};
use crate::llm::prompts::Task;
use crate::llm::CallLog;
use crate::model::{SummaryKind, TranscriptTurn};
use crate::text::{clip_head, grapheme_len, split_sentences};

/// A [`Summarizer`] on an OpenAI-compatible chat model.
pub struct ModelSummarizer {
    chat: Arc<OpenAiChat>,
}

impl ModelSummarizer {
    /// Summarises with `chat` (no request is made here).
    pub fn new(chat: Arc<OpenAiChat>) -> Self {
        Self { chat }
    }

    /// Summarises one piece (or a whole short session).
    async fn summarize_piece(
        &self,
        transcript: &str,
        language: &str,
        started_at: &str,
        part: usize,
        parts: usize,
        log: &CallLog,
    ) -> Result<String> {
        let vars = json!({"transcript": transcript, "language": language, "started_at": started_at, "part": part, "parts": parts});
        let v = self.chat.complete_json(Task::Summarize, &vars, log).await?;
        Ok(v["summary"].as_str().unwrap_or_default().trim().to_string())
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn id(&self) -> String {
        self.chat.id()
    }

    async fn summarize(&self, transcript: &[TranscriptTurn], started_at: &str, log: &CallLog) -> Result<Summary> {
        let all: String = transcript
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let language = detect_language(&all);
        let pieces = split_transcript(transcript, self.chat.input_budget());
        let mut summaries = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.iter().enumerate() {
            summaries.push(
                self.summarize_piece(piece, &language, started_at, i + 1, pieces.len(), log)
                    .await?,
            );
        }
        // merge, in groups that fit the context, until one summary remains
        while summaries.len() > 1 {
            let budget = self.chat.input_budget();
            let mut groups: Vec<Vec<String>> = vec![Vec::new()];
            let mut used = 0;
            for s in summaries.drain(..) {
                let t = estimate_tokens(&s) + 8;
                if used + t > budget && !groups.last().expect("non-empty").is_empty() {
                    groups.push(Vec::new());
                    used = 0;
                }
                used += t;
                groups.last_mut().expect("non-empty").push(s);
            }
            if groups.len() > 1 && groups.iter().all(|g| g.len() == 1) {
                // summaries too long to pair up: clip them so that merging progresses
                let cap = (budget as usize * 3 / 2).max(200);
                groups = groups
                    .chunks(2)
                    .map(|c| c.iter().map(|g| clip_summary(&g[0], cap)).collect())
                    .collect();
            }
            for g in groups {
                if g.len() == 1 {
                    summaries.push(g.into_iter().next().expect("one"));
                    continue;
                }
                let vars = json!({"summaries": g, "language": language, "started_at": started_at});
                let v = self.chat.complete_json(Task::MergeSummaries, &vars, log).await?;
                summaries.push(v["summary"].as_str().unwrap_or_default().trim().to_string());
            }
        }
        let text = summaries.pop().unwrap_or_default();
        let clipped = clip_summary(&text, self.chat.config().max_summary_chars);
        if clipped.len() < text.len() {
            tracing::warn!(
                graphemes = grapheme_len(&text),
                kept = grapheme_len(&clipped),
                "LLM summary clipped to llm.max_summary_chars"
            );
        }
        Ok(Summary {
            text: clipped,
            kind: SummaryKind::Llm,
            abstract_: None,
        })
    }
}

/// Clips `text` to at most `max` graphemes, preferring to end on a sentence.
pub fn clip_summary(text: &str, max: usize) -> String {
    if grapheme_len(text) <= max {
        return text.to_string();
    }
    let mut out = String::new();
    let mut n = 0;
    for s in split_sentences(text) {
        let len = grapheme_len(s) + 1;
        if n + len > max {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(s);
        n += len;
    }
    if out.is_empty() {
        out = clip_head(text, max).to_string();
    }
    out
}

/// English name of the dominant language of `text` when the detector is
/// reliable (whatlang, trigram + script based), else "".
pub fn detect_language(text: &str) -> String {
    let sample = clip_head(text, 4000);
    match whatlang::detect(sample) {
        Some(info) if info.is_reliable() || info.confidence() > 0.5 => {
            info.lang().eng_name().to_string()
        }
        Some(info) => match info.script() {
            // a script that belongs to one language is enough
            whatlang::Script::Hangul => "Korean".into(),
            whatlang::Script::Hiragana | whatlang::Script::Katakana => "Japanese".into(),
            _ => String::new(),
        },
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_clipped_on_sentence_boundaries() {
        let s = "First fact. Second fact. Third fact.";
        assert_eq!(clip_summary(s, 100), s);
        assert_eq!(clip_summary(s, 26), "First fact. Second fact.");
        let k = "가".repeat(500);
        assert_eq!(grapheme_len(&clip_summary(&k, 100)), 100);
    }

    #[test]
    fn language_detection_names_korean_and_english() {
        assert_eq!(
            detect_language(
                "안녕하세요, 저는 다음 주에 부산으로 여행을 가요. 강아지도 입양했어요."
            ),
            "Korean"
        );
        let english = "I am planning a trip to Busan next week with my sister Dana, and yesterday I adopted a beagle called Pickle. \
                       We still need to find someone who can look after the dog while we are away, and book the train from Seoul.";
        assert_eq!(detect_language(english), "English");
        assert_eq!(detect_language("ok"), "", "too little text to tell");
    }
}
