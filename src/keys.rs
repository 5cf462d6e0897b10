//! API keys of the HTTP and MCP server: creation, authentication, revocation.
//!
//! A secret is `sk_strata_` followed by 64 hex digits: 256 bits from
//! `rand::rng()` (ChaCha12, a CSPRNG seeded from the operating system). Only its
//! SHA-256 is stored (the `api_keys` table); the secret is shown once, by
//! whoever created it, and appears in no log. With 256 random bits a plain
//! (unsalted, fast) hash is enough: there is nothing to guess by brute force.
//! Lookup is by hash, so no secret is ever compared byte by byte.
//!
//! These functions take the system of record alone, so `strata keys` works
//! beside a running server (SQLite in WAL mode takes both processes).

use chrono::Utc;
use rand::RngCore as _;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::model::{ApiKey, KeyGrant, Scope};
use crate::store::RecordStore;

/// Prefix of every secret, so a leaked one is recognisable by secret scanners.
pub const SECRET_PREFIX: &str = "sk_strata_";

/// Longest label accepted, in bytes.
pub const MAX_LABEL_BYTES: usize = 200;

/// SHA-256 of a secret, lowercase hex (what the store keeps).
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Creates a key for `grant` and returns its record and its secret (shown
/// once; only the hash is stored).
///
/// # Errors
/// [`Error::InvalidInput`] for a grant naming an invalid user or agent id,
/// or a label over [`MAX_LABEL_BYTES`] bytes or with control characters.
pub async fn create(
    records: &dyn RecordStore,
    grant: KeyGrant,
    label: &str,
) -> Result<(ApiKey, String)> {
    match &grant {
        KeyGrant::Admin => {}
        KeyGrant::User { user_id } => {
            Scope::new(user_id.clone(), "_")?;
        }
        KeyGrant::Agent { user_id, agent_id } => {
            Scope::new(user_id.clone(), agent_id.clone())?;
        }
    }
    if label.len() > MAX_LABEL_BYTES || label.chars().any(char::is_control) {
        return Err(Error::InvalidInput(format!(
            "key label must be at most {MAX_LABEL_BYTES} bytes without control characters"
        )));
    }
    let mut secret_bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut secret_bytes);
    let secret = format!("{SECRET_PREFIX}{}", hex::encode(secret_bytes));
    let mut id_bytes = [0u8; 8];
    rand::rng().fill_bytes(&mut id_bytes);
    let key = ApiKey {
        id: format!("key_{}", hex::encode(id_bytes)),
        grant,
        label: label.to_string(),
        created_at: Utc::now(),
        revoked_at: None,
    };
    records.put_api_key(&key, &secret_hash(&secret)).await?;
    tracing::info!(key_id = %key.id, admin = key.grant.is_admin(), "api key created");
    Ok((key, secret))
}

/// The live key a bearer secret belongs to.
///
/// # Errors
/// [`Error::Unauthenticated`] for a malformed, unknown or revoked secret
/// (one message for all three, so a caller learns nothing about which).
pub async fn authenticate(records: &dyn RecordStore, secret: &str) -> Result<ApiKey> {
    let bad = || Error::Unauthenticated("unknown, malformed or revoked API key".into());
    let hex_part = secret.strip_prefix(SECRET_PREFIX).ok_or_else(bad)?;
    if hex_part.len() != 64 || !hex_part.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    match records.api_key_by_hash(&secret_hash(secret)).await? {
        Some(k) if k.revoked_at.is_none() => Ok(k),
        _ => Err(bad()),
    }
}

/// Revokes a key by id (idempotent).
///
/// # Errors
/// [`Error::NotFound`] for an unknown id.
pub async fn revoke(records: &dyn RecordStore, id: &str) -> Result<ApiKey> {
    let k = records.revoke_api_key(id, Utc::now()).await?;
    tracing::info!(key_id = %k.id, "api key revoked");
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sqlite::SqliteStore;

    #[tokio::test]
    async fn create_authenticate_revoke() {
        let db = SqliteStore::open_in_memory().unwrap();
        assert!(!db.api_keys_created().await.unwrap());
        let (k, secret) = create(
            &db,
            KeyGrant::Agent {
                user_id: "alice".into(),
                agent_id: "bot".into(),
            },
            "test",
        )
        .await
        .unwrap();
        assert!(secret.starts_with(SECRET_PREFIX) && secret.len() == SECRET_PREFIX.len() + 64);
        assert!(db.api_keys_created().await.unwrap());
        assert_eq!(authenticate(&db, &secret).await.unwrap().id, k.id);
        // the secret is nowhere in the store: only its hash
        let stored: Vec<String> = db
            .with_conn(|c| {
                let mut st = c.prepare("SELECT secret_sha256 || id || label FROM api_keys")?;
                let r = st
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<_>>()?;
                Ok(r)
            })
            .unwrap();
        assert!(stored
            .iter()
            .all(|row| !row.contains(&secret[SECRET_PREFIX.len()..])));
        let mut wrong = secret.clone();
        wrong.replace_range(
            wrong.len() - 1..,
            if secret.ends_with('0') { "1" } else { "0" },
        );
        assert!(matches!(
            authenticate(&db, &wrong).await,
            Err(Error::Unauthenticated(_))
        ));
        assert!(matches!(
            authenticate(&db, "Bearer x").await,
            Err(Error::Unauthenticated(_))
        ));
        revoke(&db, &k.id).await.unwrap();
        assert!(matches!(
            authenticate(&db, &secret).await,
            Err(Error::Unauthenticated(_))
        ));
        assert!(
            db.api_keys_created().await.unwrap(),
            "revoked keys still count"
        );
        assert!(matches!(
            revoke(&db, "key_nope").await,
            Err(Error::NotFound(_))
        ));
        assert!(create(
            &db,
            KeyGrant::User {
                user_id: " x".into()
            },
            ""
        )
        .await
        .is_err());
    }

    #[test]
    fn grants_cover_only_their_scopes() {
        let s = |u: &str, a: &str| Scope::new(u, a).unwrap();
        let agent = KeyGrant::Agent {
            user_id: "alice".into(),
            agent_id: "bot".into(),
        };
        assert!(agent.allows(&s("alice", "bot")));
        assert!(!agent.allows(&s("alice", "other")));
        assert!(!agent.allows(&s("bob", "bot")));
        assert!(
            !agent.allows_parts("alice", None),
            "user-level routes need a user key"
        );
        let user = KeyGrant::User {
            user_id: "alice".into(),
        };
        assert!(user.allows(&s("alice", "other")) && !user.allows(&s("alicia", "bot")));
        assert!(KeyGrant::Admin.allows(&s("anyone", "any")));
    }
}
