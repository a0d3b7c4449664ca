//! A small, generic vocabulary of words that mean the same thing in tool land: how a user asks
//! for something versus how a tool author names it ("fetch the page" / `get_url_content`).
//!
//! Written from the verbs and nouns that recur in MCP tool names and descriptions in general,
//! not from any labelled query. A query term found in a group also looks for the other words of
//! the group, at a lower weight than the word itself. [`ABBREVIATIONS`] are exact: an
//! abbreviation is replaced by its expansion on both sides (query and index), at full weight.

/// Groups of interchangeable words (each is stemmed before use).
pub(crate) const GROUPS: &[&[&str]] = &[
    // Verbs.
    &[
        "get", "fetch", "retrieve", "obtain", "read", "load", "lookup", "access",
    ],
    &[
        "create", "add", "new", "make", "insert", "generate", "build",
    ],
    &[
        "delete", "remove", "erase", "destroy", "drop", "trash", "discard",
    ],
    &[
        "list",
        "show",
        "enumerate",
        "display",
        "browse",
        "view",
        "all",
    ],
    &[
        "search", "find", "query", "lookup", "seek", "discover", "look",
    ],
    &[
        "update", "edit", "modify", "change", "patch", "alter", "revise", "set",
    ],
    &[
        "write", "save", "store", "persist", "record", "put", "export",
    ],
    &[
        "run", "execute", "exec", "invoke", "launch", "start", "call", "perform",
    ],
    &[
        "stop",
        "kill",
        "terminate",
        "cancel",
        "abort",
        "end",
        "halt",
    ],
    &["close", "shut", "exit", "quit"],
    &["open", "navigate", "visit", "goto", "go"],
    &["click", "press", "tap"],
    &["type", "fill", "enter", "input"],
    &["send", "post", "publish", "share", "submit"],
    &["move", "rename", "relocate"],
    // Moving an element on a page is dragging it (`drag`, drag and drop).
    &["drag", "move"],
    &["copy", "duplicate", "clone"],
    &["compare", "diff", "difference"],
    &["download", "fetch", "pull", "grab", "scrape"],
    &["upload", "attach", "push"],
    &["check", "verify", "validate", "ensure", "test", "exist"],
    &[
        "analyze",
        "analysis",
        "analyse",
        "inspect",
        "examine",
        "diagnose",
        "investigate",
    ],
    &["summarize", "summary", "digest", "overview", "abstract"],
    &[
        "explain",
        "describe",
        "detail",
        "details",
        "info",
        "information",
        "metadata",
    ],
    &["calculate", "compute", "evaluate", "math", "arithmetic"],
    &["convert", "transform", "translate", "render"],
    &["extract", "parse", "scrape"],
    &["count", "number", "total", "tally"],
    &["monitor", "watch", "track", "follow"],
    &["sort", "order", "rank"],
    // Things.
    &[
        "web", "internet", "online", "website", "site", "webpage", "page",
    ],
    &["url", "link", "address", "uri", "href"],
    &["stock", "share", "ticker", "equity", "securities", "symbol"],
    &["price", "quote", "cost", "value", "rate", "valuation"],
    &["money", "currency", "forex", "exchange", "fx"],
    &[
        "crypto",
        "cryptocurrency",
        "bitcoin",
        "coin",
        "token",
        "blockchain",
    ],
    &["company", "corporation", "business", "firm", "enterprise"],
    &[
        "financial",
        "finance",
        "fundamental",
        "statement",
        "earnings",
        "revenue",
    ],
    &["file", "document", "doc"],
    &["directory", "folder"],
    &["content", "text", "body"],
    &["image", "picture", "photo", "screenshot", "icon"],
    &[
        "chart",
        "graph",
        "plot",
        "diagram",
        "visualize",
        "visualization",
    ],
    &["slide", "presentation", "ppt", "powerpoint", "deck"],
    &["spreadsheet", "excel", "sheet", "xlsx", "workbook", "table"],
    &["word", "docx"],
    &["pdf", "paper", "article"],
    &["paper", "article", "publication", "research", "preprint"],
    &["news", "headline", "article", "story"],
    &["repository", "project", "codebase"],
    &["issue", "bug", "ticket", "problem"],
    &["error", "exception", "crash", "failure", "fault", "event"],
    &["log", "history", "commit"],
    &["version", "release", "tag"],
    &["package", "dependency", "library", "module", "artifact"],
    &["user", "account", "member", "profile", "person"],
    &["organization", "team", "workspace", "tenant"],
    &["message", "chat", "conversation", "mail", "email"],
    &["comment", "reply", "review", "feedback"],
    &["task", "todo", "job", "assignment"],
    &["note", "memory", "knowledge", "remember", "memo"],
    &["weather", "forecast", "temperature", "climate"],
    &[
        "location",
        "place",
        "map",
        "geo",
        "coordinate",
        "latitude",
        "longitude",
        "address",
    ],
    &[
        "route",
        "direction",
        "path",
        "navigation",
        "itinerary",
        "travel",
    ],
    &["near", "nearby", "around", "close", "vicinity"],
    &["time", "date", "clock", "timezone", "today", "now"],
    &[
        "current", "latest", "recent", "newest", "live", "realtime", "today",
    ],
    &["trend", "trending", "popular", "hot", "top", "ranking"],
    &["video", "youtube", "clip"],
    &["transcript", "subtitle", "caption"],
    &["music", "audio", "song", "sound", "track"],
    &["train", "rail", "railway", "railroad"],
    &["ticket", "booking", "reservation", "fare"],
    &["recipe", "cook", "cooking", "dish", "meal", "food"],
    &["random", "dice", "roll", "shuffle"],
    &["wiki", "wikipedia", "encyclopedia"],
    &["definition", "meaning", "define", "dictionary"],
    &["game", "gaming", "match", "player"],
    &["component", "widget", "element", "ui"],
    &["element", "selector", "node"],
    &["browser", "tab", "window"],
    &["dropdown", "select", "option"],
    &["domain", "whois", "registrar", "dns"],
    &["trace", "span", "tracing", "transaction"],
    &["performance", "latency", "slow", "speed"],
    &["dataset", "data", "record"],
    &["statistic", "stats", "metric", "measure"],
    &["sitemap", "crawl", "crawler", "spider"],
    &["mindmap", "mind"],
    &["size", "bytes", "length"],
    &["tree", "hierarchy", "recursive", "nested"],
    &["command", "shell", "terminal", "process", "cli"],
    &["container", "docker", "image"],
    &["code", "source", "snippet", "program"],
    &["script", "javascript", "js"],
    // Arithmetic "add" (a calculator's `sum`), next to the "create" sense above.
    &["sum", "add", "plus", "addition"],
    // Code-hosting and chat reactions are emoji.
    &["reaction", "react", "emoji"],
];

/// Verbs that mean *create* when an article or `new` follows them: trackers and code hosts
/// say "open an issue", "file a bug", "raise a ticket", "report a bug", chat and task tools
/// "start a new thread". `replace`: the word's own sense is not meant there ("file a bug" is
/// not about files), so only *create* is looked for.
pub(crate) const CREATE_VERBS: &[(&str, bool)] = &[
    ("file", true),
    ("open", false),
    ("raise", false),
    ("report", false),
    ("start", false),
];

/// Words after which a [`CREATE_VERBS`] verb means *create*.
pub(crate) const CREATE_OBJECTS_FOLLOW: &[&str] = &["a", "an", "another", "new"];

/// Whether `word` followed by `next` means *create* ("open a ticket", "file a bug"): `None` when
/// not, `Some(replace)` when it does, `replace` saying that the word's own sense is not meant.
pub(crate) fn creates(word: &str, next: Option<&str>) -> Option<bool> {
    let next = next?.trim_matches(|c: char| !c.is_alphanumeric());
    if !CREATE_OBJECTS_FOLLOW
        .iter()
        .any(|w| w.eq_ignore_ascii_case(next))
    {
        return None;
    }
    let word = word.trim_matches(|c: char| !c.is_alphanumeric());
    CREATE_VERBS
        .iter()
        .find(|(verb, _)| verb.eq_ignore_ascii_case(word))
        .map(|&(_, replace)| replace)
}

/// Abbreviations of tool land and what they stand for, each in the sense that tool names, API
/// docs and issue trackers use it (see `docs/search.md`). Only unambiguous ones: `doc` (a file
/// or documentation?), `desc` (description or descending?), `mr` (merge request or Mr.) are left
/// out, and so are file extensions (`py`, `txt`, `js`), which name a format, not a word. Plurals come for free (`PRs`, `repos`: the stem is looked up).
pub(crate) const ABBREVIATIONS: &[(&str, &str)] = &[
    ("pr", "pull request"),
    ("repo", "repository"),
    ("gh", "github"),
    ("dir", "directory"),
    ("org", "organization"),
    ("env", "environment"),
    ("config", "configuration"),
    ("cfg", "configuration"),
    ("db", "database"),
    ("msg", "message"),
    ("dm", "direct message"),
    ("img", "image"),
    ("pic", "picture"),
    ("vid", "video"),
    ("auth", "authentication"),
    ("k8s", "kubernetes"),
    ("dep", "dependency"),
    ("pkg", "package"),
    ("lib", "library"),
    ("app", "application"),
    ("param", "parameter"),
    ("arg", "argument"),
    ("num", "number"),
    ("calc", "calculate"),
    ("addr", "address"),
    ("lat", "latitude"),
    ("lng", "longitude"),
    ("lon", "longitude"),
    ("tz", "timezone"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_lower_case_words() {
        for group in GROUPS {
            assert!(group.len() >= 2);
            for word in *group {
                assert!(word.chars().all(|c| c.is_ascii_lowercase()), "{word}");
                // An abbreviation is replaced before groups are consulted.
                assert!(
                    ABBREVIATIONS.iter().all(|(short, _)| short != word),
                    "{word}"
                );
            }
        }
    }

    #[test]
    fn a_verb_before_an_article_creates() {
        assert_eq!(creates("file", Some("a")), Some(true));
        assert_eq!(creates("Open", Some("an")), Some(false));
        assert_eq!(creates("open", Some("new")), Some(false));
        // An adjective ("open issues") or the end of the query: not a creation.
        assert_eq!(creates("open", Some("issues")), None);
        assert_eq!(creates("open", None), None);
        assert_eq!(creates("read", Some("a")), None);
    }

    #[test]
    fn abbreviations_are_lower_case_and_unique() {
        for (i, (short, long)) in ABBREVIATIONS.iter().enumerate() {
            assert!(
                short
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
                "{short}"
            );
            assert!(
                long.chars().all(|c| c.is_ascii_lowercase() || c == ' '),
                "{long}"
            );
            assert!(
                ABBREVIATIONS[..i].iter().all(|(s, _)| s != short),
                "{short}"
            );
        }
    }
}
