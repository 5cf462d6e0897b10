//! Fuzzing (issue 14) with proptest: every parser of outside input gets
//! arbitrary bytes and structured near-valid input, and must answer with a
//! value or a clear error, never a panic. Targets: the JSONL importer's
//! line, the config layers (file and `--set`), the typed-retrieve filter
//! language (parsed, compiled to SQL and run on a real SQLite store), the
//! REST bodies (the library types the server deserialises), the recall
//! query builder, relative-date resolution and the text analyser.
//!
//! Cases per target: `PROPTEST_CASES` (default 256: CI's short form).
//! The long run: `PROPTEST_CASES=100000 cargo test --test fuzz --release`
//! (or the dev profile, slower).

mod common;

use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::OnceLock;

use strata::model::{ImportTurn, NewMessage};
use strata::typed::RetrieveRequest;
use strata::{Memory, Scope};

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256);
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Text with what breaks parsers: any char, controls, combining marks,
/// right-to-left and zero-width characters, quotes and backslashes.
fn nasty() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z \\t\\n\\r\"\\\\{}\\[\\]:,.$#\u{200b}\u{202e}\u{0301}\u{fffd}한国😀]{0,40}",
        Just(String::new()),
        Just(" \u{3000}\u{200b} ".to_string()),
    ]
}

/// JSON values near the filter language: its field names and operators,
/// nested, with scalars of every type.
fn filter_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("type".to_string()),
        Just("category".to_string()),
        Just("id".to_string()),
        Just("created_at".to_string()),
        Just("metadata.key".to_string()),
        Just("metadata.a.b.c".to_string()),
        Just("metadata.".to_string()),
        Just("$and".to_string()),
        Just("$or".to_string()),
        Just("$not".to_string()),
        Just("$gt".to_string()),
        Just("$lte".to_string()),
        Just("$in".to_string()),
        Just("$nin".to_string()),
        Just("$exists".to_string()),
        Just("$eq".to_string()),
        Just("$ne".to_string()),
        "[a-z$.]{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(Value::Number).unwrap_or(Value::Null)),
        nasty().prop_map(Value::String),
        Just(json!("2026-01-01T00:00:00Z")),
        Just(json!("fact")),
        Just(json!("event")),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One memory on a real SQLite store that every filter case runs against.
struct Target {
    rt: tokio::runtime::Runtime,
    mem: Memory,
    scope: Scope,
    _dir: tempfile::TempDir,
}

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let (mut cfg, dir) = common::config();
        cfg.graph.enabled = false;
        let scope = Scope::new("fuzz", "bot").unwrap();
        let mem = rt.block_on(async {
            let mem = common::open_without_workers(cfg).await;
            for v in [
                json!({"type": "fact", "content": "Mina lives in Oslo", "metadata": {"category": "profile", "key": "home"}}),
                json!({"type": "event", "content": "Bought a cello", "metadata": {"action": "purchase", "timestamp": "2026-02-01T00:00:00Z"}}),
            ] {
                let m: strata::model::typed::MemoryInput = serde_json::from_value(v).unwrap();
                mem.remember(&scope, strata::model::typed::NewMemory::try_from(m).unwrap()).await.unwrap();
            }
            mem
        });
        Target { rt, mem, scope, _dir: dir }
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn import_line_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let _ = strata::cli::import::parse_line(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn import_line_structured(
        user in nasty(), agent in nasty(), session in nasty(), content in nasty(),
        role in prop_oneof![Just("user".to_string()), Just("assistant".to_string()), Just("system".to_string()), nasty()],
        ts in prop_oneof![Just("2026-03-02T09:00:00Z".to_string()), Just("2026-03-02T09:00:00+09:00".to_string()), nasty()],
        message_id in prop::option::of(nasty()),
    ) {
        let mut line = json!({"user_id": user, "agent_id": agent, "session_id": session, "role": role, "content": content, "timestamp": ts});
        if let Some(k) = &message_id {
            line["message_id"] = json!(k);
        }
        if let Ok((scope, sid, msg)) = strata::cli::import::parse_line(&line.to_string()) {
            // what parses is what would be stored: valid, keyed, and the key
            // is the line's id or its stable content hash
            prop_assert!(msg.validate().is_ok());
            let key = msg.idempotency_key.clone().unwrap();
            match &message_id {
                Some(k) => prop_assert_eq!(&key, k),
                None => prop_assert_eq!(key, msg.content_key(&scope, &sid)),
            }
        }
    }

    #[test]
    fn rest_bodies(bytes in prop::collection::vec(any::<u8>(), 0..400), v in filter_json()) {
        for body in [bytes.clone(), v.to_string().into_bytes()] {
            if let Ok(m) = serde_json::from_slice::<NewMessage>(&body) {
                let _ = m.validate();
            }
            if let Ok(turns) = serde_json::from_slice::<Vec<ImportTurn>>(&body) {
                for t in turns {
                    let _ = t.into_parts().1.validate();
                }
            }
            if let Ok(m) = serde_json::from_slice::<strata::model::typed::MemoryInput>(&body) {
                let _ = strata::model::typed::NewMemory::try_from(m);
            }
            let _ = serde_json::from_slice::<RetrieveRequest>(&body);
            let _ = serde_json::from_slice::<strata::memory::GraphSearch>(&body);
        }
    }

    #[test]
    fn filter_language_parsed_compiled_and_run(filter in filter_json(), sort in prop::option::of(nasty()), top_k in prop::option::of(0usize..2000)) {
        let _ = strata::model::filter::Filter::parse(&filter);
        let t = target();
        let req = RetrieveRequest { filter, sort_by: sort, top_k, ..Default::default() };
        // an error is fine (a clear one); a panic or a SQL error is not
        if let Err(e) = t.rt.block_on(t.mem.retrieve(&t.scope, &req)) {
            prop_assert!(matches!(e, strata::Error::InvalidInput(_)), "{e:?}");
        }
    }

    #[test]
    fn text_analyser(text in nasty()) {
        for token in strata::store::analyzer::analyze(&text) {
            prop_assert!(!token.is_empty() && !token.contains(char::is_whitespace), "{token:?}");
        }
    }

    #[test]
    fn recall_query_builder(previous in prop::collection::vec(nasty(), 0..4), message in nasty(), max in 0usize..400) {
        let q = strata::recall::query::build_query(&previous, &message, max);
        prop_assert!(strata::text::grapheme_len(&q) <= max);
        let _ = strata::recall::dates::resolve_relative(&message, chrono::Utc::now());
    }

    #[test]
    fn config_layers(text in prop_oneof![nasty(), "\\[(recall|stores|llm)\\]\n[a-z_]{1,12} = [0-9a-z\"\\.\\-]{0,8}\n"], set in prop::collection::vec((nasty(), nasty()), 0..3)) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("strata.toml");
        std::fs::write(&file, &text).unwrap();
        let _ = strata::Config::load(Some(&file), &set);
    }
}
