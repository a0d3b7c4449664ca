//! Reconciling a running gateway with a reloaded policy (`Pool::reconcile`: which upstreams
//! stay, start, restart or stop, as [`crate::policy::Reconcile::between`] decides; the
//! catalog rebuilt in the new order; removed upstreams stopped once the calls in flight to
//! them end): here, what a reload announces, pure.

use serde_json::Value;

use crate::catalog::Catalog;
use crate::mcp::method::Listed;

/// The kinds of lists (`tools`, `prompts`, `resources`) whose pass-through view differs from
/// `before` to `after`, each once; `tools` left out when `budgeted` (a layer, the budget's,
/// lists and announces them). Resource templates count as `resources`: hosts hear of both through
/// `notifications/resources/list_changed`, MCP has no notification of templates alone.
pub(super) fn changed_lists(before: &Catalog, after: &Catalog, budgeted: bool) -> Vec<Listed> {
    let lists = [
        (
            Listed::Tools,
            Catalog::listed_tools as fn(&Catalog) -> Vec<Value>,
        ),
        (Listed::Prompts, Catalog::listed_prompts),
        (Listed::Resources, Catalog::listed_resources),
        (Listed::Resources, Catalog::listed_templates),
    ];
    let mut changed: Vec<Listed> = (lists.into_iter())
        .filter(|(kind, _)| *kind != Listed::Tools || !budgeted)
        .filter(|(_, listed)| listed(before) != listed(after))
        .map(|(kind, _)| kind)
        .collect();
    changed.dedup();
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::catalog::Contribution;

    fn catalog(tools: usize, resources: usize, templates: usize) -> Catalog {
        let item = |i| {
            json!({"name": format!("n{i}"), "uri": format!("u://{i}"),
                               "uriTemplate": format!("u://{i}/{{id}}"), "inputSchema": {"type": "object"}})
        };
        let lists = Contribution {
            tools: (0..tools).map(item).collect(),
            resources: (0..resources).map(item).collect(),
            templates: (0..templates).map(item).collect(),
            prompts: Vec::new(),
        };
        Catalog::build(vec![lists], &["a".to_owned()], "__", 1)
    }

    #[test]
    fn a_change_of_templates_alone_is_a_change_of_resources() {
        let base = catalog(1, 1, 1);
        assert!(changed_lists(&base, &catalog(1, 1, 1), false).is_empty());
        assert_eq!(
            changed_lists(&base, &catalog(1, 1, 0), false),
            [Listed::Resources]
        );
        assert_eq!(
            changed_lists(&base, &catalog(1, 0, 2), false),
            [Listed::Resources],
            "once"
        );
        assert_eq!(
            changed_lists(&base, &catalog(2, 1, 1), false),
            [Listed::Tools]
        );
        assert!(
            changed_lists(&base, &catalog(2, 1, 1), true).is_empty(),
            "budgeted"
        );
    }
}
