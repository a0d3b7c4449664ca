//! Fetching an upstream's lists (every page, [`fetch_pages`]) and comparing them with the last
//! ones.

use serde_json::Value;

use crate::mcp::method::Method;
use crate::mcp::pages::fetch_pages;
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
    use serde_json::json;

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
