#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::atomic::AtomicUsize;

use serde_json::{Value, json};
use tokio::sync::Notify;
use tower::Service;

use super::*;
use crate::authz::Scope;
use crate::catalog::Contribution;
use crate::context::{Caller, Session};
use crate::error::kind;
use crate::identity::{Client, Credential, Directory, Principal, api_key};
use crate::jsonrpc::to_raw;
use crate::limits::Rate;

fn principal(name: &str) -> Arc<Principal> {
    let dir = Directory::new(vec![
        Client::new("alice", Scope::everything()).with_key(api_key::digest("ka")),
        Client::new("bob", Scope::everything()).with_key(api_key::digest("kb")),
    ]);
    let key = if name == "alice" { "ka" } else { "kb" };
    Arc::new(dir.authenticate(Credential::ApiKey(key)).unwrap())
}

fn call(who: &str, tool: &str) -> McpRequest {
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let params = json!({"name": tool, "arguments": {}});
    McpRequest::new(
        Message::request(Id::Number(7), "tools/call", Some(to_raw(&params))),
        Caller::new(Arc::new(Session::new(who, tx))).with_principal(principal(who)),
    )
}

fn catalog() -> watch::Receiver<Arc<Catalog>> {
    let names = ["git".to_owned(), "time".to_owned()];
    let tools = |n: &str| Contribution {
        tools: vec![json!({"name": n, "inputSchema": {"type": "object"}})],
        ..Contribution::default()
    };
    let c = Catalog::build(vec![tools("log"), tools("now")], &names, "__", 1);
    watch::channel(Arc::new(c)).1
}

/// An upstream stand-in: counts calls; holds each until `release` when `hold` is set.
#[derive(Clone)]
struct Upstream {
    calls: Arc<AtomicUsize>,
    hold: bool,
    release: Arc<Notify>,
}

impl Upstream {
    fn new(hold: bool) -> Self {
        Self {
            calls: Arc::new(AtomicUsize::new(0)),
            hold,
            release: Arc::new(Notify::new()),
        }
    }

    /// Yields until `n` calls have reached the upstream.
    async fn reached(&self, n: usize) {
        while self.calls.load(Ordering::SeqCst) < n {
            tokio::task::yield_now().await;
        }
    }

    fn service(&self) -> impl crate::layer::Inner + use<> {
        let me = self.clone();
        tower::service_fn(move |req: McpRequest| {
            let me = me.clone();
            async move {
                me.calls.fetch_add(1, Ordering::SeqCst);
                if me.hold {
                    me.release.notified().await;
                }
                let id = req.message.reply_id();
                Ok::<_, Infallible>(Some(Message::response(id, to_raw(&json!({"content": []})))))
            }
        })
    }
}

fn error_data(reply: &Message) -> (i64, String, Value) {
    let e = reply.error.as_ref().expect("an error");
    let data: Value = serde_json::from_str(e.data.as_ref().unwrap().get()).unwrap();
    (e.code, e.kind().unwrap_or_default(), data)
}

/// Calls of `client` waiting for an in-flight slot.
fn waiting<S>(svc: &Limit<S>, client: &str) -> usize {
    let slots = crate::lock::lock(&svc.get_layer().state.slots);
    slots
        .get(client)
        .map_or(0, |s| s.waiting.load(Ordering::SeqCst))
}

fn limits(client: ClientLimits) -> Limits {
    Limits {
        default: client,
        ..Limits::default()
    }
}

#[tokio::test]
async fn a_client_over_its_rate_is_refused_and_another_is_not() {
    let up = Upstream::new(false);
    let l = limits(ClientLimits {
        calls_per_sec: Some(Rate::new(1.0, 2)),
        ..ClientLimits::default()
    });
    let mut svc = LimitLayer::new(l, catalog()).layer(up.service());
    for _ in 0..2 {
        let ok = svc.call(call("alice", "git__log")).await.unwrap().unwrap();
        assert!(ok.error.is_none());
    }
    let refused = svc.call(call("alice", "git__log")).await.unwrap().unwrap();
    let (code, kind, data) = error_data(&refused);
    assert_eq!((code, kind.as_str()), (-32023, kind::LIMIT_RATE));
    assert_eq!(data["limit"], "calls_per_sec");
    assert_eq!(data["client"], "alice");
    assert_eq!(data["upstream"], "git");
    let wait = data["retryAfterMs"].as_u64().unwrap();
    assert!((1..=1000).contains(&wait), "{wait}");
    assert_eq!(
        up.calls.load(Ordering::SeqCst),
        2,
        "the refused call was not forwarded"
    );
    let bob = svc.call(call("bob", "git__log")).await.unwrap().unwrap();
    assert!(bob.error.is_none(), "bob has his own bucket");
}

#[tokio::test]
async fn the_upstream_rate_is_per_client_and_upstream() {
    let up = Upstream::new(false);
    let l = limits(ClientLimits {
        upstream_calls_per_sec: Some(Rate::new(0.001, 1)),
        ..ClientLimits::default()
    });
    let mut svc = LimitLayer::new(l, catalog()).layer(up.service());
    assert!(
        svc.call(call("alice", "git__log"))
            .await
            .unwrap()
            .unwrap()
            .error
            .is_none()
    );
    let refused = svc.call(call("alice", "git__log")).await.unwrap().unwrap();
    let (_, _, data) = error_data(&refused);
    assert_eq!(data["limit"], "upstream_calls_per_sec");
    assert!(
        svc.call(call("alice", "time__now"))
            .await
            .unwrap()
            .unwrap()
            .error
            .is_none()
    );
    assert!(
        svc.call(call("bob", "git__log"))
            .await
            .unwrap()
            .unwrap()
            .error
            .is_none()
    );
}

#[tokio::test]
async fn past_its_in_flight_and_queue_a_client_is_refused_while_another_is_served() {
    let up = Upstream::new(true);
    let l = limits(ClientLimits {
        in_flight: Some(1),
        queue: 0,
        queue_ms: 30_000,
        ..ClientLimits::default()
    });
    let svc = LimitLayer::new(l, catalog()).layer(up.service());
    let mut first = svc.clone();
    let held = tokio::spawn(async move { first.call(call("alice", "git__log")).await });
    up.reached(1).await;
    let refused = svc
        .clone()
        .call(call("alice", "time__now"))
        .await
        .unwrap()
        .unwrap();
    let (code, kind, data) = error_data(&refused);
    assert_eq!((code, kind.as_str()), (-32023, kind::LIMIT_IN_FLIGHT));
    assert_eq!(data["limit"], "in_flight");
    // Bob is not behind alice's call.
    let mut bob = svc.clone();
    let bob_call = tokio::spawn(async move { bob.call(call("bob", "git__log")).await });
    up.reached(2).await;
    up.release.notify_waiters();
    assert!(held.await.unwrap().unwrap().unwrap().error.is_none());
    assert!(bob_call.await.unwrap().unwrap().unwrap().error.is_none());
    assert_eq!(up.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_queued_call_runs_when_a_slot_frees() {
    let up = Upstream::new(true);
    let l = limits(ClientLimits {
        in_flight: Some(1),
        queue: 1,
        queue_ms: 30_000,
        ..ClientLimits::default()
    });
    let svc = LimitLayer::new(l, catalog()).layer(up.service());
    let mut a = svc.clone();
    let first = tokio::spawn(async move { a.call(call("alice", "git__log")).await });
    up.reached(1).await;
    let mut b = svc.clone();
    let queued = tokio::spawn(async move { b.call(call("alice", "git__log")).await });
    while waiting(&svc, "alice") == 0 {
        tokio::task::yield_now().await;
    }
    // The queue (1) is taken: a third is refused at once.
    let third = svc
        .clone()
        .call(call("alice", "git__log"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(error_data(&third).1, kind::LIMIT_IN_FLIGHT);
    up.release.notify_one();
    assert!(first.await.unwrap().unwrap().unwrap().error.is_none());
    // The queued call got the slot and is now in the upstream.
    up.reached(2).await;
    up.release.notify_one();
    assert!(queued.await.unwrap().unwrap().unwrap().error.is_none());
}

#[tokio::test]
async fn a_queued_call_is_refused_after_queue_ms() {
    let up = Upstream::new(true);
    let l = limits(ClientLimits {
        in_flight: Some(1),
        queue: 1,
        queue_ms: 50,
        ..ClientLimits::default()
    });
    let svc = LimitLayer::new(l, catalog()).layer(up.service());
    let mut a = svc.clone();
    let first = tokio::spawn(async move { a.call(call("alice", "git__log")).await });
    up.reached(1).await;
    let late = svc
        .clone()
        .call(call("alice", "git__log"))
        .await
        .unwrap()
        .unwrap();
    let (_, kind, data) = error_data(&late);
    assert_eq!(kind, kind::LIMIT_IN_FLIGHT, "waited queue_ms");
    assert_eq!(data["retryAfterMs"], 100);
    assert_eq!(waiting(&svc, "alice"), 0, "the queue place is given back");
    up.release.notify_one();
    assert!(first.await.unwrap().unwrap().unwrap().error.is_none());
    assert_eq!(up.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_upstream_in_flight_caps_all_clients_together_but_not_other_upstreams() {
    let up = Upstream::new(true);
    let mut l = limits(ClientLimits::default());
    l.upstream_in_flight.insert("git".into(), 1);
    let svc = LimitLayer::new(l, catalog()).layer(up.service());
    let mut a = svc.clone();
    let first = tokio::spawn(async move { a.call(call("alice", "git__log")).await });
    up.reached(1).await;
    let mut b = svc.clone();
    let waiting = tokio::spawn(async move { b.call(call("bob", "git__log")).await });
    let mut c = svc.clone();
    let other = tokio::spawn(async move { c.call(call("bob", "time__now")).await });
    up.reached(2).await;
    tokio::task::yield_now().await;
    assert_eq!(
        up.calls.load(Ordering::SeqCst),
        2,
        "bob's git call waits for alice's"
    );
    up.release.notify_waiters();
    assert!(first.await.unwrap().unwrap().unwrap().error.is_none());
    assert!(other.await.unwrap().unwrap().unwrap().error.is_none());
    up.reached(3).await;
    up.release.notify_waiters();
    assert!(waiting.await.unwrap().unwrap().unwrap().error.is_none());
}

#[tokio::test]
async fn lists_and_notifications_pass_untouched() {
    let up = Upstream::new(false);
    let l = limits(ClientLimits {
        calls_per_sec: Some(Rate::new(0.001, 1)),
        ..ClientLimits::default()
    });
    let mut svc = LimitLayer::new(l, catalog()).layer(up.service());
    for _ in 0..5 {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let list = McpRequest::new(
            Message::request(Id::Number(1), "tools/list", None),
            Caller::new(Arc::new(Session::new("s", tx))),
        );
        assert!(svc.call(list).await.unwrap().unwrap().error.is_none());
    }
}
