//! A small, generic vocabulary of words that mean the same thing in tool land: how a user asks
//! for something versus how a tool author names it ("fetch the page" / `get_url_content`).
//!
//! Written from the verbs and nouns that recur in MCP tool names and descriptions in general,
//! not from any labelled query. A query term found in a group also looks for the other words of
//! the group, at a lower weight than the word itself.

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
        "search", "find", "query", "lookup", "seek", "locate", "discover", "look",
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
    &["directory", "folder", "dir"],
    &["content", "text", "body"],
    &["image", "picture", "photo", "screenshot", "icon", "img"],
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
    &["repository", "repo", "project", "codebase"],
    &["issue", "bug", "ticket", "problem"],
    &["error", "exception", "crash", "failure", "fault", "event"],
    &["log", "history", "commit"],
    &["version", "release", "tag"],
    &["package", "dependency", "library", "module", "artifact"],
    &["user", "account", "member", "profile", "person"],
    &["organization", "org", "team", "workspace", "tenant"],
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
            }
        }
    }
}
