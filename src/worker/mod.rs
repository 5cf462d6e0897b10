//! Background workers: each is a cancellable task that talks to the rest of
//! the system only through the bus and the stores.
//!
//! - [`episodic`]: `SessionCompleted` → summary, abstract, episode row, keyword index (and
//!   vectors unless deferred), `EpisodeCreated` (and `EpisodeVectors` when deferred).
//! - [`vectors`]: `EpisodeVectors` → the deferred vector units (in the episodic loop, when
//!   no promotion is ready).
//! - [`idle`]: ends sessions idle longer than `sessions.idle_timeout_secs`.
//! - [`pruner`]: removes expired episodes from every index on a cron schedule.
//! - [`semantic`]: `EpisodeCreated` → extracted entities and relations in the graph, `EntityUpserted`.
//! - [`dedup`]: `EntityUpserted` → candidate pairs, guards, merges (logged, undoable).

pub mod episodic;
pub mod idle;
pub mod pruner;
pub mod vectors;

pub mod dedup;
pub mod semantic;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;
use tokio::sync::watch;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::store::{EventKind, OutboxEvent};

/// The event kinds the workers consume under `config`: promotion, the
/// deferred vectors and webhook deliveries always, extraction and dedup
/// with `graph.enabled`.
pub fn kinds(config: &Config) -> Vec<EventKind> {
    let mut k = vec![EventKind::SessionCompleted, EventKind::EpisodeVectors, EventKind::WebhookDelivery];
    if config.graph.enabled {
        k.extend([EventKind::EpisodeCreated, EventKind::EntityUpserted]);
    }
    k
}

/// Starts every worker's loop on the runtime (extraction and dedup only
/// with `graph.enabled`) and wakes each one once, so whatever a previous
/// process left pending is replayed. The loops end when `stop` turns true.
pub fn start(rt: &Arc<Runtime>, stop: &watch::Receiver<bool>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(run_promotion(rt.clone(), rt.bus.subscribe(EventKind::SessionCompleted), stop.clone())),
        tokio::spawn(idle::run(rt.clone(), stop.clone())),
        // always: deliveries a previous config left are posted or parked
        tokio::spawn(webhooks::run(rt.clone(), rt.bus.subscribe(EventKind::WebhookDelivery), stop.clone())),
    ];
    if rt.config.graph.enabled {
        tasks.push(tokio::spawn(semantic::run(rt.clone(), rt.bus.subscribe(EventKind::EpisodeCreated), stop.clone())));
        tasks.push(tokio::spawn(dedup::run(rt.clone(), rt.bus.subscribe(EventKind::EntityUpserted), stop.clone())));
    }
    for kind in [EventKind::SessionCompleted, EventKind::EpisodeCreated, EventKind::EntityUpserted, EventKind::WebhookDelivery] {
        rt.bus.publish(kind);
    }
    tasks
}

/// The episodic worker's loop until stopped (see `serve`): promotion, taking the deferred embeddings
/// ([`vectors`]) whenever no promotion is ready; whenever the outbox
/// runs dry it lets the vector index optimise (a no-op until `OPTIMIZE_AFTER_POINTS`, 5,000,
/// unindexed points; at start that includes the points a restart found unindexed).
pub async fn run_promotion(shared: Arc<Runtime>, wake: flume::Receiver<()>, stop: watch::Receiver<bool>) {
    serve(
        shared,
        &[EventKind::SessionCompleted, EventKind::EpisodeVectors],
        wake,
        stop,
        |s| async move {
            let mut n = episodic::drain(&s).await;
            if matches!(n, Ok(0)) {
                // deferred embeddings only when no promotion is ready
                n = vectors::drain(&s).await;
            }
            if !matches!(n, Ok(k) if k > 0) {
                if let Err(e) = s.vectors.optimize().await {
                    tracing::warn!(error = %e, "vector index optimisation failed");
                }
            }
            n
        },
    )
    .await
}

/// Polls (every 20 ms, waking the workers) until no event of `kinds` is
/// pending: done or parked.
///
/// # Errors
/// Store errors.
pub async fn wait_for(rt: &Runtime, kinds: &[EventKind]) -> Result<()> {
    loop {
        if rt.records.count_pending(kinds).await? == 0 {
            return Ok(());
        }
        for k in kinds {
            rt.bus.publish(*k);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Runs every worker's job inline until no event is pending (or only events
/// in backoff remain). Returns how many events were taken.
///
/// # Errors
/// Store errors (a failing job is retried and parked, not an error).
pub async fn run_pending(rt: &Runtime) -> Result<usize> {
    run_pending_until(rt, None).await
}

/// [`run_pending`], stopping after the batches in hand once `deadline` is
/// past (`None`: until nothing is pending); what is left stays in the outbox.
///
/// # Errors
/// Store errors.
pub async fn run_pending_until(rt: &Runtime, deadline: Option<std::time::Instant>) -> Result<usize> {
    let mut total = 0;
    loop {
        if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
            return Ok(total);
        }
        let mut n = episodic::drain(rt).await?;
        n += vectors::drain(rt).await?;
        if rt.config.graph.enabled {
            n += semantic::drain(rt).await?;
            n += dedup::drain(rt).await?;
        }
        n += webhooks::drain(rt).await?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
    }
}

/// After how many failed attempts a job that failed with `e` is parked:
/// never when a server it needs cannot be reached ([`Error::Unavailable`]:
/// the job waits in the outbox, retried with the usual backoff capped at
/// 60 s, and resumes when the server is back), else `max_attempts`.
pub(crate) fn park_after(e: &Error, max_attempts: u32) -> u32 {
    if matches!(e, Error::Unavailable { .. }) {
        // the store compares it as a 32-bit signed integer
        i32::MAX as u32
    } else {
        max_attempts
    }
}

/// Records a failed attempt of `job` (retried with backoff, parked after
/// `park_after` attempts; [`crate::store::RecordStore::fail_event`]),
/// writing the `job.parked` webhook deliveries in the same transaction when
/// it parks. Returns whether it was parked.
///
/// # Errors
/// Store errors.
pub(crate) async fn fail(rt: &Runtime, job: &OutboxEvent, error: &Error, park_after: u32) -> Result<bool> {
    let message = error.to_string();
    let on_park = crate::webhook::job_parked(&rt.config.webhooks, job, job.attempts + 1, &message);
    let announce = !on_park.is_empty();
    let parked = rt.records.fail_event(job.id, &message, park_after, on_park).await?;
    if parked && announce {
        rt.bus.publish(EventKind::WebhookDelivery);
    }
    Ok(parked)
}

/// Takes one batch of `kind` events and runs `process` on each; a failure
/// is retried with backoff and parked after `workers.max_attempts`. Returns
/// how many events it took.
pub(crate) async fn drain_each(
    shared: &Runtime,
    kind: EventKind,
    what: &'static str,
    process: for<'a> fn(
        &'a Runtime,
        &'a crate::store::OutboxEvent,
    ) -> futures::future::BoxFuture<'a, Result<()>>,
) -> Result<usize> {
    let events = shared
        .records
        .pending_events(&[kind], shared.config.workers.batch_size)
        .await?;
    let n = events.len();
    for ev in events {
        if let Err(e) = process(shared, &ev).await {
            tracing::warn!(event_id = %ev.id, attempts = ev.attempts + 1, error = %e, job = what, "job failed");
            fail(shared, &ev, &e, park_after(&e, shared.config.workers.max_attempts)).await?;
        }
    }
    Ok(n)
}

/// The loop of an outbox consumer of `kinds`: drain while there is work,
/// then sleep until a bus wake-up, a stop, or (while events of `kinds` wait
/// in backoff or under another node's lease) 250 ms, else `workers.idle_poll_ms`.
/// On stop it finishes what can be processed now, for at most
/// `workers.shutdown_grace_ms` (then the batch in hand), and returns; events
/// left, or still waiting out a backoff, stay in the outbox and run on the
/// next open, so neither a failing endpoint nor a long queue holds up a
/// shutdown.
pub(crate) async fn serve<F, Fut>(
    shared: Arc<Runtime>,
    kinds: &'static [EventKind],
    wake: flume::Receiver<()>,
    mut stop: watch::Receiver<bool>,
    drain: F,
) where
    F: Fn(Arc<Runtime>) -> Fut,
    Fut: Future<Output = Result<usize>>,
{
    // when the stop was first seen: queued jobs are taken for `workers.shutdown_grace_ms` more
    let mut stopping: Option<std::time::Instant> = None;
    let grace = std::time::Duration::from_millis(shared.config.workers.shutdown_grace_ms);
    loop {
        let result = drain(shared.clone()).await;
        if *stop.borrow() && stopping.is_none() {
            stopping = Some(std::time::Instant::now());
        }
        let in_grace = stopping.is_none_or(|t| t.elapsed() < grace);
        match result {
            Ok(n) if n > 0 && in_grace => continue,
            Ok(n) if n > 0 => {
                tracing::info!(kind = kinds[0].as_str(), "shutdown grace over: queued jobs stay in the outbox");
                break;
            }
            Ok(_) => {}
            Err(e) => tracing::error!(kind = kinds[0].as_str(), error = %e, "worker batch failed"),
        }
        if *stop.borrow() {
            break;
        }
        let pending = shared.records.count_pending(kinds).await.unwrap_or(0) > 0;
        let wait = if pending {
            std::time::Duration::from_millis(250)
        } else {
            std::time::Duration::from_millis(shared.config.workers.idle_poll_ms.max(1))
        };
        tokio::select! {
            _ = wake.recv_async() => {}
            _ = stop.changed() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
    tracing::debug!(kind = kinds[0].as_str(), "worker stopped");
}
