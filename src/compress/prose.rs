//! Prose: cleaning tool and parameter descriptions of markup and noise, and cutting them
//! to a paragraph, a sentence, a few words or a number of characters. Pure string work,
//! shared by every level.

use serde_json::Value;

/// Whether two names are the same words (`get_issue` ~ "Get issue").
pub(super) fn same_words(a: &str, b: &str) -> bool {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .flat_map(char::to_lowercase)
            .collect()
    };
    let a = norm(a);
    !a.is_empty() && a == norm(b)
}

/// Openers that add no meaning; removed at `low`, case-insensitively.
const BOILERPLATE: &[&str] = &[
    "this tool allows you to ",
    "this tool lets you ",
    "this tool can be used to ",
    "this tool is used to ",
    "this tool will ",
    "this tool ",
    "use this tool to ",
    "use this to ",
    "a tool to ",
    "a tool that ",
    "tool to ",
    "tool that ",
    "allows you to ",
    "lets you ",
];

/// `low`: strips markdown and noise, keeping every sentence.
pub(super) fn clean(text: &str, schema: Option<&Value>, keep_headings: bool) -> String {
    let mut cleaner = Cleaner::new(schema, keep_headings);
    for raw_line in text.lines() {
        cleaner.line(raw_line);
    }
    strip_boilerplate(&paragraphs(cleaner.finish(), text.len()))
}

/// [`clean`]'s walk over a description's lines, with what it knows of the schema.
struct Cleaner<'a> {
    schema: Option<&'a Value>,
    /// The schema's parameter names, lower-cased.
    params: Vec<String>,
    keep_headings: bool,
    /// The lines kept so far; an empty one is a paragraph break.
    lines: Vec<String>,
    in_fence: bool,
    /// The lines of the fenced block being read, kept unless it only repeats the schema.
    fence_lines: Vec<String>,
    /// In an `Args:` section, where lines naming described parameters are dropped.
    skipping_args: bool,
    /// Just after a heading, where a blank line adds no break.
    after_heading: bool,
}

impl<'a> Cleaner<'a> {
    fn new(schema: Option<&'a Value>, keep_headings: bool) -> Self {
        let params = schema
            .and_then(|s| s.get("properties"))
            .and_then(Value::as_object)
            .map(|p| p.keys().map(|k| k.to_lowercase()).collect())
            .unwrap_or_default();
        Self {
            schema,
            params,
            keep_headings,
            lines: Vec::new(),
            in_fence: false,
            fence_lines: Vec::new(),
            skipping_args: false,
            after_heading: false,
        }
    }

    fn line(&mut self, raw_line: &str) {
        let trimmed = raw_line.trim();
        if trimmed.starts_with("```") {
            self.fence();
        } else if self.in_fence {
            self.fence_lines.push(collapse_spaces(trimmed));
        } else if !self.args_line(raw_line, trimmed) {
            self.text_line(trimmed);
        }
    }

    /// A fence opens or closes a block.
    fn fence(&mut self) {
        if self.in_fence {
            // A fenced block that only shows a JSON call repeating the schema is noise.
            let body = self.fence_lines.join("\n");
            if !looks_like_schema_example(&body, &self.params) {
                self.lines.append(&mut self.fence_lines);
            }
            self.fence_lines.clear();
        }
        self.in_fence = !self.in_fence;
    }

    /// Docstring `Args:` sections repeat the schema when every listed argument is a described
    /// parameter: whether the line was one of such a section (and is dealt with).
    fn args_line(&mut self, raw_line: &str, trimmed: &str) -> bool {
        let lower = trimmed.to_lowercase();
        if matches!(
            lower.as_str(),
            "args:" | "arguments:" | "parameters:" | "params:" | "inputs:"
        ) {
            self.skipping_args = true;
            return true;
        }
        if !self.skipping_args {
            return false;
        }
        if trimmed.is_empty() {
            return true;
        }
        let indented = raw_line.starts_with([' ', '\t']) || trimmed.starts_with(['-', '*']);
        let arg = trimmed
            .trim_start_matches(['-', '*', ' '])
            .split([':', ' ', '('])
            .next()
            .unwrap_or("")
            .trim_matches('`')
            .to_lowercase();
        if indented && self.params.contains(&arg) && self.described(&arg) {
            return true;
        }
        if indented && self.params.contains(&arg) {
            // Not described in the schema: this line is the only place the meaning is.
            self.lines.push(clean_inline(trimmed));
            return true;
        }
        self.skipping_args = false;
        false
    }

    /// Whether the schema describes parameter `name`.
    fn described(&self, name: &str) -> bool {
        self.schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str)
            .is_some_and(|d| !d.trim().is_empty())
    }

    /// A line of prose, a heading or a blank line.
    fn text_line(&mut self, trimmed: &str) {
        // Headings are recognised after inline markup is gone (`*#` cleans to `#`), so that
        // cleaning a cleaned text changes nothing.
        let inline = clean_inline(trimmed);
        if let Some(heading) = inline.strip_prefix('#') {
            // A heading labels what follows: kept as `Heading:` at `low`, dropped from summaries.
            let heading = clean_inline(heading.trim_start_matches('#'));
            if self.keep_headings && !heading.is_empty() {
                self.lines.push(if heading.ends_with(':') {
                    heading
                } else {
                    format!("{heading}:")
                });
            }
            self.after_heading = true;
            return;
        }
        let line = inline;
        if line.is_empty() {
            if !self.after_heading && self.lines.last().is_some_and(|l| !l.is_empty()) {
                self.lines.push(String::new());
            }
            return;
        }
        self.after_heading = false;
        self.lines.push(line);
    }

    /// The lines kept, an unclosed fence's included, without trailing breaks.
    fn finish(mut self) -> Vec<String> {
        self.lines.append(&mut self.fence_lines);
        while self.lines.last().is_some_and(String::is_empty) {
            self.lines.pop();
        }
        self.lines
    }
}

/// `lines` joined, runs of blank lines made one paragraph break (`\n\n`), which
/// `first_paragraph` uses.
fn paragraphs(lines: Vec<String>, capacity: usize) -> String {
    let mut out = String::with_capacity(capacity);
    let mut blank = false;
    for line in lines {
        if line.is_empty() {
            blank = true;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { "\n" });
        }
        blank = false;
        out.push_str(&line);
    }
    out
}

fn looks_like_schema_example(body: &str, params: &[String]) -> bool {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(body) else {
        return false;
    };
    let obj = match obj.get("arguments").or_else(|| obj.get("params")) {
        Some(Value::Object(inner)) => inner.clone(),
        _ => obj,
    };
    !obj.is_empty() && obj.keys().all(|k| params.contains(&k.to_lowercase()))
}

/// `text` without its boilerplate openers (all of them, so that cleaning twice changes
/// nothing), its first letter upper-cased when one was removed.
pub(super) fn strip_boilerplate(text: &str) -> String {
    let mut rest = text;
    while let Some(opener) = BOILERPLATE.iter().find(|o| {
        rest.get(..o.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(o))
    }) {
        rest = &rest[opener.len()..];
    }
    if rest.len() == text.len() {
        return text.to_owned();
    }
    let mut chars = rest.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Markdown emphasis, inline code, links and images → plain text; spaces collapsed.
pub(super) fn clean_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' | '`' => {}
            '_' if (i + 1 < chars.len() && chars[i + 1] == '_')
                || (i > 0 && chars[i - 1] == '_') =>
            {
                // `__bold__`; a lone `_` is kept (snake_case names).
                let word_inside = i > 0
                    && chars[i - 1].is_alphanumeric()
                    && i + 2 < chars.len()
                    && chars[i + 2].is_alphanumeric();
                if word_inside {
                    out.push(c);
                }
            }
            '!' if chars.get(i + 1) == Some(&'[') => {}
            '[' => {
                // `[text](url)` → `text`.
                if let Some(close) = chars[i..].iter().position(|&x| x == ']') {
                    let end = i + close;
                    if chars.get(end + 1) == Some(&'(') {
                        if let Some(paren) = chars[end..].iter().position(|&x| x == ')') {
                            out.extend(&chars[i + 1..end]);
                            i = end + paren + 1;
                            continue;
                        }
                    }
                }
                out.push(c);
            }
            _ => out.push(c),
        }
        i += 1;
    }
    let out = out.trim_start_matches(['>', ' ']);
    let out = if let Some(rest) = out.strip_prefix("* ").or_else(|| out.strip_prefix("+ ")) {
        format!("- {rest}")
    } else {
        out.to_owned()
    };
    collapse_spaces(&out)
}

fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

pub(super) fn one_line(text: &str) -> String {
    collapse_spaces(text)
}

pub(super) fn first_paragraph(text: &str) -> String {
    text.split("\n\n").next().unwrap_or("").trim().to_owned()
}

/// The first sentence: up to the first `. `, `! `, `? `, a full stop of a script written
/// without spaces (`。`, `！`, `？`, `．`), or a line break. A dot inside a word (`Data.gov`,
/// `.docx`, `v1.2`) ends nothing.
pub(super) fn first_sentence(text: &str) -> String {
    let para = text.lines().next().unwrap_or("");
    let mut chars = para.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '.' | '!' | '?' => chars.peek().is_none_or(|&(_, n)| n == ' '),
            '。' | '！' | '？' | '．' => true,
            _ => false,
        };
        if !end {
            continue;
        }
        // Skip abbreviations such as "e.g." and "i.e.".
        let before = &para[..i];
        if before.ends_with("e.g") || before.ends_with("i.e") || before.ends_with("etc") {
            continue;
        }
        return para[..i + c.len_utf8()].to_owned();
    }
    para.to_owned()
}

/// Qualifiers that select nothing: in a tool's summary they stand before the noun the tool
/// acts on ("Get a *specific* issue", "Delete an *existing* file", "in the *specified*
/// directory") and are true of every tool that takes an argument, so they tell no tool from
/// its neighbours. Words that do (`current`, `new`, `all`, `latest`) are not here.
const FILLER: &[&str] = &[
    "appropriate",
    "certain",
    "corresponding",
    "desired",
    "existing",
    "given",
    "particular",
    "provided",
    "relevant",
    "selected",
    "specific",
    "specified",
    "various",
];

/// `text` without [`FILLER`] words (and the article before one), where they qualify a
/// following word: never the first or the last word, so "Given a URL, …" and "… as given"
/// stay. Idempotent: what is left holds no filler word in such a place.
pub(super) fn drop_filler(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out: Vec<&str> = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let filler =
            i > 0 && i + 1 < words.len() && FILLER.iter().any(|f| word.eq_ignore_ascii_case(f));
        if !filler {
            out.push(word);
            continue;
        }
        let article = |w: &&str| ["a", "an", "the"].iter().any(|a| w.eq_ignore_ascii_case(a));
        if out.len() > 1 && out.last().is_some_and(article) {
            out.pop();
        }
    }
    out.join(" ")
}

/// Words a server id holds that name no product: most ids end in them (`word-document-server`,
/// `12306-mcp`), and a summary's "in the server" says something else.
const GENERIC_ID_WORDS: &[&str] = &["mcp", "server"];

/// Words that open the phrase [`drop_namespace_tail`] removes.
const TAIL_PREPOSITIONS: &[&str] = &[
    "at", "for", "from", "in", "into", "of", "on", "to", "using", "via", "with", "within",
];

/// The words of `server` that `exposed` (the name a host sees) also shows, lower-cased: what
/// the namespace in front of every tool of that server already says. Empty when the name
/// carries no namespace.
pub(super) fn namespace_words(server: &str, exposed: &str) -> Vec<String> {
    let shown = crate::naming::words(exposed);
    crate::naming::words(server)
        .into_iter()
        .filter(|w| !GENERIC_ID_WORDS.contains(&w.as_str()) && shown.contains(w))
        .collect()
}

/// `text` without a closing phrase that only repeats its tool's namespace: "Add a paragraph
/// *to a Word document*." of `word-document-server__add_paragraph`, "Find teams *in Sentry*."
/// of `sentry__find_teams`. The namespace stands in front of every line of its server, so the
/// phrase tells the tool from none of its neighbours, and it lengthens every line of that
/// server. Removed: a preposition, articles, then only `namespace` words, at the end of `text`
/// (its full stop kept), when at least two words remain; repeated while one is left, so the
/// result is idempotent.
pub(super) fn drop_namespace_tail(text: &str, namespace: &[String]) -> String {
    let mut text = text.to_owned();
    if namespace.is_empty() {
        return text;
    }
    while let Some(shorter) = namespace_tail_once(&text, namespace) {
        text = shorter;
    }
    text
}

/// [`drop_namespace_tail`]'s one step: `None` when `text` has no such closing phrase.
fn namespace_tail_once(text: &str, namespace: &[String]) -> Option<String> {
    let (body, stop) = match text.strip_suffix('.') {
        Some(body) => (body, "."),
        None => (text, ""),
    };
    let words: Vec<&str> = body.split(' ').collect();
    let is = |list: &[&str], w: &str| list.iter().any(|l| w.eq_ignore_ascii_case(l));
    let mut start = words.len();
    while start > 0 && is_namespace_word(words[start - 1], namespace) {
        start -= 1;
    }
    if start == words.len() {
        return None;
    }
    while start > 0 && is(&["a", "an", "the", "your"], words[start - 1]) {
        start -= 1;
    }
    if start < 3 || !is(TAIL_PREPOSITIONS, words[start - 1]) {
        return None;
    }
    let mut out = words[..start - 1].join(" ");
    out.push_str(stop);
    Some(out)
}

/// Whether the summary word `word` is the namespace's: one of its words (any case, any
/// script), all of them run together (`GitHub` of `git-hub`), or made of them only
/// (`basicMemory` of `basic-memory`).
fn is_namespace_word(word: &str, namespace: &[String]) -> bool {
    let lower = word.to_lowercase();
    if namespace.contains(&lower) || namespace.concat() == lower {
        return true;
    }
    let parts = crate::naming::words(word);
    !parts.is_empty() && parts.iter().all(|p| namespace.contains(p))
}

/// At most `max` characters, cut on a word boundary with `…`.
pub(super) fn cut_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max).collect();
    if let Some(space) = cut.rfind(' ') {
        cut.truncate(space);
    } else {
        // Room for the `…`: a cut text is never cut again (compression is idempotent).
        cut.pop();
    }
    let cut = cut.trim_end_matches([',', ';', ':', ' ', '(', '-']);
    format!("{cut}…")
}

pub(super) fn first_words(text: &str, n: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= n {
        return text.trim_end_matches('.').to_owned();
    }
    words[..n]
        .join(" ")
        .trim_end_matches([',', ';', ':', '.'])
        .to_owned()
}
