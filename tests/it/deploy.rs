//! The Kubernetes deployment under `deploy/`: every kustomization renders with `kubectl
//! kustomize`, validates against the Kubernetes schemas (the `kubernetes-validate` package from `PyPI`,
//! strict), fits together (selectors, probes on the admin port, the autoscaler's target, at least
//! two replicas, hardened pods) and carries a policy `mcp-budget check` accepts, whose variables
//! (`seal_key_env`, `api_key_env`, `${env:…}`) the container gets from its Secret
//! (`tests/peers/scripts/check_manifests.py` does the checking). Broken copies must fail it.
//!
//! Needs `scripts/install-test-deps.sh` (run by `scripts/test.sh`): the venv and `kubectl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn check(deploy: &Path) -> Output {
    let python = root().join("tests/peers/.venv/bin/python");
    assert!(python.exists(), "run scripts/install-test-deps.sh first");
    Command::new("timeout")
        .arg("120")
        .arg(python)
        .arg(root().join("tests/peers/scripts/check_manifests.py"))
        .arg(deploy)
        .arg(crate::harness::BIN)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The report of the check of `deploy`, which must fail.
fn refused(deploy: &Path) -> String {
    let out = check(deploy);
    let report = text(&out);
    assert!(!out.status.success(), "{report}");
    report
}

/// A copy of `deploy/` in a temporary directory, with `file` edited by `edit`.
fn broken(file: &str, edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("deploy");
    let status = Command::new("cp")
        .arg("-r")
        .arg(root().join("deploy"))
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let path = copy.join(file);
    let before = std::fs::read_to_string(&path).unwrap();
    let after = edit(&before);
    assert_ne!(before, after, "the edit of {file} changed nothing");
    std::fs::write(&path, after).unwrap();
    (dir, copy)
}

#[test]
fn manifests_render_validate_and_fit_together() {
    let out = check(&root().join("deploy"));
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    for kustomization in ["kustomize/base", "kustomize/overlays/example"] {
        assert!(
            report.contains(&format!(
                "{kustomization}: policy in configmap/mcp-budget-policy-"
            )),
            "{kustomization}'s policy was not checked:\n{report}"
        );
        assert!(
            report.contains(&format!("{kustomization}: ")) && report.contains("objects rendered"),
            "{report}"
        );
        assert!(
            report.contains(&format!(
                "{kustomization}: container mcp-budget gets the 4 variables its policy reads: \
                 AGENT_A_KEY, AGENT_B_KEY, GITHUB_TOKEN, MCP_BUDGET_SEAL_KEY"
            )),
            "{kustomization}'s policy variables were not checked:\n{report}"
        );
    }
}

#[test]
fn a_field_kubernetes_does_not_know_fails_the_schema_check() {
    let (_dir, copy) = broken("kustomize/base/deployment.yaml", |s| {
        s.replace(
            "  revisionHistoryLimit: 5",
            "  revisionHistoryLimit: 5\n  replicass: 2",
        )
    });
    let report = refused(&copy);
    assert!(
        report.contains("FAIL") && report.contains("replicass"),
        "{report}"
    );
}

#[test]
fn a_service_that_selects_no_pod_fails() {
    let (_dir, copy) = broken("kustomize/base/service.yaml", |s| {
        s.replacen(
            "app.kubernetes.io/component: gateway",
            "app.kubernetes.io/component: gatway",
            1,
        )
    });
    let report = refused(&copy);
    assert!(
        report.contains("FAIL kustomize/base: service/mcp-budget selects no pod"),
        "{report}"
    );
}

#[test]
fn a_policy_mcp_budget_refuses_fails() {
    let (_dir, copy) = broken("kustomize/overlays/example/policy.toml", |s| {
        s.replace("[budget]\n", "[budget]\nthreshhold_percent = 2\n")
    });
    let report = refused(&copy);
    assert!(
        report.contains("FAIL kustomize/overlays/example: mcp-budget check refuses the policy")
            && report.contains("threshhold_percent"),
        "{report}"
    );
}

#[test]
fn a_seal_key_variable_the_secret_does_not_provide_fails() {
    // `mcp-budget check` only warns about an unset variable (it may be set where the gateway
    // runs), so the name must be checked against what the pod gets.
    let (_dir, copy) = broken("kustomize/base/policy.toml", |s| {
        s.replace(
            "seal_key_env = \"MCP_BUDGET_SEAL_KEY\"",
            "seal_key_env = \"MCP_BUDGET_SEAL\"",
        )
    });
    let report = refused(&copy);
    assert!(
        report.contains("FAIL kustomize/base: the policy in configmap/mcp-budget-policy-")
            && report.contains(
                "reads MCP_BUDGET_SEAL (sessions.seal_key_env), which container mcp-budget does \
                 not get"
            ),
        "{report}"
    );
}

#[test]
fn a_variable_dropped_from_the_secret_fails() {
    let (_dir, copy) = broken("kustomize/base/secret.yaml", |s| {
        s.replace("  GITHUB_TOKEN: replace-me\n", "")
    });
    let report = refused(&copy);
    for kustomization in ["kustomize/base", "kustomize/overlays/example"] {
        assert!(
            report.contains(&format!("FAIL {kustomization}: the policy in configmap/"))
                && report.contains("reads GITHUB_TOKEN (upstream[0].headers.Authorization)"),
            "{report}"
        );
    }
}

#[test]
fn the_image_runs_as_non_root_from_a_minimal_base() {
    let file = std::fs::read_to_string(root().join("deploy/Containerfile")).unwrap();
    let stages: Vec<&str> = file.lines().filter(|l| l.starts_with("FROM ")).collect();
    assert_eq!(
        stages.len(),
        2,
        "a build stage and a runtime stage: {stages:?}"
    );
    assert!(stages[1].contains("distroless"), "{stages:?}");
    let runtime = file.split(stages[1]).nth(1).unwrap();
    assert!(
        runtime.lines().any(|l| l.starts_with("USER 65532")),
        "{runtime}"
    );
    assert!(
        runtime.contains("ENTRYPOINT [\"/usr/local/bin/mcp-budget\"]"),
        "{runtime}"
    );
}

/// `promtool` with `args`, run in `deploy/prometheus`: its output, after asserting success.
fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(root().join("deploy/prometheus"))
        .output()
        .expect("promtool (Debian package prometheus) is installed");
    let said = format!("{}{}", text(&out), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?}: {said}");
    said
}

/// Every `mcp_budget_*` metric name in `text`, a histogram's `_bucket` series under its own name.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("mcp_budget_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        names.insert(name.strip_suffix("_bucket").unwrap_or(name).to_owned());
        rest = &tail[end..];
    }
    names
}

/// The metrics `docs/metrics.md` (generated from `src/telemetry/names.rs`) documents.
fn documented_metrics() -> std::collections::BTreeSet<String> {
    let doc = std::fs::read_to_string(root().join("docs/metrics.md")).unwrap();
    (doc.lines())
        .filter_map(|l| l.strip_prefix("| `mcp_budget_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("mcp_budget_{n}"))
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    assert!(promtool(&["check", "rules", "alerts.yml"]).contains("SUCCESS: 7 rules found"));
    promtool(&["test", "rules", "alerts.test.yml"]);
    let rules = std::fs::read_to_string(root().join("deploy/prometheus/alerts.yml")).unwrap();
    let known = documented_metrics();
    let unknown: Vec<String> = metric_names(&rules).difference(&known).cloned().collect();
    assert!(
        unknown.is_empty(),
        "not metrics the gateway exports: {unknown:?}"
    );
}

#[test]
fn the_grafana_dashboard_queries_only_real_metrics() {
    let text = std::fs::read_to_string(root().join("deploy/grafana/mcp-budget.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(dashboard["uid"], "mcp-budget");
    let panels = dashboard["panels"].as_array().unwrap();
    let exprs: Vec<&str> = (panels.iter())
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap())
        .collect();
    assert!(exprs.len() >= 10, "{exprs:?}");
    let used = metric_names(&exprs.join("\n"));
    let known = documented_metrics();
    let unknown: Vec<&String> = used.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "not metrics the gateway exports: {unknown:?}"
    );
    // The outcomes it splits calls by include the denied one.
    assert!(text.contains("denied"), "{text}");
}

#[test]
fn the_image_tag_is_the_crate_version() {
    for file in [
        "deploy/kustomize/base/kustomization.yaml",
        "deploy/kustomize/overlays/example/kustomization.yaml",
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let tag = format!("newTag: \"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(text.contains(&tag), "{file}: the image tag is not {tag}");
    }
}
