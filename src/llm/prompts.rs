//! Prompt files: one versioned TOML template plus a JSON response schema per
//! LLM task, compiled in from `prompts/` and optionally replaced, file by
//! file, from the folder named by `llm.prompts_dir`.
//!
//! A prompt file holds `version` (integer), `system` and `user` (minijinja
//! templates). Everything is checked when loaded: the TOML parses, both
//! templates compile, the schema compiles. A broken prompt is therefore a
//! start-up [`Error::Config`], never a failed job.

use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The LLM tasks that have a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Task {
    /// One session → summary (`prompts/summarize.toml`).
    Summarize,
    /// Summaries of the pieces of a long session → one summary (`prompts/merge_summaries.toml`).
    MergeSummaries,
    /// A session's turns → entities and relations (`prompts/extract_entities_relations.toml`).
    ExtractEntitiesRelations,
    /// Ambiguous entity pairs → same or different (`prompts/dedup_entities.toml`).
    DedupEntities,
}

impl Task {
    /// Every task, in file order.
    pub const ALL: [Task; 4] = [
        Task::Summarize,
        Task::MergeSummaries,
        Task::ExtractEntitiesRelations,
        Task::DedupEntities,
    ];

    /// File stem in `prompts/` (also the task name in `llm_calls.task` and the schema name sent to the server).
    pub fn name(self) -> &'static str {
        match self {
            Task::Summarize => "summarize",
            Task::MergeSummaries => "merge_summaries",
            Task::ExtractEntitiesRelations => "extract_entities_relations",
            Task::DedupEntities => "dedup_entities",
        }
    }

    fn defaults(self) -> (&'static str, &'static str) {
        match self {
            Task::Summarize => (
                include_str!("../../prompts/summarize.toml"),
                include_str!("../../prompts/summarize.schema.json"),
            ),
            Task::MergeSummaries => (
                include_str!("../../prompts/merge_summaries.toml"),
                include_str!("../../prompts/merge_summaries.schema.json"),
            ),
            Task::ExtractEntitiesRelations => (
                include_str!("../../prompts/extract_entities_relations.toml"),
                include_str!("../../prompts/extract_entities_relations.schema.json"),
            ),
            Task::DedupEntities => (
                include_str!("../../prompts/dedup_entities.toml"),
                include_str!("../../prompts/dedup_entities.schema.json"),
            ),
        }
    }
}

/// The compiled-in system-prompt paragraph (`prompts/system.md`).
pub const DEFAULT_SYSTEM_PROMPT: &str = include_str!("../../prompts/system.md");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PromptFile {
    version: u32,
    system: String,
    user: String,
}

/// One loaded, validated prompt.
pub struct Prompt {
    /// Which task.
    pub task: Task,
    /// The file's `version`.
    pub version: u32,
    system: String,
    user: String,
    /// The JSON schema answers must match.
    pub schema: serde_json::Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for Prompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompt")
            .field("task", &self.task)
            .field("version", &self.version)
            .finish()
    }
}

/// A rendered prompt: the system and user messages.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// System message.
    pub system: String,
    /// User message.
    pub user: String,
}

impl Prompt {
    fn parse(task: Task, toml_src: &str, schema_src: &str, origin: &str) -> Result<Self> {
        let bad =
            |what: String| Error::Config(format!("prompt {} ({origin}): {what}", task.name()));
        let file: PromptFile =
            toml::from_str(toml_src).map_err(|e| bad(format!("invalid TOML: {e}")))?;
        let env = minijinja::Environment::new();
        for (part, src) in [("system", &file.system), ("user", &file.user)] {
            env.template_from_str(src)
                .map_err(|e| bad(format!("{part} template: {e}")))?;
        }
        let schema: serde_json::Value = serde_json::from_str(schema_src)
            .map_err(|e| bad(format!("schema is not JSON: {e}")))?;
        let validator = jsonschema::validator_for(&schema)
            .map_err(|e| bad(format!("invalid JSON schema: {e}")))?;
        Ok(Self {
            task,
            version: file.version,
            system: file.system.trim().to_string(),
            user: file.user.trim().to_string(),
            schema,
            validator,
        })
    }

    /// Renders both templates with `ctx` (a serialisable map of the variables
    /// the file lists).
    ///
    /// # Errors
    /// [`Error::Chat`] when a template fails at render time (e.g. a filter on a missing variable).
    pub fn render<S: serde::Serialize>(&self, ctx: &S) -> Result<Rendered> {
        let env = minijinja::Environment::new();
        let render = |src: &str| {
            env.render_str(src, ctx)
                .map_err(|e| Error::Chat(format!("rendering prompt {}: {e}", self.task.name())))
        };
        Ok(Rendered {
            system: render(&self.system)?,
            user: render(&self.user)?,
        })
    }

    /// Checks an answer against the schema.
    ///
    /// # Errors
    /// A one-line description of the first violations (at most 3), with their JSON paths.
    pub fn validate(&self, value: &serde_json::Value) -> std::result::Result<(), String> {
        let errs: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(3)
            .map(|e| format!("{} at '{}'", e, e.instance_path()))
            .collect();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

/// All prompts plus the system-prompt paragraph.
#[derive(Debug)]
pub struct Prompts {
    prompts: Vec<Prompt>,
    system_prompt: String,
}

impl Prompts {
    /// The compiled-in prompts.
    pub fn builtin() -> Arc<Self> {
        Arc::new(Self::load(None).expect("compiled-in prompts are valid"))
    }

    /// Loads the compiled-in prompts, replacing each one whose files exist in
    /// `dir` (`NAME.toml` with `NAME.schema.json`; `system.md`).
    ///
    /// # Errors
    /// [`Error::Config`] naming the file: `dir` missing, a `.toml` without
    /// its schema, invalid TOML, a template that does not compile, a schema
    /// that is not valid JSON Schema.
    pub fn load(dir: Option<&Path>) -> Result<Self> {
        if let Some(d) = dir {
            if !d.is_dir() {
                return Err(Error::Config(format!(
                    "llm.prompts_dir {} is not a folder",
                    d.display()
                )));
            }
        }
        let mut prompts = Vec::new();
        for task in Task::ALL {
            let (toml_default, schema_default) = task.defaults();
            let overridden = dir.map(|d| {
                (
                    d.join(format!("{}.toml", task.name())),
                    d.join(format!("{}.schema.json", task.name())),
                )
            });
            match overridden {
                Some((t, s)) if t.is_file() => {
                    let toml_src = std::fs::read_to_string(&t)
                        .map_err(|e| Error::Config(format!("reading {}: {e}", t.display())))?;
                    let schema_src = if s.is_file() {
                        std::fs::read_to_string(&s)
                            .map_err(|e| Error::Config(format!("reading {}: {e}", s.display())))?
                    } else {
                        return Err(Error::Config(format!(
                            "{} has no schema beside it ({})",
                            t.display(),
                            s.display()
                        )));
                    };
                    prompts.push(Prompt::parse(
                        task,
                        &toml_src,
                        &schema_src,
                        &t.display().to_string(),
                    )?);
                }
                _ => prompts.push(Prompt::parse(
                    task,
                    toml_default,
                    schema_default,
                    "compiled-in",
                )?),
            }
        }
        let mut system_prompt = DEFAULT_SYSTEM_PROMPT.trim().to_string();
        if let Some(p) = dir.map(|d| d.join("system.md")).filter(|p| p.is_file()) {
            system_prompt = std::fs::read_to_string(&p)
                .map_err(|e| Error::Config(format!("reading {}: {e}", p.display())))?
                .trim()
                .to_string();
            if system_prompt.is_empty() {
                return Err(Error::Config(format!("{} is empty", p.display())));
            }
        }
        Ok(Self {
            prompts,
            system_prompt,
        })
    }

    /// The prompt of `task`.
    pub fn get(&self, task: Task) -> &Prompt {
        self.prompts
            .iter()
            .find(|p| p.task == task)
            .expect("every task is loaded")
    }

    /// The system-prompt paragraph for the chatbot (plain text, about 1,300 characters).
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtin_prompts_load_render_and_validate() {
        let p = Prompts::builtin();
        let s = p.get(Task::Summarize);
        assert!(s.version >= 1);
        let r = s
            .render(&json!({"transcript": "Dana: 안녕하세요", "language": "Korean", "part": 1, "parts": 1, "started_at": "2026-01-02"}))
            .unwrap();
        assert!(
            r.system.contains("write the summary in Korean"),
            "{}",
            r.system
        );
        assert!(r.user.contains("Dana: 안녕하세요"));
        assert!(!r.user.contains("part 1 of"));
        assert!(s
            .validate(&json!({"summary": "Dana moved.", "language": "English"}))
            .is_ok());
        let e = s.validate(&json!({"summary": 42})).unwrap_err();
        assert!(e.contains("summary") || e.contains("language"), "{e}");
        assert!(
            s.validate(&json!({"summary": "", "language": "en"}))
                .is_err(),
            "empty summary breaks minLength"
        );
        assert!(p.system_prompt().contains("memory_search"));
        assert!(p.system_prompt().contains("knowledge_graph_search"));
    }

    #[test]
    fn a_folder_overrides_file_by_file_and_bad_files_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("summarize.toml"),
            "version = 7\nsystem = \"S {{ language }}\"\nuser = \"U {{ transcript }}\"\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("summarize.schema.json"),
            r#"{"type":"object","required":["summary"]}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("system.md"), "Custom memory note.\n").unwrap();
        let p = Prompts::load(Some(dir.path())).unwrap();
        assert_eq!(p.get(Task::Summarize).version, 7);
        assert_eq!(
            p.get(Task::MergeSummaries).version,
            Prompts::builtin().get(Task::MergeSummaries).version
        );
        assert_eq!(p.system_prompt(), "Custom memory note.");
        std::fs::write(
            dir.path().join("summarize.toml"),
            "version = 7\nsystem = \"{% if %}\"\nuser = \"x\"\n",
        )
        .unwrap();
        let e = Prompts::load(Some(dir.path())).unwrap_err().to_string();
        assert!(
            e.contains("summarize") && e.contains("system template"),
            "{e}"
        );
        std::fs::remove_file(dir.path().join("summarize.schema.json")).unwrap();
        std::fs::write(
            dir.path().join("summarize.toml"),
            "version = 1\nsystem = \"s\"\nuser = \"u\"\n",
        )
        .unwrap();
        assert!(Prompts::load(Some(dir.path()))
            .unwrap_err()
            .to_string()
            .contains("no schema"));
        assert!(Prompts::load(Some(&dir.path().join("missing"))).is_err());
    }
}
