//! Serving the HTTP downstream on a listener: HTTP/1.1 with keep-alive and `TCP_NODELAY`, a
//! limit on how long a client may take to send a request's headers, and a graceful stop.
//!
//! `axum::serve` gives hyper no timer, which switches hyper's header-read timeout off: a client
//! that sends its headers a byte at a time (or opens connections and says nothing) holds a
//! connection and a task for as long as it likes. This loop is `axum::serve` with the timer.

use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long a client may take to send the headers of a request, counted from its first byte
/// or, on a kept-alive connection, from the end of the previous answer.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connections with requests in flight get to finish once `shutdown` fires.
const GRACE: Duration = Duration::from_secs(2);

/// Serves `app` on `listener` until `shutdown` is cancelled, then gives open connections
/// [`GRACE`] to finish.
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let stop = tokio_util::sync::CancellationToken::new();
/// mcp_budget::downstream::http::serve(listener, app, stop).await;
/// # Ok(())
/// # }
/// ```
pub async fn serve(listener: TcpListener, app: Router, shutdown: CancellationToken) {
    serve_with(listener, app, shutdown, HEADER_READ_TIMEOUT).await;
}

async fn serve_with(
    listener: TcpListener,
    app: Router,
    shutdown: CancellationToken,
    header_timeout: Duration,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let graceful = GracefulShutdown::new();
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(err) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!(error = %err, "Accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // Answers are small writes (SSE events especially): without TCP_NODELAY they wait for
        // delayed ACKs (~40 ms on Linux).
        let _ = tcp.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let conn = graceful.watch(http.serve_connection(TokioIo::new(tcp), service));
        tokio::spawn(async move {
            if let Err(err) = conn.await {
                tracing::debug!(error = %err, "HTTP connection ended with an error");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(GRACE, graceful.shutdown()).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn start(header_timeout: Duration) -> (std::net::SocketAddr, CancellationToken) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let app = Router::new().route("/", get(|| async { "ok" }));
        tokio::spawn(serve_with(listener, app, stop.clone(), header_timeout));
        (addr, stop)
    }

    #[tokio::test]
    async fn a_client_slow_with_its_headers_is_cut_off_and_others_are_served() {
        let (addr, stop) = start(Duration::from_millis(300)).await;
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await
            .unwrap();
        let mut fast = tokio::net::TcpStream::connect(addr).await.unwrap();
        fast.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        fast.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // The slow one is answered 408 or closed once its headers are overdue, not left open.
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
        assert!(read.is_ok(), "the slow connection was left open");
        let text = String::from_utf8_lossy(&rest);
        assert!(
            text.is_empty() || text.starts_with("HTTP/1.1 408"),
            "{text}"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn shutdown_stops_accepting() {
        let (addr, stop) = start(HEADER_READ_TIMEOUT).await;
        stop.cancel();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
