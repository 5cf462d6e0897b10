//! Crash harness (issue 14): `strata import --wait` and a live `strata
//! serve` under load, each SIGKILLed at a random point, then reopened.
//! After every kill and recovery: every acknowledged message is stored
//! exactly once and in order, every ended session is promoted exactly once
//! (one episode, one `episode_created` event), nothing is pending or parked,
//! and `strata check` finds the indexes in agreement with the records.
//!
//! `STRATA_CRASH_SEEDS` kills per mode (default 15: 30 kills in all, CI's
//! short form); `STRATA_CRASH_SEED0` the first seed (default 1). By hand:
//! `STRATA_CRASH_SEEDS=100 cargo test --test crash -- --nocapture`.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

/// Sessions and turns per session of the imported history.
const SESSIONS: usize = 16;
const TURNS: usize = 6;
/// Writers of the serve run, each with its own user and sessions.
const WRITERS: usize = 4;
const SERVE_SESSIONS: usize = 8;
const SERVE_TURNS: usize = 4;

fn seeds() -> (u64, u64) {
    let n = std::env::var("STRATA_CRASH_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let first = std::env::var("STRATA_CRASH_SEED0").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    (first, n)
}

fn strata(dir: &Path) -> Command {
    let mut c = common::bin();
    c.arg("--data-dir").arg(dir);
    c
}

/// A turn's text: distinct per (user, session, turn), with words that give
/// the summariser, the keyword index and the graph something to hold.
fn turn(user: usize, s: usize, t: usize) -> String {
    const PLACES: [&str; 6] = ["Lisbon", "Kyoto", "Oslo", "Busan", "Quito", "Tromsø"];
    const THINGS: [&str; 6] = ["cello lessons", "a sourdough starter", "the climbing gym", "a vegetable garden", "Yuna's wedding", "a marathon plan"];
    format!(
        "User {user}, session {s}, turn {t}: I talked about {} while staying in {} — détails № {t}.",
        THINGS[(s + t) % THINGS.len()],
        PLACES[(s * 7 + t) % PLACES.len()]
    )
}

fn write_history(file: &Path) {
    let mut out = String::new();
    for s in 0..SESSIONS {
        for t in 0..TURNS {
            let line = json!({
                "user_id": "mina", "agent_id": "bot", "session_id": format!("s{s}"),
                "role": if t % 2 == 0 { "user" } else { "assistant" },
                "content": turn(0, s, t),
                "timestamp": format!("2026-03-{:02}T10:{:02}:00Z", 1 + s % 28, t),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
    }
    std::fs::write(file, out).unwrap();
}

fn kill(child: &mut Child) {
    let _ = child.kill(); // SIGKILL on Unix
    let _ = child.wait();
}

/// What a recovered data directory must hold: `sessions` sessions, each
/// promoted exactly once, `messages` messages in all, stored once each and
/// in order; no job pending or parked; `strata check` clean.
fn verify(dir: &Path, sessions: i64, messages: i64, label: &str) {
    let out = strata(dir).args(["check", "--json"]).output().unwrap();
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{label}: check printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    assert!(out.status.success(), "{label}: check found problems: {report}");
    let c = &report["counts"];
    assert_eq!(c["sessions"], sessions, "{label}: {report}");
    assert_eq!(c["messages"], messages, "{label}: {report}");
    assert_eq!(c["episodes"], sessions, "{label}: {report}");
    assert_eq!(c["keyword_documents"], sessions, "{label}: {report}");
    assert_eq!(c["vector_documents"], sessions, "{label}: {report}");
    assert_eq!(report["pending_vectors"], 0, "{label}: {report}");
    let db = rusqlite::Connection::open(dir.join("strata.db")).unwrap();
    let one = |sql: &str| db.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    // promoted exactly once: a second promotion would write a second event
    assert_eq!(one("SELECT COUNT(*) FROM outbox WHERE kind='episode_created'"), sessions, "{label}");
    assert_eq!(one("SELECT COUNT(*) FROM outbox WHERE kind='session_completed'"), sessions, "{label}");
    assert_eq!(one("SELECT COUNT(*) FROM outbox WHERE status <> 'done'"), 0, "{label}: a job is pending or parked");
    assert_eq!(one("SELECT COUNT(*) FROM sessions WHERE status <> 'completed'"), 0, "{label}");
    // once each and in order: within a session, seq runs 0.. with no gap and
    // no content twice; the turn number written in the text follows seq
    assert_eq!(
        one("SELECT COUNT(*) FROM (SELECT 1 FROM messages GROUP BY user_id, agent_id, session_id, content HAVING COUNT(*) > 1)"),
        0,
        "{label}: a message stored twice"
    );
    assert_eq!(
        one("SELECT COUNT(*) FROM sessions s WHERE message_count <> (SELECT COUNT(*) FROM messages m WHERE m.user_id=s.user_id AND m.agent_id=s.agent_id AND m.session_id=s.session_id) OR message_count <> 1 + (SELECT MAX(seq) FROM messages m WHERE m.user_id=s.user_id AND m.agent_id=s.agent_id AND m.session_id=s.session_id)"),
        0,
        "{label}: a gap in a session's sequence"
    );
    assert_eq!(
        one("SELECT COUNT(*) FROM messages WHERE content NOT LIKE '%turn ' || seq || ':%'"),
        0,
        "{label}: a message out of order"
    );
}

#[test]
fn sigkill_during_import_then_rerun_loses_and_doubles_nothing() {
    let (first, n) = seeds();
    let base = tempfile::tempdir().unwrap();
    let file = base.path().join("history.jsonl");
    write_history(&file);
    let import = |dir: &Path| {
        let mut c = strata(dir);
        c.arg("import").arg(&file).args(["--end-sessions", "--wait"]);
        c
    };
    // the baseline: an uninterrupted import, timed so kills land inside one
    let dir = base.path().join("baseline");
    let t0 = Instant::now();
    let out = import(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let full = t0.elapsed();
    verify(&dir, SESSIONS as i64, (SESSIONS * TURNS) as i64, "baseline");
    eprintln!("import baseline: {:.2} s", full.as_secs_f64());
    let mut killed_running = 0;
    for seed in first..first + n {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = base.path().join(format!("seed{seed}"));
        // one to three kills in a row before the run that finishes
        for _ in 0..rng.random_range(1..=3) {
            let mut child = import(&dir).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
            std::thread::sleep(full.mul_f64(rng.random_range(0.0..1.1)));
            if child.try_wait().unwrap().is_none() {
                killed_running += 1;
            }
            kill(&mut child);
        }
        let out = import(&dir).output().unwrap();
        assert!(out.status.success(), "seed {seed}: {}", String::from_utf8_lossy(&out.stderr));
        verify(&dir, SESSIONS as i64, (SESSIONS * TURNS) as i64, &format!("import seed {seed}"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("import: {n} seeds, {killed_running} kills of a running import, all recovered");
    assert!(killed_running >= n as usize / 2, "the kills should mostly land inside a run");
}

/// Posts until the server answers (a killed server refuses connections
/// until its restart): the retry a client makes, safe because every write
/// carries an idempotency key. Any answer but 201/202 fails the test.
async fn post_until_answered(client: &reqwest::Client, url: &str, key: &str, body: Option<Value>) {
    loop {
        let mut rb = client.post(url).header("idempotency-key", key);
        if let Some(b) = &body {
            rb = rb.json(b);
        }
        match rb.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                assert!(status == 201 || status == 202, "{url}: {status} {}", r.text().await.unwrap_or_default());
                return;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// One writer: its user's sessions turn by turn, each ended after its
/// last turn; `done` counts acknowledged requests.
async fn writer(base: String, w: usize, done: Arc<AtomicUsize>) {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().unwrap();
    for s in 0..SERVE_SESSIONS {
        let scope = format!("{base}/v1/users/u{w}/agents/bot/sessions/s{s}");
        for t in 0..SERVE_TURNS {
            let body = json!({"role": if t % 2 == 0 { "user" } else { "assistant" }, "content": turn(w, s, t)});
            post_until_answered(&client, &format!("{scope}/messages"), &format!("{w}-{s}-{t}"), Some(body)).await;
            done.fetch_add(1, Ordering::SeqCst);
        }
        post_until_answered(&client, &format!("{scope}/end"), &format!("{w}-{s}-end"), None).await;
        done.fetch_add(1, Ordering::SeqCst);
    }
}

fn serve(dir: &Path, port: u16) -> Child {
    strata(dir)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until no job of any worker is pending (the metrics say so).
async fn wait_drained(base: &str) {
    for _ in 0..1200 {
        if let Ok(r) = reqwest::get(format!("{base}/metrics")).await {
            let t = r.text().await.unwrap_or_default();
            let idle = ["episodic", "vectors", "semantic", "dedup"]
                .iter()
                .all(|w| t.contains(&format!("strata_outbox_pending{{worker=\"{w}\"}} 0")));
            if idle {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the outbox did not drain in 120 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_live_server_under_load_loses_and_doubles_nothing() {
    let (first, n) = seeds();
    let base_dir = tempfile::tempdir().unwrap();
    let total = WRITERS * SERVE_SESSIONS * (SERVE_TURNS + 1);
    let run = |dir: std::path::PathBuf, kill_at: Option<f64>| async move {
        let port = common::free_port();
        let base = format!("http://127.0.0.1:{port}");
        let mut child = serve(&dir, port);
        common::wait_ready(&base, 60).await;
        let done = Arc::new(AtomicUsize::new(0));
        let t0 = Instant::now();
        let writers: Vec<_> = (0..WRITERS).map(|w| tokio::spawn(writer(base.clone(), w, done.clone()))).collect();
        let mut killed_at = None;
        if let Some(frac) = kill_at {
            // kill once `frac` of the requests are acknowledged (past the end: after them all)
            let target = (frac * total as f64) as usize;
            while done.load(Ordering::SeqCst) < target.min(total) {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            killed_at = Some(done.load(Ordering::SeqCst));
            kill(&mut child);
            child = serve(&dir, port);
            common::wait_ready(&base, 60).await;
        }
        for w in writers {
            w.await.unwrap();
        }
        let written = t0.elapsed();
        wait_drained(&base).await;
        common::signal(&child, "-TERM");
        assert!(child.wait().unwrap().success());
        (written, killed_at)
    };
    let (written, _) = run(base_dir.path().join("baseline"), None).await;
    let (sessions, messages) = ((WRITERS * SERVE_SESSIONS) as i64, (WRITERS * SERVE_SESSIONS * SERVE_TURNS) as i64);
    verify(&base_dir.path().join("baseline"), sessions, messages, "serve baseline");
    eprintln!("serve baseline: {total} requests in {:.2} s", written.as_secs_f64());
    for seed in first..first + n {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = base_dir.path().join(format!("seed{seed}"));
        // past 1.0 the kill lands while promotion and indexing run
        let (_, at) = run(dir.clone(), Some(rng.random_range(0.0..1.3))).await;
        verify(&dir, sessions, messages, &format!("serve seed {seed} (killed after {at:?} acknowledged)"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
    eprintln!("serve: {n} kills under load, all recovered");
}
