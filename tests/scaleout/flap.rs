//! Shared limits while the store flaps or is slow, not down (issue 50 finding 3): three
//! replicas behind HAProxy on one real `redis-server`, `on_store_error = "local_share"`, the
//! store blocked 200 ms of every second (`CLIENT PAUSE`) or reached through a proxy that delays
//! every byte 5 ms each way (a round trip near `timeout_ms` on a loaded machine). A replica
//! that falls back starts from what it last knew of the shared bucket and pays what it
//! admitted back when the store answers again, so the client gets through at its rate, not
//! 1.5 to 1.7 times it.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::harness::{self, free_port};
use super::{
    BURST, Haproxy, RATE, Replica, TURN, Tally, expected, fallbacks, hammer, limits_policy,
    open_session, stop_all,
};

/// A TCP proxy to `127.0.0.1:to` that holds every chunk `delay` before passing it on, each way
/// (a delay line: latency, not a throughput cap). Ends when dropped.
struct DelayProxy {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    async fn start(to: u16, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut links = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)).await else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                links.spawn(delayed(cr, sw, delay));
                links.spawn(delayed(sr, cw, delay));
            }
        });
        Self { port, task }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every link.
        self.task.abort();
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read.
async fn delayed(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0
            || tx
                .send((tokio::time::Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
        {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// What is done to the store during the run.
#[derive(Clone, Copy, Debug)]
enum Flap {
    /// `CLIENT PAUSE 200 ALL` at every second: blocked a fifth of the time.
    Pause200EverySecond,
    /// Every byte to and from the store delayed `ms` each way (a round trip near `timeout_ms`).
    Delay { ms: u64 },
}

/// Three `local_share` replicas (`timeout_ms`) behind HAProxy on one store, through a delay
/// proxy for [`Flap::Delay`]; the client hammers for `secs` while `flap` happens: what it got,
/// the seconds it took, and the fallbacks counted.
async fn flapping_run(flap: Flap, timeout_ms: u64, secs: u64) -> (Tally, f64, u64) {
    let tag = harness::new_tag("scaleout-flap");
    let _guard = harness::TagGuard(tag.clone());
    let dir = tempfile::tempdir().unwrap();
    let redis = harness::RedisServer::start(&tag).await;
    let proxy = match flap {
        Flap::Delay { ms } => Some(DelayProxy::start(redis.port, Duration::from_millis(ms)).await),
        Flap::Pause200EverySecond => None,
    };
    let store_port = proxy.as_ref().map_or(redis.port, |p| p.port);
    let env = [
        (
            "MCP_BUDGET_REDIS_URL",
            format!("redis://127.0.0.1:{store_port}"),
        ),
        ("MCP_BUDGET_LOG", "warn,mcp_budget::state=info".to_owned()),
    ];
    let (ports, admin) = (
        [free_port(), free_port(), free_port()],
        [free_port(), free_port(), free_port()],
    );
    let mut gateways = Vec::new();
    for (i, (port, admin)) in ports.iter().zip(admin).enumerate() {
        let state = format!(
            "\n[state]\nbackend = \"redis\"\nurl_env = \"MCP_BUDGET_REDIS_URL\"\n\
             key_prefix = \"{tag}:\"\ntimeout_ms = {timeout_ms}\non_store_error = \"local_share\"\n\
             \n[admin]\nhttp = \"127.0.0.1:{admin}\"\n"
        );
        let policy = limits_policy(dir.path(), &format!("p{i}"), &tag, &state);
        gateways.push(Replica::start_with(&policy, *port, &tag, &env).await);
    }
    let haproxy = Haproxy::start(&ports, &tag).await;
    let session = open_session(&haproxy.url()).await;
    // The heartbeat has counted the three replicas (it beats every 2 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // A quiet second: every bucket full at the start.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let run = Duration::from_secs(secs);
    let started = std::time::Instant::now();
    let url = haproxy.url();
    let calls = tokio::spawn(async move { hammer(&url, &session, 6, run).await });
    if matches!(flap, Flap::Pause200EverySecond) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        while started.elapsed() + Duration::from_millis(200) < run {
            assert_eq!(redis.command("CLIENT PAUSE 200 ALL").await, "+OK");
            tick.tick().await;
        }
    }
    let tally = calls.await.unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let mut counted = 0;
    for port in admin {
        counted += fallbacks(port).await;
    }
    drop((haproxy, proxy));
    stop_all(gateways, Some(redis), &tag).await;
    (tally, elapsed, counted)
}

/// Runs `flap` and checks the client got through at its rate (within a tenth), every call
/// answered, and the store really flapped (fallbacks counted).
async fn holds_under(flap: Flap, timeout_ms: u64) {
    let (tally, secs, counted) = flapping_run(flap, timeout_ms, 8).await;
    let want = expected(secs);
    #[allow(clippy::cast_precision_loss)]
    let got = tally.admitted as f64;
    eprintln!(
        "store {flap:?}, timeout_ms = {timeout_ms} \
         (local_share, 3 replicas, {RATE}/s burst {BURST}): {} admitted of {} in {secs:.2} s, \
         expected {want:.0}: {:.2}x; {counted} fallbacks; other {:?}",
        tally.admitted,
        tally.admitted + tally.limited,
        got / want,
        tally.other
    );
    assert!(
        tally.other.is_empty(),
        "{flap:?}: every call answered: {tally:?}"
    );
    assert!(
        counted > 0,
        "{flap:?}: the store flapped (fallbacks counted)"
    );
    assert!(
        tally.limited > tally.admitted,
        "{flap:?}: the callers went over the rate: {tally:?}"
    );
    assert!(
        got <= want * 1.1,
        "{flap:?}: {got} admitted, {want:.0} expected: {:.2}x the limit",
        got / want
    );
    assert!(
        got >= want * 0.6,
        "{flap:?}: {got} admitted, {want:.0} expected: the limit starves the client"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_when_the_store_is_blocked_a_fifth_of_every_second() {
    let _turn = TURN.lock().await;
    holds_under(Flap::Pause200EverySecond, 25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_hold_when_the_store_answers_near_timeout_ms() {
    let _turn = TURN.lock().await;
    // 5 ms each way: a 10 ms round trip, which a loaded machine running debug builds stretches
    // to about `timeout_ms` = 25 now and then.
    holds_under(Flap::Delay { ms: 5 }, 25).await;
}
