//! Byte-stable tool lists: a real upstream restarted mid-session yields the same bytes.

use std::time::Duration;

use serde_json::json;

use crate::harness::{Gateway, Mode, Up, child_matching, first_text};

/// With the budget on, the gateway lists tools in canonical form: after the upstream is killed
/// and restarted by the gateway (a new process, a new handshake, lists fetched again), the host
/// sees exactly the same bytes, so its prompt cache keeps hitting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_bytes_survive_an_upstream_restart() {
    let mut gw = Gateway::builder("restart-bytes", Mode::Stdio)
        .policy("[budget]\nmode = \"full\"\n")
        .start(&[Up::everything("everything"), Up::time("time")])
        .await;
    gw.client().initialize().await;
    let before = gw.client().request("tools/list", json!({})).await;
    let tools = before["result"]["tools"].as_array().unwrap();
    assert!(tools.len() > 10, "{before}");

    let victim = child_matching(&gw, "server-everything").expect("server-everything runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r = gw
            .client()
            .call_tool("everything__echo", json!({"message": "back"}))
            .await;
        if r.get("result").is_some() {
            assert_eq!(first_text(&r), "Echo: back");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never restarted: {}",
            gw.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_ne!(child_matching(&gw, "server-everything"), Some(victim));
    // Lists are fetched again once the upstream is ready; give the refresh a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = gw.client().request("tools/list", json!({})).await;
    assert_eq!(
        serde_json::to_string(&before["result"]).unwrap(),
        serde_json::to_string(&after["result"]).unwrap(),
        "the tools/list bytes changed across the restart"
    );
    gw.stop_and_check().await;
}
