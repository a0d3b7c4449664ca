use super::*;
use serde_json::json;

fn tool(server: &str, def: Value) -> CatalogTool {
    CatalogTool::new(server, def).unwrap()
}

#[test]
fn finds_by_name_words() {
    let tools = vec![
        tool(
            "git",
            json!({"name": "git_log", "description": "Show the commit logs"}),
        ),
        tool(
            "fs",
            json!({"name": "list_directory", "description": "List entries"}),
        ),
    ];
    let index = SearchIndex::build(&tools);
    let hits = index.search("list the directory", 5);
    assert_eq!(hits[0].index, 1);
}
