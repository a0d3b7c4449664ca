//! The environment of stdio upstreams: server-everything's `get-env` tool prints the environment
//! its process got, while the gateway runs with secrets in its own.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::harness::{Gateway, Mode, Up, first_text, node_bin, tagged_pids};

/// Variables of the gateway's environment that no child may see unless its policy lists them.
const SECRETS: &[(&str, &str)] = &[
    ("MCPB_TEST_SECRET", "s3cret"),
    ("AWS_SECRET_ACCESS_KEY", "aws-s3cret"),
    ("GITHUB_TOKEN", "gh-s3cret"),
];

/// The gateway's environment for these tests: the test's own plus the secrets, and debug logs
/// of the stdio upstream module (which names the variables each child got).
fn gateway_env() -> Vec<(&'static str, &'static str)> {
    let mut env = SECRETS.to_vec();
    env.push(("MCP_BUDGET_LOG", "info,mcp_budget::upstream::stdio=debug"));
    // A company network: its CA bundle and proxy reach every child.
    env.push(("SSL_CERT_FILE", "/etc/ssl/corp-ca.pem"));
    env.push(("NODE_EXTRA_CA_CERTS", "/etc/ssl/corp-ca.pem"));
    env.push(("NO_PROXY", "localhost,127.0.0.1"));
    env
}

/// What `<upstream>__get-env` reports: the child's whole environment.
async fn child_env(gw: &mut Gateway, upstream: &str) -> BTreeMap<String, String> {
    let resp = gw
        .client()
        .call_tool(&format!("{upstream}__get-env"), json!({}))
        .await;
    let env: Value = serde_json::from_str(first_text(&resp)).expect("get-env prints JSON");
    serde_json::from_value(env).expect("an object of strings")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_child_gets_the_base_and_its_env_but_no_secrets() {
    let everything = Up::everything("clean").env("X", "y");
    // A secret the policy names by reference reaches this one child, and no other.
    let referred = Up::everything("referred").env("TOKEN", "${GITHUB_TOKEN}");
    let mut gw = Gateway::builder("env-clean", Mode::Stdio)
        .env(&gateway_env())
        .start(&[everything, referred])
        .await;
    gw.client().initialize().await;
    let env = child_env(&mut gw, "clean").await;
    let referred = child_env(&mut gw, "referred").await;
    assert_eq!(
        referred.get("TOKEN").map(String::as_str),
        Some("gh-s3cret"),
        "{referred:#?}"
    );
    assert!(!referred.contains_key("GITHUB_TOKEN"), "{referred:#?}");

    for (name, _) in SECRETS {
        assert!(
            !env.contains_key(*name),
            "{name} reached the child: {env:#?}"
        );
    }
    assert!(!env.contains_key("MCP_BUDGET_LOG"), "{env:#?}");
    assert_eq!(env.get("X").map(String::as_str), Some("y"), "{env:#?}");
    for name in ["SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS"] {
        let got = env.get(name).map(String::as_str);
        assert_eq!(got, Some("/etc/ssl/corp-ca.pem"), "{name}: {env:#?}");
    }
    assert_eq!(
        env.get("NO_PROXY").map(String::as_str),
        Some("localhost,127.0.0.1")
    );
    assert_eq!(
        env.get("PATH"),
        std::env::var("PATH").ok().as_ref(),
        "{env:#?}"
    );
    // Nothing else: the documented base, `LC_*`, and what the policy set.
    let base = mcp_budget::upstream::stdio::BASE_ENV;
    let network = mcp_budget::upstream::stdio::NETWORK_ENV;
    for name in env.keys() {
        assert!(
            base.contains(&name.as_str())
                || network.contains(&name.as_str())
                || name.starts_with("LC_")
                || name == "X"
                || name == "MCPB_IT_TAG",
            "{name} reached the child: {env:#?}"
        );
    }

    // The debug log names what the child got, never a value.
    let log = gw.log();
    let line = log
        .lines()
        .find(|l| l.contains("Child environment") && l.contains("upstream=\"clean\""))
        .unwrap_or_else(|| panic!("no environment line in the log:\n{log}"));
    assert!(
        line.contains("\"X\"") && line.contains("\"PATH\""),
        "{line}"
    );
    assert!(!log.contains("s3cret"), "{log}");
    gw.stop_and_check().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inherit_env_gives_the_child_the_whole_environment() {
    let everything = Up::everything("whole").inherit_env().env("X", "y");
    let mut gw = Gateway::builder("env-whole", Mode::Stdio)
        .env(&gateway_env())
        .start(&[everything])
        .await;
    gw.client().initialize().await;
    let env = child_env(&mut gw, "whole").await;

    for (name, value) in SECRETS {
        assert_eq!(env.get(*name).map(String::as_str), Some(*value), "{env:#?}");
    }
    assert_eq!(env.get("X").map(String::as_str), Some("y"), "{env:#?}");
    assert_eq!(
        env.get("PATH"),
        std::env::var("PATH").ok().as_ref(),
        "{env:#?}"
    );
    gw.stop_and_check().await;
}

/// The leftover checks keep biting with clean environments: the harness gives every stdio
/// upstream the test's tag, so a process that escapes the gateway's process group (`setsid`)
/// is still found (and, on Linux, the gateway ends it when it stops: it is their subreaper).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_check_finds_an_upstream_child_that_outlives_the_gateway() {
    let script = format!(
        "setsid sleep 57 </dev/null >/dev/null 2>&1 & exec {}",
        node_bin("mcp-server-everything")
    );
    let up = Up::stdio("stray", "sh", &["-c", &script]);
    let mut gw = Gateway::start("env-stray", Mode::Stdio, &[up]).await;
    gw.client().initialize().await;
    let tag = gw.tag.clone();
    let strays = || -> Vec<String> {
        (tagged_pids(&tag).into_iter())
            .map(crate::harness::cmdline)
            .filter(|c| c.starts_with("sleep 57"))
            .collect()
    };
    assert!(!strays().is_empty(), "the stray child is not tagged");
    gw.terminate().await;
    if cfg!(target_os = "linux") {
        assert_eq!(
            strays(),
            Vec::<String>::new(),
            "the stray outlived the gateway"
        );
    }
    // Dropping the gateway kills every tagged process, the stray one included.
}

/// A stdio upstream's `args` take `${env:VAR}` from the gateway's environment when the child
/// starts (what `init` now writes for a VS Code entry's `${env:…}` argument); an argument
/// without one is passed as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_args_take_env_references_when_the_child_starts() {
    let time = Up::stdio(
        "tz",
        &crate::harness::venv_bin("mcp-server-time"),
        &["--local-timezone", "${env:MCPB_TEST_TZ}"],
    );
    let mut gw = Gateway::builder("env-args", Mode::Stdio)
        .env(&[("MCPB_TEST_TZ", "Pacific/Chatham")])
        .start(&[time])
        .await;
    gw.client().initialize().await;
    let list = gw.client().request("tools/list", json!({})).await;
    // The server names its local timezone in its parameters' descriptions; with the argument
    // passed as written it does not start at all (`${env:MCPB_TEST_TZ}` is no timezone).
    let text = list["result"].to_string();
    assert!(
        text.contains("Use 'Pacific/Chatham' as local timezone"),
        "{list}"
    );
}
