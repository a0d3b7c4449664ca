//! The gateway's clients: the session registry (each session with the `[[client]]` it
//! belongs to, [`Session::client`]), what goes to every session (broadcasts, upstream-wide
//! logs) or to one client's sessions (what its per-client instances say outside a call), and
//! what a client learns at the handshake (`initialize` or `server/discover`: versions,
//! capabilities, instructions), plus its log level. [`Sessions`] is that room of the
//! gateway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::{Map, Value, json};

use crate::context::{Caller, Session, SessionState};
use crate::error::Error;
use crate::jsonrpc::Message;
use crate::lock::lock;
use crate::mcp::method::Method;
use crate::upstream::{Call, Status, Upstream};

/// Protocol versions the gateway speaks downstream (2025 era), newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The sessions that get broadcasts, by id. Weak: a session lives as long as its downstream
/// connection holds it.
#[derive(Default)]
pub(super) struct Sessions(Mutex<HashMap<String, Weak<Session>>>);

impl Sessions {
    /// Registers a session for broadcasts (`list_changed`).
    pub(super) fn register(&self, session: &Arc<Session>) {
        let mut sessions = lock(&self.0);
        sessions.retain(|_, s| s.strong_count() > 0);
        sessions.insert(session.id.clone(), Arc::downgrade(session));
    }

    /// Forgets session `id`.
    pub(super) fn remove(&self, id: &str) {
        lock(&self.0).remove(id);
    }

    /// Sessions still held by their connection.
    pub(super) fn active(&self) -> usize {
        lock(&self.0)
            .values()
            .filter(|s| s.strong_count() > 0)
            .count()
    }

    /// Sends `msg` to every initialized session.
    pub(super) fn broadcast(&self, msg: &Message) {
        self.send(msg, |_, _| true);
    }

    /// A log message of no client's call. Of a shared upstream (`client` `None`): to the
    /// sessions that asked for its level with `logging/setLevel` (a session that asked for
    /// none gets no upstream-wide logs: they may tell of other clients' work). Of `client`'s
    /// own per-client instance: to that client's sessions only, each at the level it asked
    /// for (one that asked for none gets what the server sends: it tells of that client's
    /// work alone).
    pub(super) fn log(&self, msg: &Message, client: Option<&str>) {
        let level = string_param(msg, "level").unwrap_or_default();
        self.send(msg, |s, state| {
            let theirs = client.is_none_or(|c| s.client() == Some(c));
            let wanted = match state.log_level.as_deref() {
                Some(wanted) => crate::mcp::bridge::level_wanted(wanted, &level),
                None => client.is_some(),
            };
            theirs && wanted
        });
    }

    /// The `[[client]]` session `id` belongs to ([`Session::client`]), while it is held.
    pub(super) fn client_of(&self, id: &str) -> Option<String> {
        let session = lock(&self.0).get(id).and_then(Weak::upgrade)?;
        session.client().map(str::to_owned)
    }

    /// Sends `msg` to every initialized session that `wants` it.
    pub(super) fn send(&self, msg: &Message, wants: impl Fn(&Session, &SessionState) -> bool) {
        let sessions: Vec<Arc<Session>> =
            lock(&self.0).values().filter_map(Weak::upgrade).collect();
        for s in sessions {
            let state = s.state();
            if state.initialized && wants(&s, &state) {
                let _ = s.notify.send(msg.clone());
            }
        }
    }
}

impl Sessions {
    /// Tells the sessions held here whose tools were promoted on another replica
    /// (`[discover] promote_on_use` with `[state]`) that their list changed, until shutdown:
    /// the replica holding a session's stream is the one whose word reaches its client.
    pub(super) async fn announce_promotions(
        self: Arc<Self>,
        mut promotions: tokio::sync::broadcast::Receiver<crate::state::relay::Promotion>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        use tokio::sync::broadcast::error::RecvError;
        let changed = Message::notification(Method::ToolsListChanged.as_str(), None);
        loop {
            let promotion = tokio::select! {
                () = shutdown.cancelled() => return,
                promotion = promotions.recv() => promotion,
            };
            match promotion {
                Ok(p) => self.send(&changed, |s, _| s.id == p.sid),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            }
        }
    }

    /// `initialize`: the session learns what the gateway offers, and waits for
    /// `notifications/initialized` before it gets broadcasts. What it offers comes from the
    /// current `upstreams`.
    pub(super) fn initialize(
        &self,
        msg: &Message,
        caller: &Caller,
        upstreams: &[Upstream],
    ) -> Value {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        let version = negotiate(params.get("protocolVersion").and_then(Value::as_str));
        caller.session.update(|s| {
            s.client_capabilities = params.get("capabilities").cloned().unwrap_or(json!({}));
            s.client_info = params.get("clientInfo").cloned().unwrap_or(Value::Null);
            s.protocol_version = Some(version.to_owned());
            // `initialized` waits for `notifications/initialized`: until then the client may
            // not even have this result, and broadcasts (`list_changed`) must not reach it.
            s.initialized = false;
        });
        self.register(&caller.session);
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities(upstreams),
            "serverInfo": server_info(),
        });
        if let Some(instructions) = instructions(upstreams) {
            result["instructions"] = Value::String(instructions);
        }
        result
    }

    /// `server/discover`, the 2026-07-28 era's stateless handshake: what `initialize` would
    /// say, from the current `upstreams`.
    pub(super) fn discover(upstreams: &[Upstream]) -> Value {
        crate::mcp::modern::discover_result(
            &capabilities(upstreams),
            &server_info(),
            instructions(upstreams).as_deref(),
        )
    }

    /// `logging/setLevel` of a 2025-era client: the session's level, also asked of every
    /// ready 2025-era upstream that logs of `upstreams` (the caller's, [`Pool::legacy_of`]).
    /// A level outside RFC 5424's eight is refused (`-32602`), never stored nor forwarded.
    ///
    /// [`Pool::legacy_of`]: super::pool::Pool::legacy_of
    pub(super) async fn set_log_level(
        msg: &Message,
        caller: &Caller,
        upstreams: impl FnOnce() -> Vec<Upstream>,
    ) -> Result<(), Error> {
        let params: Value = msg.params_as().unwrap_or(Value::Null);
        if let Some(reason) = crate::mcp::log_level_problem(params.get("level")) {
            return Err(Error::InvalidParams {
                method: Method::LoggingSetLevel.as_str().to_owned(),
                reason,
            });
        }
        let level = params
            .get("level")
            .and_then(Value::as_str)
            .map(str::to_owned);
        caller.session.update(|s| s.log_level = level);
        // 2026-07-28 has no session level: each modern request names its own (`_meta`, added
        // from the session's level by `Call::client`).
        // The caller's own per-client instances too (the last level one of its sessions set
        // holds there; each session still gets only what it asked for, see
        // `Sessions::log`), never another client's.
        for u in upstreams() {
            if u.status() == Status::Ready && u.info().capabilities.get("logging").is_some() {
                let call = Call::new(Method::LoggingSetLevel.as_str()).params(msg.params.clone());
                let _ = u.request(call).await;
            }
        }
        Ok(())
    }
}

/// What the gateway offers its clients: its own capabilities, plus the tasks its upstreams
/// support (task requests are routed to the upstream that created the task).
fn capabilities(upstreams: &[Upstream]) -> Value {
    let mut caps = own_capabilities();
    let mut tasks = Map::new();
    for u in upstreams {
        if let Some(Value::Object(t)) = u.info().capabilities.get("tasks") {
            merge_objects(&mut tasks, t);
        }
    }
    if !tasks.is_empty() {
        caps["tasks"] = Value::Object(tasks);
    }
    caps
}

/// The upstreams' instructions, each under its server's name.
fn instructions(upstreams: &[Upstream]) -> Option<String> {
    joined_instructions(
        upstreams
            .iter()
            .map(|u| (u.name().to_owned(), u.info().instructions)),
    )
}

/// The string member `key` of `msg`'s params, if any.
pub(super) fn string_param(msg: &Message, key: &str) -> Option<String> {
    let params = msg.params_as::<Value>().ok()?;
    params.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The version a 2025-era `initialize` gets: the one it asked for if the gateway speaks it,
/// else the newest.
fn negotiate(asked: Option<&str>) -> &'static str {
    let known = asked.and_then(|v| SUPPORTED_VERSIONS.iter().find(|s| **s == v));
    known.copied().unwrap_or(SUPPORTED_VERSIONS[0])
}

/// What the gateway itself offers its clients.
fn own_capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "logging": {},
        "completions": {},
    })
}

fn server_info() -> Value {
    json!({"name": "mcp-budget", "version": env!("CARGO_PKG_VERSION")})
}

/// The instructions of each upstream that has some (by name, in order), under a heading of
/// its name; `None` when none has any.
fn joined_instructions(
    upstreams: impl Iterator<Item = (String, Option<String>)>,
) -> Option<String> {
    let mut instructions = String::new();
    for (name, text) in upstreams {
        if let Some(text) = text {
            instructions.push_str(&format!("## {name}\n{}\n\n", text.trim()));
        }
    }
    (!instructions.is_empty()).then(|| instructions.trim_end().to_owned())
}

/// Adds what `from` has to `into`, recursively for objects on both sides.
fn merge_objects(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => merge_objects(a, b),
            (Some(_), _) => {}
            (None, v) => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::to_raw;

    #[test]
    fn an_instances_log_goes_to_its_clients_sessions_at_their_levels() {
        let sessions = Sessions::default();
        let open = |id: &str, client: Option<&str>, level: Option<&str>| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let session = Arc::new(Session::new(id, tx));
            session.update(|s| {
                s.initialized = true;
                s.log_level = level.map(str::to_owned);
            });
            if let Some(client) = client {
                session.bind_client(client);
            }
            sessions.register(&session);
            (session, rx)
        };
        let mut alice = open("a1", Some("alice"), None);
        let mut alice_quiet = open("a2", Some("alice"), Some("error"));
        let mut bob = open("b1", Some("bob"), Some("debug"));
        let mut nobody = open("n1", None, Some("debug"));
        let log = |level: &str| {
            let params = to_raw(&json!({"level": level, "data": "x"}));
            Message::notification("notifications/message", Some(params))
        };
        sessions.log(&log("info"), Some("alice"));
        sessions.log(&log("critical"), Some("alice"));
        let levels = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Message>| {
            std::iter::from_fn(|| rx.try_recv().ok())
                .filter_map(|m| string_param(&m, "level"))
                .collect::<Vec<_>>()
        };
        assert_eq!(levels(&mut alice.1), ["info", "critical"]);
        assert_eq!(levels(&mut alice_quiet.1), ["critical"]);
        assert_eq!(levels(&mut bob.1), Vec::<String>::new());
        assert_eq!(levels(&mut nobody.1), Vec::<String>::new());
        assert_eq!(sessions.client_of("a2").as_deref(), Some("alice"));
        assert_eq!(sessions.client_of("n1"), None);
        drop(bob.0);
        assert_eq!(sessions.client_of("b1"), None, "a session gone");
    }

    #[test]
    fn a_known_version_is_kept_any_other_gets_the_newest() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2026-07-28")), SUPPORTED_VERSIONS[0]);
        assert_eq!(negotiate(Some("1999-01-01")), SUPPORTED_VERSIONS[0]);
        assert_eq!(negotiate(None), SUPPORTED_VERSIONS[0]);
    }

    #[test]
    fn instructions_come_under_their_server_names() {
        let of = |list: &[(&str, Option<&str>)]| {
            joined_instructions((list.iter()).map(|(n, t)| ((*n).to_owned(), t.map(str::to_owned))))
        };
        assert_eq!(of(&[("a", None)]), None);
        assert_eq!(
            of(&[
                ("a", Some(" Use x. \n")),
                ("b", None),
                ("c", Some("Ask y."))
            ])
            .as_deref(),
            Some("## a\nUse x.\n\n## c\nAsk y.")
        );
    }

    #[test]
    fn task_capabilities_merge_without_overwriting() {
        let object = |v: Value| v.as_object().cloned().unwrap();
        let mut into = object(json!({"list": {}, "cancel": true, "requests": {"tools": {}}}));
        let from = object(json!({"list": {"x": 1}, "cancel": {}, "requests": {"prompts": {}}}));
        merge_objects(&mut into, &from);
        assert_eq!(
            Value::Object(into),
            json!({"list": {"x": 1}, "cancel": true, "requests": {"tools": {}, "prompts": {}}})
        );
    }
}
