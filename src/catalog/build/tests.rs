use super::*;
use proptest::prelude::*;
use serde_json::json;

fn tools(names: &[&str]) -> Contribution {
    Contribution {
        tools: names
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect(),
        ..Contribution::default()
    }
}

fn names(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// (server, own name) → exposed name, for every tool.
fn mapping(catalog: &Catalog) -> BTreeMap<(String, String), String> {
    catalog
        .tools()
        .iter()
        .map(|t| {
            let exposed = t.exposed_name("ignored").into_owned();
            ((t.server.clone(), t.name.clone()), exposed)
        })
        .collect()
}

#[test]
fn colliding_names_are_told_apart_and_both_route_home() {
    let catalog = Catalog::build(
        vec![tools(&["b__c", "x"]), tools(&["c"])],
        &names(&["a", "a__b"]),
        "__",
        7,
    );
    assert_eq!(catalog.version(), 7);
    let [collision] = catalog.collisions() else {
        panic!("one collision: {:?}", catalog.collisions());
    };
    assert_eq!(collision.kind, "tool");
    assert_eq!(collision.exposed, "a__b__c");
    assert_eq!(
        collision.claimants,
        [("a".into(), "b__c".into()), ("a__b".into(), "c".into())]
    );
    // `a` sorts first and keeps the name; `a__b`'s tool gets a hashed one.
    assert_eq!(collision.resolved[0], "a__b__c");
    let other = &collision.resolved[1];
    assert!(
        other.starts_with("a__b__c_") && crate::naming::is_valid(other),
        "{other}"
    );
    assert_eq!(catalog.tool("a__b__c"), Some((0, "b__c")));
    assert_eq!(catalog.tool(other), Some((1, "c")));
    let listed: Vec<&str> = catalog
        .tools()
        .iter()
        .map(|t| t.definition["name"].as_str().unwrap())
        .collect();
    // The definitions keep the upstream's own names; the exposed ones are beside them.
    assert_eq!(listed, ["b__c", "x", "c"]);
    let shown: Vec<String> = catalog
        .listed_tools()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(shown, ["a__b__c", "a__x", other.as_str()]);
    assert_eq!(
        collision.to_string(),
        format!("tool name a__b__c claimed by a/b__c (keeps it), a__b/c (as {other})")
    );
}

#[test]
fn the_resolution_does_not_depend_on_policy_order() {
    let one = Catalog::build(
        vec![tools(&["b__c"]), tools(&["c"])],
        &names(&["a", "a__b"]),
        "__",
        1,
    );
    let two = Catalog::build(
        vec![tools(&["c"]), tools(&["b__c"])],
        &names(&["a__b", "a"]),
        "__",
        1,
    );
    assert_eq!(mapping(&one), mapping(&two));
    assert_eq!(one.collisions(), two.collisions());
    // The policy order still decides the listing order.
    assert_eq!(two.tools()[0].server, "a__b");
}

#[test]
fn a_second_name_never_takes_a_name_another_tool_has() {
    // Server `a` happens to have a tool whose plain name is the hashed name `a__b`'s `c` would
    // get first: that one moves on to the next attempt.
    let first = disambiguated("a__b", "c", "__", 2);
    let squatter = first.strip_prefix("a__").unwrap().to_owned();
    let catalog = Catalog::build(
        vec![tools(&["b__c", &squatter]), tools(&["c"])],
        &names(&["a", "a__b"]),
        "__",
        1,
    );
    let resolved = &catalog.collisions()[0].resolved[1];
    assert_eq!(*resolved, disambiguated("a__b", "c", "__", 3));
    assert_eq!(catalog.tool(&first), Some((0, squatter.as_str())));
    assert_eq!(catalog.tool(resolved), Some((1, "c")));
}

#[test]
fn duplicates_of_one_upstream_are_no_collision_and_prompts_collide_on_their_own() {
    let mut a = tools(&["t", "t"]);
    a.prompts = vec![json!({"name": "b__p"})];
    let mut b = tools(&["t"]);
    b.prompts = vec![json!({"name": "p"})];
    let catalog = Catalog::build(vec![a, b], &names(&["a", "a__b"]), "__", 1);
    let [collision] = catalog.collisions() else {
        panic!("{:?}", catalog.collisions());
    };
    assert_eq!(collision.kind, "prompt");
    assert_eq!(catalog.prompt("a__b__p"), Some((0, "b__p")));
    assert_eq!(catalog.prompt(&collision.resolved[1]), Some((1, "p")));
    assert_eq!(catalog.listed_prompts()[1]["name"], collision.resolved[1]);
    assert_eq!(catalog.tools().len(), 3);
}

#[test]
fn resources_route_by_uri_then_template_prefix_and_marks_by_exposed_name() {
    let a = Contribution {
        tools: vec![
            json!({"name": "t", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}}}),
        ],
        resources: vec![json!({"uri": "file:///a"})],
        templates: vec![json!({"uriTemplate": "file:///{path}"})],
        ..Contribution::default()
    };
    let b = Contribution {
        resources: vec![json!({"uri": "file:///a"})],
        templates: vec![json!({"uriTemplate": "file:///docs/{path}"})],
        ..Contribution::default()
    };
    let catalog = Catalog::build(vec![a, b], &names(&["a", "b"]), "__", 1);
    assert_eq!(catalog.resource("file:///a"), Some(0));
    assert_eq!(catalog.resource("file:///docs/x"), Some(1));
    assert_eq!(catalog.resource("file:///x"), Some(0));
    assert_eq!(catalog.resource("http://x"), None);
    assert_eq!(catalog.param_marks("a__t").len(), 1);
    assert!(catalog.param_marks("t").is_empty());
}

/// A few servers whose ids and tool names are drawn from a tiny alphabet, so that collisions
/// (and duplicates) are common.
fn servers() -> impl Strategy<Value = Vec<(String, Vec<String>)>> {
    let id = prop::sample::select(vec!["a", "a__b", "b", "a_b", "c"]);
    let tool = prop::sample::select(vec!["c", "b__c", "x", "b__x", "y", "c__2"]);
    prop::collection::btree_map(id, prop::collection::vec(tool, 0..5), 1..5).prop_map(|m| {
        m.into_iter()
            .map(|(s, t)| (s.to_owned(), t.into_iter().map(str::to_owned).collect()))
            .collect()
    })
}

fn build_from(servers: &[(String, Vec<String>)]) -> Catalog {
    let ids: Vec<String> = servers.iter().map(|(s, _)| s.clone()).collect();
    let lists = servers
        .iter()
        .map(|(_, t)| tools(&t.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect();
    Catalog::build(lists, &ids, "__", 1)
}

proptest! {
    #[test]
    fn same_catalog_whatever_the_arrival_order(
        servers in servers(),
        seed in any::<u64>(),
    ) {
        let base = build_from(&servers);
        // Each upstream's tools in another order: the same catalog, byte for byte.
        let mut reordered = servers.clone();
        let mut rng = seed;
        for (_, tools) in &mut reordered {
            tools.reverse();
            if !tools.is_empty() {
                rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let k = usize::try_from(rng >> 33).unwrap() % tools.len();
                tools.rotate_left(k);
            }
        }
        let again = build_from(&reordered);
        prop_assert_eq!(base.tools(), again.tools());
        prop_assert_eq!(base.collisions(), again.collisions());
        // Upstreams in another (policy) order: the same names for the same tools.
        let mut turned = servers.clone();
        turned.reverse();
        let turned = build_from(&turned);
        prop_assert_eq!(mapping(&base), mapping(&turned));
        // Every exposed name is valid, and distinct tools never share one.
        let exposed = mapping(&base);
        let distinct: HashSet<&String> = exposed.values().collect();
        prop_assert_eq!(distinct.len(), exposed.len());
        for (key, name) in &exposed {
            prop_assert!(crate::naming::is_valid(name), "{}", name);
            prop_assert_eq!(base.tool(name), Some((
                servers.iter().position(|(s, _)| *s == key.0).unwrap(),
                key.1.as_str(),
            )));
        }
    }
}

/// A guard that lets everything in as it is and holds nothing.
fn open_door(_: usize, raw: &Contribution, _: &Held) -> (Contribution, Held) {
    (raw.clone(), Held::default())
}

#[test]
fn a_guarded_catalog_lists_moved_tools_in_upstream_order_and_keeps_the_nameless() {
    let mut a = tools(&["z", "b"]);
    a.tools.insert(1, json!({"description": "no name"}));
    a.tools[0]["inputSchema"] =
        json!({"type": "object", "required": ["q"], "properties": {"q": {}}});
    let ids = names(&["a", "c"]);
    let guarded = Catalog::build_guarded(
        vec![a.clone(), tools(&["y"])],
        &ids,
        "__",
        1,
        &Catalog::default(),
        open_door,
    );
    let plain = Catalog::build(vec![a.clone(), tools(&["y"])], &ids, "__", 1);
    // The lists as given are kept whole; the admitted tools live on as the catalog's only.
    assert_eq!(guarded.upstreams()[0].lists(), a);
    assert_eq!(guarded.listed_tools(), plain.listed_tools());
    let shown: Vec<Value> = guarded.listed_tools();
    assert_eq!(shown[0]["name"], "a__z");
    assert_eq!(shown[1], json!({"description": "no name"}));
    assert_eq!(shown[2]["name"], "a__b");
    assert_eq!(shown[3]["name"], "c__y");
    // Listed in the catalog's own key order, values as given.
    assert_eq!(
        serde_json::to_string(&shown[0]).unwrap(),
        r#"{"name":"a__z","inputSchema":{"properties":{"q":{}},"required":["q"],"type":"object"}}"#
    );
    assert_eq!(guarded.tool("a__b"), Some((0, "b")));
}

#[test]
fn a_rebuilt_catalog_shares_the_lists_and_definitions_that_did_not_change() {
    let ids = names(&["a", "b"]);
    let first = Catalog::build_guarded(
        vec![tools(&["x", "y"]), tools(&["z"])],
        &ids,
        "__",
        1,
        &Catalog::default(),
        open_door,
    );
    // Upstream `b` changed its one tool; `a`'s lists are passed on as they are.
    let mut raw = first.upstreams().to_vec();
    let mut changed = tools(&["z"]);
    changed.tools[0]["description"] = json!("now with words");
    raw[1] = changed.into();
    let second = Catalog::build_guarded(raw, &ids, "__", 2, &first, open_door);
    assert!(Arc::ptr_eq(&first.upstreams()[0], &second.upstreams()[0]));
    let definition = |c: &Catalog, name: &str| {
        let t = c.tools().iter().find(|t| t.name == name).unwrap();
        Arc::clone(&t.definition)
    };
    for name in ["x", "y"] {
        assert!(
            Arc::ptr_eq(&definition(&first, name), &definition(&second, name)),
            "{name}"
        );
    }
    assert!(!Arc::ptr_eq(
        &definition(&first, "z"),
        &definition(&second, "z")
    ));
    assert_eq!(definition(&second, "z")["description"], "now with words");
    // Key order aside, equal is equal: the same tool with its keys reordered is shared too.
    let mut reordered = first.upstreams().to_vec();
    reordered[0] = Contribution {
        tools: vec![
            json!({"inputSchema": {"type": "object"}, "name": "x"}),
            json!({"name": "y", "inputSchema": {"type": "object"}}),
        ],
        ..Contribution::default()
    }
    .into();
    let third = Catalog::build_guarded(reordered, &ids, "__", 3, &first, open_door);
    assert!(Arc::ptr_eq(
        &definition(&first, "x"),
        &definition(&third, "x")
    ));
}
