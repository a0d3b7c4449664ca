//! The gateway's own paged lists (`tools/list` with the budget off, `prompts/list`,
//! `resources/list`, `resources/templates/list`: the catalog, [`PAGE_SIZE`] items a page), and
//! the opaque cursors of those lists and of `tasks/list`.

use base64::Engine;
use serde_json::{Map, Value};

use crate::error::Error;
use crate::jsonrpc::Message;

/// Items per page of the gateway's own lists.
const PAGE_SIZE: usize = 500;

/// One page of `items` (a list of the catalog), under `key`, from the request's cursor on.
pub(super) fn list_page(msg: &Message, key: &str, items: &[Value]) -> Result<Value, Error> {
    let params: Value = msg.params_as().unwrap_or(Value::Null);
    let offset = match params.get("cursor").and_then(Value::as_str) {
        None => 0,
        Some(cursor) => decode_cursor(cursor).ok_or_else(|| {
            let method = msg.method().unwrap_or_default();
            Error::invalid_params(method, "unknown cursor; list again from the start")
        })?,
    };
    Ok(page(key, items, offset))
}

/// The page of `items` from `offset` on, under `key`, with the cursor of the next page if
/// there is one.
fn page(key: &str, items: &[Value], offset: usize) -> Value {
    // Saturating: the offset comes from a cursor, and a forged one must not overflow.
    let end = offset.saturating_add(PAGE_SIZE).min(items.len());
    let page: Vec<Value> = (items.get(offset.min(items.len())..end))
        .unwrap_or(&[])
        .to_vec();
    let mut result = Map::new();
    result.insert(key.to_owned(), Value::Array(page));
    if end < items.len() {
        result.insert("nextCursor".into(), Value::String(encode_cursor(end)));
    }
    Value::Object(result)
}

/// An opaque cursor carrying `text` (each kind of list tags its own). Opaque, not sealed: a
/// client that forges one only pages the lists it may see anyway.
pub(super) fn seal_cursor(text: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// The text a cursor of [`seal_cursor`] carries; `None` for one the gateway did not make.
pub(super) fn open_cursor(cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The cursor of the page that starts at item `offset`.
pub(super) fn encode_cursor(offset: usize) -> String {
    seal_cursor(&format!("mcpb:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    open_cursor(cursor)?.strip_prefix("mcpb:")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor(500)), Some(500));
        assert_eq!(decode_cursor("nope"), None);
        assert_eq!(decode_cursor(&seal_cursor("mcpb-tasks:1:")), None);
    }

    #[test]
    fn pages_follow_each_other_to_the_end() {
        let items: Vec<Value> = (0..PAGE_SIZE + 2).map(|n| json!({"n": n})).collect();
        let first = page("tools", &items, 0);
        assert_eq!(first["tools"].as_array().map(Vec::len), Some(PAGE_SIZE));
        let cursor = first["nextCursor"].as_str().unwrap();
        let offset = decode_cursor(cursor).unwrap();
        let second = page("tools", &items, offset);
        assert_eq!(
            second,
            json!({"tools": [{"n": PAGE_SIZE}, {"n": PAGE_SIZE + 1}]})
        );
        // A cursor past the end (an older, longer list) gives an empty last page.
        assert_eq!(page("tools", &items, 10_000), json!({"tools": []}));
        assert_eq!(page("tools", &items, usize::MAX), json!({"tools": []}));
        assert_eq!(page("prompts", &[], 0), json!({"prompts": []}));
    }
}
