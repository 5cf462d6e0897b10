//! Webhook worker: `WebhookDelivery` → a signed POST to the endpoint
//! ([`crate::webhook::deliver`]). A 2xx answer marks the delivery done;
//! anything else is retried with the outbox's backoff and parked after
//! `webhooks.max_attempts` (at once when the endpoint is no longer
//! configured or its secret is unset: only a config change can help).
//! Its own loop, so a slow receiver never holds up promotion.

use std::sync::Arc;

use futures::StreamExt;

use crate::error::{Error, Result};
use crate::runtime::Runtime;
use crate::store::{Event, EventKind, OutboxEvent};

/// Deliveries posted at once (each waits at most `webhooks.timeout_ms`).
pub const CONCURRENCY: usize = 4;

/// Runs until stopped.
pub async fn run(
    shared: Arc<Runtime>,
    wake: flume::Receiver<()>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    super::serve(
        shared,
        &[EventKind::WebhookDelivery],
        wake,
        stop,
        |s| async move { drain(&s).await },
    )
    .await
}

/// Posts one batch of due deliveries, [`CONCURRENCY`] at a time; returns
/// how many it took.
///
/// # Errors
/// Store errors (a failed delivery is retried or parked, not an error).
pub async fn drain(shared: &Runtime) -> Result<usize> {
    let events = shared
        .records
        .pending_events(&[EventKind::WebhookDelivery], shared.config.workers.batch_size)
        .await?;
    let n = events.len();
    let results: Vec<Result<()>> = futures::stream::iter(events)
        .map(|ev| async move { process(shared, &ev).await })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>>>()?;
    Ok(n)
}

async fn process(shared: &Runtime, ev: &OutboxEvent) -> Result<()> {
    let Event::WebhookDelivery { url, webhook, .. } = &ev.event else {
        return shared.records.finish_event(ev.id, vec![]).await;
    };
    let cfg = &shared.config.webhooks;
    match crate::webhook::deliver(cfg, url, webhook).await {
        Ok(()) => {
            metrics::counter!("strata_webhook_deliveries_total", "outcome" => "delivered").increment(1);
            tracing::debug!(event_id = %ev.id, webhook_id = %webhook.id, url = %url, "webhook delivered");
            shared.records.finish_event(ev.id, vec![]).await
        }
        Err(e) => {
            let park_after = match e {
                Error::Config(_) => 1,
                _ => cfg.max_attempts,
            };
            let parked = ev.attempts + 1 >= park_after;
            metrics::counter!("strata_webhook_deliveries_total", "outcome" => if parked { "parked" } else { "failed" })
                .increment(1);
            tracing::warn!(event_id = %ev.id, webhook_id = %webhook.id, url = %url, attempts = ev.attempts + 1, error = %e, "webhook delivery failed");
            // a delivery's own parking is not announced (job.parked): a receiver
            // that is down would feed a loop
            shared.records.fail_event(ev.id, &e.to_string(), park_after, vec![]).await.map(|_| ())
        }
    }
}
