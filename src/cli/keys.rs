//! `strata keys`: API keys, on the system of record alone (works beside a running server).

use super::{print_json, KeysCommand};
use std::process::ExitCode;

use crate::config::Config;
use crate::error::{Error, Result};

/// `strata keys`: create, list, revoke and rotate API keys in the system of record.
pub(super) async fn keys_command(config: Config, action: KeysCommand) -> Result<ExitCode> {
    use crate::model::KeyGrant;
    // the system of record alone: works beside a running server
    config.validate()?;
    let db = crate::store::factory::open_stores(&config, false).await?.records;
    match action {
        KeysCommand::Create {
            user,
            agent,
            admin,
            label,
            json,
        } => {
            let grant = match (admin, user, agent) {
                (true, _, _) => KeyGrant::Admin,
                (false, Some(user_id), Some(agent_id)) => KeyGrant::Agent { user_id, agent_id },
                (false, Some(user_id), None) => KeyGrant::User { user_id },
                (false, None, _) => {
                    return Err(Error::InvalidInput(
                        "give --user U (and --agent A) or --admin".into(),
                    ))
                }
            };
            let (key, secret) = crate::keys::create(db.as_ref(), grant, &label).await?;
            if json {
                print_json(&serde_json::json!({ "key": key, "secret": secret }))?;
            } else {
                println!("{secret}");
                eprintln!(
                    "created {} ({}); the secret above is shown once: store it now",
                    key.id,
                    describe_grant(&key.grant)
                );
            }
        }
        KeysCommand::List { json } => {
            let keys = db.api_keys().await?;
            if json {
                print_json(&keys)?;
            } else if keys.is_empty() {
                println!("no API keys: `strata serve` runs open on loopback only");
            } else {
                for k in keys {
                    let state = k
                        .revoked_at
                        .map(|t| format!("revoked {}", t.format("%Y-%m-%d %H:%M")))
                        .unwrap_or_else(|| "active".into());
                    println!(
                        "{}  {:<32}  {}  created {}  {}",
                        k.id,
                        describe_grant(&k.grant),
                        state,
                        k.created_at.format("%Y-%m-%d %H:%M"),
                        k.label
                    );
                }
            }
        }
        KeysCommand::Revoke { id } => {
            let k = crate::keys::revoke(db.as_ref(), &id).await?;
            println!("revoked {} ({})", k.id, describe_grant(&k.grant));
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_grant(g: &crate::model::KeyGrant) -> String {
    use crate::model::KeyGrant;
    match g {
        KeyGrant::Admin => "admin".into(),
        KeyGrant::User { user_id } => format!("user {user_id}, every agent"),
        KeyGrant::Agent { user_id, agent_id } => format!("user {user_id}, agent {agent_id}"),
    }
}
