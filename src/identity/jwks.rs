//! A JWKS from a URL, kept fresh: fetched again every refresh period, and early (at most once
//! per [`EARLY_REFRESH_MIN`]) when a token names a key id the set lacks — how an authorization
//! server's key rotation reaches the gateway before the next period. The fetching itself is
//! given ([`keep_fresh`]'s `fetch`), so this stays free of network code.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::jwk::JwkSet;
use tokio_util::sync::CancellationToken;

use super::Gate;

/// Shortest time between two fetches caused by unknown key ids: a client sending tokens with
/// made-up ids cannot make the gateway hammer the authorization server.
pub const EARLY_REFRESH_MIN: Duration = Duration::from_secs(30);

/// Largest JWKS document accepted.
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// A JWKS document.
///
/// # Errors
/// What is wrong with it.
pub fn parse(bytes: &[u8]) -> Result<JwkSet, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("not a JWKS: {e}"))
}

/// Refreshes `gate`'s keys with `fetch` every `period` and on unknown key ids, until
/// `shutdown`. A failed fetch keeps the keys it has (logged as a warning).
pub async fn keep_fresh<F, Fut>(gate: Gate, period: Duration, fetch: F, shutdown: CancellationToken)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<JwkSet, String>>,
{
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(last + period) => {}
            () = gate.unknown_kid().notified() => {
                let early = last + EARLY_REFRESH_MIN;
                tokio::select! {
                    () = tokio::time::sleep_until(early) => {}
                    () = shutdown.cancelled() => return,
                }
            }
            () = shutdown.cancelled() => return,
        }
        match fetch().await {
            Ok(keys) => gate.set_jwks(&Arc::new(keys)),
            Err(err) => {
                tracing::warn!(error = %err, "JWKS refresh failed; keeping the keys in use");
            }
        }
        last = tokio::time::Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn keys_are_fetched_each_period_and_early_at_most_every_thirty_seconds() {
        let gate = Gate::open();
        let fetched = Arc::new(AtomicUsize::new(0));
        let count = fetched.clone();
        let stop = CancellationToken::new();
        let task = tokio::spawn(keep_fresh(
            gate.clone(),
            Duration::from_secs(300),
            move || {
                count.fetch_add(1, Ordering::SeqCst);
                async { Ok(JwkSet { keys: vec![] }) }
            },
            stop.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(299)).await;
        assert_eq!(fetched.load(Ordering::SeqCst), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
        for _ in 0..5 {
            gate.unknown_kid().notify_one();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        // Within 30 s of the last fetch: one early fetch, at its end.
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_secs(26)).await;
        assert_eq!(fetched.load(Ordering::SeqCst), 2);
        stop.cancel();
        task.await.unwrap();
    }
}
