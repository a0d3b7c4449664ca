//! What the admin listener reads of the gateway at each probe or scrape: every upstream's
//! state now (not as it started), and how many client sessions are open. The types only: the
//! pool fills them in (`Pool::states`).

use std::time::SystemTime;

use crate::upstream::Status;

/// One upstream as it is now.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UpstreamState {
    /// Server id.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Health.
    pub status: Status,
    /// `2026-07-28`, `2025` or `unknown` (before the first handshake).
    pub era: &'static str,
    /// Negotiated protocol version (empty before the first handshake).
    pub protocol_version: String,
    /// Tools, prompts, resources it lists in the current catalog.
    pub counts: (usize, usize, usize),
    /// Requests sent to it and not answered yet.
    pub in_flight: usize,
    /// Its lists are in the catalog for its latest connection (after a handshake, `false`
    /// until the `tools/list` and the other lists that follow are answered).
    pub listed: bool,
    /// `/readyz` waits for it (`required`).
    pub required: bool,
    /// `share = "per_client"`: it serves no call itself, its clients' instances do.
    pub per_client: bool,
    /// Its running per-client instances, by client name (none for a shared upstream).
    pub instances: Vec<InstanceState>,
    /// When its server runs (`start`), where it is in its life, where its manifest came from
    /// and its first-use latency.
    pub life: crate::upstream::LifeView,
}

/// One client's instance of a `share = "per_client"` upstream, as it is now.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InstanceState {
    /// The `[[client]]` it serves.
    pub client: String,
    /// Health.
    pub status: Status,
    /// When it was started.
    pub started_at: SystemTime,
    /// Requests sent to it and not answered yet.
    pub in_flight: usize,
    /// Since when nothing uses it (`None` while something does): it stops `idle_secs` later.
    pub idle_since: Option<SystemTime>,
}

impl InstanceState {
    /// An instance of `client` in `status`, started at `started_at`, idle since then.
    #[must_use]
    pub fn new(client: &str, status: Status, started_at: SystemTime) -> Self {
        Self {
            client: client.to_owned(),
            status,
            started_at,
            in_flight: 0,
            idle_since: Some(started_at),
        }
    }
}

impl UpstreamState {
    /// A required stdio upstream `name` in `status`, era unknown, nothing listed (for tests
    /// and embedders that build states of their own).
    #[must_use]
    pub fn new(name: &str, status: Status) -> Self {
        Self {
            name: name.to_owned(),
            transport: "stdio",
            status,
            era: "unknown",
            protocol_version: String::new(),
            counts: (0, 0, 0),
            in_flight: 0,
            listed: true,
            required: true,
            per_client: false,
            instances: Vec::new(),
            life: crate::upstream::LifeView::eager(crate::upstream::Phase::Started),
        }
    }
}
