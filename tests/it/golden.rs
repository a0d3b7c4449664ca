//! Golden files: the exact bytes of a rewritten `tools/list` and of the gateway's error objects,
//! kept in `tests/fixtures/golden/`, so that a change to either shows as a failing test and a
//! reviewed diff rather than passing unseen (the field-by-field tests elsewhere check meaning;
//! these check bytes, which a host's prompt cache keys on).
//!
//! When a change is meant, `UPDATE=1 cargo test --test it golden::` rewrites the files; review
//! their diff like code. (rmcp's `tests/test_message_schema.rs` does the same with
//! `UPDATE_SCHEMA`.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mcp_budget::error::Error;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `actual` with the golden file `name`, or writes it there under `UPDATE=1`.
///
/// # Panics
/// When they differ (naming the first differing byte, with some context on each side) or the
/// file is missing.
fn assert_golden(name: &str, actual: &str) {
    let path: PathBuf = root().join("tests/fixtures/golden").join(name);
    if std::env::var_os("UPDATE").is_some_and(|v| v == "1") {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let at = expected
        .bytes()
        .zip(actual.bytes())
        .position(|(e, a)| e != a)
        .unwrap_or_else(|| expected.len().min(actual.len()));
    // 120 bytes each side, widened to char boundaries (`floor_char_boundary` is newer than the
    // crate's rust-version).
    let around = |s: &str| {
        let mut from = at.saturating_sub(120).min(s.len());
        while !s.is_char_boundary(from) {
            from -= 1;
        }
        let mut to = (at + 120).min(s.len());
        while !s.is_char_boundary(to) {
            to += 1;
        }
        s[from..to].to_owned()
    };
    panic!(
        "{} differs from what the gateway gives now, first at byte {at} (of {} golden, {} now):\n\
         golden: …{}…\n\
         now:    …{}…\n\
         If the change is meant: UPDATE=1 cargo test --test it golden::, and review the diff.",
        path.display(),
        expected.len(),
        actual.len(),
        around(&expected),
        around(actual),
    );
}

/// `render` on the shipped progressive policy with two saved servers prints the `tools/list`
/// result `serve` answers (the `offline_live_*` tests prove the two agree): `time` pinned and
/// listed in full, github's tools behind the three meta-tools with its catalog lines in
/// `search_tools`.
#[test]
fn a_progressive_tools_list_keeps_its_bytes() {
    let toolsets = root().join("tests/fixtures/toolsets");
    let out = Command::new("timeout")
        .arg(Duration::from_secs(60).as_secs().to_string())
        .arg(crate::harness::BIN)
        .args(["render", "--policy"])
        .arg(root().join("policies/progressive.toml"))
        .arg("--tools")
        .args([toolsets.join("time.json"), toolsets.join("github.json")])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "render failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_golden(
        "progressive-tools-list.json",
        &String::from_utf8(out.stdout).unwrap(),
    );
}

/// Every error the gateway answers with, as its JSON-RPC error object goes on the wire: code,
/// message and `data` (its `type` included), one line each as `{"of": VARIANT, "error": …}`.
#[test]
fn error_objects_keep_their_bytes() {
    let up = || "github".to_owned();
    let errors = [
        (
            "UpstreamUnavailable",
            Error::UpstreamUnavailable {
                upstream: up(),
                reason: "exited with status 1".into(),
            },
        ),
        (
            "UpstreamTimeout",
            Error::UpstreamTimeout {
                upstream: up(),
                timeout: Duration::from_millis(2500),
            },
        ),
        (
            "UpstreamProtocol",
            Error::UpstreamProtocol {
                upstream: up(),
                reason: "a response of the wrong shape".into(),
            },
        ),
        (
            "UpstreamUnreachable",
            Error::UpstreamUnreachable {
                upstream: up(),
                url: "http://127.0.0.1:1/mcp".into(),
                reason: "connection refused".into(),
            },
        ),
        (
            "InstancesExhausted",
            Error::InstancesExhausted {
                upstream: up(),
                max: 4,
            },
        ),
        ("ClientRequired", Error::ClientRequired { upstream: up() }),
        (
            "NotFound tool",
            Error::NotFound {
                what: "tool",
                name: "github__nope".into(),
            },
        ),
        (
            "NotFound resource",
            Error::NotFound {
                what: "resource",
                name: "file:///nope".into(),
            },
        ),
        ("MethodNotFound", Error::MethodNotFound("tools/nope".into())),
        (
            "InvalidParams",
            Error::invalid_params("tools/call", "params.name must be a string"),
        ),
        (
            "TooLarge",
            Error::TooLarge {
                size: 9000,
                limit: 8192,
            },
        ),
        ("Session", Error::Session("unknown session".into())),
        (
            "ClientInput missing capability",
            Error::ClientInput {
                upstream: up(),
                reason: "the client did not declare sampling".into(),
                missing_capability: Some("sampling".into()),
            },
        ),
        (
            "ClientInput failed",
            Error::ClientInput {
                upstream: up(),
                reason: "the client answered with an error".into(),
                missing_capability: None,
            },
        ),
        ("UnknownRequest", Error::UnknownRequest { id: "7".into() }),
        (
            "Unroutable no client",
            Error::Unroutable {
                upstream: up(),
                method: "sampling/createMessage".into(),
                reason: "no client has a request in flight to it".into(),
                ambiguous: false,
            },
        ),
        (
            "Unroutable ambiguous",
            Error::Unroutable {
                upstream: up(),
                method: "elicitation/create".into(),
                reason: "two clients have requests in flight to it".into(),
                ambiguous: true,
            },
        ),
        ("ShuttingDown", Error::ShuttingDown),
        ("Internal", Error::Internal("a lock was poisoned".into())),
    ];
    let mut lines = String::new();
    for (of, error) in &errors {
        let wire = serde_json::to_string(&error.to_error_object()).unwrap();
        // Written around the wire bytes, not re-serialized: the line keeps them verbatim.
        lines += &format!("{{\"of\":{of:?},\"error\":{wire}}}\n");
    }
    assert_golden("error-objects.jsonl", &lines);
}
