//! `inspect` and `render` run as a user would: the built binary on the fixture toolsets.

use std::path::PathBuf;

use serde_json::Value;

use crate::harness::cli;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/toolsets")
}

fn run(args: &[&str]) -> (bool, String, String) {
    let out = cli(args).run();
    (out.status.success(), out.stdout, out.stderr)
}

fn json_of(args: &[&str]) -> Value {
    cli(args).ok().json()
}

const LEVELS: [&str; 5] = ["off", "low", "medium", "high", "extreme"];

#[test]
fn inspect_json_has_the_documented_shape() {
    let github = fixtures().join("github.json");
    let r = json_of(&[
        "inspect",
        "--tools",
        github.to_str().unwrap(),
        "--model",
        "claude-haiku-4-5",
        "--format",
        "json",
    ]);
    assert_eq!(r["model"], "claude-haiku-4-5");
    assert_eq!(r["rendering"], "anthropic");
    assert_eq!(r["budget"]["tokens"], 4000);
    assert_eq!(r["budget"]["tools"], 12);
    for level in LEVELS {
        assert!(r["totals"][level].as_u64().unwrap() > 0, "{level}");
    }
    assert!(r["totals"]["off"].as_u64() > r["totals"]["extreme"].as_u64());
    let plan = &r["plan"];
    assert_eq!(plan["mode"], "progressive");
    assert!(plan["exposed_tokens"].as_u64().unwrap() <= 4000);
    // Over Haiku's cap of 12: the hybrid rung lists 9 tools (12 − 3 meta-tools), the rest
    // deferred.
    assert_eq!(plan["rung"], "hybrid");
    assert_eq!(plan["exposed_tools"], 9);
    assert_eq!(plan["deferred_tools"], 108);
    let tools = r["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 117);
    assert_eq!(tools[0]["id"], "github/actions_get");
    assert_eq!(tools[0]["schemaHash"].as_str().map(str::len), Some(64));
    for level in LEVELS {
        assert!(tools[0]["tokens"][level].is_u64());
    }
}

#[test]
fn small_catalog_is_listed_in_full() {
    let time = fixtures().join("time.json");
    let r = json_of(&[
        "inspect",
        "--tools",
        time.to_str().unwrap(),
        "--model",
        "gpt-4o",
        "--format",
        "json",
    ]);
    assert_eq!(r["plan"]["mode"], "full");
    assert_eq!(r["plan"]["rung"], "full");
    assert_eq!(r["plan"]["deferred_tools"], 0);
    assert_eq!(r["plan"]["exposed_tokens"], r["totals"]["off"]);
}

#[test]
fn render_full_is_the_catalog_namespaced() {
    let (time, fetch) = (fixtures().join("time.json"), fixtures().join("fetch.json"));
    let (ok, stdout, stderr) = run(&[
        "render",
        "--tools",
        fetch.to_str().unwrap(),
        time.to_str().unwrap(),
        "--model",
        "gpt-4o",
    ]);
    assert!(ok, "{stderr}");
    // Compact bytes, one line.
    assert_eq!(stdout.lines().count(), 1);
    let r: Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    // Servers in the order given, then tools by name: the canonical order `serve` lists
    // (time.json itself has get_current_time first).
    assert_eq!(
        names,
        [
            "fetch__fetch",
            "time__convert_time",
            "time__get_current_time"
        ]
    );
}

#[test]
fn render_progressive_lists_catalog_lines_in_search_tool() {
    let github = fixtures().join("github.json");
    let r = json_of(&[
        "render",
        "--tools",
        github.to_str().unwrap(),
        "--mode",
        "progressive",
        "--level",
        "extreme",
    ]);
    let tools = r["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["search_tools", "get_tool_schema", "invoke_tool"]);
    let description = tools[0]["description"].as_str().unwrap();
    // At `extreme` a catalog line is the name alone.
    assert!(
        description.contains("\n- github__create_issue\n"),
        "{description}"
    );
    assert_eq!(description.matches("\n- github__").count(), 117);
}

#[test]
fn render_fixed_level_keeps_every_constraint() {
    let github = fixtures().join("github.json");
    let off = json_of(&[
        "render",
        "--tools",
        github.to_str().unwrap(),
        "--mode",
        "full",
        "--level",
        "off",
    ]);
    let extreme = json_of(&[
        "render",
        "--tools",
        github.to_str().unwrap(),
        "--mode",
        "full",
        "--level",
        "extreme",
    ]);
    let (a, b) = (
        off["tools"].as_array().unwrap(),
        extreme["tools"].as_array().unwrap(),
    );
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            mcp_budget::compress::constraints_of(&x["inputSchema"]),
            mcp_budget::compress::constraints_of(&y["inputSchema"])
        );
    }
    assert!(extreme.to_string().len() < off.to_string().len());
}

#[test]
fn policy_pins_and_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        "version = 1\n[budget]\nmodel = \"claude-haiku-4-5\"\n\
         [budget.tools.\"github/create_issue\"]\npin = true\ndescription = \"Open a GitHub issue.\"\n",
    )
    .unwrap();
    let github = fixtures().join("github.json");
    let r = json_of(&[
        "render",
        "--tools",
        github.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ]);
    let tools = r["tools"].as_array().unwrap();
    let pinned = tools
        .iter()
        .find(|t| t["name"] == "github__create_issue")
        .expect("the pinned tool is listed");
    assert_eq!(pinned["description"], "Open a GitHub issue.");
    // The pinned tool, 8 more (Haiku's cap of 12 less the 3 meta-tools), the meta-tools.
    assert_eq!(tools.len(), 12);
}

/// The example: a desktop host's three servers (41 tools, 6,284 tokens) on Sonnet 4.5
/// (4,000 tokens, 20 tools). Past the tool cap it used to be 0 listed, 41 deferred; the
/// hybrid rung lists a fair share of every server (two rounds across them), then the smallest
/// whole, and keeps the rest behind search.
#[test]
fn three_servers_over_the_cap_list_the_most_useful_tools() {
    let sets = ["12306-mcp", "hackernews", "word-document-server"]
        .map(|s| fixtures().join(format!("{s}.json")).display().to_string());
    let mut args = vec!["inspect", "--tools"];
    args.extend(sets.iter().map(String::as_str));
    args.extend(["--model", "claude-sonnet-4-5", "--format", "json"]);
    let r = json_of(&args);
    assert_eq!(r["totals"]["off"], 6284);
    assert_eq!(r["tools"].as_array().unwrap().len(), 41);
    let plan = &r["plan"];
    assert_eq!(
        (plan["rung"].as_str(), plan["fits"].as_bool()),
        (Some("hybrid"), Some(true))
    );
    assert_eq!(plan["exposed_tools"], 17);
    assert_eq!(plan["listed_tools"], 20);
    // The level the 17 were listed at, not null: `off` since the rounds across servers list
    // cheap tools of every server (`medium` with the smallest server whole).
    assert_eq!(plan["level"], "off");
    assert!(plan["exposed_tokens"].as_u64().unwrap() <= 4000);
    let mut listed = std::collections::BTreeMap::<String, usize>::new();
    for tool in r["tools"].as_array().unwrap() {
        let server = tool["id"]
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        *listed.entry(server).or_default() += usize::from(tool["plan"] != "deferred");
    }
    let expected = [
        ("12306-mcp", 5),
        ("hackernews", 6),
        ("word-document-server", 6),
    ];
    let expected: std::collections::BTreeMap<String, usize> = expected
        .iter()
        .map(|(s, n)| ((*s).to_owned(), *n))
        .collect();
    assert_eq!(
        listed, expected,
        "every server its fair share of 17 (5.7 each)"
    );
    // `render` gives the host the same: 17 tools, then the meta-tools with the others' lines.
    let mut args = vec!["render", "--tools"];
    args.extend(sets.iter().map(String::as_str));
    args.extend(["--model", "claude-sonnet-4-5"]);
    let r = json_of(&args);
    let tools = r["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 20);
    assert_eq!(tools[17]["name"], "search_tools");
    let lines = tools[17]["description"].as_str().unwrap();
    assert_eq!(
        lines.matches("\n- word-document-server__").count(),
        18,
        "{lines}"
    );
}

/// Issue 55's desktop host (`everything` 13 tools, GitHub's reference server 26, `time` 2) on
/// Sonnet 4.5 (4,000 tokens, 20 tools): every server gets its max-min fair share of the 17
/// slots, and `inspect` says so (GitHub used to get 2 of 26).
#[test]
fn inspect_shows_each_servers_fair_share_and_why() {
    let desktop = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/desktop");
    let desktop = desktop.to_str().unwrap();
    let r = json_of(&[
        "inspect",
        "--tools",
        desktop,
        "--model",
        "claude-sonnet-4-5",
        "--format",
        "json",
    ]);
    let share = |server: &str| {
        let s = r["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["server"] == server);
        s.unwrap()["share"].clone()
    };
    let github = share("github");
    assert_eq!(github["fair_share"], 7.5, "{github}");
    assert!(
        github["listed_tools"].as_f64().unwrap() >= 0.6 * 7.5,
        "{github}"
    );
    assert_eq!(github["why"], "fair");
    assert_eq!(share("time")["why"], "whole");
    let (ok, table, stderr) = run(&[
        "inspect",
        "--tools",
        desktop,
        "--model",
        "claude-sonnet-4-5",
    ]);
    assert!(ok, "{stderr}");
    let line = table
        .lines()
        .find(|l| l.starts_with("share of the 17 listed slots"));
    let line = line.unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains("github 7/26 (fair 7.5: fair)"), "{line}");
    assert!(line.contains("time 2/2 (fair 2.0: whole)"), "{line}");
}

#[test]
fn html_is_self_contained() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.html");
    let (ok, _, stderr) = run(&[
        "inspect",
        "--tools",
        fixtures().to_str().unwrap(),
        "--format",
        "html",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{stderr}");
    let html = std::fs::read_to_string(out).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("<svg"));
    assert!(!html.contains("<script") && !html.contains("src=\"http"));
}

#[test]
fn unknown_model_is_an_error() {
    let (ok, _, stderr) = run(&[
        "inspect",
        "--tools",
        fixtures().to_str().unwrap(),
        "--model",
        "llama-9",
    ]);
    assert!(!ok);
    assert!(stderr.contains("context_window"), "{stderr}");
}

/// `calibrate` end to end: the request it prints carries the tools `render` gives; fed back the
/// answer Claude would give if it counted these tools at 1.4 × cl100k, it prints a calibration
/// of 1.4, and a policy with that calibration makes `inspect` count what Claude counted.
#[test]
fn calibrate_turns_a_count_tokens_answer_into_the_policy_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let git = fixtures().join("git.json");
    let (ok, tools, err) = run(&[
        "render",
        "--tools",
        git.to_str().unwrap(),
        "--model",
        "claude-sonnet-4-5",
        "--format",
        "anthropic",
        "--mode",
        "full",
        "--level",
        "off",
    ]);
    assert!(ok, "{err}");
    let tools_file = dir.path().join("tools.json");
    std::fs::write(&tools_file, &tools).unwrap();
    let tools_file = tools_file.to_str().unwrap();

    let request = json_of(&[
        "calibrate",
        "--model",
        "claude-sonnet-4-5",
        "--tools-file",
        tools_file,
        "--print-request",
    ]);
    let sent: Value = serde_json::from_str(&tools).unwrap();
    assert_eq!(request["tools"], sent["tools"]);
    assert_eq!(request["model"], "claude-sonnet-4-5");
    assert_eq!(request["messages"][0]["role"], "user");

    // cl100k count of the same tools, as the anthropic rendering counts them.
    let list: Vec<Value> = sent["tools"].as_array().unwrap().clone();
    let bpe = mcp_budget::cli::calibrate::compute(
        &list,
        mcp_budget::tokens::Encoding::Cl100kBase,
        1_000_000,
        0,
        0,
    )
    .unwrap()
    .bpe_tokens;
    let claude = bpe * 14 / 10;
    let answer = 8 + 346 + claude;
    let response = dir.path().join("response.json");
    std::fs::write(&response, format!("{{\"input_tokens\": {answer}}}")).unwrap();
    let (ok, out, err) = run(&[
        "calibrate",
        "--model",
        "claude-sonnet-4-5",
        "--tools-file",
        tools_file,
        "--count-tokens-response",
        response.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("13 tools {claude}")), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("calibration = "))
        .expect(&out);
    let calibration: f64 = line["calibration = ".len()..].parse().unwrap();
    assert!((calibration - 1.4).abs() < 0.002, "{out}");
    // The saved lists themselves, rendered as above, give the same answer.
    let (ok, from_saved, err) = run(&[
        "calibrate",
        "--model",
        "claude-sonnet-4-5",
        "--tools",
        git.to_str().unwrap(),
        "--count-tokens-response",
        response.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert_eq!(from_saved, out);

    let policy = dir.path().join("p.toml");
    std::fs::write(
        &policy,
        format!(
            "version = 1\n[budget]\nmodel = \"claude-sonnet-4-5\"\ncalibration = {calibration}\n"
        ),
    )
    .unwrap();
    let r = json_of(&[
        "inspect",
        "--tools",
        git.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let counted = r["totals"]["off"].as_u64().unwrap() as f64;
    let billed = (answer - 8) as f64;
    assert!(
        (counted - billed).abs() / billed < 0.01,
        "inspect {counted} vs Claude {billed}"
    );

    // An answer that cannot be for these tools is refused with a reason.
    std::fs::write(&response, "{\"input_tokens\": 300}").unwrap();
    let (ok, _, err) = run(&[
        "calibrate",
        "--model",
        "claude-sonnet-4-5",
        "--tools-file",
        tools_file,
        "--count-tokens-response",
        response.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("was the request sent with these tools?"),
        "{err}"
    );
    let (ok, _, err) = run(&[
        "calibrate",
        "--model",
        "gpt-5",
        "--tools-file",
        tools_file,
        "--print-request",
    ]);
    assert!(!ok);
    assert!(err.contains("not a Claude model"), "{err}");
}

/// `completions bash` is a script bash accepts, and completing the first word offers the
/// commands.
#[test]
fn bash_completions_offer_the_commands() {
    let (ok, script, err) = run(&["completions", "bash"]);
    assert!(ok, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcp-budget.bash");
    std::fs::write(&file, &script).unwrap();
    let probe = format!(
        "source {}; COMP_WORDS=(mcp-budget ca); COMP_CWORD=1; COMP_LINE='mcp-budget ca'; \
         COMP_POINT=13; _mcp__budget mcp-budget ca mcp-budget; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &probe])
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&out.stdout);
    assert!(
        offered.lines().any(|l| l == "calibrate"),
        "{offered} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for shell in ["zsh", "fish"] {
        let (ok, script, _) = run(&["completions", shell]);
        assert!(ok && script.contains("inspect"), "{shell}");
    }
}

fn collisions() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collisions")
}

#[test]
fn colliding_names_are_reported_by_check_inspect_and_render() {
    let dir = collisions();
    let dir = dir.to_str().unwrap();
    let (ok, _, stderr) = run(&["check", "--tools", dir]);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(
            "warning: --tools: tool name a__b__c claimed by a/b__c (keeps it), a__b/c (as a__b__c_"
        ),
        "{stderr}"
    );
    let (ok, _, stderr) = run(&["check", "--strict", "--tools", dir]);
    assert!(!ok, "a collision is a warning: {stderr}");

    let report = json_of(&["inspect", "--tools", dir, "--format", "json"]);
    let collision = &report["collisions"][0];
    assert_eq!(collision["name"], "a__b__c", "{report}");
    let other = collision["claimants"][1]["exposed"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(other.starts_with("a__b__c_"), "{collision}");
    assert_eq!(tool_names(&report), ["a__b__c", other.as_str()]);
    let (ok, table, _) = run(&["inspect", "--tools", dir]);
    assert!(
        ok && table.contains("collision: tool name a__b__c"),
        "{table}"
    );

    let listed = json_of(&["render", "--tools", dir]);
    assert_eq!(tool_names(&listed), ["a__b__c", other.as_str()]);
}

/// The `name` of each of `value["tools"]`.
fn tool_names(value: &Value) -> Vec<&str> {
    value["tools"]
        .as_array()
        .expect("a tools array")
        .iter()
        .map(|t| t["name"].as_str().expect("a string name"))
        .collect()
}

#[test]
fn render_passes_tools_through_when_the_policy_turns_the_budget_off() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("off.toml");
    std::fs::write(&policy, "version = 1\n[budget]\nenabled = false\n").unwrap();
    // More tools than a small model's budget: planned, they would go behind the meta-tools.
    let fixtures = fixtures();
    let listed = json_of(&[
        "render",
        "--policy",
        policy.to_str().unwrap(),
        "--tools",
        fixtures.to_str().unwrap(),
        "--model",
        "claude-haiku-4-5",
    ]);
    let tools = listed["tools"].as_array().unwrap();
    let saved = mcp_budget::catalog::load_saved(&[fixtures]).unwrap();
    assert_eq!(tools.len(), saved.len());
    assert!(tools.iter().all(|t| t["name"] != "search_tools"));
    // In the upstreams' own order, as the gateway passes them through.
    assert_eq!(tools[0]["name"], saved[0].exposed_name("__").as_ref());
}

/// `inspect` names deferred tools to pin, one per server that has tools behind search, as
/// `[budget.tools]` keys the user can paste.
#[test]
fn inspect_names_the_tools_it_would_pin_for_more() {
    let sets = ["github", "12306-mcp", "hackernews", "word-document-server"]
        .map(|s| fixtures().join(format!("{s}.json")).display().to_string());
    let mut args = vec!["inspect", "--tools"];
    args.extend(sets.iter().map(String::as_str));
    args.extend(["--model", "claude-sonnet-4-5", "--format", "json"]);
    let r = json_of(&args);
    let advice = r["plan"]["advice"].as_str().unwrap();
    assert!(advice.contains("pin = true, e.g. \""), "{advice}");
    let named: Vec<&str> = advice
        .split('"')
        .filter(|w| w.contains('/') && !w.contains("server/tool"))
        .collect();
    assert!(named.iter().any(|t| t.starts_with("github/")), "{advice}");
    let deferred = |id: &str| {
        r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id && t["plan"] == "deferred")
    };
    assert!(
        named.iter().all(|t| deferred(t)),
        "only deferred tools are named: {advice}"
    );
}
