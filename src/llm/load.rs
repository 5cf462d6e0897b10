//! Builds the chat client of `[llm]` and the prompt files of
//! `llm.prompts_dir` (the embedder: [`crate::embed::load`]; the tasks built
//! on the client: [`crate::summary::load`], [`crate::graph::extract::load`]).

use std::sync::Arc;

use super::openai::OpenAiChat;
use super::prompts::Prompts;
use crate::config::{Config, LlmProvider};
use crate::error::Result;

/// The chat client `[llm]` names: `None` for `provider = "offline"` (no
/// model; the tasks use their offline forms), else an OpenAI-compatible
/// endpoint (no request is made).
///
/// # Errors
/// [`crate::Error::Config`] when the API key's environment variable is named but unset.
pub fn chat(config: &Config, prompts: Arc<Prompts>) -> Result<Option<Arc<OpenAiChat>>> {
    Ok(match config.llm.provider {
        LlmProvider::Offline => None,
        LlmProvider::Openai => Some(Arc::new(OpenAiChat::new(&config.llm, prompts)?)),
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
