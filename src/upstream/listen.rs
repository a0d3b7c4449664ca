//! `subscriptions/listen` on a modern upstream: the one stream its notifications travel on.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Call, Event, Upstream};
use crate::error::Error;
use crate::jsonrpc::{METHOD_NOT_FOUND, Message, to_raw};
use crate::lock::lock;
use crate::mcp::method::Listed;

impl Upstream {
    /// Starts or stops watching resource `uri` of a modern upstream (`resources/subscribe`
    /// of the 2025 era becomes part of the gateway's `subscriptions/listen`).
    pub(crate) fn watch_resource(&self, uri: &str, on: bool) {
        let changed = {
            let mut watched = lock(&self.inner.watched);
            if on {
                watched.insert(uri.to_owned())
            } else {
                watched.remove(uri)
            }
        };
        if changed {
            self.inner.watch_changed.notify_one();
        }
    }

    /// Keeps a `subscriptions/listen` request open on a modern upstream, so that its
    /// `list_changed` notifications (and `resources/updated` of the watched resources) reach
    /// the gateway (a modern server sends them nowhere else). Re-opened when it ends, and when
    /// the watched resources change; after a gap the catalog is refreshed, since changes may
    /// have been missed. Returns at shutdown, or when the server has no `subscriptions/listen`.
    pub(crate) async fn listen_modern(&self) {
        let caps = self.info().capabilities;
        let stop = self.inner.shutdown.clone();
        let mut gap = false;
        loop {
            let resources: Vec<String> = lock(&self.inner.watched).iter().cloned().collect();
            let Some(params) = listen_params(&caps, &resources) else {
                // Nothing to listen for until a client watches a resource.
                tokio::select! {
                    () = self.inner.watch_changed.notified() => continue,
                    () = stop.cancelled() => return,
                }
            };
            if gap {
                for kind in Listed::ANNOUNCED {
                    let _ = self
                        .inner
                        .events
                        .send(Event::ListChanged(self.inner.index, kind));
                }
            }
            let opened = tokio::time::Instant::now();
            let id = self.next_request_id();
            let call = Call::new("subscriptions/listen")
                .id(id)
                .params(Some(to_raw(&params)))
                .before_ready()
                .wait(None);
            let outcome = tokio::select! {
                outcome = self.request(call) => outcome,
                () = self.inner.watch_changed.notified() => {
                    // The watched resources changed: the same stream with the new set.
                    self.cancel(id, Some("listening again with other resources"));
                    gap = false;
                    continue;
                }
                () = stop.cancelled() => return,
            };
            gap = true;
            if !self.listen_ended(outcome) {
                return;
            }
            // Do not spin on a server that ends the stream at once.
            let pause = Duration::from_secs(2).saturating_sub(opened.elapsed());
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Notes how a `subscriptions/listen` ended; false when the server has none (do not ask
    /// again).
    fn listen_ended(&self, outcome: Result<Message, Error>) -> bool {
        match outcome {
            Ok(reply)
                if reply
                    .error
                    .as_ref()
                    .is_some_and(|e| e.code == METHOD_NOT_FOUND) =>
            {
                tracing::debug!(
                    upstream = self.name(),
                    "Upstream has no subscriptions/listen"
                );
                return false;
            }
            Ok(_) => tracing::debug!(upstream = self.name(), "subscriptions/listen ended"),
            Err(err) => {
                tracing::debug!(upstream = self.name(), error = %err, "subscriptions/listen failed");
            }
        }
        true
    }
}

/// The params of `subscriptions/listen` for a server with `capabilities`: the lists it
/// announces changes of, and the `resources` clients watch; `None` when there is nothing to
/// listen for.
fn listen_params(capabilities: &Value, resources: &[String]) -> Option<Value> {
    let changes = |kind: &str| {
        capabilities
            .get(kind)
            .and_then(|c| c.get("listChanged"))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    if !Listed::ANNOUNCED.iter().any(|k| changes(k.capability())) && resources.is_empty() {
        return None;
    }
    let mut notifications = json!({
        "toolsListChanged": changes("tools"),
        "promptsListChanged": changes("prompts"),
        "resourcesListChanged": changes("resources"),
    });
    if !resources.is_empty() {
        notifications["resourceSubscriptions"] = json!(resources);
    }
    Some(json!({ "notifications": notifications }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::listen_params;

    #[test]
    fn listens_for_announced_lists_and_watched_resources_only() {
        let caps = json!({"tools": {"listChanged": true}, "prompts": {}});
        assert_eq!(
            listen_params(&caps, &[]),
            Some(json!({"notifications": {
                "toolsListChanged": true,
                "promptsListChanged": false,
                "resourcesListChanged": false,
            }}))
        );
        let watched = ["file:///a".to_owned()];
        let p = listen_params(&json!({}), &watched).unwrap();
        assert_eq!(
            p["notifications"]["resourceSubscriptions"],
            json!(["file:///a"])
        );
        assert_eq!(listen_params(&json!({"tools": {}}), &[]), None);
    }
}
