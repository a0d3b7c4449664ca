use super::*;

fn discovery() -> Discovery {
    let tools = vec![
        CatalogTool::new(
            "github",
            json!({
                "name": "create_issue",
                "description": "Create a new issue in a GitHub repository.\nMore text.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "owner": {"type": "string"},
                        "repo": {"type": "string"},
                        "title": {"type": "string"},
                        "state": {"type": "string", "enum": ["open", "closed"]}
                    },
                    "required": ["owner", "repo", "title"]
                },
                "annotations": {"readOnlyHint": false},
                "_meta": {"x": 1}
            }),
        )
        .unwrap(),
        CatalogTool::new(
            "weather",
            json!({"name": "get_forecast", "description": "Weather forecast for a city.",
                   "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}),
        )
        .unwrap(),
    ];
    Discovery::new(
        tools,
        "__",
        &MetaToolNames::default(),
        SearchLimits::default(),
    )
}

#[test]
fn search_lists_names_lines_and_parameters() {
    let d = discovery();
    let result = d.search_tools("open an issue on github", None);
    let first = &result["structuredContent"]["tools"][0];
    assert_eq!(first["name"], "github__create_issue");
    assert_eq!(
        first["description"],
        "Create a new issue in a GitHub repository."
    );
    assert_eq!(first["required"], json!(["owner", "repo", "title"]));
    assert_eq!(first["matched"], json!(["open", "issue", "github"]));
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "- github__create_issue(owner: string, repo: string, title: string; +1 optional): \
         Create a new issue in a GitHub repository. [matched: open, issue, github]\n"
        ),
        "{text}"
    );
    assert!(result.get("isError").is_none());
}

#[test]
fn a_hit_line_shows_types_enums_and_caps_the_required_list() {
    let properties: Map<String, Value> = (0..8)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .chain([
            (
                "a_state".to_owned(),
                json!({"enum": ["open", "closed", "all", "draft"]}),
            ),
            (
                "labels".to_owned(),
                json!({"type": "array", "items": {"type": "string"}}),
            ),
            ("limit".to_owned(), json!({"type": ["integer", "null"]})),
        ])
        .collect();
    let required: Vec<String> = properties.keys().cloned().collect();
    let tool = CatalogTool::new(
        "s",
        json!({"name": "t", "inputSchema": {"type": "object", "properties": properties,
               "required": ["a_state", "labels", "limit", "p0", "p1", "p2", "p3", "p4"]}}),
    )
    .unwrap();
    let (params, req) = parameters(&tool);
    assert_eq!(params.len(), required.len());
    let line = hit_line("s__t", &tool, &params, &req, "Purpose.", &[]);
    assert_eq!(
        line,
        "- s__t(a_state: \"open\"|\"closed\"|\"all\"|…, labels: string[], limit: integer|null, \
         p0: string, p1: string, p2: string, +2 required; +3 optional): Purpose."
    );
}

#[test]
fn a_long_query_is_not_echoed_whole() {
    let d = discovery();
    let query = format!("zzzz {}", "q".repeat(5000));
    let text = d.search_tools(&query, None)["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.len() < 400, "{}", text.len());
}

#[test]
fn search_without_match_says_so() {
    let d = discovery();
    let result = d.search_tools("zzzz", None);
    assert_eq!(result["structuredContent"]["tools"], json!([]));
    assert!(
        result["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("No tool matches")
    );
}

#[test]
fn schema_is_the_upstream_definition_under_the_exposed_name() {
    let d = discovery();
    let result = d.get_tool_schema("github__create_issue");
    let def = &result["structuredContent"];
    assert_eq!(def["name"], "github__create_issue");
    assert_eq!(
        def["inputSchema"]["required"],
        json!(["owner", "repo", "title"])
    );
    assert_eq!(def["annotations"], json!({"readOnlyHint": false}));
    assert!(def.get("_meta").is_none());
    // Other spellings a model may use.
    assert_eq!(d.get_tool_schema("github/create_issue"), result);
    assert_eq!(d.get_tool_schema("create_issue"), result);
}

#[test]
fn unknown_names_are_tool_errors_that_point_to_search() {
    let d = discovery();
    for result in [
        d.get_tool_schema("github__create_isue"),
        d.invoke_tool("nope", &json!({})).unwrap_err(),
    ] {
        assert_eq!(result["isError"], true);
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("Unknown tool") && text.contains("search_tools"),
            "{text}"
        );
    }
    let text = d.get_tool_schema("github create issue")["content"][0]["text"].clone();
    assert!(
        text.as_str()
            .unwrap()
            .contains("Similar names: github__create_issue")
    );
}

#[test]
fn invoke_checks_arguments() {
    let d = discovery();
    let ok = d.invoke_tool(
        "github__create_issue",
        &json!({"owner": "o", "repo": "r", "title": "t"}),
    );
    assert_eq!(ok.unwrap().name, "create_issue");
    let err = d
        .invoke_tool(
            "github__create_issue",
            &json!({"owner": 1, "repo": "r", "state": "merged"}),
        )
        .unwrap_err();
    assert_eq!(err["isError"], true);
    let text = err["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("- arguments.title: required property is missing (string)"),
        "{text}"
    );
    assert!(
        text.contains("- arguments.owner: expected string, got integer 1"),
        "{text}"
    );
    assert!(
        text.contains("- arguments.state: \"merged\" is not one of [\"open\", \"closed\"]"),
        "{text}"
    );
}

#[test]
fn invalid_arguments_carry_the_schema_and_a_call_of_the_right_shape() {
    let d = discovery();
    let err = d
        .invoke_tool(
            "github__create_issue",
            &json!({"owner": "o", "repo": "r", "title": 3}),
        )
        .unwrap_err();
    let text = err["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Invalid arguments for github__create_issue:\n- arguments.title: expected string, got integer 3\n"), "{text}");
    assert!(
        text.contains("Required: owner (string), repo (string), title (string)."),
        "{text}"
    );
    assert!(text.contains(r#"Call invoke_tool again as {"name":"github__create_issue","arguments":{"owner":"…","repo":"…","title":"…"}}."#), "{text}");
    let schema = d.tools()[0].input_schema().unwrap();
    assert!(
        text.ends_with(&format!("Input schema of github__create_issue: {schema}")),
        "{text}"
    );
    let s = &err["structuredContent"];
    assert_eq!(s["type"], "mcp_budget.discover.invalid_arguments");
    assert_eq!(
        s["problems"],
        json!(["arguments.title: expected string, got integer 3"])
    );
    assert_eq!(&s["inputSchema"], schema);
}

#[test]
fn empty_or_misplaced_arguments_say_which_fields_are_required() {
    let d = discovery();
    let answer = |call: Value| match d.call(MetaTool::Invoke, &call) {
        Some(MetaCall::Result(r)) => r,
        other => panic!("{other:?}"),
    };
    for call in [
        json!({"name": "github__create_issue"}),
        json!({"name": "github__create_issue", "arguments": {}}),
        json!({"name": "github__create_issue", "arguments": null}),
    ] {
        let r = answer(call);
        assert_eq!(
            r["structuredContent"]["type"],
            "mcp_budget.discover.missing_arguments"
        );
        assert_eq!(
            r["structuredContent"]["required"],
            json!(["owner", "repo", "title"])
        );
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("github__create_issue needs arguments; none were given.\nRequired: owner (string), repo (string), title (string)."), "{text}");
    }
    let r = answer(json!({"name": "github__create_issue", "owner": "o", "title": "t"}));
    assert_eq!(
        r["structuredContent"]["type"],
        "mcp_budget.discover.misplaced_arguments"
    );
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("not next to \"name\": found owner, title at the top level."),
        "{text}"
    );
    let r = answer(json!({"tool_name": "github__create_issue", "tool_input": {"owner": "o"}}));
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with(
            "The arguments of github__create_issue go inside \"arguments\", not \"tool_input\"."
        ),
        "{text}"
    );
    // Misplaced arguments of an unknown tool: the unknown name is the problem.
    let r = answer(json!({"name": "nope", "city": "Paris"}));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Unknown tool")
    );
    // `tool_name` names the tool; a tool that requires nothing still takes no arguments.
    match d.call(
        MetaTool::Invoke,
        &json!({"tool_name": "weather__get_forecast", "arguments": {}}),
    ) {
        Some(MetaCall::Invoke { tool, arguments }) => {
            assert_eq!(
                (tool.id(), arguments),
                ("weather/get_forecast".into(), json!({}))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn call_dispatches_by_meta_tool_name() {
    let d = discovery();
    let names = d.names();
    assert_eq!(names.which("other_tool"), None);
    assert_eq!(names.which("run_code"), None, "code mode is off");
    assert!(d.call(MetaTool::Code, &json!({})).is_none());
    match d.call(MetaTool::Invoke, &json!({"name": "weather__get_forecast"})) {
        Some(MetaCall::Invoke { tool, arguments }) => {
            assert_eq!(tool.id(), "weather/get_forecast");
            assert_eq!(arguments, json!({}));
        }
        other => panic!("{other:?}"),
    }
    let Some(MetaCall::Result(r)) = d.call(MetaTool::Search, &json!({"limit": 2})) else {
        panic!()
    };
    assert_eq!(r["isError"], true);
    let Some(MetaCall::Result(r)) =
        d.call(MetaTool::Search, &json!({"query": "forecast", "limit": 1}))
    else {
        panic!()
    };
    assert_eq!(r["structuredContent"]["tools"].as_array().unwrap().len(), 1);
}

#[test]
fn meta_tool_names_follow_the_policy() {
    let names = MetaToolNames {
        search: "a".into(),
        schema: "b".into(),
        invoke: "c".into(),
        code: None,
    };
    let defs = meta_tool_definitions(&names);
    let listed: Vec<&str> = defs.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["a", "b", "c"]);
    let with_code = MetaToolNames {
        code: Some("d".into()),
        ..names
    };
    let defs = meta_tool_definitions(&with_code);
    let listed: Vec<&str> = defs.iter().map(|d| d["name"].as_str().unwrap()).collect();
    assert_eq!(listed, ["a", "b", "c", "d"]);
    assert!(defs[0]["description"].as_str().unwrap().contains("call c"));
}

#[test]
fn one_line_cuts_at_sentence_and_word() {
    assert_eq!(one_line("  First. Second.", 100), "First.");
    assert_eq!(one_line("line one\nline two", 100), "line one");
    assert_eq!(one_line("aaaa bbbb cccc dddd", 12), "aaaa bbbb…");
}

#[test]
fn invoke_tool_and_get_tool_schema_answer_for_listed_tools_which_search_never_offers() {
    let listed = CatalogTool::new(
        "clock",
        json!({"name": "now", "description": "The current time in a city.",
               "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}}),
    )
    .unwrap();
    let d = discovery().with_listed(vec![listed], "__");
    let args = json!({"name": "clock__now", "arguments": {"city": "Paris"}});
    match d.call(MetaTool::Invoke, &args) {
        Some(MetaCall::Invoke { tool, .. }) => assert_eq!(tool.name, "now"),
        other => panic!("{other:?}"),
    }
    let schema = d.get_tool_schema("clock__now");
    assert_eq!(schema["structuredContent"]["name"], "clock__now");
    let (i, _) = d.find("clock__now").unwrap();
    assert!(!d.is_deferred(i) && d.is_deferred(0));
    assert_eq!(d.tools().len(), 2);
    let found = d.search_tools("current time in a city", Some(20));
    assert!(!found.to_string().contains("clock__now"), "{found}");
}
