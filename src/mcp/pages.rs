//! Reading a whole MCP list (`tools/list`, `prompts/list`, …) page by page, following
//! `nextCursor`, over whatever sends the requests.

use std::future::Future;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{Message, to_raw};
use crate::mcp::method::Method;

/// A whole list of server `server` (for logs), page by page: `request` sends `method` with
/// the page's params (`None`, then `{"cursor": …}` while the answers give a `nextCursor`) and
/// returns the server's answer. `None` when a page failed. The gateway's upstreams and an
/// embedder's inner service are listed through it.
pub async fn fetch_pages<F, Fut>(
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
