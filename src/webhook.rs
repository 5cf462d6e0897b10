//! Webhooks: which outbox deliveries a notification fans out to, how a
//! delivery is signed, and the POST itself (`docs/webhooks.md`).
//!
//! A notification becomes one [`Event::WebhookDelivery`] per subscribed
//! endpoint, written to the durable outbox (in the transaction of the
//! change it reports where the store allows: promotion and parking); the
//! webhook worker ([`crate::worker::webhooks`]) posts each and marks it done
//! on a 2xx answer, else retries it with the outbox's backoff and parks it
//! after `webhooks.max_attempts`. Nothing here runs on the request path.
//!
//! The signature follows the common "timestamp.body" scheme:
//! `X-Strata-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`.
//! A receiver recomputes it over the raw body and rejects a stale `t`
//! (5 minutes is the usual tolerance, [`DEFAULT_TOLERANCE_SECS`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::config::{WebhookEndpoint, WebhooksConfig};
use crate::error::{Error, Result};
use crate::model::webhook::{WebhookEvent, WebhookEventType};
use crate::model::Scope;
use crate::bus::Bus;
use crate::runtime::Runtime;
use crate::store::{Event, EventKind, RecordStore};

/// Header carrying `t=<unix seconds>,v1=<hex HMAC-SHA256>`.
pub const SIGNATURE_HEADER: &str = "x-strata-signature";
/// Header carrying the event type (`session.promoted`, ...).
pub const EVENT_HEADER: &str = "x-strata-event";
/// Header carrying the notification id (`evt_…`), the same on every retry.
pub const DELIVERY_HEADER: &str = "x-strata-delivery";
/// How old a signature's timestamp [`verify`] accepts by default, in
/// seconds: 300, the tolerance Stripe and Svix document for the same scheme.
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;
/// The agent id of a `user.erased` delivery's outbox row: the erasure
/// concerns every agent, and `_` keeps the row in the user's scope.
pub const ERASURE_AGENT: &str = "_";

/// What a capability keeps to write notifications after a change another
/// store committed: the outbox, the endpoints and a wake-up for the worker.
#[derive(Clone)]
pub struct Notifier {
    records: Arc<dyn RecordStore>,
    config: WebhooksConfig,
    bus: Bus,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").field("endpoints", &self.config.endpoints.len()).finish()
    }
}

impl Notifier {
    /// The runtime's outbox, `[webhooks]` and bus.
    pub fn new(rt: &Runtime) -> Self {
        Self { records: rt.records.clone(), config: rt.config.webhooks.clone(), bus: rt.bus.clone() }
    }

    /// The endpoints' config.
    pub fn config(&self) -> &WebhooksConfig {
        &self.config
    }

    /// Writes `deliveries` to the outbox (one transaction) and wakes the
    /// webhook worker; nothing when empty.
    ///
    /// # Errors
    /// Store errors.
    pub async fn send(&self, deliveries: Vec<Event>) -> Result<()> {
        if deliveries.is_empty() {
            return Ok(());
        }
        self.records.enqueue(deliveries).await?;
        self.bus.publish(EventKind::WebhookDelivery);
        Ok(())
    }
}

/// The deliveries of one notification: one per endpoint subscribed to
/// `event_type`, all with the same notification id; empty when none is.
pub fn deliveries(
    config: &WebhooksConfig,
    scope: &Scope,
    event_type: WebhookEventType,
    data: serde_json::Value,
) -> Vec<Event> {
    let agent = (event_type != WebhookEventType::UserErased).then(|| scope.agent_id());
    fan_out(config, scope, WebhookEvent::new(event_type, scope.user_id(), agent, data))
}

/// The `user.erased` deliveries for `user_id` (every agent).
///
/// # Errors
/// [`Error::InvalidInput`] for a malformed user id.
pub fn user_erased(config: &WebhooksConfig, user_id: &str) -> Result<Vec<Event>> {
    let scope = Scope::new(user_id, ERASURE_AGENT)?;
    Ok(deliveries(config, &scope, WebhookEventType::UserErased, serde_json::json!({})))
}

/// The `job.parked` deliveries for outbox job `job` parked after `attempts`
/// failed attempts with `error`; none for a webhook delivery (a receiver
/// that is down must not feed a loop of notifications about itself).
pub fn job_parked(config: &WebhooksConfig, job: &crate::store::OutboxEvent, attempts: u32, error: &str) -> Vec<Event> {
    let mut data = serde_json::json!({
        "job_id": job.id.0,
        "kind": job.event.kind().as_str(),
        "attempts": attempts,
        "error": crate::text::clip_with_ellipsis(error, 1000),
    });
    match &job.event {
        Event::WebhookDelivery { .. } => return Vec::new(),
        Event::SessionCompleted { session_id, .. } => data["session_id"] = session_id.as_str().into(),
        Event::EpisodeCreated { episode_id, .. } | Event::EpisodeVectors { episode_id, .. } => {
            data["episode_id"] = episode_id.as_str().into()
        }
        Event::EntityUpserted { entity_id, .. } => data["entity_id"] = entity_id.to_string().into(),
    }
    deliveries(config, job.event.scope(), WebhookEventType::JobParked, data)
}

fn fan_out(config: &WebhooksConfig, scope: &Scope, webhook: WebhookEvent) -> Vec<Event> {
    config
        .endpoints
        .iter()
        .filter(|e| e.wants(webhook.event_type))
        .map(|e| Event::WebhookDelivery {
            scope: scope.clone(),
            url: e.url.clone(),
            webhook: webhook.clone(),
        })
        .collect()
}

/// The `X-Strata-Signature` value of `body` posted at `timestamp` (unix seconds).
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("t={timestamp},v1={}", hex::encode(mac(secret, timestamp, body).finalize().into_bytes()))
}

/// HMAC-SHA256 under `secret` fed with `"<timestamp>.<body>"`, for signing and verifying.
fn mac(secret: &[u8], timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes a key of any length");
    m.update(timestamp.to_string().as_bytes());
    m.update(b".");
    m.update(body);
    m
}

/// Checks a `X-Strata-Signature` header against the raw `body`: a `v1`
/// entry must match (compared in constant time) and `t` must be within
/// `tolerance_secs` of `now` (unix seconds). What a receiver written in
/// Rust calls; the clients have the same helper.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: i64, tolerance_secs: i64) -> bool {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => sigs.extend(hex::decode(v).ok()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    if (now - t).abs() > tolerance_secs {
        return false;
    }
    sigs.iter().any(|s| mac(secret, t, body).verify_slice(s).is_ok())
}

/// The secret of `endpoint`, read from the environment variable it names.
///
/// # Errors
/// [`Error::Config`] when the variable is unset or empty.
pub fn secret(endpoint: &WebhookEndpoint) -> Result<String> {
    match std::env::var(&endpoint.secret_env) {
        Ok(s) if !s.is_empty() => Ok(s),
        _ => Err(Error::Config(format!(
            "webhook endpoint {}: environment variable {} (its secret_env) is not set",
            endpoint.url, endpoint.secret_env
        ))),
    }
}

/// Checks at start-up that every endpoint's secret is set, so a missing one
/// is an error now rather than parked deliveries later.
///
/// # Errors
/// [`Error::Config`] naming the first endpoint whose variable is unset.
pub fn check_secrets(config: &WebhooksConfig) -> Result<()> {
    config.endpoints.iter().try_for_each(|e| secret(e).map(|_| ()))
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            // a redirect could lead a delivery off the allowed hosts
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|e| {
                tracing::warn!(error = %e, "webhooks: default HTTP client (the configured one failed to build)");
                reqwest::Client::new()
            })
    })
}

/// Posts `webhook` to `url`, signed with the secret of the endpoint that
/// `config` lists under that URL.
///
/// # Errors
/// [`Error::Config`] when `url` is no longer a configured endpoint, its
/// host no longer allowed, or its secret unset (the delivery is parked at
/// once: retrying cannot help until the config changes);
/// [`Error::Webhook`] for a connection failure, a timeout
/// (`webhooks.timeout_ms`) or an answer outside 2xx (retried, then parked).
pub async fn deliver(config: &WebhooksConfig, url: &str, webhook: &WebhookEvent) -> Result<()> {
    let endpoint = config
        .endpoints
        .iter()
        .find(|e| e.url == url)
        .ok_or_else(|| Error::Config(format!("webhook endpoint {url} is no longer configured")))?;
    // the config was checked when it loaded, and only a listed endpoint gets here; checked
    // again so no future path can post off the allowed hosts
    let host = reqwest::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_string)).unwrap_or_default();
    if !config.host_allowed(&host) {
        return Err(Error::Config(format!("webhook host {host:?} is not allowed")));
    }
    let secret = secret(endpoint)?;
    let body = serde_json::to_vec(webhook)?;
    let now = chrono::Utc::now().timestamp();
    let answer = client()
        .post(url)
        .timeout(Duration::from_millis(config.timeout_ms))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::USER_AGENT, concat!("strata-webhooks/", env!("CARGO_PKG_VERSION")))
        .header(SIGNATURE_HEADER, sign(secret.as_bytes(), now, &body))
        .header(EVENT_HEADER, webhook.event_type.as_str())
        .header(DELIVERY_HEADER, &webhook.id)
        .body(body)
        .send()
        .await
        .map_err(|e| Error::Webhook(format!("{url}: {}", describe(&e))))?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(Error::Webhook(format!("{url} answered {status}")))
    }
}

fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(endpoints: Vec<(&str, Vec<&str>)>) -> WebhooksConfig {
        WebhooksConfig {
            endpoints: endpoints
                .into_iter()
                .map(|(url, events)| WebhookEndpoint {
                    url: url.into(),
                    secret_env: "X".into(),
                    events: events.into_iter().map(str::to_string).collect(),
                })
                .collect(),
            allowed_hosts: vec!["hooks.example.com".into()],
            timeout_ms: 1000,
            max_attempts: 3,
        }
    }

    #[test]
    fn a_notification_fans_out_to_subscribed_endpoints_with_one_id() {
        let c = cfg(vec![
            ("http://127.0.0.1:1/a", vec![]),
            ("http://127.0.0.1:1/b", vec!["memory.created"]),
            ("http://127.0.0.1:1/c", vec!["session.promoted", "job.parked"]),
        ]);
        let s = Scope::new("u", "a").unwrap();
        let d = deliveries(&c, &s, WebhookEventType::SessionPromoted, serde_json::json!({"x": 1}));
        let urls: Vec<_> = d
            .iter()
            .map(|e| match e {
                Event::WebhookDelivery { url, .. } => url.as_str(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(urls, ["http://127.0.0.1:1/a", "http://127.0.0.1:1/c"]);
        let ids: std::collections::HashSet<_> = d
            .iter()
            .map(|e| match e {
                Event::WebhookDelivery { webhook, .. } => webhook.id.clone(),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(ids.len(), 1);
        assert!(deliveries(&cfg(vec![]), &s, WebhookEventType::JobParked, serde_json::json!({})).is_empty());
        let erased = user_erased(&c, "u").unwrap();
        assert_eq!(erased.len(), 1);
        assert_eq!(erased[0].scope().agent_id(), ERASURE_AGENT);
    }

    #[test]
    fn signatures_verify_and_tampering_or_age_fails() {
        let body = br#"{"id":"evt_1"}"#;
        let h = sign(b"s3cret", 1_700_000_000, body);
        assert!(h.starts_with("t=1700000000,v1="));
        assert!(verify(b"s3cret", &h, body, 1_700_000_100, DEFAULT_TOLERANCE_SECS));
        assert!(!verify(b"s3cret", &h, br#"{"id":"evt_2"}"#, 1_700_000_100, DEFAULT_TOLERANCE_SECS));
        assert!(!verify(b"other", &h, body, 1_700_000_100, DEFAULT_TOLERANCE_SECS));
        assert!(!verify(b"s3cret", &h, body, 1_700_000_000 + 301, DEFAULT_TOLERANCE_SECS));
        assert!(!verify(b"s3cret", "v1=00", body, 1_700_000_000, DEFAULT_TOLERANCE_SECS));
        // a known vector: HMAC-SHA256("key", "1.body"), computed independently
        // with Python's hmac module
        assert_eq!(
            sign(b"key", 1, b"body"),
            format!("t=1,v1={}", "91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5")
        );
    }

    #[test]
    fn hosts_are_loopback_or_listed() {
        let c = cfg(vec![]);
        for h in ["127.0.0.1", "127.8.9.1", "localhost", "LOCALHOST", "::1", "[::1]", "hooks.example.com", "HOOKS.example.com"] {
            assert!(c.host_allowed(h), "{h}");
        }
        for h in ["10.0.0.1", "169.254.169.254", "example.com", "hooks.example.com.evil", "0.0.0.0", ""] {
            assert!(!c.host_allowed(h), "{h}");
        }
    }
}
