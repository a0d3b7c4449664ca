//! Resource subscriptions and `subscriptions/listen` streams.
//!
//! A 2025-era client subscribes to a resource with `resources/subscribe`; the gateway keeps
//! which sessions want which URI (a shared upstream is told to stop only when no session wants
//! the resource any more; a client's per-client instance, when none of that client's sessions
//! does) and sends each `notifications/resources/updated` to those sessions only (of a
//! per-client instance, to those of its client). A modern client opens a
//! `subscriptions/listen` stream instead, naming the `list_changed` kinds and resources it
//! wants; each notification it asked for is sent on the stream, tagged with its subscription
//! (of a per-client upstream, the resources are watched on the client's own instance).
//! [`Subscriptions`] is that room of the gateway.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use super::pool::{Pool, Serving};
use super::route::Forwarder;
use super::sessions::{Sessions, string_param};
use crate::context::{Caller, McpRequest, Outbound};
use crate::error::Error;
use crate::jsonrpc::{Id, Message, to_raw};
use crate::lock::lock;
use crate::mcp::bridge;
use crate::mcp::method::Method;
use crate::policy::share::Share;
use crate::upstream::Call;

/// `_meta` key naming the `subscriptions/listen` request a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Who is subscribed to what.
#[derive(Default)]
pub(super) struct Subscriptions {
    /// `resources/subscribe` of 2025-era sessions.
    subscribers: Mutex<Subscribers>,
    /// Open `subscriptions/listen` streams of modern clients.
    listeners: Mutex<Vec<Listener>>,
}

impl Subscriptions {
    /// Forgets every subscription of session `id`.
    pub(super) fn remove_session(&self, id: &str) {
        lock(&self.subscribers).remove_session(id);
    }

    /// Every resource some session is subscribed to (`resources/subscribe`), with those
    /// sessions.
    pub(super) fn subscribed(&self) -> Vec<(String, BTreeSet<String>)> {
        let subscribers = lock(&self.subscribers);
        (subscribers.0.iter())
            .map(|(uri, sessions)| (uri.clone(), sessions.clone()))
            .collect()
    }

    /// `notifications/resources/updated`: to the sessions subscribed to the resource; of a
    /// per-client instance (`client` names its client), to those of that client only.
    pub(super) fn resource_updated(
        &self,
        msg: &Message,
        sessions: &Sessions,
        client: Option<&str>,
    ) {
        let uri = string_param(msg, "uri").unwrap_or_default();
        let subscribed = lock(&self.subscribers).of(&uri);
        sessions.send(msg, |s, _| {
            subscribed.contains(&s.id) && client.is_none_or(|c| s.client() == Some(c))
        });
    }

    /// Sends `msg` (a `list_changed` or `resources/updated` notification) to the listen
    /// streams that asked for it, tagged with their subscription; of a per-client instance
    /// (`client` names its client), to those of that client only.
    pub(super) fn notify_listeners(&self, msg: &Message, client: Option<&str>) {
        let name = msg.method().unwrap_or_default();
        let method = Method::parse(name);
        let uri = (method == Method::ResourcesUpdated)
            .then(|| string_param(msg, "uri"))
            .flatten();
        let mut listeners = lock(&self.listeners);
        listeners.retain(|l| !l.outbound.is_closed());
        let theirs = |l: &Listener| client.is_none_or(|c| l.client.as_deref() == Some(c));
        for l in listeners
            .iter()
            .filter(|l| theirs(l) && l.wants.wants(&method, uri.as_deref()))
        {
            let mut params: Map<String, Value> = msg.params_as().unwrap_or_default();
            bridge::set_meta(&mut params, SUBSCRIPTION_ID, l.subscription.clone());
            let tagged = Message::notification(name, Some(to_raw(&Value::Object(params))));
            let _ = l.outbound.send(tagged);
        }
    }
}

/// Resource URI → the sessions subscribed to it.
#[derive(Debug, Default)]
struct Subscribers(HashMap<String, BTreeSet<String>>);

/// Whether a session of `subscribed` other than `session` holds the same subscription upstream
/// (`shares`: every session of a shared upstream; of a per-client one, the sessions of the same
/// client, as the others have instances of their own).
fn others_left(
    subscribed: &BTreeSet<String>,
    session: &str,
    shares: impl Fn(&str) -> bool,
) -> bool {
    (subscribed.iter()).any(|other| other != session && shares(other))
}

impl Subscribers {
    /// Subscribes (`on`) or unsubscribes `session` to `uri`.
    fn set(&mut self, uri: &str, session: &str, on: bool) {
        if on {
            self.0
                .entry(uri.to_owned())
                .or_default()
                .insert(session.to_owned());
        } else if let Some(sessions) = self.0.get_mut(uri) {
            sessions.remove(session);
            if sessions.is_empty() {
                self.0.remove(uri);
            }
        }
    }

    /// The sessions subscribed to `uri`.
    fn of(&self, uri: &str) -> BTreeSet<String> {
        self.0.get(uri).cloned().unwrap_or_default()
    }

    fn remove_session(&mut self, id: &str) {
        self.0.retain(|_, sessions| {
            sessions.remove(id);
            !sessions.is_empty()
        });
    }
}

/// A modern client's `subscriptions/listen` stream.
pub(super) struct Listener {
    outbound: Outbound,
    subscription: Value,
    /// The `[[client]]` that listens ([`crate::context::Session::client`]).
    client: Option<String>,
    /// What it listens to.
    wants: Listening,
}

/// What a `subscriptions/listen` asked for, of what the gateway can honour.
#[derive(Debug, Default, PartialEq)]
struct Listening {
    /// The `notifications` it gets, as the acknowledgement says them.
    honoured: Map<String, Value>,
    /// The lists (`tools`, `prompts`, `resources`) whose `list_changed` it gets.
    kinds: Vec<&'static str>,
    /// The resources whose `notifications/resources/updated` it gets.
    resources: Vec<String>,
}

impl Listening {
    /// What the `notifications` member of a `subscriptions/listen` asks for.
    fn asked(asked: &Value) -> Self {
        let mut listening = Self::default();
        for (key, kind) in [
            ("toolsListChanged", "tools"),
            ("promptsListChanged", "prompts"),
            ("resourcesListChanged", "resources"),
        ] {
            if asked.get(key).and_then(Value::as_bool) == Some(true) {
                listening.honoured.insert(key.into(), json!(true));
                listening.kinds.push(kind);
            }
        }
        listening.resources = (asked.get("resourceSubscriptions").and_then(Value::as_array))
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        if !listening.resources.is_empty() {
            let resources = json!(listening.resources);
            listening
                .honoured
                .insert("resourceSubscriptions".into(), resources);
        }
        listening
    }

    /// Whether a notification of `method` (about `uri`, for `resources/updated`) is for it.
    fn wants(&self, method: &Method, uri: Option<&str>) -> bool {
        let kind = match method {
            Method::ToolsListChanged => "tools",
            Method::PromptsListChanged => "prompts",
            Method::ResourcesListChanged => "resources",
            Method::ResourcesUpdated => {
                return uri.is_some_and(|uri| self.resources.iter().any(|r| r == uri));
            }
            _ => return false,
        };
        self.kinds.contains(&kind)
    }
}

/// The rooms a subscription reaches: the pool that routes its resource, the sessions that
/// say whose a session is, and the forwarding a 2025 upstream's `resources/subscribe` takes.
pub(super) struct Reach<'a> {
    /// The upstreams.
    pub(super) pool: &'a Pool,
    /// The session registry.
    pub(super) sessions: &'a Sessions,
    /// Forwarding.
    pub(super) forwarder: &'a Forwarder,
}

impl Subscriptions {
    /// `resources/subscribe` (`on`) / `unsubscribe` of a 2025-era client: forwarded to a 2025
    /// upstream; for a modern upstream (which has no such method) the resource joins or leaves
    /// the gateway's `subscriptions/listen` on it.
    pub(super) async fn subscribe(
        &self,
        req: &McpRequest,
        on: bool,
        reach: Reach<'_>,
    ) -> Result<Message, Error> {
        let (msg, caller) = (&req.message, &req.caller);
        let uri = string_param(msg, "uri").unwrap_or_default();
        let session = caller.session.id.as_str();
        let (pool, subscriptions) = (reach.pool, self);
        let routed = pool.route_uri(&uri).map(|i| (i, pool.upstream(i)));
        let per_client =
            (routed.as_ref()).is_some_and(|(_, u)| matches!(u.spec().share, Share::PerClient(_)));
        // The upstream (or the caller's instance of it) stops sending updates only when no
        // session it sends them for wants them.
        let client = caller.principal.name();
        let shares =
            |other: &str| !per_client || reach.sessions.client_of(other).as_deref() == Some(client);
        let subscribed = lock(&subscriptions.subscribers).of(&uri);
        let others_left = others_left(&subscribed, session, shares);
        let done = Message::response_value(Id::Null, &json!({}));
        let reply = match routed {
            _ if !on && others_left => done,
            Some((i, u)) if u.is_modern() => {
                // A per-client upstream's updates come from the caller's own instance (one
                // that is not running watches nothing to stop).
                let watching = match (on, per_client) {
                    (false, true) => pool.running_instance(i, client),
                    _ => Some(pool.serving(i, caller).await?.upstream),
                };
                if let Some(upstream) = watching {
                    upstream.watch_resource(&uri, on);
                }
                done
            }
            _ => reach.forwarder.call_by_uri(req).await?,
        };
        if reply.error.is_none() {
            lock(&subscriptions.subscribers).set(&uri, session, on);
        }
        Ok(reply)
    }

    /// `subscriptions/listen` of a modern client: acknowledged at once, then the stream
    /// carries the `list_changed` (and `resources/updated`) notifications it asked for,
    /// until the client closes it or the gateway shuts down (`shutdown`). Its resources are
    /// watched on `pool`'s upstreams.
    pub(super) async fn listen(
        &self,
        msg: &Message,
        caller: &Caller,
        pool: &Pool,
        shutdown: &tokio_util::sync::CancellationToken,
    ) -> Result<Message, Error> {
        let params: Value = msg.params_as().unwrap_or_else(|_| json!({}));
        let asked = params
            .get("notifications")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let wants = Listening::asked(&asked);
        // Held while the stream is open: the caller's instances it watches do not idle out.
        let _watching = watch_for_listener(pool, &wants.resources, caller).await;
        let subscription = serde_json::to_value(msg.reply_id()).unwrap_or(Value::Null);
        let ack = Message::notification(
            Method::SubscriptionsAcknowledged.as_str(),
            Some(to_raw(&json!({
                "notifications": wants.honoured,
                "_meta": { SUBSCRIPTION_ID: subscription },
            }))),
        );
        let _ = caller.outbound.send(ack);
        let listeners = &self.listeners;
        lock(listeners).push(Listener {
            outbound: caller.outbound.clone(),
            subscription: subscription.clone(),
            client: caller.session.client().map(str::to_owned),
            wants,
        });
        tokio::select! {
            () = caller.outbound.closed() => {}
            () = shutdown.cancelled() => {}
        }
        lock(listeners).retain(|l| !l.outbound.is_closed());
        Ok(Message::response_value(
            Id::Null,
            &json!({ "_meta": { SUBSCRIPTION_ID: subscription } }),
        ))
    }
}

/// What a modern client's `subscriptions/listen` asks about resources, arranged upstream:
/// `resources/subscribe` on a 2025 upstream, the listen filter of a modern one; of a
/// per-client upstream, on the caller's own instance (started if need be), whose hold is
/// returned.
async fn watch_for_listener<'a>(
    pool: &'a Pool,
    uris: &[String],
    caller: &Caller,
) -> Vec<Serving<'a>> {
    let mut held = Vec::new();
    for uri in uris {
        let Some(i) = pool.route_uri(uri) else {
            continue;
        };
        let upstream = match pool.serving(i, caller).await {
            Ok(serving) => {
                let upstream = serving.upstream.clone();
                held.push(serving);
                upstream
            }
            Err(err) => {
                tracing::debug!(uri, error = %err, "A listener's resource is not watched");
                continue;
            }
        };
        if upstream.is_modern() {
            upstream.watch_resource(uri, true);
            continue;
        }
        let params = to_raw(&json!({ "uri": uri }));
        tokio::spawn(async move {
            let call = Call::new(Method::ResourcesSubscribe.as_str()).params(Some(params));
            if let Err(err) = upstream.request(call).await {
                tracing::debug!(error = %err, "resources/subscribe for a listener failed");
            }
        });
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_resource_stays_subscribed_until_its_last_session_leaves() {
        let mut subs = Subscribers::default();
        subs.set("file:///a", "s1", true);
        subs.set("file:///a", "s2", true);
        subs.set("file:///b", "s1", true);
        let left = |subs: &Subscribers, uri: &str, session: &str| {
            others_left(&subs.of(uri), session, |_| true)
        };
        assert!(left(&subs, "file:///a", "s1"));
        assert!(!left(&subs, "file:///b", "s1"));
        assert!(!left(&subs, "file:///c", "s1"));
        // Of a per-client upstream, only the sessions that share the caller's instance count.
        assert!(!others_left(&subs.of("file:///a"), "s1", |other| other != "s2"));
        subs.set("file:///a", "s2", false);
        assert!(!left(&subs, "file:///a", "s1"));
        assert_eq!(subs.of("file:///a"), BTreeSet::from(["s1".to_owned()]));
        // A session that goes takes all its subscriptions, and empty URIs go with it.
        subs.remove_session("s1");
        assert!(subs.0.is_empty(), "{subs:?}");
        // Unsubscribing what nobody subscribed to is a no-op.
        subs.set("file:///x", "s3", false);
        assert!(subs.0.is_empty());
    }

    #[test]
    fn listen_honours_only_what_it_can_send() {
        let asked = json!({
            "toolsListChanged": true,
            "promptsListChanged": false,
            "resourcesListChanged": "yes",
            "resourceSubscriptions": ["file:///a", 3],
            "somethingNew": true,
        });
        let listening = Listening::asked(&asked);
        assert_eq!(listening.kinds, ["tools"]);
        assert_eq!(listening.resources, ["file:///a"]);
        assert_eq!(
            Value::Object(listening.honoured.clone()),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        assert_eq!(Listening::asked(&json!({})), Listening::default());

        assert!(listening.wants(&Method::ToolsListChanged, None));
        assert!(!listening.wants(&Method::PromptsListChanged, None));
        assert!(listening.wants(&Method::ResourcesUpdated, Some("file:///a")));
        assert!(!listening.wants(&Method::ResourcesUpdated, Some("file:///b")));
        assert!(!listening.wants(&Method::ResourcesUpdated, None));
        assert!(!listening.wants(&Method::LogMessage, Some("file:///a")));
        let other = Method::parse("notifications/tools/list_changed/x");
        assert!(!listening.wants(&other, None));
    }
}
