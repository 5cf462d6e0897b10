//! Builds the chat model of `[llm]` and the prompt files of `llm.prompts_dir`
//! (the embedder: [`crate::embed::load`]).

use std::sync::Arc;

use super::offline::{ExtractiveOptions, OfflineChat};
use super::openai::OpenAiChat;
use super::prompts::Prompts;
use super::ChatModel;
use crate::config::{Config, LlmProvider};
use crate::error::Result;

/// Builds the chat model named in `[llm]`: the offline extractive
/// summariser or an OpenAI-compatible endpoint (no request is made).
///
/// # Errors
/// [`crate::Error::Config`] when the API key's environment variable is named but unset.
pub fn chat(config: &Config, prompts: Arc<Prompts>) -> Result<Arc<dyn ChatModel>> {
    Ok(match config.llm.provider {
        LlmProvider::Offline => Arc::new(OfflineChat {
            options: ExtractiveOptions {
                max_sentences: config.episodes.summary_max_sentences,
                max_chars: config.episodes.summary_max_chars,
            },
        }),
        LlmProvider::Openai => Arc::new(OpenAiChat::new(&config.llm, prompts)?),
    })
}

/// The prompt files: compiled-in, or those of `llm.prompts_dir` when set.
///
/// # Errors
/// [`crate::Error::Config`] for an unreadable or invalid prompt file.
pub fn prompts(config: &Config) -> Result<Arc<Prompts>> {
    let dir = &config.llm.prompts_dir;
    Ok(Arc::new(Prompts::load(
        (!dir.as_os_str().is_empty()).then_some(dir.as_path()),
    )?))
}
