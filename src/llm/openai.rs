//! OpenAI-compatible chat models through `async-openai` (OpenAI, vLLM,
//! Ollama, llama.cpp, LM Studio: anything serving `/v1/chat/completions` at
//! `base_url`); the client and retries serve [`crate::embed::remote`] too.
//! [`OpenAiChat::complete_json`] runs one prompt file's task and returns its
//! schema-valid answer; what the answer means is the task's own (the
//! summariser's in [`crate::summary::model`], the extractor's in
//! [`crate::graph::extract::model`]).
//!
//! Requests are built as JSON and sent with async-openai's "bring your own
//! types" calls, so one client covers every `response_format` dialect
//! (`json_schema`, llama-cpp-python's `json_object` + `schema`, none) and
//! answers are read leniently (servers differ in which fields they fill).
//!
//! Failure handling, per call ([`with_retries`]): HTTP 429, 408, 409 and
//! 5xx, timeouts, connection errors, bodies that are not JSON, an empty
//! `choices` list, an answer that is not JSON or breaks the prompt's schema
//! are retried `max_retries` times with exponential backoff and jitter;
//! other 4xx fail at once. The caller (the episodic worker) then retries the
//! whole job up to `workers.max_attempts` times and parks it in the
//! dead-letter table; nothing is dropped.

use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::Client;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::prompts::{Prompts, Task};
use super::{CallLog, CallRecord, TranscriptTurn};
use crate::config::{LlmConfig, StructuredOutput};
use crate::error::{Error, Result};
use crate::text::{clip_head, split_sentences};

/// Temperature added per retry of one call (a model at temperature 0 would
/// otherwise repeat the same malformed answer on every retry).
pub const RETRY_TEMPERATURE_STEP: f32 = 0.25;

/// Tokens reserved for the rendered prompt around the transcript (instructions, headers).
pub const PROMPT_OVERHEAD_TOKENS: u32 = 700;

/// A conservative token estimate: one token per 3 UTF-8 bytes. English runs
/// about 4-5 bytes per token and Korean about 3, so this over-counts, which
/// is the safe side for fitting a context window.
pub fn estimate_tokens(s: &str) -> u32 {
    (s.len() as u32).div_ceil(3)
}

/// What one attempt's failure means for the retry loop.
#[derive(Debug)]
pub enum Failure {
    /// Worth another attempt (429, 5xx, timeout, malformed answer...).
    Retryable(String),
    /// Will fail the same way again (400, 401, 403, 404...).
    Permanent(String),
}

impl Failure {
    fn message(&self) -> &str {
        match self {
            Failure::Retryable(m) | Failure::Permanent(m) => m,
        }
    }
}

/// Classifies an async-openai error (status codes as described in the module docs).
pub fn classify(e: &OpenAIError) -> Failure {
    match e {
        OpenAIError::ApiError(r) => {
            let s = r.status_code.as_u16();
            let msg = format!("HTTP {s}: {}", clip_head(&r.api_error.message, 300));
            if s == 429 || s == 408 || s == 409 || s >= 500 {
                Failure::Retryable(msg)
            } else {
                Failure::Permanent(msg)
            }
        }
        OpenAIError::Reqwest(r) => {
            if let Some(st) = r.status() {
                let s = st.as_u16();
                if !(s == 429 || s == 408 || s >= 500) && (400..500).contains(&s) {
                    return Failure::Permanent(format!("HTTP {s}: {r}"));
                }
            }
            Failure::Retryable(format!("http: {r}"))
        }
        OpenAIError::JSONDeserialize(err, body) => Failure::Retryable(format!(
            "response is not valid JSON ({err}): {}",
            clip_head(body, 200)
        )),
        OpenAIError::InvalidArgument(m) => Failure::Permanent(format!("invalid request: {m}")),
        other => Failure::Retryable(other.to_string()),
    }
}

/// Delay before retry number `retry` (0-based): `min(max_ms, base_ms * 2^retry)`,
/// of which the upper half is random ("equal jitter", AWS Architecture Blog,
/// "Exponential Backoff and Jitter", 2015), so concurrent clients spread out
/// but never retry at once.
pub fn backoff_delay(retry: u32, base_ms: u64, max_ms: u64) -> Duration {
    let exp = base_ms.saturating_mul(1u64 << retry.min(20)).min(max_ms);
    let half = exp / 2;
    let jitter = if half > 0 {
        rand::random_range(0..=half)
    } else {
        0
    };
    Duration::from_millis(half + jitter)
}

/// Runs `attempt` once plus up to `max_retries` more times while it fails
/// with [`Failure::Retryable`], sleeping [`backoff_delay`] between attempts.
/// `attempt` receives the attempt number (1-based).
///
/// # Errors
/// The last failure, with the number of attempts made, as [`Error::Chat`]
/// (or whatever `wrap` builds).
pub async fn with_retries<T, F, Fut>(
    max_retries: u32,
    base_ms: u64,
    max_ms: u64,
    wrap: fn(String) -> Error,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut(u32) -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, Failure>>,
{
    let mut n = 0;
    loop {
        n += 1;
        match attempt(n).await {
            Ok(v) => return Ok(v),
            Err(Failure::Permanent(m)) => {
                return Err(wrap(format!("{m} (attempt {n}, not retried)")))
            }
            Err(Failure::Retryable(m)) if n > max_retries => {
                return Err(wrap(format!("{m} (gave up after {n} attempts)")));
            }
            Err(f) => {
                let d = backoff_delay(n - 1, base_ms, max_ms);
                tracing::warn!(
                    attempt = n,
                    delay_ms = d.as_millis() as u64,
                    error = f.message(),
                    "retrying"
                );
                tokio::time::sleep(d).await;
            }
        }
    }
}

/// Finds the JSON answer in a model's text: strips Markdown code fences, then
/// takes the whole text if it parses, else the JSON object or array that
/// starts at the first `{` or `[` (trailing prose is ignored). Near-JSON is
/// left to [`super::repair::repair_json`].
pub fn parse_json_tolerant(text: &str) -> Option<Value> {
    let t = text.trim().trim_start_matches('\u{feff}');
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    let mut candidates: Vec<&str> = Vec::new();
    if let Some(start) = t.find("```") {
        let after = &t[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        let body = body.find("```").map(|e| &body[..e]).unwrap_or(body);
        candidates.push(body.trim());
    }
    candidates.push(t);
    for c in candidates {
        if let Ok(v) = serde_json::from_str::<Value>(c) {
            return Some(v);
        }
        // from the first bracket only: an inner object of a broken list is no answer
        // (the near-JSON repair, super::repair, reads the whole of it)
        if let Some(i) = c.find(['{', '[']) {
            let mut it = serde_json::Deserializer::from_str(&c[i..]).into_iter::<Value>();
            if let Some(Ok(v)) = it.next() {
                if v.is_object() || v.is_array() {
                    return Some(v);
                }
            }
        }
    }
    None
}

#[derive(Deserialize, Default)]
struct ChatResponse {
    #[serde(default)]
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ChatChoice {
    #[serde(default)]
    message: Option<ChatMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u32,
    #[serde(default)]
    completion_tokens: u32,
}

pub(crate) fn client(
    base_url: &str,
    api_key_env: &str,
    timeout: Duration,
    connect_timeout: Duration,
) -> Result<Client<OpenAIConfig>> {
    let mut cfg = OpenAIConfig::new().with_api_base(base_url.trim_end_matches('/'));
    if !api_key_env.is_empty() {
        match std::env::var(api_key_env) {
            Ok(k) if !k.trim().is_empty() => cfg = cfg.with_api_key(k.trim()),
            _ => {
                return Err(Error::Config(format!(
                    "environment variable {api_key_env} (named by api_key_env) is not set; set it, or set api_key_env = \"\" for a server that needs no key"
                )))
            }
        }
    } else {
        cfg = cfg.with_api_key("");
    }
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(connect_timeout)
        .build()
        .map_err(|e| Error::Config(format!("http client: {e}")))?;
    // a plain transport: async-openai's default client adds its own retry
    // layer (3 retries of 429/5xx), which would hide attempts from our retry
    // loop and from cost accounting
    Ok(Client::with_config(cfg)
        .with_http_service(async_openai::middleware::ReqwestService::new(http)))
}

/// A chat model behind an OpenAI-compatible endpoint.
pub struct OpenAiChat {
    client: Client<OpenAIConfig>,
    cfg: LlmConfig,
    prompts: Arc<Prompts>,
}

impl OpenAiChat {
    /// Builds the client from `[llm]` (no request is made).
    ///
    /// # Errors
    /// [`Error::Config`] when the key's environment variable is named but unset.
    pub fn new(cfg: &LlmConfig, prompts: Arc<Prompts>) -> Result<Self> {
        let client = client(
            &cfg.base_url,
            &cfg.api_key_env,
            Duration::from_secs(cfg.timeout_secs),
            Duration::from_secs(cfg.connect_timeout_secs),
        )?;
        Ok(Self {
            client,
            cfg: cfg.clone(),
            prompts,
        })
    }

    /// `openai:<model>`: the id the summariser and the extractor report.
    pub fn id(&self) -> String {
        format!("openai:{}", self.cfg.model)
    }

    /// The `[llm]` section this client was built from.
    pub fn config(&self) -> &LlmConfig {
        &self.cfg
    }

    /// Runs `task` with the template variables `vars`, retrying as described
    /// in the module docs, and returns the schema-valid JSON answer. Every
    /// attempt, failed or not, is appended to `log`.
    ///
    /// # Errors
    /// [`Error::Chat`] after the last retry, naming the last failure and the attempts.
    pub async fn complete_json(&self, task: Task, vars: &Value, log: &CallLog) -> Result<Value> {
        let prompt = self.prompts.get(task);
        let rendered = prompt.render(vars)?;
        let mut body = json!({
            "model": self.cfg.model,
            "messages": [
                {"role": "system", "content": rendered.system},
                {"role": "user", "content": rendered.user},
            ],
            "max_tokens": self.cfg.max_tokens,
            "temperature": self.cfg.temperature,
            "stream": false,
        });
        match self.cfg.structured_output {
            StructuredOutput::JsonSchema => {
                body["response_format"] = json!({"type": "json_schema", "json_schema": {"name": task.name(), "schema": prompt.schema, "strict": true}});
            }
            StructuredOutput::JsonObject => {
                body["response_format"] = json!({"type": "json_object", "schema": prompt.schema});
            }
            StructuredOutput::None => {}
        }
        let timeout = Duration::from_secs(self.cfg.timeout_secs);
        let body = &body;
        let rendered = &rendered;
        with_retries(
            self.cfg.max_retries,
            self.cfg.retry_base_ms,
            self.cfg.retry_max_ms,
            Error::Chat,
            |attempt| async move {
                let started = Instant::now();
                let mut body = body.clone();
                if attempt > 1 {
                    // a deterministic model repeats a malformed answer at the same
                    // temperature: each retry samples a little hotter (cap 1.0)
                    body["temperature"] = json!((self.cfg.temperature
                        + RETRY_TEMPERATURE_STEP * (attempt - 1) as f32)
                        .min(1.0)
                        .max(self.cfg.temperature));
                }
                let sent = tokio::time::timeout(
                    timeout,
                    self.client.chat().create_byot::<_, ChatResponse>(body),
                )
                .await;
                let latency_ms = started.elapsed().as_millis() as u64;
                let mut record = CallRecord {
                    task: task.name(),
                    model: self.cfg.model.clone(),
                    prompt_version: prompt.version,
                    attempt,
                    error: None,
                    input_tokens: 0,
                    output_tokens: 0,
                    latency_ms,
                };
                let outcome = match sent {
                    Err(_) => Err(Failure::Retryable(format!(
                        "timed out after {} s",
                        timeout.as_secs()
                    ))),
                    Ok(Err(e)) => Err(classify(&e)),
                    Ok(Ok(resp)) => {
                        if let Some(u) = resp.usage {
                            record.input_tokens = u.prompt_tokens;
                            record.output_tokens = u.completion_tokens;
                        } else {
                            // server sent no usage: estimate, so costs are never silently zero
                            record.input_tokens =
                                estimate_tokens(&rendered.system) + estimate_tokens(&rendered.user);
                        }
                        read_answer(resp, prompt, &mut record)
                    }
                };
                if let Err(f) = &outcome {
                    record.error = Some(f.message().to_string());
                }
                log.push(record);
                outcome
            },
        )
        .await
    }

    /// Tokens available for the variable part of a request: the context
    /// (`llm.context_tokens`) less the answer (`llm.max_tokens`) and the
    /// prompt's own text ([`PROMPT_OVERHEAD_TOKENS`]), at least 256.
    pub fn input_budget(&self) -> u32 {
        self.cfg
            .context_tokens
            .saturating_sub(self.cfg.max_tokens + PROMPT_OVERHEAD_TOKENS)
            .max(256)
    }
}

fn read_answer(
    resp: ChatResponse,
    prompt: &super::prompts::Prompt,
    record: &mut CallRecord,
) -> std::result::Result<Value, Failure> {
    let Some(choice) = resp.choices.into_iter().next() else {
        return Err(Failure::Retryable("the answer has no choices".into()));
    };
    let content = choice.message.and_then(|m| m.content).unwrap_or_default();
    if record.output_tokens == 0 {
        record.output_tokens = estimate_tokens(&content);
    }
    if content.trim().is_empty() {
        return Err(Failure::Retryable(format!(
            "empty answer (finish_reason {:?})",
            choice.finish_reason
        )));
    }
    // JSON as it stands, else near-JSON repaired (super::repair)
    let (v, mut repaired) = match parse_json_tolerant(&content) {
        Some(v) => (v, false),
        None => match super::repair::repair_json(&content) {
            Some(v) => (v, true),
            None => {
                return Err(Failure::Retryable(format!(
                    "answer is not JSON (finish_reason {:?}): {}",
                    choice.finish_reason,
                    clip_head(content.trim(), 160)
                )))
            }
        },
    };
    let v = match prompt.validate(&v) {
        Ok(()) => v,
        Err(e) => {
            // fitted to the schema (a bare list placed, invalid items dropped), never coerced
            let fitted = super::repair::fit_schema(&prompt.schema, v);
            if prompt.validate(&fitted).is_err() {
                return Err(Failure::Retryable(format!(
                    "answer breaks the {} schema: {e}",
                    prompt.task.name()
                )));
            }
            repaired = true;
            fitted
        }
    };
    if repaired {
        metrics::counter!("strata_llm_repaired_total", "task" => record.task).increment(1);
        tracing::info!(task = record.task, attempt = record.attempt, "near-JSON answer repaired");
    }
    Ok(v)
}

/// Splits a transcript into pieces of at most `budget` estimated tokens,
/// on turn boundaries; a single turn longer than the budget is cut on
/// sentence boundaries, or on grapheme boundaries when a sentence is itself
/// too long. Every piece is non-empty and no text is lost.
pub fn split_transcript(turns: &[TranscriptTurn], budget: u32) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, pieces: &mut Vec<String>| {
        if !cur.trim().is_empty() {
            pieces.push(std::mem::take(cur));
        }
        cur.clear();
    };
    for t in turns {
        let line = format!("{}: {}\n", t.speaker, t.text.trim());
        if estimate_tokens(&cur) + estimate_tokens(&line) <= budget {
            cur.push_str(&line);
            continue;
        }
        flush(&mut cur, &mut pieces);
        if estimate_tokens(&line) <= budget {
            cur.push_str(&line);
            continue;
        }
        // one turn larger than a piece: cut it into labelled chunks
        let label = format!("{}: ", t.speaker);
        let mut chunk = label.clone();
        for sentence in split_sentences(&t.text) {
            let mut rest = sentence;
            while !rest.is_empty() {
                let room = budget.saturating_sub(estimate_tokens(&chunk)) as usize * 3;
                if rest.len() + 1 <= room {
                    chunk.push_str(rest);
                    chunk.push(' ');
                    rest = "";
                } else if chunk.len() > label.len() {
                    pieces.push(std::mem::replace(&mut chunk, label.clone()));
                } else {
                    // a sentence longer than a whole piece: cut on graphemes
                    let mut take = 0;
                    for (i, g) in
                        unicode_segmentation::UnicodeSegmentation::grapheme_indices(rest, true)
                    {
                        if i + g.len() > room.max(4) {
                            break;
                        }
                        take = i + g.len();
                    }
                    let take = take.max(rest.chars().next().map(char::len_utf8).unwrap_or(1));
                    chunk.push_str(&rest[..take]);
                    pieces.push(std::mem::replace(&mut chunk, label.clone()));
                    rest = &rest[take..];
                }
            }
        }
        if chunk.len() > label.len() {
            chunk.push('\n');
            cur = chunk;
        }
    }
    flush(&mut cur, &mut pieces);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_json_parsing() {
        assert_eq!(
            parse_json_tolerant(r#"{"summary":"a"}"#).unwrap()["summary"],
            "a"
        );
        let fenced = "Here you go:\n```json\n{\"summary\": \"b\", \"language\": \"English\"}\n```\nHope it helps!";
        assert_eq!(parse_json_tolerant(fenced).unwrap()["summary"], "b");
        let trailing = "Sure! {\"summary\": \"c\"} and then {\"summary\": \"d\"}";
        assert_eq!(
            parse_json_tolerant(trailing).unwrap()["summary"],
            "c",
            "first JSON value wins"
        );
        assert!(parse_json_tolerant("I cannot help with that.").is_none());
        assert!(parse_json_tolerant("{\"summary\": \"unterminated").is_none());
        assert!(
            parse_json_tolerant("[{\"name\": \"A\"}, {\"name\": \"B").is_none(),
            "an inner object of a broken list is not taken for the answer"
        );
        assert_eq!(
            parse_json_tolerant("```\n{\"k\":\"한국어 요약\"}\n```").unwrap()["k"],
            "한국어 요약"
        );
    }

    #[test]
    fn backoff_grows_caps_and_jitters_within_bounds() {
        for retry in 0..10 {
            let exp = (100u64 << retry).min(2_000);
            for _ in 0..50 {
                let d = backoff_delay(retry, 100, 2_000).as_millis() as u64;
                assert!(
                    d >= exp / 2 && d <= exp,
                    "retry {retry}: {d} outside [{}, {exp}]",
                    exp / 2
                );
            }
        }
    }

    #[tokio::test]
    async fn retries_only_retryable_failures_and_counts_attempts() {
        let mut calls = 0;
        let r: Result<u32> = with_retries(3, 1, 2, Error::Chat, |n| {
            calls += 1;
            async move {
                if n < 3 {
                    Err(Failure::Retryable("503".into()))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(r.unwrap(), 3);
        assert_eq!(calls, 3);
        let e = with_retries::<u32, _, _>(2, 1, 2, Error::Chat, |_| async {
            Err(Failure::Retryable("429".into()))
        })
        .await
        .unwrap_err();
        assert!(e.to_string().contains("gave up after 3 attempts"), "{e}");
        let mut calls = 0;
        let e = with_retries::<u32, _, _>(5, 1, 2, Error::Chat, |_| {
            calls += 1;
            async { Err(Failure::Permanent("HTTP 401".into())) }
        })
        .await
        .unwrap_err();
        assert_eq!(calls, 1, "permanent failures are not retried");
        assert!(e.to_string().contains("401"));
    }

    #[test]
    fn long_transcripts_split_without_losing_text() {
        let turn = |s: &str, t: String| TranscriptTurn {
            speaker: s.into(),
            text: t,
            at: None,
        };
        let big = "Dana fixed the build. ".repeat(2_000); // ~44 KB in one turn
        let korean = "한국어 문장입니다".repeat(3_000); // one long sentence, no break
        let turns = vec![
            turn("Dana", "short hello".into()),
            turn("Sam", big.clone()),
            turn("Dana", korean.clone()),
        ];
        let pieces = split_transcript(&turns, 1_000);
        assert!(pieces.len() > 10, "{}", pieces.len());
        for p in &pieces {
            assert!(
                estimate_tokens(p) <= 1_000 + 20,
                "piece of {} tokens",
                estimate_tokens(p)
            );
        }
        let joined: String = pieces.concat();
        assert_eq!(joined.matches("Dana fixed the build.").count(), 2_000);
        assert_eq!(
            joined.matches('한').count(),
            3_000,
            "no Korean syllable lost or split"
        );
        assert!(joined.contains("short hello"));
    }
}
