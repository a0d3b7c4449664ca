//! The store's connection (feature `redis`): one multiplexed [`ConnectionManager`] (no pool:
//! every call's one round trip shares it), connected lazily and again after a failure, and the
//! scripts sent by `EVALSHA` (loaded once, loaded again on `NOSCRIPT`).

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Script};

use super::gcra::{self, Check};
use super::{relay, results, usage};
use crate::plan::UsageCounts;
use crate::policy::state::RedisState;

/// A connection to the store and its scripts.
#[derive(Clone)]
pub(crate) struct Conn {
    client: Client,
    manager: ConnectionManager,
    gcra: Script,
    repay: Script,
    heartbeat: Script,
    usage: Script,
    revoke: Script,
    forward: Script,
    promote: Script,
    keep_result: Script,
    kept_result: Script,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the URL: it may carry a password.
        f.debug_struct("Conn").finish_non_exhaustive()
    }
}

/// The client of `url`: with `settings`' CA and client certificate when it names them.
fn client(url: &str, settings: &RedisState) -> Result<Client, String> {
    let invalid = |e: redis::RedisError| format!("invalid store URL: {:?}", e.kind());
    if settings.ca_file.is_none() && settings.client_cert.is_none() {
        return Client::open(url).map_err(invalid);
    }
    #[cfg(feature = "tls")]
    {
        let read = crate::policy::http::read;
        let root_cert = settings.ca_file.as_deref().map(read).transpose()?;
        let client_tls = match &settings.client_cert {
            Some((cert, key)) => Some(redis::ClientTlsConfig {
                client_cert: read(cert)?,
                client_key: read(key)?,
            }),
            None => None,
        };
        let certificates = redis::TlsCertificates {
            client_tls,
            root_cert,
        };
        Client::build_with_tls(url, certificates).map_err(|e| format!("store TLS: {e}"))
    }
    #[cfg(not(feature = "tls"))]
    Err("[state] ca_file and client certificates need the `tls` feature".to_owned())
}

impl Conn {
    /// A connection to `url`, made on first use; `timeout` bounds each attempt to connect (a
    /// call waits for it no longer than its own `timeout_ms`: the heartbeat does).
    pub(crate) fn lazy(
        url: &str,
        settings: &RedisState,
        timeout: std::time::Duration,
    ) -> Result<Self, String> {
        let client = client(url, settings)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            // One attempt per request: the heartbeat, not a call, waits for the store to be back.
            .set_number_of_retries(0);
        let manager = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| format!("store connection: {e}"))?;
        Ok(Self {
            client,
            manager,
            gcra: Script::new(gcra::SCRIPT),
            repay: Script::new(gcra::REPAY),
            heartbeat: Script::new(gcra::HEARTBEAT),
            usage: Script::new(usage::SCRIPT),
            revoke: Script::new(relay::REVOKE),
            forward: Script::new(relay::FORWARD),
            promote: Script::new(relay::PROMOTE),
            keep_result: Script::new(results::PUT),
            kept_result: Script::new(results::GET),
        })
    }

    /// Runs the rate script over `checks`, spending nothing past `deadline_us` (the server's
    /// clock; 0: none): its raw answer.
    pub(crate) async fn spend(
        &self,
        checks: &[Check],
        deadline_us: u64,
    ) -> redis::RedisResult<Vec<i64>> {
        let mut invocation = self.gcra.prepare_invoke();
        for check in checks {
            invocation
                .key(&check.key)
                .arg(check.interval_us)
                .arg(check.burst);
        }
        invocation.arg(deadline_us);
        let mut manager = self.manager.clone();
        invocation.invoke_async(&mut manager).await
    }

    /// Beats for replica `id` (counted for `ttl_ms` after): how many replicas count.
    pub(crate) async fn beat(&self, key: &str, id: &str, ttl_ms: u64) -> redis::RedisResult<u64> {
        let mut manager = self.manager.clone();
        self.heartbeat
            .key(key)
            .arg(id)
            .arg(ttl_ms)
            .invoke_async(&mut manager)
            .await
    }

    /// Runs the usage script: adds `adds`, seeds `seeds`, and answers the epoch, the
    /// milliseconds until the next, and the learned counts' fields.
    pub(crate) async fn learn_usage(
        &self,
        prefix: &str,
        period_ms: u64,
        adds: &UsageCounts,
        seeds: &UsageCounts,
    ) -> redis::RedisResult<(i64, i64, Vec<String>)> {
        let mut invocation = self.usage.prepare_invoke();
        for key in usage::keys(prefix) {
            invocation.key(key);
        }
        invocation.arg(period_ms).arg(adds.len());
        for (id, n) in adds.iter().chain(seeds) {
            invocation.arg(id).arg(n);
        }
        let mut manager = self.manager.clone();
        invocation.invoke_async(&mut manager).await
    }

    /// The client, for the subscription's own connection.
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Runs the revocation script over `revocations` (in chunks): how many were new to the
    /// store (each published).
    pub(crate) async fn revoke(
        &self,
        prefix: &str,
        revocations: &[relay::Revocation],
    ) -> redis::RedisResult<u64> {
        let mut manager = self.manager.clone();
        let mut added = 0;
        for chunk in revocations.chunks(relay::REVOKE_CHUNK) {
            let mut invocation = self.revoke.prepare_invoke();
            invocation
                .key(relay::revoked_key(prefix))
                .arg(relay::revoked_channel(prefix));
            for r in chunk {
                invocation.arg(&r.sid).arg(r.exp);
            }
            added += invocation.invoke_async::<u64>(&mut manager).await?;
        }
        Ok(added)
    }

    /// Runs the paying-back script over `debts` (keys of one hash tag): each key's TAT ahead of
    /// now afterwards.
    pub(crate) async fn repay(&self, debts: &[gcra::Debt]) -> redis::RedisResult<Vec<i64>> {
        let mut invocation = self.repay.prepare_invoke();
        for debt in debts {
            invocation
                .key(&debt.key)
                .arg(debt.interval_us)
                .arg(debt.burst)
                .arg(debt.calls)
                .arg(debt.since_us)
                .arg(debt.paced_us);
        }
        let mut manager = self.manager.clone();
        invocation.invoke_async(&mut manager).await
    }

    /// Runs the forwarding script: -1 when `owner`'s heartbeat is older than `ttl_ms`, else
    /// how many listened on its channel.
    pub(crate) async fn forward(
        &self,
        prefix: &str,
        owner: &str,
        ttl_ms: u64,
        payload: &str,
    ) -> redis::RedisResult<i64> {
        let mut manager = self.manager.clone();
        self.forward
            .key(gcra::replicas_key(prefix))
            .arg(owner)
            .arg(ttl_ms)
            .arg(relay::replica_channel(prefix, owner))
            .arg(payload)
            .invoke_async(&mut manager)
            .await
    }

    /// Runs the promotion script: whether `name` was new to session `sid`'s list.
    pub(crate) async fn promote(
        &self,
        prefix: &str,
        sid: &str,
        name: &str,
        ttl_ms: u64,
    ) -> redis::RedisResult<bool> {
        let mut manager = self.manager.clone();
        self.promote
            .key(relay::promoted_key(prefix, sid))
            .arg(name)
            .arg(ttl_ms)
            .arg(relay::promotions_channel(prefix))
            .arg(sid)
            .invoke_async(&mut manager)
            .await
    }

    /// The tools session `sid` promoted, in promotion order.
    pub(crate) async fn promoted(
        &self,
        prefix: &str,
        sid: &str,
    ) -> redis::RedisResult<Vec<String>> {
        let mut manager = self.manager.clone();
        redis::cmd("LRANGE")
            .arg(relay::promoted_key(prefix, sid))
            .arg(0)
            .arg(-1)
            .query_async(&mut manager)
            .await
    }

    /// Runs the script that keeps result `id` (`stored`, its text) for session `sid`, for
    /// `ttl_ms` within `cap` bytes: whether it was kept (not: larger than `cap`).
    pub(crate) async fn keep_result(
        &self,
        prefix: &str,
        (sid, id): (&str, &str),
        stored: &str,
        ttl_ms: u64,
        cap: usize,
    ) -> redis::RedisResult<bool> {
        let mut invocation = self.keep_result.prepare_invoke();
        for key in results::keys(prefix, sid) {
            invocation.key(key);
        }
        invocation.arg(id).arg(stored).arg(ttl_ms).arg(cap);
        let mut manager = self.manager.clone();
        invocation.invoke_async(&mut manager).await
    }

    /// Runs the script that reads result `id` of session `sid` kept less than `ttl_ms` ago:
    /// its text and age (ms), if it is kept.
    pub(crate) async fn kept_result(
        &self,
        prefix: &str,
        (sid, id): (&str, &str),
        ttl_ms: u64,
    ) -> redis::RedisResult<Option<(String, u64)>> {
        let [hash, at, _] = results::keys(prefix, sid);
        let mut manager = self.manager.clone();
        self.kept_result
            .key(hash)
            .key(at)
            .arg(id)
            .arg(ttl_ms)
            .invoke_async(&mut manager)
            .await
    }

    /// Loads the rate script (`SCRIPT LOAD`), so that calls' `EVALSHA` find it; after a store
    /// restart or `SCRIPT FLUSH`, a call meeting `NOSCRIPT` loads it again itself.
    pub(crate) async fn load(&self) -> redis::RedisResult<()> {
        let mut manager = self.manager.clone();
        self.gcra
            .prepare_invoke()
            .load_async(&mut manager)
            .await
            .map(drop)
    }

    /// What `check --live` asks: the store's `INFO server` text, after both scripts loaded.
    pub(crate) async fn probe(&self) -> redis::RedisResult<String> {
        let mut manager = self.manager.clone();
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut manager)
            .await?;
        self.load().await?;
        for script in [
            &self.repay,
            &self.heartbeat,
            &self.usage,
            &self.revoke,
            &self.forward,
            &self.promote,
            &self.keep_result,
            &self.kept_result,
        ] {
            script.prepare_invoke().load_async(&mut manager).await?;
        }
        Ok(info)
    }
}
