//! Fetching an upstream's lists (every page) and comparing them with the last ones.

use std::future::Future;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{Message, to_raw};
use crate::mcp::method::Method;
use crate::upstream::{Call, Upstream};

/// Fetches a whole list, following `nextCursor`. `None` when the upstream failed.
pub(super) async fn fetch_all(
    upstream: &Upstream,
    method: &Method,
    key: &str,
) -> Option<Vec<Value>> {
    fetch_pages(upstream.name(), method, key, |params| async move {
        let call = Call::new(method.as_str()).params(params);
        upstream.request(call).await.map_err(|err| err.to_string())
    })
    .await
}

/// A whole list of server `server` (for logs), page by page: `request` sends `method` with
/// the page's params (`None`, then `{"cursor": …}` while the answers give a `nextCursor`) and
/// returns the server's answer. `None` when a page failed. The gateway's upstreams and an
/// embedder's inner service ([`crate::embed`]) are listed through it.
pub(crate) async fn fetch_pages<F, Fut>(
    server: &str,
    method: &Method,
    key: &str,
    mut request: F,
) -> Option<Vec<Value>>
where
    F: FnMut(Option<Box<RawValue>>) -> Fut,
    Fut: Future<Output = Result<Message, String>>,
{
    let method = method.as_str();
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    // Bounded: a server that keeps returning cursors must not hang the refresh.
    for _ in 0..1000 {
        let params = cursor.as_ref().map(|c| to_raw(&json!({ "cursor": c })));
        let reply = match request(params).await {
            Ok(reply) => reply,
            Err(error) => {
                tracing::warn!(upstream = server, method, %error, "Listing failed");
                return None;
            }
        };
        if let Some(err) = &reply.error {
            tracing::warn!(upstream = server, method, code = err.code, message = %err.message, "Listing failed");
            return None;
        }
        let mut result: Map<String, Value> = reply.result_as().ok()?;
        if let Some(Value::Array(page)) = result.remove(key) {
            items.extend(page.into_iter().filter(Value::is_object));
        }
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Some(items);
        }
    }
    Some(items)
}

/// Whether two lists hold the same items (in the same order when `order_matters`). Object key
/// order never matters (`serde_json` maps compare as maps).
pub(super) fn same_items(a: &[Value], b: &[Value], order_matters: bool) -> bool {
    if order_matters || a.len() != b.len() {
        return a == b;
    }
    let key = |v: &Value| v.get("name").map(ToString::to_string).unwrap_or_default();
    let mut a: Vec<&Value> = a.iter().collect();
    let mut b: Vec<&Value> = b.iter().collect();
    a.sort_by_key(|v| key(v));
    b.sort_by_key(|v| key(v));
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reorders_are_quiet_only_when_order_is_not_shown() {
        let a = vec![json!({"name": "x", "d": 1}), json!({"name": "y"})];
        let b = vec![json!({"name": "y"}), json!({"d": 1, "name": "x"})];
        assert!(same_items(&a, &b, false));
        assert!(!same_items(&a, &b, true));
        assert!(!same_items(
            &a,
            &[json!({"name": "x", "d": 2}), json!({"name": "y"})],
            false
        ));
    }
}
