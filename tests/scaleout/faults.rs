//! The fault table of the closing note (issue 34): every `on_store_error` mode under every
//! store fault, three replicas behind HAProxy, a client limited to 10 calls a second calling
//! as fast as 6 workers can for 4 s; the fault at 1.5 s, the store back at 3.5 s. A
//! measurement (`--ignored --nocapture`): the assertions that hold in CI are the other store
//! tests'.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Fault, StoreDown, TURN, fallbacks_of, hammer};

/// How long after the store is back every replica's `/status` says it is up again.
async fn recovery(run: &StoreDown, back: Instant) -> Duration {
    loop {
        let mut up = 0;
        for port in run.admin {
            let status: Value = reqwest::get(format!("http://127.0.0.1:{port}/status"))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            up += usize::from(status["state"]["up"] == true);
        }
        if up == run.admin.len() || back.elapsed() > Duration::from_secs(20) {
            return back.elapsed();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// One cell: the calls' outcomes, the fallbacks counted and the recovery time.
async fn cell(mode: &str, fault: Fault) -> String {
    use nix::sys::signal::Signal;
    let mut run = StoreDown::start(mode).await;
    let (url, session) = (run.haproxy.url(), run.session.clone());
    let calls =
        tokio::spawn(async move { hammer(&url, &session, 6, Duration::from_secs(4)).await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let port = run.redis.port;
    match fault {
        Fault::Kill => run.redis.kill().await,
        Fault::Stop => run.redis.signal(Signal::SIGSTOP),
        Fault::Pause => {
            assert_eq!(run.redis.command("CLIENT PAUSE 2000 ALL").await, "+OK");
        }
        Fault::RestartEmpty => {
            run.redis.kill().await;
            run.redis = super::harness::RedisServer::start_on(port, &run.tag).await;
        }
    }
    let back = if matches!(fault, Fault::RestartEmpty) {
        Instant::now()
    } else {
        tokio::time::sleep(Duration::from_secs(2)).await;
        match fault {
            Fault::Kill => {
                run.redis = super::harness::RedisServer::start_on(port, &run.tag).await;
            }
            Fault::Stop => run.redis.signal(Signal::SIGCONT),
            _ => {}
        }
        Instant::now()
    };
    let tally = calls.await.unwrap();
    let recovered = recovery(&run, back).await;
    let counted = fallbacks_of(&run).await;
    run.stop().await;
    let unavailable = tally
        .other
        .get("mcp_budget.state.unavailable")
        .copied()
        .unwrap_or(0);
    let lost: u64 = (tally.other.iter())
        .filter(|(k, _)| k.as_str() != "mcp_budget.state.unavailable")
        .map(|(_, n)| n)
        .sum();
    format!(
        "| {mode} | {fault:?} | {} | {} | {unavailable} | {lost} | {counted} | {:.2} s |",
        tally.admitted,
        tally.limited,
        recovered.as_secs_f64()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn measure_the_fault_table() {
    let _turn = TURN.lock().await;
    let mut rows = vec![
        "| on_store_error | fault | admitted | refused (rate) | refused (store) | lost | fallbacks | recovery |".to_owned(),
        "|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    for mode in ["local_share", "open", "closed"] {
        for fault in [Fault::Kill, Fault::Stop, Fault::Pause, Fault::RestartEmpty] {
            let row = cell(mode, fault).await;
            eprintln!("{row}");
            rows.push(row);
        }
    }
    eprintln!("\n{}", rows.join("\n"));
}
