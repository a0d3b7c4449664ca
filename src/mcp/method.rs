//! The MCP method names of both protocol eras, as one enum.
//!
//! A message's `method` is parsed into a [`Method`] once, where it is dispatched, so that the
//! dispatch is one exhaustive `match` instead of string comparisons, and a misspelt name is a
//! compile error rather than a method that silently never matches. Names the gateway does not
//! know stay as they came ([`Method::Other`]): unknown methods pass through (or are refused)
//! unchanged, and [`Method::as_str`] always gives back the exact name that was parsed.
//!
//! ```
//! use mcp_budget::mcp::method::Method;
//!
//! assert_eq!(Method::parse("tools/call"), Method::ToolsCall);
//! assert_eq!(Method::ToolsCall.as_str(), "tools/call");
//! let unknown = Method::parse("tools/frobnicate");
//! assert_eq!(unknown, Method::Other("tools/frobnicate".into()));
//! assert_eq!(unknown.as_str(), "tools/frobnicate");
//! ```

/// Declares [`Method`] from one table, so that the variants, [`Method::parse`],
/// [`Method::as_str`] and [`Method::KNOWN`] cannot disagree.
macro_rules! methods {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// An MCP method name (requests and notifications, both directions, both eras).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[doc = $doc])* $variant,)*
            /// Any other name, kept exactly as it came.
            Other(String),
        }

        impl Method {
            /// Every method the enum names (all but [`Method::Other`]), in declaration order.
            pub const KNOWN: &'static [Self] = &[$(Self::$variant,)*];

            /// The method called `name`; [`Method::Other`] for a name the enum does not know.
            #[must_use]
            pub fn parse(name: &str) -> Self {
                match name {
                    $($name => Self::$variant,)*
                    other => Self::Other(other.to_owned()),
                }
            }

            /// The method's name on the wire (for [`Method::Other`], the name it was parsed
            /// from).
            #[must_use]
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $name,)*
                    Self::Other(name) => name,
                }
            }
        }
    };
}

methods! {
    // Lifecycle.
    /// `initialize`: the 2025-era handshake (removed in 2026-07-28).
    Initialize => "initialize",
    /// `notifications/initialized`: the 2025-era client finished the handshake.
    Initialized => "notifications/initialized",
    /// `server/discover`: the 2026-07-28 era's stateless handshake.
    Discover => "server/discover",
    /// `ping` (removed in 2026-07-28).
    Ping => "ping",
    /// `notifications/cancelled`: the sender gave up on one of its requests.
    Cancelled => "notifications/cancelled",
    /// `notifications/progress`: progress of a request that asked for it.
    Progress => "notifications/progress",

    // Tools, prompts, resources.
    /// `tools/list`.
    ToolsList => "tools/list",
    /// `tools/call`.
    ToolsCall => "tools/call",
    /// `notifications/tools/list_changed`.
    ToolsListChanged => "notifications/tools/list_changed",
    /// `tools/catalog`: one light entry per tool (draft SEP "Progressive Tool Disclosure";
    /// served by the budget layer with `[discover] native_disclosure`).
    ToolsCatalog => "tools/catalog",
    /// `tools/describe`: full tools by name (the same draft SEP).
    ToolsDescribe => "tools/describe",
    /// `prompts/list`.
    PromptsList => "prompts/list",
    /// `prompts/get`.
    PromptsGet => "prompts/get",
    /// `notifications/prompts/list_changed`.
    PromptsListChanged => "notifications/prompts/list_changed",
    /// `resources/list`.
    ResourcesList => "resources/list",
    /// `resources/templates/list`.
    ResourcesTemplatesList => "resources/templates/list",
    /// `resources/read`.
    ResourcesRead => "resources/read",
    /// `resources/subscribe` (removed in 2026-07-28: `subscriptions/listen` replaces it).
    ResourcesSubscribe => "resources/subscribe",
    /// `resources/unsubscribe` (removed in 2026-07-28).
    ResourcesUnsubscribe => "resources/unsubscribe",
    /// `notifications/resources/list_changed`.
    ResourcesListChanged => "notifications/resources/list_changed",
    /// `notifications/resources/updated`: a subscribed resource changed.
    ResourcesUpdated => "notifications/resources/updated",
    /// `completion/complete`: argument completion for a prompt or resource template.
    CompletionComplete => "completion/complete",

    // Logging.
    /// `logging/setLevel`: the 2025-era session's log level (removed in 2026-07-28).
    LoggingSetLevel => "logging/setLevel",
    /// `notifications/message`: a log message.
    LogMessage => "notifications/message",

    // Subscriptions (2026-07-28).
    /// `subscriptions/listen`: a modern client's stream of list and resource notifications.
    SubscriptionsListen => "subscriptions/listen",
    /// `notifications/subscriptions/acknowledged`: what a `subscriptions/listen` will carry.
    SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged",

    // Tasks.
    /// `tasks/get`.
    TasksGet => "tasks/get",
    /// `tasks/result`.
    TasksResult => "tasks/result",
    /// `tasks/cancel`.
    TasksCancel => "tasks/cancel",
    /// `tasks/update` (2026-07-28).
    TasksUpdate => "tasks/update",
    /// `tasks/list`.
    TasksList => "tasks/list",
    /// `notifications/tasks/status`.
    TasksStatus => "notifications/tasks/status",

    // Server→client requests.
    /// `sampling/createMessage`.
    SamplingCreateMessage => "sampling/createMessage",
    /// `elicitation/create`.
    ElicitationCreate => "elicitation/create",
    /// `notifications/elicitation/complete`: a URL-mode elicitation finished.
    ElicitationComplete => "notifications/elicitation/complete",
    /// `roots/list`.
    RootsList => "roots/list",
    /// `notifications/roots/list_changed`.
    RootsListChanged => "notifications/roots/list_changed",
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name of the 2025-11-25 and 2026-07-28 schemas that the crate reads or writes,
    /// and of the draft SEPs it serves.
    const SPEC_NAMES: &[&str] = &[
        "initialize",
        "notifications/initialized",
        "server/discover",
        "ping",
        "notifications/cancelled",
        "notifications/progress",
        "tools/list",
        "tools/call",
        "notifications/tools/list_changed",
        "tools/catalog",
        "tools/describe",
        "prompts/list",
        "prompts/get",
        "notifications/prompts/list_changed",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "completion/complete",
        "logging/setLevel",
        "notifications/message",
        "subscriptions/listen",
        "notifications/subscriptions/acknowledged",
        "tasks/get",
        "tasks/result",
        "tasks/cancel",
        "tasks/update",
        "tasks/list",
        "notifications/tasks/status",
        "sampling/createMessage",
        "elicitation/create",
        "notifications/elicitation/complete",
        "roots/list",
        "notifications/roots/list_changed",
    ];

    #[test]
    fn every_spec_name_is_known_and_round_trips() {
        for name in SPEC_NAMES {
            let method = Method::parse(name);
            assert!(!matches!(method, Method::Other(_)), "{name} is not known");
            assert_eq!(method.as_str(), *name);
            assert_eq!(method.to_string(), *name);
        }
        assert_eq!(Method::KNOWN.len(), SPEC_NAMES.len());
    }

    #[test]
    fn known_methods_have_distinct_names() {
        let mut seen = std::collections::HashSet::new();
        for method in Method::KNOWN {
            assert!(seen.insert(method.as_str()), "{method} twice");
            assert_eq!(Method::parse(method.as_str()), *method);
        }
    }

    #[test]
    fn unknown_names_are_kept_exactly() {
        for name in [
            "",
            "tools/frobnicate",
            "Tools/List",
            "tools/list ",
            "notifications/x",
        ] {
            let method = Method::parse(name);
            assert_eq!(method, Method::Other(name.to_owned()));
            assert_eq!(method.as_str(), name);
        }
    }
}
