//! Unit tests and property checks of the compression levels.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn obj(v: Value) -> Map<String, Value> {
    let Value::Object(map) = v else {
        panic!("not an object")
    };
    map
}

#[test]
fn low_drops_noise_and_keeps_sentences() {
    let t = obj(json!({
        "name": "search_repos",
        "title": "Search repos",
        "description": "Use this tool to **search** GitHub   repositories.\n\n## Notes\n- Results are [paged](https://x.y).\n\nArgs:\n    query: the query\n    page: page number\n",
        "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {"query": {"type": "string", "description": "Search query"},
                           "page": {"type": "integer", "minimum": 1}},
            "required": ["query"]}
    }));
    let low = compress(&t, Level::Low);
    assert_eq!(
        low["description"],
        "Search GitHub repositories.\n\nNotes:\n- Results are paged.\n\npage: page number"
    );
    assert!(low.get("title").is_none());
    assert!(low["inputSchema"].get("$schema").is_none());
    assert_eq!(low["inputSchema"]["properties"]["page"]["minimum"], 1);
}

#[test]
fn levels_shrink_monotonically_on_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
    let tools = crate::catalog::load_saved(&[dir]).unwrap();
    for tool in &tools {
        let mut last = usize::MAX;
        for level in Level::ALL {
            let c = compress(&tool.definition, level);
            let len = serde_json::to_string(&c).unwrap().len();
            assert!(len <= last, "{} grew at {level}", tool.id());
            last = len;
            let before = tool.input_schema().map(constraints_of);
            let after = c.get("inputSchema").map(constraints_of);
            assert_eq!(before, after, "{} lost a constraint at {level}", tool.id());
            assert_eq!(c.get("name"), tool.definition.get("name"));
        }
    }
}

#[test]
fn property_named_description_is_not_an_annotation() {
    let t = obj(
        json!({"name": "x", "description": "d", "inputSchema": {"type": "object",
        "properties": {"description": {"type": "string", "description": "The body"},
                       "title": {"type": "string"}}}}),
    );
    for level in Level::ALL {
        let c = compress(&t, level);
        let props = c["inputSchema"]["properties"].as_object().unwrap();
        assert!(props.contains_key("description") && props.contains_key("title"));
    }
}

#[test]
fn catalog_lines_are_one_line() {
    let t = obj(
        json!({"name": "gh__create_issue", "description": "Create an issue.\nIn a repo.",
        "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}, "title": {"type": "string"}, "body": {}}, "required": ["owner", "title"]}}),
    );
    // `medium`: the parameters and the first sentence (of the first line).
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "gh__create_issue(owner, title, body?): Create an issue."
    );
    assert_eq!(
        catalog_line(&t, Level::High),
        "gh__create_issue: Create an issue."
    );
    assert_eq!(catalog_line(&t, Level::Extreme), "gh__create_issue");
}

#[test]
fn override_description_is_used() {
    let t = obj(json!({"name": "x", "description": "Old.", "inputSchema": {"type": "object"}}));
    assert_eq!(
        compress_with(&t, Level::Off, Some("New."))["description"],
        "New."
    );
}

#[test]
fn medium_lines_say_what_tells_a_tool_apart() {
    let t = obj(json!({"name": "fetch", "description":
        "Fetch a URL from the internet and return its text. Follows redirects. Returns markdown.",
        "inputSchema": {"type": "object", "properties": {"url": {"type": "string"},
            "raw": {"type": "boolean"}}, "required": ["url"]}}));
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "fetch(url, raw?): Fetch a URL from the internet and return its text."
    );
    // A first sentence of fewer than four words says too little: the next one is added.
    let t = obj(json!({"name": "q", "description": "Search. Finds issues by title.\n\nMore."}));
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "q: Search. Finds issues by title."
    );
    let long = format!("Does {}.", "very ".repeat(60));
    let t = obj(json!({"name": "l", "description": long}));
    let line = catalog_line(&t, Level::Medium);
    assert!(line.ends_with('…') && line.chars().count() <= "l: ".len() + MEDIUM_LINE_CHARS);
}

#[test]
fn lines_drop_qualifiers_that_select_nothing() {
    let t = obj(json!({"name": "get_issue", "description":
        "Get the details of a specific issue in the specified repository. Needs a token."}));
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "get_issue: Get the details of issue in repository."
    );
    assert_eq!(
        catalog_line(&t, Level::High),
        "get_issue: Get the details of issue in repository."
    );
    // The first and the last word stay (`Given …` opens a clause; `… as given` ends one), and
    // so does an opening article; a listed tool's description keeps every word.
    let t = obj(json!({"name": "x", "description": "Given a URL, fetch the page as given."}));
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "x: Given a URL, fetch the page as given."
    );
    let t = obj(json!({"name": "x", "description": "The specified file is read whole."}));
    assert_eq!(
        catalog_line(&t, Level::Medium),
        "x: The file is read whole."
    );
    assert_eq!(
        compress(&t, Level::Medium)["description"],
        "The specified file is read whole."
    );
}

#[test]
fn sentences_end_at_full_stops_not_at_dots_inside_words() {
    // Dots inside a word end nothing: `Data.gov`, `.docx`, `v1.2`.
    let t = obj(json!({"name": "x", "description":
        "Search Data.gov for .docx files of v1.2 or later. Paged."}));
    assert_eq!(
        catalog_line(&t, Level::High),
        "x: Search Data.gov for .docx files of v1.2 or later."
    );
    // A script written without spaces ends its sentences with its own full stop.
    let t = obj(json!({"name": "x", "description": "查询12306余票信息。尚且只支持查询前十条。"}));
    assert_eq!(catalog_line(&t, Level::High), "x: 查询12306余票信息。");
    assert_eq!(
        compress(&t, Level::High)["description"],
        "查询12306余票信息。"
    );
    let t = obj(json!({"name": "x", "description": "获取 36 氪热榜！包含投融资动态"}));
    assert_eq!(catalog_line(&t, Level::High), "x: 获取 36 氪热榜！");
}

#[test]
fn extreme_lines_are_the_name_alone() {
    let t = obj(json!({"name": "x", "description": "Does a thing.",
        "inputSchema": {"type": "object", "properties": {"a": {}}, "required": ["a"]}}));
    assert_eq!(catalog_line(&t, Level::Extreme), "x");
    // Directly listed tools keep a few words at `extreme`.
    assert_eq!(compress(&t, Level::Extreme)["description"], "Does a thing");
}

#[test]
fn parameter_descriptions_that_repeat_the_name_are_dropped() {
    let t = obj(
        json!({"name": "x", "inputSchema": {"type": "object", "properties": {
        "repo_owner": {"type": "string", "description": "Repo owner"},
        "repo": {"type": "string", "description": "Repository name"}}}}),
    );
    // `low` keeps every word (lexical search counts repeated words); `medium` drops them.
    assert_eq!(compress(&t, Level::Low), t);
    let medium = compress(&t, Level::Medium);
    let props = &medium["inputSchema"]["properties"];
    assert!(props["repo_owner"].get("description").is_none());
    assert_eq!(props["repo"]["description"], "Repository name");
}

#[test]
fn every_boilerplate_opener_is_dropped() {
    let t = obj(json!({"name": "x", "description": "Use this tool to use this to list files."}));
    assert_eq!(compress(&t, Level::Low)["description"], "List files.");
}

/// Tool prose as servers write it: sentences, markdown, headings, lists, `Args:` sections.
fn arb_prose() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[A-Za-z]{1,9}( [a-z]{1,9}){0,12}[.!?]?".prop_map(|s| s),
        Just("Use this tool to ".to_owned()),
        Just("**bold** and `code`".to_owned()),
        Just("[a link](https://x.y)".to_owned()),
        Just("\n\n".to_owned()),
        Just("\n## Heading\n".to_owned()),
        Just("\n- item one\n* item two\n".to_owned()),
        Just("\nArgs:\n    a: the a\n    b: the b\n".to_owned()),
        Just("e.g. this, i.e. that".to_owned()),
        Just(" a specific one, the Specified given ".to_owned()),
        Just("查询余票。尚且！".to_owned()),
        Just(" ".to_owned()),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|v| v.concat())
}

fn arb_schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer", "minimum": 0, "maximum": 9})),
        Just(json!({"type": "string", "enum": ["a", "b"], "description": "Pick. Really."})),
        "[ -~\\n]{0,40}".prop_map(
            |d| json!({"type": "string", "description": d, "title": "T", "examples": ["x"]})
        ),
        Just(json!({"const": 3, "$comment": "c"})),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map("[a-z]{1,6}", inner.clone(), 0..4).prop_map(|m| {
                let keys: Vec<String> = m.keys().take(1).cloned().collect();
                json!({"type": "object", "properties": m, "required": keys, "additionalProperties": false, "description": "Obj. More."})
            }),
            inner.clone().prop_map(|i| json!({"type": "array", "items": i, "minItems": 1})),
            prop::collection::vec(inner, 1..3).prop_map(|v| json!({"anyOf": v})),
        ]
    })
}

proptest! {
    #[test]
    fn levels_are_idempotent_and_shrink(schema in arb_schema(), desc in arb_prose()) {
        let tool = obj(json!({"name": "t", "description": desc, "inputSchema": {"type": "object",
            "properties": {"a": schema, "b": {"type": "string", "description": "B"}},
            "required": ["a"]}}));
        let (mut last_len, mut last_line) = (usize::MAX, usize::MAX);
        for level in Level::ALL {
            let once = compress(&tool, level);
            prop_assert_eq!(&compress(&once, level), &once, "not idempotent at {}", level);
            let len = serde_json::to_string(&once).unwrap().len();
            prop_assert!(len <= last_len, "longer at {} than the level above", level);
            let line = catalog_line(&tool, level);
            let line_len = line.chars().count();
            prop_assert!(line_len <= last_line, "line longer at {}: {:?}", level, line);
            if level <= Level::Medium {
                // Required parameters are named, unmarked, on every line that lists them.
                prop_assert!(line.starts_with("t(a, b?)"), "{:?}", line);
            }
            prop_assert_eq!(&once["inputSchema"]["required"], &json!(["a"]));
            (last_len, last_line) = (len, line_len);
        }
    }

    #[test]
    fn namespaced_lines_only_shrink_and_the_tail_drop_is_idempotent(
        desc in arb_prose(),
        tail in prop_oneof![Just(""), Just(" in Word."), Just(" to a Word doc."),
            Just(" from the word-doc"), Just(" in Word. More in Word.")],
    ) {
        let desc = format!("{desc}{tail}");
        let tool = obj(json!({"name": "t", "description": desc}));
        let ns = super::prose::namespace_words("word-doc", "word-doc__t");
        let mut last_line = usize::MAX;
        for level in Level::ALL {
            let line = catalog_line_memo("word-doc", "word-doc__t", &tool, level, None,
                &mut Memo::default());
            let plain = catalog_line_memo("", "word-doc__t", &tool, level, None,
                &mut Memo::default());
            prop_assert!(!line.contains('\n'));
            prop_assert!(line.len() <= plain.len(), "{:?} longer than {:?}", line, plain);
            let line_len = line.chars().count();
            prop_assert!(line_len <= last_line, "line longer at {}: {:?}", level, line);
            last_line = line_len;
        }
        let once = super::prose::drop_namespace_tail(&desc, &ns);
        prop_assert_eq!(&super::prose::drop_namespace_tail(&once, &ns), &once);
    }

    #[test]
    fn compression_never_drops_a_constraint(schema in arb_schema(), desc in "[ -~\\n]{0,200}") {
        let tool = obj(json!({"name": "t", "description": desc, "inputSchema": schema}));
        for level in Level::ALL {
            let c = compress(&tool, level);
            prop_assert_eq!(constraints_of(&tool["inputSchema"]), constraints_of(&c["inputSchema"]));
            prop_assert_eq!(&c["name"], &tool["name"]);
            prop_assert!(!catalog_line(&tool, level).contains('\n'));
        }
    }
}

#[test]
fn lines_drop_a_closing_phrase_that_repeats_the_namespace() {
    let t = obj(json!({"name": "add_paragraph", "description":
        "Add a paragraph to a Word document. Styles apply.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}));
    let line = |server: &str, name: &str, level| {
        catalog_line_memo(server, name, &t, level, None, &mut Memo::default())
    };
    let exposed = "word-document-server__add_paragraph";
    assert_eq!(
        line("word-document-server", exposed, Level::Medium),
        "word-document-server__add_paragraph(text?): Add a paragraph."
    );
    assert_eq!(
        line("word-document-server", exposed, Level::High),
        "word-document-server__add_paragraph: Add a paragraph."
    );
    // Not at `low` (every word of meaning kept), nor where the name shows no namespace.
    assert_eq!(
        line("word-document-server", exposed, Level::Low),
        "word-document-server__add_paragraph(text?): Add a paragraph to a Word document. Styles apply."
    );
    assert_eq!(
        line("word-document-server", "add_paragraph", Level::Medium),
        "add_paragraph(text?): Add a paragraph to a Word document."
    );
    assert_eq!(
        line("docs", "docs__add_paragraph", Level::Medium),
        "docs__add_paragraph(text?): Add a paragraph to a Word document."
    );
}

#[test]
fn a_namespace_tail_is_only_a_closing_phrase_of_namespace_words() {
    use super::prose::{drop_namespace_tail, namespace_words};
    let ns = namespace_words("sentry-mcp", "sentry-mcp__find_teams");
    assert_eq!(ns, ["sentry"], "`mcp` and `server` name no product");
    assert_eq!(
        namespace_words("basicMemory", "basicMemory__write"),
        ["basic", "memory"]
    );
    let drop = |s: &str| drop_namespace_tail(s, &ns);
    assert_eq!(
        drop("Find teams in an organization in Sentry."),
        "Find teams in an organization."
    );
    assert_eq!(
        drop("Identify the authenticated user in Sentry"),
        "Identify the authenticated user"
    );
    // Kept: a namespace word that is not closing, one not after a preposition, a phrase with
    // other words, and a summary that would keep fewer than two words.
    for kept in [
        "Create a Sentry project.",
        "Grant a team access to Sentry project.",
        "Search Sentry.",
        "Ask Sentry.",
        "Search in Sentry.",
        "Sentry issues.",
    ] {
        assert_eq!(drop(kept), kept);
    }
    // Any case and script; run together or camel-cased as the id is.
    let ns = namespace_words("Ärzte-basicMemory", "Ärzte-basicMemory__find");
    assert_eq!(ns, ["ärzte", "basic", "memory"]);
    let drop = |s: &str| drop_namespace_tail(s, &ns);
    assert_eq!(drop("Find a note in ÄRZTE basicMemory."), "Find a note.");
    assert_eq!(
        drop_namespace_tail(
            "List repositories on GitHub.",
            &namespace_words("git-hub", "git-hub__x")
        ),
        "List repositories."
    );
    let ns = namespace_words("sentry-mcp", "sentry-mcp__find_teams");
    let drop = |s: &str| drop_namespace_tail(s, &ns);
    // Repeated phrases go one after the other, so the result is idempotent.
    let twice = drop_namespace_tail(
        "Get text from a Word document in Word.",
        &namespace_words("word-document", "word-document__get_text"),
    );
    assert_eq!(twice, "Get text.");
    assert_eq!(
        drop(&drop("Find teams in Sentry.")),
        drop("Find teams in Sentry.")
    );
}
