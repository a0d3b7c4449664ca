//! The server `instructions` a host that searches tools itself reads (`mode = "host_search"`).
//!
//! Hosts that defer tools themselves (Claude Code's tool search, `OpenAI`'s `tool_search` with
//! deferred loading) load tool *names* and the server's `instructions` at start, and a tool's
//! definition only once their search picks it. What the model knows before searching is then
//! these instructions: so they say which upstreams sit behind the gateway, what each is for (its
//! own instructions, cleaned and bounded), how many tools it has with a few of their names, and
//! how names are built (`<server><separator><tool>`), so that a search for a server's name or a
//! tool's verb finds the right tools.
//!
//! Pure: [`host_search_instructions`] takes plain values; the budget layer feeds it the catalog
//! and the gateway's own instructions (one `## <server>` section per upstream that has any,
//! [`upstream_sections`] splits them).
//!
//! ```
//! use mcp_budget::discover::{host_search_instructions, ServerNote};
//!
//! let servers = [ServerNote {
//!     server: "github",
//!     tools: vec!["github__get_issue", "github__create_issue"],
//!     instructions: Some("Issues, pull requests and code of GitHub repositories."),
//! }];
//! let text = host_search_instructions(&servers, "__", None);
//! assert!(text.contains("`<server>__<tool>`"));
//! assert!(text.contains("## github (2 tools: github__get_issue, github__create_issue)"));
//! assert!(text.contains("Issues, pull requests"));
//! ```

use std::fmt::Write as _;

/// Most characters of one upstream's own instructions kept (then cut at a word, with `…`).
pub const SERVER_CHARS: usize = 600;
/// Most characters of the gateway's instructions kept when they name no upstream.
pub const GENERAL_CHARS: usize = 1_200;
/// Tool names shown per server.
const EXAMPLE_TOOLS: usize = 6;

/// What the instructions say about one upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerNote<'a> {
    /// The server's id (the prefix of its exposed tool names).
    pub server: &'a str,
    /// Its tools' exposed names, in listing order.
    pub tools: Vec<&'a str>,
    /// Its own instructions, if it sent any.
    pub instructions: Option<&'a str>,
}

/// The instructions for a host that searches tools itself: how names are built, then one
/// section per server (tool count, the first tool names, its own instructions cleaned of
/// control and invisible characters and cut to [`SERVER_CHARS`]). `general` (instructions
/// that belong to no server) comes after, cleaned and cut to [`GENERAL_CHARS`].
#[must_use]
pub fn host_search_instructions(
    servers: &[ServerNote<'_>],
    separator: &str,
    general: Option<&str>,
) -> String {
    let mut out = String::new();
    let tools: usize = servers.iter().map(|s| s.tools.len()).sum();
    let _ = write!(
        out,
        "This gateway serves {tools} tool{} of {} server{}. Every tool is named \
         `<server>{separator}<tool>`: search for a server's name to find its tools, or for what \
         a tool does (its verb and object, e.g. \"create issue\").",
        plural(tools),
        servers.len(),
        plural(servers.len()),
    );
    for note in servers {
        let _ = write!(
            out,
            "\n\n## {} ({} tool{}",
            note.server,
            note.tools.len(),
            plural(note.tools.len())
        );
        if !note.tools.is_empty() {
            out.push_str(": ");
            out.push_str(&note.tools[..note.tools.len().min(EXAMPLE_TOOLS)].join(", "));
            if note.tools.len() > EXAMPLE_TOOLS {
                out.push_str(", …");
            }
        }
        out.push(')');
        if let Some(text) = note.instructions.map(|t| bounded(&clean(t), SERVER_CHARS)) {
            if !text.is_empty() {
                out.push('\n');
                out.push_str(&text);
            }
        }
    }
    if let Some(text) = general.map(|t| bounded(&clean(t), GENERAL_CHARS)) {
        if !text.is_empty() {
            out.push_str("\n\n");
            out.push_str(&text);
        }
    }
    out
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Splits the gateway's instructions (`## <server>\n<text>` per upstream, blank lines between)
/// into each named server's text and what belongs to none (`None` when nothing does).
#[must_use]
pub fn upstream_sections<'a>(
    text: &'a str,
    servers: &[&str],
) -> (Vec<(usize, &'a str)>, Option<&'a str>) {
    // Header positions: a line `## <server>` of a known server, at the start or after a line end.
    let mut heads: Vec<(usize, usize, usize)> = Vec::new(); // (start, body start, server)
    for (s, server) in servers.iter().enumerate() {
        let head = format!("## {server}\n");
        let mut from = 0;
        while let Some(at) = text[from..].find(&head).map(|p| p + from) {
            if at == 0 || text[..at].ends_with('\n') {
                heads.push((at, at + head.len(), s));
                break;
            }
            from = at + head.len();
        }
    }
    heads.sort_unstable();
    let general = heads
        .first()
        .map_or(text, |&(start, _, _)| &text[..start])
        .trim();
    let sections = heads
        .iter()
        .enumerate()
        .map(|(k, &(_, body, s))| {
            let end = heads.get(k + 1).map_or(text.len(), |&(next, _, _)| next);
            (s, text[body..end].trim())
        })
        .collect();
    (sections, (!general.is_empty()).then_some(general))
}

/// `text` without control characters (line breaks and tabs kept as spaces or breaks) and
/// without invisible format characters (zero-width, bidirectional overrides, byte order
/// marks), runs of blank lines folded to one.
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push(' '),
            c if c.is_control() || invisible(c) => {}
            c => out.push(c),
        }
    }
    while out.contains("\n\n\n") {
        out = out.replace("\n\n\n", "\n\n");
    }
    out.trim().to_owned()
}

/// Characters that render as nothing but can steer a model (or hide text from a person).
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}' | '\u{FEFF}'
        | '\u{E0000}'..='\u{E007F}')
}

/// At most `max` characters of `text`, cut at the last space before the limit when there is
/// one, with `…` when cut.
fn bounded(text: &str, max: usize) -> String {
    let Some((cut, _)) = text.char_indices().nth(max) else {
        return text.to_owned();
    };
    let head = &text[..cut];
    let head = head.rfind(char::is_whitespace).map_or(head, |i| &head[..i]);
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_split_by_known_servers_only() {
        let text = "Be brief.\n\n## github\nIssues and PRs.\n## not a server\n\n## time\nClocks.";
        let (sections, general) = upstream_sections(text, &["time", "github", "absent"]);
        assert_eq!(
            sections,
            [(1, "Issues and PRs.\n## not a server"), (0, "Clocks.")]
        );
        assert_eq!(general, Some("Be brief."));
        assert_eq!(upstream_sections("## time\nx", &["time"]).1, None);
    }

    #[test]
    fn upstream_text_is_cleaned_and_bounded() {
        let long = format!(
            "Use\u{200B} me\u{202E}.\u{7}\n\n\n\nThen {}",
            "word ".repeat(300)
        );
        let servers = [ServerNote {
            server: "s",
            tools: (0..8).map(|_| "s__t").collect(),
            instructions: Some(&long),
        }];
        let text = host_search_instructions(&servers, "__", Some("\u{1b}[31mgeneral"));
        assert!(text.contains(
            "## s (8 tools: s__t, s__t, s__t, s__t, s__t, s__t, …)\nUse me.\n\nThen word"
        ));
        assert!(!text.contains('\u{200B}') && !text.contains('\u{7}') && !text.contains('\u{1b}'));
        let section = text.split("## s").nth(1).unwrap();
        assert!(section.chars().count() < SERVER_CHARS + 80, "{section}");
        assert!(text.contains("word…"));
        assert!(text.ends_with("[31mgeneral"));
        assert!(text.starts_with("This gateway serves 8 tools of 1 server."));
    }
}
