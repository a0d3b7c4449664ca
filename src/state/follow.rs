//! The subscription that hears what other replicas tell this one through the store
//! (feature `redis`): revocations, promotions and notes, whose keys, channels and shapes are
//! [`super::relay`]'s.

use super::relay::{
    Note, Promotion, Revocation, promotions_channel, replica_channel, revoked_channel, revoked_key,
};

/// Follows the revocations and this replica's channel until `shutdown`, subscribing again
/// after every loss (each time, the whole revocation set is read first, and what this replica
/// knows and the set lacks, such as after the store restarted empty, is put back).
pub(super) async fn follow(
    conn: super::conn::Conn,
    prefix: String,
    replica: String,
    to: super::Relayed,
    shutdown: tokio_util::sync::CancellationToken,
) {
    use futures::StreamExt;
    let (revocations, own) = (revoked_channel(&prefix), replica_channel(&prefix, &replica));
    let promotions = promotions_channel(&prefix);
    let client = conn.client();
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&[&revocations, &own, &promotions]).await?;
            // Revocations published before the subscription: the set holds them.
            let mut conn = client.get_multiplexed_async_connection().await?;
            let all: Vec<(String, f64)> = redis::cmd("ZRANGE")
                .arg(revoked_key(&prefix))
                .arg(-i64::try_from(super::MAX_REVOCATIONS).unwrap_or(i64::MAX))
                .arg(-1)
                .arg("WITHSCORES")
                .query_async(&mut conn)
                .await?;
            Ok::<_, redis::RedisError>((pubsub, all))
        };
        let bound = super::CONNECT_TIMEOUT;
        match tokio::time::timeout(bound, subscribed).await {
            Ok(Ok((pubsub, all))) => {
                let mut stored = std::collections::HashSet::new();
                for (sid, exp) in all {
                    // Whole seconds (the scores are `exp` values).
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    let exp = exp as u64;
                    stored.insert(sid.clone());
                    to.revocations.heard(Revocation { sid, exp });
                }
                put_back(&conn, &prefix, &to.revocations, &stored).await;
                let mut messages = pubsub.into_on_message();
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        msg = messages.next() => {
                            let Some(msg) = msg else { break };
                            let Ok(payload) = msg.get_payload::<String>() else { continue };
                            if msg.get_channel_name() == revocations {
                                if let Some(revoked) = Revocation::parse(&payload) {
                                    to.revocations.heard(revoked);
                                }
                            } else if msg.get_channel_name() == promotions {
                                if let Some(promotion) = Promotion::parse(&payload) {
                                    let _ = to.promotions.send(promotion);
                                }
                            } else {
                                match serde_json::from_str(&payload) {
                                    Ok(Note::Resumed(outcome)) => to.resumed(outcome),
                                    Ok(note) => {
                                        let _ = to.notes.send(note);
                                    }
                                    Err(e) => tracing::debug!(error = %e, "Unreadable note from another replica"),
                                }
                            }
                        }
                    }
                }
                tracing::debug!("State store subscription lost; subscribing again");
            }
            Ok(Err(e)) => tracing::debug!(error = %e, "State store subscription failed"),
            Err(_) => tracing::debug!("State store subscription timed out"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(super::PROBE_EVERY) => {}
        }
    }
}

/// Puts back in the store the revocations this replica knows and `stored` (the store's set)
/// lacks; those it does not take are sent again by the heartbeat.
async fn put_back(
    conn: &super::conn::Conn,
    prefix: &str,
    revocations: &super::Revocations,
    stored: &std::collections::HashSet<String>,
) {
    let missing = revocations.missing_from(stored);
    if missing.is_empty() {
        return;
    }
    let sent = tokio::time::timeout(super::CONNECT_TIMEOUT, conn.revoke(prefix, &missing)).await;
    match sent {
        Ok(Ok(added)) => tracing::info!(
            revocations = added,
            "Revocations the state store lacked (restarted empty?) were put back"
        ),
        _ => revocations.unsent(missing),
    }
}
