//! Property test: two scopes never see each other's data, over random
//! interleavings of record / end_session / search / expand / inject across
//! three scopes (two of which share a user or an agent id).

use crate::common;

use chrono::{Duration, TimeZone, Utc};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};
use strata::{NewMessage, Scope, SessionId};

#[derive(Debug, Clone)]
enum Op {
    Record {
        scope: usize,
        session: u8,
        word: usize,
    },
    End {
        scope: usize,
        session: u8,
    },
    Search {
        scope: usize,
        word: usize,
    },
}

const WORDS: &[&str] = &[
    "kayak",
    "violin",
    "Lisbon",
    "sourdough",
    "marathon",
    "Kafka",
    "orchid",
    "chess",
];

fn scopes() -> Vec<Scope> {
    vec![
        Scope::new("ann", "bot").unwrap(),
        Scope::new("ann", "other-bot").unwrap(),
        Scope::new("ben", "bot").unwrap(),
    ]
}

fn tag(s: &Scope) -> String {
    format!("owner {}-{} ", s.user_id(), s.agent_id())
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..3u8, 0..WORDS.len()).prop_map(|(scope, session, word)| Op::Record { scope, session, word }),
        2 => (0..3usize, 0..3u8).prop_map(|(scope, session)| Op::End { scope, session }),
        2 => (0..3usize, 0..WORDS.len()).prop_map(|(scope, word)| Op::Search { scope, word }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, max_shrink_iters: 20, ..ProptestConfig::default() })]
    #[test]
    fn scopes_never_leak(ops in proptest::collection::vec(op(), 5..40)) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let (cfg, _dir) = common::config();
            let mem = common::open(cfg).await;
            let scopes = scopes();
            // session names are shared across scopes on purpose: same session id, different owners
            let mut ended: HashSet<(usize, u8)> = HashSet::new();
            let mut generation: HashMap<(usize, u8), u32> = HashMap::new();
            let base = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
            for (i, op) in ops.iter().enumerate() {
                match *op {
                    Op::Record { scope, session, word } => {
                        let gen = generation.entry((scope, session)).or_default();
                        if ended.remove(&(scope, session)) { *gen += 1; }
                        let sid = SessionId::new(format!("s{session}-{gen}")).unwrap();
                        let text = format!("{}talks about {}", tag(&scopes[scope]), WORDS[word]);
                        mem.record(&scopes[scope], &sid, NewMessage::user(text, base + Duration::minutes(i as i64))).await.unwrap();
                    }
                    Op::End { scope, session } => {
                        let gen = generation.get(&(scope, session)).copied().unwrap_or(0);
                        let sid = SessionId::new(format!("s{session}-{gen}")).unwrap();
                        if mem.end_session(&scopes[scope], &sid).await.is_ok() { ended.insert((scope, session)); }
                    }
                    Op::Search { scope, word } => {
                        mem.wait_idle().await.unwrap();
                        let me = &scopes[scope];
                        let hits = mem.memory_search(me, WORDS[word], 20).await.unwrap();
                        for h in &hits {
                            let ex = mem.memory_expand(me, &h.id, true).await.unwrap();
                            for m in ex.raw.unwrap() {
                                assert!(m.message.content.starts_with(&tag(me)), "leak: {me} saw {:?}", m.message.content);
                            }
                            // the episode belongs to `me` only: other scopes cannot expand it
                            for other in scopes.iter().filter(|s| *s != me) {
                                assert!(mem.memory_expand(other, &h.id, false).await.is_err(), "{other} expanded {me}'s episode");
                            }
                        }
                        let r = mem.inject(me, &SessionId::new("probe").unwrap(), WORDS[word]).await.unwrap();
                        for e in &r.entries {
                            assert!(mem.memory_expand(me, &e.id, false).await.is_ok());
                        }
                    }
                }
            }
            // final sweep: every episode each scope can find is its own
            mem.wait_idle().await.unwrap();
            for me in &scopes {
                for w in WORDS {
                    for h in mem.memory_search(me, w, 20).await.unwrap() {
                        let ex = mem.memory_expand(me, &h.id, true).await.unwrap();
                        assert!(ex.raw.unwrap().iter().all(|m| m.message.content.starts_with(&tag(me))));
                    }
                }
            }
            mem.shutdown().await.unwrap();
        });
    }
}
