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
//! // What the layers ask is answered here, in one table, not by string matches of their own.
//! assert!(Method::ToolsCall.is_call() && Method::ToolsCall.result_reaches_model());
//! assert!(!Method::ToolsList.is_call());
//! ```
//!
//! # The sets the layers ask about
//!
//! Each predicate below is one deliberate set, declared here once; they overlap but are not
//! the same (what `[limits]` counts as a call is not what `[guard]` sanitizes), so none is
//! written in terms of another.
//!
//! | predicate | methods | who asks |
//! |---|---|---|
//! | [`Method::is_call`] | `tools/call`, `prompts/get`, `resources/read`, `completion/complete` | `limit` (rates and slots) |
//! | [`Method::result_reaches_model`] | `tools/call`, `prompts/get`, `resources/read`, `initialize`, `server/discover` | `guard` (sanitizing results) |
//! | [`Method::names`] | `tools/call` and `prompts/get` (a name), `resources/read` and `resources/subscribe` (a URI), `completion/complete` (a `ref`) | routing, `guard` (quarantine) |
//! | [`Method::takes_arguments`] | `tools/call`, `prompts/get` | `authorize` (argument rules), logs |
//! | [`Method::lists`] | `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list` | `authorize` (list filtering) |
//! | [`Method::removed_in_modern`] | `initialize`, `ping`, `logging/setLevel`, `resources/subscribe`, `resources/unsubscribe` | the modern era's refusal |
//! | [`Method::mirrored_field`] | `tools/call`, `prompts/get` (`name`), `resources/read` (`uri`) | the modern `Mcp-Name` header |
//! | [`Method::result_is_cacheable`] | the four lists, `resources/read` | the modern result's cache hints |
//! | [`Method::needs_capability`] | `sampling/createMessage`, `elicitation/create`, `roots/list` | the bridge (server→client requests) |
//! | [`Method::notification`] | the `notifications/*` methods | the gateway's dispatch |

/// Declares [`Method`] and [`Notification`] from one table, so that the variants,
/// [`Method::parse`], [`Method::as_str`], [`Method::notification`] and [`Method::KNOWN`] cannot
/// disagree.
macro_rules! methods {
    (
        requests { $($(#[doc = $rdoc:literal])* $request:ident => $rname:literal,)* }
        notifications { $($(#[doc = $ndoc:literal])* $note:ident => $nname:literal,)* }
    ) => {
        /// An MCP method name (requests and notifications, both directions, both eras).
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Method {
            $($(#[doc = $rdoc])* $request,)*
            $($(#[doc = $ndoc])* $note,)*
            /// Any other name, kept exactly as it came.
            Other(Box<str>),
        }

        /// The notifications among the [`Method`]s: what a `match` that only cares about
        /// notifications matches exhaustively ([`Method::notification`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Notification {
            $($(#[doc = $ndoc])* $note,)*
        }

        impl Method {
            /// Every method the enum names (all but [`Method::Other`]), requests first.
            pub const KNOWN: &'static [Self] = &[$(Self::$request,)* $(Self::$note,)*];

            /// The method called `name`; [`Method::Other`] for a name the enum does not know.
            #[must_use]
            pub fn parse(name: &str) -> Self {
                Self::known(name).unwrap_or_else(|| Self::Other(name.into()))
            }

            /// The method called `name` when the enum names it; `None` for any other name (no
            /// allocation either way: what a caller that only asks a predicate uses).
            #[must_use]
            pub fn known(name: &str) -> Option<Self> {
                match name {
                    $($rname => Some(Self::$request),)*
                    $($nname => Some(Self::$note),)*
                    _ => None,
                }
            }

            /// The method's name on the wire (for [`Method::Other`], the name it was parsed
            /// from).
            #[must_use]
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$request => $rname,)*
                    $(Self::$note => $nname,)*
                    Self::Other(name) => name,
                }
            }

            /// The notification it is, when it is one the enum names.
            #[must_use]
            pub fn notification(&self) -> Option<Notification> {
                match self {
                    $(Self::$note => Some(Notification::$note),)*
                    _ => None,
                }
            }
        }
    };
}

methods! {
    requests {
        /// `initialize`: the 2025-era handshake (removed in 2026-07-28).
        Initialize => "initialize",
        /// `server/discover`: the 2026-07-28 era's stateless handshake.
        Discover => "server/discover",
        /// `ping` (removed in 2026-07-28).
        Ping => "ping",
        /// `tools/list`.
        ToolsList => "tools/list",
        /// `tools/call`.
        ToolsCall => "tools/call",
        /// `tools/catalog`: one light entry per tool (draft SEP "Progressive Tool Disclosure";
        /// served by the budget layer with `[discover] native_disclosure`).
        ToolsCatalog => "tools/catalog",
        /// `tools/describe`: full tools by name (the same draft SEP).
        ToolsDescribe => "tools/describe",
        /// `prompts/list`.
        PromptsList => "prompts/list",
        /// `prompts/get`.
        PromptsGet => "prompts/get",
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
        /// `completion/complete`: argument completion for a prompt or resource template.
        CompletionComplete => "completion/complete",
        /// `logging/setLevel`: the 2025-era session's log level (removed in 2026-07-28).
        LoggingSetLevel => "logging/setLevel",
        /// `subscriptions/listen`: a modern client's stream of list and resource notifications.
        SubscriptionsListen => "subscriptions/listen",
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
        /// `sampling/createMessage`.
        SamplingCreateMessage => "sampling/createMessage",
        /// `elicitation/create`.
        ElicitationCreate => "elicitation/create",
        /// `roots/list`.
        RootsList => "roots/list",
    }
    notifications {
        /// `notifications/initialized`: the 2025-era client finished the handshake.
        Initialized => "notifications/initialized",
        /// `notifications/cancelled`: the sender gave up on one of its requests.
        Cancelled => "notifications/cancelled",
        /// `notifications/progress`: progress of a request that asked for it.
        Progress => "notifications/progress",
        /// `notifications/tools/list_changed`.
        ToolsListChanged => "notifications/tools/list_changed",
        /// `notifications/prompts/list_changed`.
        PromptsListChanged => "notifications/prompts/list_changed",
        /// `notifications/resources/list_changed`.
        ResourcesListChanged => "notifications/resources/list_changed",
        /// `notifications/resources/updated`: a subscribed resource changed.
        ResourcesUpdated => "notifications/resources/updated",
        /// `notifications/message`: a log message.
        LogMessage => "notifications/message",
        /// `notifications/subscriptions/acknowledged`: what a `subscriptions/listen` will carry.
        SubscriptionsAcknowledged => "notifications/subscriptions/acknowledged",
        /// `notifications/tasks/status`.
        TasksStatus => "notifications/tasks/status",
        /// `notifications/elicitation/complete`: a URL-mode elicitation finished.
        ElicitationComplete => "notifications/elicitation/complete",
        /// `notifications/roots/list_changed`.
        RootsListChanged => "notifications/roots/list_changed",
    }
}

/// What a request's params name, for routing: where [`Method::names`] says to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// A tool, by its exposed `name`.
    Tool,
    /// A prompt, by its exposed `name`.
    Prompt,
    /// A resource, by its `uri`.
    Uri,
    /// The prompt or resource template whose argument `ref` completes.
    Completed,
}

/// What a list method lists ([`Method::lists`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// `tools/list`.
    Tools,
    /// `prompts/list`.
    Prompts,
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
}

impl Listed {
    /// The lists a server announces changes of (`notifications/*/list_changed`). Templates
    /// change with `resources`: MCP has no notification of templates alone.
    pub const ANNOUNCED: [Self; 3] = [Self::Tools, Self::Prompts, Self::Resources];

    /// Its key in a server's capabilities: `tools`, `prompts`, `resources` (templates are
    /// `resources`').
    #[must_use]
    pub fn capability(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources | Self::Templates => "resources",
        }
    }

    /// The notification that says it changed (templates: `resources`').
    #[must_use]
    pub fn changed(self) -> Method {
        match self {
            Self::Tools => Method::ToolsListChanged,
            Self::Prompts => Method::PromptsListChanged,
            Self::Resources | Self::Templates => Method::ResourcesListChanged,
        }
    }
}

/// The sets of methods the layers ask about (see the module docs' table). Each is a set of its
/// own: what counts as a call for limits is not what is sanitized.
impl Method {
    /// The list a `notifications/*/list_changed` says changed.
    #[doc(hidden)]
    #[must_use]
    pub fn list_changed(&self) -> Option<Listed> {
        match self {
            Self::ToolsListChanged => Some(Listed::Tools),
            Self::PromptsListChanged => Some(Listed::Prompts),
            Self::ResourcesListChanged => Some(Listed::Resources),
            _ => None,
        }
    }

    /// Whether it is a call: it reaches an upstream's tool, prompt, resource or completion
    /// (what `[limits]` rates and slots count).
    #[must_use]
    pub fn is_call(&self) -> bool {
        matches!(
            self,
            Self::ToolsCall | Self::PromptsGet | Self::ResourcesRead | Self::CompletionComplete
        )
    }

    /// Whether a model reads its result (what `[guard]` sanitizes): calls, gets, reads and
    /// the handshake's `instructions`.
    #[must_use]
    pub fn result_reaches_model(&self) -> bool {
        matches!(
            self,
            Self::ToolsCall
                | Self::PromptsGet
                | Self::ResourcesRead
                | Self::Initialize
                | Self::Discover
        )
    }

    /// What its params name, for the request to be routed; `None` for a method that names
    /// nothing an upstream serves.
    #[doc(hidden)]
    #[must_use]
    pub fn names(&self) -> Option<Names> {
        match self {
            Self::ToolsCall => Some(Names::Tool),
            Self::PromptsGet => Some(Names::Prompt),
            Self::ResourcesRead | Self::ResourcesSubscribe => Some(Names::Uri),
            Self::CompletionComplete => Some(Names::Completed),
            _ => None,
        }
    }

    /// Whether its params carry a tool's or prompt's `name` and its `arguments`.
    #[must_use]
    pub fn takes_arguments(&self) -> bool {
        matches!(self, Self::ToolsCall | Self::PromptsGet)
    }

    /// What it lists, for a list of catalog items.
    #[doc(hidden)]
    #[must_use]
    pub fn lists(&self) -> Option<Listed> {
        match self {
            Self::ToolsList => Some(Listed::Tools),
            Self::PromptsList => Some(Listed::Prompts),
            Self::ResourcesList => Some(Listed::Resources),
            Self::ResourcesTemplatesList => Some(Listed::Templates),
            _ => None,
        }
    }

    /// Whether 2026-07-28 removed it: a modern request for it is answered `-32601`.
    #[must_use]
    pub fn removed_in_modern(&self) -> bool {
        matches!(
            self,
            Self::Initialize
                | Self::Ping
                | Self::LoggingSetLevel
                | Self::ResourcesSubscribe
                | Self::ResourcesUnsubscribe
        )
    }

    /// The `params` field that a modern HTTP request's `Mcp-Name` header mirrors (`name` or
    /// `uri`), for the methods that name a target.
    #[must_use]
    pub fn mirrored_field(&self) -> Option<&'static str> {
        match self {
            Self::ToolsCall | Self::PromptsGet => Some("name"),
            Self::ResourcesRead => Some("uri"),
            _ => None,
        }
    }

    /// Whether a modern result of it is cacheable and carries `ttlMs` and `cacheScope`: the
    /// lists, and `resources/read`.
    #[must_use]
    pub fn result_is_cacheable(&self) -> bool {
        self.lists().is_some() || *self == Self::ResourcesRead
    }

    /// The client capability it needs, for a server→client request (`sampling`,
    /// `elicitation`, `roots`).
    #[must_use]
    pub fn needs_capability(&self) -> Option<&'static str> {
        match self {
            Self::SamplingCreateMessage => Some("sampling"),
            Self::ElicitationCreate => Some("elicitation"),
            Self::RootsList => Some("roots"),
            _ => None,
        }
    }

    /// Whether it is a notification the enum names (`notifications/…`): never answered.
    #[must_use]
    pub fn is_notification(&self) -> bool {
        self.notification().is_some()
    }
}

/// The empty name (`Other("")`, no allocation): what a message without a method (an answer)
/// reads as.
impl Default for Method {
    fn default() -> Self {
        Self::Other(Box::default())
    }
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
    fn the_notifications_are_the_notifications_names() {
        for method in Method::KNOWN {
            let named = method.as_str().starts_with("notifications/");
            assert_eq!(method.is_notification(), named, "{method}");
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
            assert_eq!(method, Method::Other(name.into()));
            assert_eq!(method.as_str(), name);
            assert_eq!(Method::known(name), None);
        }
    }
}
