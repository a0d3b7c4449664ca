use super::*;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::path::Path;
use std::sync::LazyLock;

/// The fixture catalog and its index, built once for the property tests.
static FIXTURES: LazyLock<(Vec<CatalogTool>, SearchIndex)> = LazyLock::new(|| {
    let tools = fixtures();
    let index = SearchIndex::build(&tools);
    (tools, index)
});

fn tool(server: &str, def: Value) -> CatalogTool {
    CatalogTool::new(server, def).unwrap()
}

fn fixtures() -> Vec<CatalogTool> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets");
    crate::catalog::load_saved(&[dir]).unwrap()
}

fn ids(tools: &[CatalogTool], hits: &[Hit]) -> Vec<String> {
    hits.iter().map(|h| tools[h.index].id()).collect()
}

#[test]
fn finds_by_name_words_and_equivalents() {
    let tools = vec![
        tool(
            "git",
            json!({"name": "git_log", "description": "Show the commit logs"}),
        ),
        tool(
            "fs",
            json!({"name": "list_directory", "description": "List entries"}),
        ),
        tool(
            "fs",
            json!({"name": "delete_file", "description": "Delete a file"}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    assert_eq!(index.search("list the directory", 5)[0].index, 1);
    // `remove` ~ `delete`, `folder` ~ `directory`.
    assert_eq!(index.search("remove a file", 5)[0].index, 2);
    assert_eq!(index.search("show the folder", 5)[0].index, 1);
    assert!(index.search("", 5).is_empty());
    assert!(index.search("list", 0).is_empty());
}

#[test]
fn ties_are_broken_by_id() {
    let same = |server: &str, name: &str| {
        tool(server, json!({"name": name, "description": "Do the thing"}))
    };
    let tools = vec![
        same("b", "x"),
        same("a", "y"),
        same("a", "x"),
        same("c", "a"),
    ];
    let index = SearchIndex::build(&tools);
    let hits = index.search("thing", 10);
    assert_eq!(ids(&tools, &hits), ["a/x", "a/y", "b/x", "c/a"]);
    assert!(hits.windows(2).all(|w| w[0].score == w[1].score));
}

#[test]
fn argument_values_weigh_less_than_words() {
    let tools = vec![
        tool(
            "fs",
            json!({"name": "list_directory", "description": "List a directory"}),
        ),
        tool(
            "proj",
            json!({"name": "create_project", "description": "Create a project"}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    let hits = index.search("list the directory ./my_project/src", 5);
    assert_eq!(ids(&tools, &hits)[0], "fs/list_directory");
}

#[test]
fn chinese_descriptions_match_chinese_queries() {
    let tools = vec![
        tool(
            "rail",
            json!({"name": "get-tickets", "description": "查询12306余票信息。"}),
        ),
        tool(
            "cook",
            json!({"name": "recommend", "description": "推荐菜谱"}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    assert_eq!(ids(&tools, &index.search("余票", 5)), ["rail/get-tickets"]);
}

#[test]
fn baseline_ranker_works_on_the_fixtures() {
    let tools = fixtures();
    let index = SearchIndex::build_with(&tools, Ranker::Bm25);
    assert_eq!(index.ranker(), Ranker::Bm25);
    let hits = index.search("create a directory", 5);
    assert!(ids(&tools, &hits).contains(&"filesystem/create_directory".to_owned()));
}

#[test]
fn fixtures_rank_obvious_queries_first() {
    let tools = fixtures();
    let index = SearchIndex::build(&tools);
    for (query, want) in [
        ("create a new directory", "create_directory"),
        ("what time is it in Tokyo", "get_current_time"),
        ("get the weather forecast for Berlin", "weather"),
    ] {
        let hits = index.search(query, 5);
        let got = ids(&tools, &hits);
        assert!(got.iter().any(|id| id.contains(want)), "{query}: {got:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn same_query_same_results(query in "[a-z ]{0,40}", limit in 0usize..12) {
        let (_, index) = &*FIXTURES;
        let a = index.search(&query, limit);
        prop_assert!(a.len() <= limit);
        prop_assert!(a.windows(2).all(|w| w[0].score >= w[1].score));
        prop_assert_eq!(&a, &index.search(&query, limit));
    }

    #[test]
    fn rebuilt_index_answers_the_same(query in "[a-z ]{1,40}") {
        let (tools, index) = &*FIXTURES;
        prop_assert_eq!(index.search(&query, 10), SearchIndex::build(tools).search(&query, 10));
    }

    #[test]
    fn removed_tool_is_not_found(pick in 0usize..1000) {
        let mut tools = FIXTURES.0.clone();
        let removed = tools.remove(pick % tools.len());
        let index = SearchIndex::build(&tools);
        let query = format!("{} {}", removed.name, removed.description());
        for hit in index.search(&query, 50) {
            prop_assert_ne!(tools[hit.index].id(), removed.id());
        }
    }

    #[test]
    fn input_order_does_not_change_the_ranking(seed in any::<u64>()) {
        let tools = &FIXTURES.0;
        let mut shuffled: Vec<CatalogTool> = tools.clone();
        // Deterministic shuffle from the seed.
        let mut state = seed | 1;
        for i in (1..shuffled.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let j = usize::try_from(state % (i as u64 + 1)).unwrap();
            shuffled.swap(i, j);
        }
        let a = FIXTURES.1.search("read a file from disk", 10);
        let b = SearchIndex::build(&shuffled).search("read a file from disk", 10);
        prop_assert_eq!(ids(tools, &a), ids(&shuffled, &b));
    }
}

#[test]
fn a_tool_name_typed_as_is_is_found_first() {
    let (tools, index) = &*FIXTURES;
    let hits = index.search("create_directory", 3);
    assert!(ids(tools, &hits)[0].ends_with("/create_directory"));
    let hits = index.search("filesystem create_directory", 3);
    assert_eq!(ids(tools, &hits)[0], "filesystem/create_directory");
}

#[test]
fn an_exact_name_ranks_its_tool_first_over_near_names() {
    // Each lost to a near name on its words alone (a plural, a word order, one more word).
    let (tools, index) = &*FIXTURES;
    for (query, want) in [
        ("getComment", "hackernews/getComment"),
        (
            "create_presentation_from_template",
            "ppt/create_presentation_from_template",
        ),
        ("list them with tag_list please", "datagov/tag_list"),
        ("get-user-profile", "leetcode/get-user-profile"),
    ] {
        assert_eq!(ids(tools, &index.search(query, 3))[0], want, "{query}");
    }
}

#[test]
fn current_means_now_not_a_date() {
    // "current" asks for the latest value; it is not an equivalent of "date", so a tool taking a
    // date must not win on it.
    let tools = vec![
        tool(
            "quotes",
            json!({"name": "get_price_by_date", "description": "Get the stock price on a given date."}),
        ),
        tool(
            "market",
            json!({"name": "get_stock_quote", "description": "Get the stock price, with the current value and change."}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    let hits = index.search("What is the current share price of Acme?", 5);
    assert_eq!(ids(&tools, &hits)[0], "market/get_stock_quote");
}

#[test]
fn typo_in_a_name_word_is_corrected() {
    let (tools, index) = &*FIXTURES;
    for (query, want) in [
        ("create_isue", "github/create_issue"),
        ("serch_repositories", "github/search_repositories"),
        ("list the brnaches", "github/list_branches"),
    ] {
        let got = ids(tools, &index.search(query, 5));
        assert_eq!(got[0], want, "{query}: {got:?}");
    }
    // A short unknown word is not corrected into a name word ("tak" is not "task").
    let hits = index.search("tak", 5);
    assert!(hits.is_empty(), "{:?}", ids(tools, &hits));
}

#[test]
fn enum_values_are_indexed() {
    let tools = vec![
        tool(
            "hub",
            json!({"name": "add_reaction", "description": "React to a comment.",
                "inputSchema": {"type": "object", "properties": {"content": {
                    "type": "string", "enum": ["+1", "heart", "rocket", "eyes"]}}}}),
        ),
        tool(
            "hub",
            json!({"name": "add_comment", "description": "Comment on an issue."}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    assert_eq!(
        ids(&tools, &index.search("rocket", 5)),
        ["hub/add_reaction"]
    );
    assert_eq!(
        ids(&tools, &index.search("a heart", 5)),
        ["hub/add_reaction"]
    );
}

#[test]
fn abbreviations_meet_their_expansions() {
    let (tools, index) = &*FIXTURES;
    for (query, want) in [
        ("list my open PRs", "github/list_pull_requests"),
        ("create a new repo", "github/create_repository"),
    ] {
        let got = ids(tools, &index.search(query, 5));
        assert_eq!(got[0], want, "{query}: {got:?}");
    }
    // The other way round: a tool that says `repo` is found by `repository`.
    let short = vec![tool(
        "x",
        json!({"name": "fork_repo", "description": "Fork it."}),
    )];
    let index = SearchIndex::build(&short);
    assert_eq!(index.search("fork a repository", 5).len(), 1);
}

#[test]
fn a_named_server_is_preferred() {
    let (tools, index) = &*FIXTURES;
    // Without the preference, `git_log` ("Shows the commit logs") beats GitHub's commit list.
    let got = ids(tools, &index.search("commit history in github", 10));
    let at = |id: &str| got.iter().position(|g| g == id).unwrap_or(usize::MAX);
    assert!(at("github/list_commits") < at("git/git_log"), "{got:?}");
    let got = ids(tools, &index.search("show the commit history in git", 5));
    assert_eq!(got[0], "git/git_log", "{got:?}");
}

#[test]
fn generic_words_name_no_server() {
    // `search` is in `google-search`'s id, but most tools that mention it are elsewhere.
    let tools = vec![
        tool(
            "google-search",
            json!({"name": "search", "description": "Perform a web search query"}),
        ),
        tool(
            "github",
            json!({"name": "search_code", "description": "Search code in GitHub repositories"}),
        ),
        tool(
            "github",
            json!({"name": "search_issues", "description": "Search issues in GitHub repositories"}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    let named = |q: &str| {
        let terms = index.query_terms(q);
        index.servers.named(terms.iter().map(|(t, _)| t.as_str()))
    };
    assert!(named("search the web").is_empty());
    assert_eq!(named("search github").len(), 1);
}

#[test]
fn sum_is_an_arithmetic_add() {
    let tools = vec![
        tool(
            "everything",
            json!({"name": "get-sum", "description": "Returns the sum of two numbers"}),
        ),
        tool(
            "github",
            json!({"name": "add_issue_comment", "description": "Add a comment to a specific issue in a GitHub repository."}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    assert_eq!(
        ids(&tools, &index.search("add two numbers", 5))[0],
        "everything/get-sum"
    );
}

#[test]
fn an_equivalent_counts_no_more_than_the_word_typed() {
    // `metadata` is rarer than `information` here; standing in for `information` it must not
    // outweigh a tool that has the word typed.
    let mut tools = vec![
        tool(
            "store",
            json!({"name": "get_metadata", "description": "Get the metadata of a record."}),
        ),
        tool(
            "wiki",
            json!({"name": "lookup", "description": "Look up information about a topic."}),
        ),
    ];
    for i in 0..6 {
        tools.push(tool(
            "other",
            json!({"name": format!("tool_{i}"), "description": "Returns information."}),
        ));
    }
    let index = SearchIndex::build(&tools);
    let got = ids(&tools, &index.search("information about cats", 10));
    let at = |id: &str| got.iter().position(|g| g == id).unwrap_or(usize::MAX);
    assert!(at("wiki/lookup") < at("store/get_metadata"), "{got:?}");
}

#[test]
fn find_is_not_a_location() {
    // `locate` (a verb of finding) and `location` share a stem; `find` must not look for places.
    let tools = vec![
        tool(
            "device",
            json!({"name": "get_location", "description": "Get the current location of the device."}),
        ),
        tool(
            "notes",
            json!({"name": "search_notes", "description": "Search notes."}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    assert_eq!(
        ids(&tools, &index.search("find my notes", 5)),
        ["notes/search_notes"]
    );
}

#[test]
fn located_says_where_not_what() {
    let (tools, index) = &*FIXTURES;
    let query = "What are the details of the file located at ./src/main.py?";
    let got = ids(tools, &index.search(query, 3));
    assert!(got[0].ends_with("/get_file_info"), "{got:?}");
}

#[test]
fn moving_an_element_is_dragging_it() {
    let (tools, index) = &*FIXTURES;
    let got = ids(
        tools,
        &index.search("move the element from .card to #deck", 3),
    );
    assert_eq!(got[0], "playwright/playwright_drag", "{got:?}");
}

#[test]
fn open_or_file_a_thing_creates_it() {
    let (tools, index) = &*FIXTURES;
    for (query, want) in [
        ("file a bug about the crash", "github/create_issue"),
        ("open a PR for this branch", "github/create_pull_request"),
    ] {
        let got = ids(tools, &index.search(query, 5));
        assert_eq!(got[0], want, "{query}: {got:?}");
    }
    let got = ids(tools, &index.search("open a ticket", 3));
    assert!(
        got.iter()
            .any(|id| id == "github/create_issue" || id == "github/issue_write"),
        "{got:?}"
    );
}

#[test]
fn usage_decides_between_close_candidates_only() {
    let tools = vec![
        tool(
            "a",
            json!({"name": "search_files", "description": "Search for files"}),
        ),
        tool(
            "b",
            json!({"name": "find_files", "description": "Find files by name"}),
        ),
        tool(
            "c",
            json!({"name": "read_notes", "description": "Read notes, which may mention files"}),
        ),
        tool(
            "d",
            json!({"name": "list_files", "description": "List the files of a directory"}),
        ),
    ];
    let mut index = SearchIndex::build(&tools);
    assert_eq!(
        ids(&tools, &index.search("look for files", 3))[..2],
        ["a/search_files", "b/find_files"]
    );
    // The deployment calls b far more than anything: it passes a, whose score is close.
    index.set_usage(&[1, 40, 0, 0], 0.3);
    assert_eq!(
        ids(&tools, &index.search("look for files", 3))[..2],
        ["b/find_files", "a/search_files"]
    );
    // Called a thousand times, c stays where its weak match puts it, below d (at most 60 % of
    // the best score, twice its own at weight 1): usage does not lift a weak match.
    index.set_usage(&[0, 0, 1000, 0], 1.0);
    let hits = ids(&tools, &index.search("look for files", 4));
    assert_eq!(hits[2..], ["d/list_files", "c/read_notes"], "{hits:?}");
    // A query naming a tool's every name word: the most called other tool does not pass it.
    index.set_usage(&[0, 1000, 0, 0], 1.0);
    assert_eq!(index.search("search files", 4)[0].index, 0);
    // Weight 0, or no calls, is no prior at all.
    let plain = SearchIndex::build(&tools).search("look for files", 4);
    index.set_usage(&[5, 9, 1, 0], 0.0);
    assert_eq!(index.search("look for files", 4), plain);
    index.set_usage(&[], 0.5);
    assert_eq!(index.search("look for files", 4), plain);
}
