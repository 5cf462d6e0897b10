//! Idle sweeper: ends open sessions whose last message arrived (wall clock)
//! more than `sessions.idle_timeout_secs` ago, exactly as `end_session`
//! would. Wall clock, not message timestamps, so replays of old
//! conversations are not closed on arrival.

use chrono::{Duration, Utc};
use std::sync::Arc;
use tokio::sync::watch;

use crate::error::Result;
use crate::runtime::Runtime;
use crate::store::EventKind;

/// Ends every session idle at `now`; returns how many were ended.
pub async fn sweep(shared: &Runtime, now: chrono::DateTime<Utc>) -> Result<usize> {
    // one node of a cluster sweeps at a time; the others skip this round
    let Some(_lock) = shared.records.maintenance_lock("idle_sweep").await? else {
        tracing::debug!("another node is sweeping idle sessions");
        return Ok(0);
    };
    let before = now - Duration::seconds(shared.config.sessions.idle_timeout_secs as i64);
    let idle = shared.records.idle_sessions(before).await?;
    let mut n = 0;
    for (scope, session) in idle {
        if shared
            .records
            .complete_session(&scope, &session, now)
            .await?
            .is_some()
        {
            n += 1;
            tracing::info!(scope = %scope, session_id = %session, "ended idle session");
        }
    }
    if n > 0 {
        shared.bus.publish(EventKind::SessionCompleted);
    }
    Ok(n)
}

/// Sweeps every `min(idle_timeout / 4, 60 s)` until `stop` turns true.
pub async fn run(shared: Arc<Runtime>, mut stop: watch::Receiver<bool>) {
    let period =
        std::time::Duration::from_secs((shared.config.sessions.idle_timeout_secs / 4).clamp(1, 60));
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stop.changed() => {}
        }
        if *stop.borrow() {
            break;
        }
        if let Err(e) = sweep(&shared, Utc::now()).await {
            tracing::error!(error = %e, "idle sweep failed");
        }
    }
}
