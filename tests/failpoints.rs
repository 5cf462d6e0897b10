//! Fail points (issue 14): an error injected at each commit boundary of the
//! store writes and the workers (the `fail` crate; built with `--features
//! failpoints`, as `scripts/test.sh` does). Each is hit once on a fresh
//! memory, then cleared; recovery (the caller's retry, or the outbox's) must
//! end in the state a run without the failure reaches: nothing lost, nothing
//! done twice, and `check` clean. The store boundaries run on SQLite and,
//! when `STRATA_TEST_POSTGRES_URL` names a server, on PostgreSQL too.
#![cfg(feature = "failpoints")]

mod common;

use std::time::{Duration, Instant};

use strata::model::typed::{MemoryInput, NewMemory};
use strata::{Memory, NewMessage, Scope, SessionId};

fn scope() -> Scope {
    Scope::new("fp", "bot").unwrap()
}

fn msg(text: &str) -> NewMessage {
    NewMessage::user(text, chrono::Utc::now())
}

/// Runs every queued job inline until none is pending (jobs in a retry
/// backoff are waited for), at most 30 s. A pass that fails (a fail point
/// hit where a crash would stop the worker) is followed by another, as the
/// worker loop's next wake-up would.
async fn drain(mem: &Memory) -> usize {
    let t0 = Instant::now();
    let mut failed = 0;
    loop {
        if let Err(e) = mem.run_pending().await {
            eprintln!("pass failed, retried: {e}");
            failed += 1;
        }
        let depth: usize = mem.queue_depths().await.unwrap().iter().map(|(_, n)| n).sum();
        if depth == 0 {
            return failed;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "jobs still pending: {:?}", mem.queue_depths().await.unwrap());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What a run leaves, for comparison with the run without failures.
#[derive(Debug, PartialEq)]
struct State {
    sessions: u64,
    messages: u64,
    episodes: u64,
    episode_created: i64,
    vector_points: usize,
    entities: usize,
    relations: usize,
    parked: usize,
}

/// A count over the system of record (SQLite file or PostgreSQL schema).
async fn count(mem: &Memory, sql: &str) -> i64 {
    let cfg = mem.config();
    if cfg.stores.records == strata::config::RecordsBackend::Postgres {
        let (client, conn) = tokio_postgres::connect(&cfg.postgres.url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        client.batch_execute(&format!("SET search_path TO \"{}\"", cfg.postgres.schema)).await.unwrap();
        return client.query_one(sql, &[]).await.unwrap().get(0);
    }
    let db = rusqlite::Connection::open(cfg.data_dir.join("strata.db")).unwrap();
    db.query_row(sql, [], |r| r.get(0)).unwrap()
}

async fn state(mem: &Memory) -> State {
    let r = mem.check(false).await.unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    let episode_created = count(mem, "SELECT COUNT(*) FROM outbox WHERE kind='episode_created'").await;
    State {
        sessions: r.counts.sessions,
        messages: r.counts.messages,
        episodes: r.counts.episodes,
        episode_created,
        vector_points: r.counts.vector_points,
        entities: r.counts.entities,
        relations: r.counts.relations,
        parked: mem.parked_jobs(100).await.unwrap().len(),
    }
}

/// The turn path and promotion of one session, with `point` failing once
/// where it is hit; returns the state after recovery.
async fn session_run(point: Option<&str>, postgres: bool) -> (State, bool) {
    eprintln!("fail point {point:?}, postgres: {postgres}");
    let (mut cfg, _dir) = common::config();
    if postgres {
        // the same boundaries of the PostgreSQL system of record (scripts/test.sh starts one)
        cfg.stores.records = strata::config::RecordsBackend::Postgres;
        cfg.postgres.url = std::env::var("STRATA_TEST_POSTGRES_URL").unwrap();
        cfg.postgres.schema = format!("strata_fp_{}", uuid::Uuid::new_v4().simple());
        cfg.postgres.pool_size = 4;
        // a job that failed where a crash would stop it stays claimed until its
        // lease ends (then any node retakes it): 1 s here instead of 5 min
        cfg.workers.claim_lease_ms = 1000;
    }
    let mem = common::open_without_workers(cfg).await;
    let s = scope();
    let sid = SessionId::new("s1").unwrap();
    let turns = [
        "My sister Yuna is getting married in Busan in October.",
        "Congratulations to Yuna!",
        "I will fly there from Lisbon with my friend Marco.",
        // a second name for the same friend: the dedup job has a candidate to judge
        "Marco Rossi booked our hotel near Haeundae beach.",
    ];
    if let Some(p) = point {
        fail::cfg(p, "1*return").unwrap();
    }
    let mut hit = false;
    for t in turns {
        // the caller retries a record or an end that answered an error
        let mut tries = 0;
        while let Err(e) = mem.record(&s, &sid, msg(t)).await {
            hit = true;
            tries += 1;
            assert!(tries < 3 && point == Some("store.append.before_commit"), "{e}");
            assert!(mem.session(&s, &sid).await.is_err() || mem.session(&s, &sid).await.unwrap().message_count < 4);
        }
    }
    while let Err(e) = mem.end_session(&s, &sid).await {
        hit = true;
        assert_eq!(point, Some("store.complete_session.before_commit"), "{e}");
        assert_eq!(mem.queue_depths().await.unwrap()[0].1, 0, "no job for a session that did not end");
    }
    hit |= drain(&mem).await > 0;
    if let Some(p) = point {
        fail::remove(p);
    }
    // a worker job that failed through the outbox carries the error
    hit |= count(&mem, "SELECT COUNT(*) FROM outbox WHERE last_error LIKE '%fail point%'").await > 0;
    let st = state(&mem).await;
    mem.shutdown().await.unwrap();
    (st, hit)
}

/// One test: the fail-point registry is global to the process, and tests
/// of one binary run in parallel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_points() {
    every_fail_point_recovers_to_the_state_of_a_clean_run().await;
    typed_and_erasure_fail_points_are_found_and_finished().await;
}

async fn every_fail_point_recovers_to_the_state_of_a_clean_run() {
    let postgres = std::env::var("STRATA_TEST_POSTGRES_URL").is_ok_and(|u| !u.is_empty());
    if !postgres {
        eprintln!("SKIPPED (PostgreSQL half): STRATA_TEST_POSTGRES_URL is not set");
    }
    for pg in [false, true] {
        if pg && !postgres {
            continue;
        }
        recovers_on(pg).await;
    }
}

async fn recovers_on(pg: bool) {
    let (clean, hit) = session_run(None, pg).await;
    assert!(!hit);
    assert_eq!((clean.sessions, clean.messages, clean.episodes, clean.episode_created, clean.parked), (1, 4, 1, 1, 0));
    assert!(clean.entities > 0 && clean.vector_points > 0, "{clean:?}");
    for p in [
        "store.append.before_commit",
        "store.complete_session.before_commit",
        "promotion.after_keywords",
        "promotion.before_record",
        "store.put_episode.before_commit",
        "vectors.before_finish",
        "semantic.before_finish",
        "dedup.before_finish",
    ] {
        let (got, hit) = session_run(Some(p), pg).await;
        assert!(hit, "the fail point {p} was never reached (postgres: {pg})");
        assert_eq!(got, clean, "after a failure at {p} (postgres: {pg})");
    }
}

/// A typed write that fails between its record and its index leaves a fact
/// that `check` reports and `--repair` indexes; an erasure that fails after
/// the indexes leaves the records, and running it again finishes it.
async fn typed_and_erasure_fail_points_are_found_and_finished() {
    let (cfg, _dir) = common::config();
    let mem = common::open_without_workers(cfg).await;
    let s = scope();
    fail::cfg("typed.after_record", "1*return").unwrap();
    let fact: MemoryInput = serde_json::from_value(serde_json::json!({"type": "fact", "content": "Mina is allergic to peanuts", "metadata": {"category": "health"}})).unwrap();
    assert!(mem.remember(&s, NewMemory::try_from(fact).unwrap()).await.is_err());
    fail::remove("typed.after_record");
    let r = mem.check(false).await.unwrap();
    assert_eq!(r.problems.len(), 2, "the fact is missing from both knowledge indexes: {:?}", r.problems);
    let r = mem.check(true).await.unwrap();
    assert!(r.ok() && r.repaired == 2, "{r:?}");

    let sid = SessionId::new("s1").unwrap();
    mem.record(&s, &sid, msg("My locker code at the climbing gym is 4417.")).await.unwrap();
    mem.end_session(&s, &sid).await.unwrap();
    drain(&mem).await;
    fail::cfg("erasure.after_indexes", "1*return").unwrap();
    assert!(mem.forget_user("fp").await.is_err());
    fail::remove("erasure.after_indexes");
    let r = mem.check(false).await.unwrap();
    assert!(!r.ok(), "the records outlived the indexes: check must say so");
    let report = mem.forget_user("fp").await.unwrap();
    assert!(report.records.rows.values().sum::<usize>() > 0, "{report:?}");
    let r = mem.check(false).await.unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    assert_eq!((r.counts.sessions, r.counts.episodes, r.counts.typed_memories, r.counts.entities), (0, 0, 0, 0));
    mem.shutdown().await.unwrap();
}
