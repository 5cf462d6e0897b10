//! API keys: who may call the service, and over which scopes.
//!
//! A key is a bearer secret shown once at creation; only its SHA-256 is
//! stored. Each key is bound to one user and either one agent of that user,
//! all of that user's agents, or (admin keys) everything, including the
//! operator routes (erasure, parked jobs, usage, reload).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Scope;

/// What a key may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KeyGrant {
    /// Every scope and the operator routes.
    Admin,
    /// Every agent of one user.
    User {
        /// The end user.
        user_id: String,
    },
    /// One (user, agent) scope.
    Agent {
        /// The end user.
        user_id: String,
        /// The agent.
        agent_id: String,
    },
}

impl KeyGrant {
    /// True when a request on `scope` is covered.
    pub fn allows(&self, scope: &Scope) -> bool {
        self.allows_parts(scope.user_id(), Some(scope.agent_id()))
    }

    /// True when a request on `user_id` (and `agent_id`, when the route names
    /// one) is covered. A user-level route (`agent_id = None`) needs a user
    /// or admin grant.
    pub fn allows_parts(&self, user_id: &str, agent_id: Option<&str>) -> bool {
        match self {
            KeyGrant::Admin => true,
            KeyGrant::User { user_id: u } => u == user_id,
            KeyGrant::Agent {
                user_id: u,
                agent_id: a,
            } => u == user_id && agent_id.is_some_and(|x| x == a),
        }
    }

    /// True for admin keys.
    pub fn is_admin(&self) -> bool {
        matches!(self, KeyGrant::Admin)
    }
}

/// A stored API key (never the secret: only its SHA-256 is kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ApiKey {
    /// Public identifier (`key_` + 16 hex digits), shown by `strata keys list`
    /// and taken by `strata keys revoke`.
    pub id: String,
    /// What the key may reach.
    pub grant: KeyGrant,
    /// Free-text label given at creation.
    pub label: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; a revoked key authenticates nothing.
    pub revoked_at: Option<DateTime<Utc>>,
}
