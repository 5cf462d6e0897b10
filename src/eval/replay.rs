//! Replays a LoCoMo conversation into its own scope (`user` = the sample
//! id, `agent` = "locomo"): every turn recorded with its speaker, every
//! session ended, promotion waited for. Shared by `strata eval locomo` and
//! `strata eval graph`.

use chrono::Duration;
use std::time::Instant;

use super::locomo::LocomoConversation;
use crate::error::Result;
use crate::model::{NewMessage, Role, Scope, SessionId};
use crate::Memory;

/// Replays one conversation; returns inject latencies in ms and the number
/// of blank turns skipped (empty, whitespace-only or invisible-only text,
/// which `record` refuses: [`crate::model::is_blank`]).
pub async fn replay(mem: &Memory, conv: &LocomoConversation, measure_inject: bool) -> Result<(Vec<f64>, usize)> {
    let scope = Scope::new(conv.sample_id.clone(), "locomo")?;
    let mut lat = Vec::new();
    let mut blank = 0;
    for s in &conv.sessions {
        let sid = SessionId::new(format!("session_{}", s.index))?;
        for (i, t) in s.turns.iter().enumerate() {
            if crate::model::is_blank(&t.text) {
                blank += 1;
                continue;
            }
            // both LoCoMo speakers are people talking about their own lives: both are
            // users (named), none is an assistant
            let role = Role::User;
            if measure_inject {
                let start = Instant::now();
                mem.inject(&scope, &sid, &t.text).await?;
                lat.push(start.elapsed().as_secs_f64() * 1000.0);
            }
            let msg = NewMessage {
                role,
                name: Some(t.speaker.clone()),
                content: t.text.clone(),
                timestamp: s.date + Duration::seconds(i as i64),
                idempotency_key: None,
            };
            mem.record(&scope, &sid, msg).await?;
        }
        if mem.session(&scope, &sid).await.is_ok() {
            mem.end_session(&scope, &sid).await?;
        }
        if measure_inject {
            // promotion finishes before the next session, so inject latency measures the
            // request path, not a 2-core machine busy embedding the previous session
            mem.wait_idle().await?;
        }
    }
    mem.wait_idle().await?;
    Ok((lat, blank))
}
