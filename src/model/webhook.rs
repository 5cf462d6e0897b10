//! Webhook notifications: the event types an endpoint subscribes to and the
//! JSON body a delivery posts (see `docs/webhooks.md`).
//!
//! A notification names what happened by ids, never by content: a receiver
//! that wants the summary or the memory reads it through the API with its
//! own key. One notification fans out to one outbox delivery per subscribed
//! endpoint; every delivery of it carries the same `id`, so a receiver
//! de-duplicates retries by it (delivery is at least once).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

use crate::error::{Error, Result};

/// What a notification reports. Wire names are dotted (`session.promoted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub enum WebhookEventType {
    /// A session became an episode (searchable by keyword; vectors may follow).
    #[serde(rename = "session.promoted")]
    SessionPromoted,
    /// A typed memory was created (a new row: created, or a fact superseding
    /// its key's older fact; not an entity merge or relation update).
    #[serde(rename = "memory.created")]
    MemoryCreated,
    /// The dedup worker merged two entities of a scope's graph.
    #[serde(rename = "entity.merged")]
    EntityMerged,
    /// An outbox job failed `workers.max_attempts` times and was parked
    /// (a webhook delivery's own parking is not reported, so a receiver
    /// that is down cannot feed a loop).
    #[serde(rename = "job.parked")]
    JobParked,
    /// Every record of a user was erased (`strata forget`, `DELETE /v1/users/{user_id}`).
    #[serde(rename = "user.erased")]
    UserErased,
}

impl WebhookEventType {
    /// Every type, in documentation order.
    pub const ALL: [WebhookEventType; 5] = [
        Self::SessionPromoted,
        Self::MemoryCreated,
        Self::EntityMerged,
        Self::JobParked,
        Self::UserErased,
    ];

    /// The wire name (`session.promoted`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SessionPromoted => "session.promoted",
            Self::MemoryCreated => "memory.created",
            Self::EntityMerged => "entity.merged",
            Self::JobParked => "job.parked",
            Self::UserErased => "user.erased",
        }
    }

    /// Parses a wire name.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming the known types.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|t| t.as_str()).collect();
            Error::InvalidInput(format!("unknown webhook event {s:?} (known: {})", known.join(", ")))
        })
    }
}

impl fmt::Display for WebhookEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of a webhook delivery.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WebhookEvent {
    /// `evt_` + 32 hex (a UUIDv7: time-ordered); the same for every endpoint
    /// and every retry of one notification.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: WebhookEventType,
    /// When it happened (UTC, RFC 3339).
    pub created_at: DateTime<Utc>,
    /// The user it concerns.
    pub user_id: String,
    /// The agent it concerns; absent for `user.erased` (every agent of the user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Ids of what happened, by type (`docs/webhooks.md` lists the fields).
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

impl WebhookEvent {
    /// A notification of `event_type` about `user_id` (and `agent_id`) now, with a fresh id.
    pub fn new(
        event_type: WebhookEventType,
        user_id: &str,
        agent_id: Option<&str>,
        data: serde_json::Value,
    ) -> Self {
        Self {
            id: format!("evt_{}", uuid::Uuid::now_v7().simple()),
            event_type,
            created_at: Utc::now(),
            user_id: user_id.to_string(),
            agent_id: agent_id.map(str::to_string),
            data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip_and_unknown_names_are_refused() {
        for t in WebhookEventType::ALL {
            assert_eq!(WebhookEventType::parse(t.as_str()).unwrap(), t);
            assert_eq!(serde_json::to_value(t).unwrap(), serde_json::json!(t.as_str()));
        }
        let e = WebhookEventType::parse("session.created").unwrap_err().to_string();
        assert!(e.contains("session.promoted"), "{e}");
    }

    #[test]
    fn an_erasure_has_no_agent_and_ids_differ() {
        let a = WebhookEvent::new(WebhookEventType::UserErased, "u", None, serde_json::json!({}));
        let b = WebhookEvent::new(WebhookEventType::UserErased, "u", None, serde_json::json!({}));
        assert_ne!(a.id, b.id);
        assert!(a.id.starts_with("evt_") && a.id.len() == 36, "{}", a.id);
        let v = serde_json::to_value(&a).unwrap();
        assert!(v.get("agent_id").is_none());
        assert_eq!(v["type"], "user.erased");
    }
}
