//! The HTTP client of one upstream (or of one other URL: [`super::Poster`]): hyper's HTTP/1.1 connections, driven by the caller.
//!
//! A pooled client (hyper-util's, reqwest) runs each connection on a task of its own and hands it
//! every request through a channel, and the answer back through another: two task hops per
//! message, each usually a thread wake-up, which on a loopback call cost several times what the
//! rest of the gateway does. Here the task that awaits an answer polls the connection itself
//! while it waits for the response head and reads the body; once the body has ended the
//! connection goes back to a small idle pool for the next message. A connection the server
//! closed while idle is noticed when it is taken out (or, racing, by hyper before anything was
//! written), and the message goes out on a fresh one.
//!
//! HTTPS upstreams (feature `tls`, on in the binary) take the same path, with rustls between
//! the TCP stream and hyper ([`super::tls`]).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{AUTHORIZATION, HOST};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::Full;
use hyper::body::{Body as _, Incoming};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::lock::lock;
use crate::policy::HttpOptions;

/// Idle connections kept per upstream; more are closed when they come back.
const MAX_IDLE: usize = 64;
/// Attempts on a pooled connection that turned out to be closed before the message went out.
const MAX_STALE: usize = 4;

/// The bytes under a connection: TCP, or TLS over it.
#[cfg(feature = "tls")]
type Stream = super::tls::Io;
#[cfg(not(feature = "tls"))]
type Stream = TcpStream;

type Connection = http1::Connection<TokioIo<Stream>, Full<Bytes>>;

/// A client bound to one upstream URL.
#[derive(Debug)]
pub(crate) struct Client {
    pool: Arc<Pool>,
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Failure {
    /// No connection could be made (refused, unknown host, TLS handshake failed): nothing
    /// reached the server. The reason, as the operating system (or TLS) gave it.
    #[error("{0}")]
    Connect(String),
    /// The request failed on a connection (reset, closed, not HTTP).
    #[error("request failed: {0}")]
    Request(String),
}

/// An answer: status, headers, and a body read with [`Body::chunk`].
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Body,
}

/// The body of a [`Response`].
pub(crate) type Body = PlainBody;

impl Client {
    /// A client for `url` (`http://`, or `https://` with the `tls` feature) with the
    /// upstream's TLS files.
    pub(crate) fn new(url: &str, options: &HttpOptions) -> Result<Self, String> {
        let shown = crate::redact::Url(url);
        let uri: Uri = url
            .parse()
            .map_err(|e| format!("invalid upstream URL \"{shown}\": {e}"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "upstream URL \"{shown}\" is not http:// or https://"
                ));
            }
        };
        let authority = uri
            .authority()
            .ok_or_else(|| format!("upstream URL \"{shown}\" has no host"))?;
        let host = authority.host();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        // Bracketed IPv6 literals connect without them.
        let connect_host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        #[cfg(feature = "tls")]
        let tls = https
            .then(|| super::tls::Tls::new(&connect_host, options))
            .transpose()?;
        #[cfg(not(feature = "tls"))]
        {
            let _ = options;
            if https {
                return Err(format!(
                    "HTTPS upstream \"{shown}\" needs mcp-budget built with the `tls` feature"
                ));
            }
        }
        let (userinfo, host_port) = match authority.as_str().rsplit_once('@') {
            Some((userinfo, host_port)) => (Some(userinfo), host_port),
            None => (None, authority.as_str()),
        };
        let host_header = HeaderValue::from_str(host_port)
            .map_err(|e| format!("invalid upstream host \"{shown}\": {e}"))?;
        // Credentials in the URL become Basic authorization, as they did through reqwest.
        let basic_auth = userinfo
            .map(|userinfo| {
                use base64::Engine as _;
                let token = base64::engine::general_purpose::STANDARD
                    .encode(percent_decode(userinfo.as_bytes()));
                HeaderValue::from_str(&format!("Basic {token}"))
            })
            .transpose()
            .map_err(|e| format!("invalid upstream credentials \"{shown}\": {e}"))?;
        let path = uri
            .path_and_query()
            .map_or("/", http::uri::PathAndQuery::as_str);
        let target: Uri = path
            .parse()
            .map_err(|e| format!("invalid upstream URL \"{shown}\": {e}"))?;
        Ok(Self {
            pool: Arc::new(Pool {
                host: connect_host,
                port,
                #[cfg(feature = "tls")]
                tls,
                host_header,
                basic_auth,
                target,
                idle: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Sends one request and waits for the response head.
    pub(crate) async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, Failure> {
        send_plain(&self.pool, &self.pool.target, method, headers, body).await
    }

    /// Sends one request to another path (and query) of the same server: the endpoint the
    /// 2024-11-05 HTTP+SSE transport names.
    pub(crate) async fn send_to(
        &self,
        target: &Uri,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, Failure> {
        send_plain(&self.pool, target, method, headers, body).await
    }
}

impl PlainBody {
    /// The next piece of the body; `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Option<Result<Bytes, String>> {
        poll_fn(|cx| self.poll_chunk(cx)).await
    }

    /// The whole body.
    pub(crate) async fn bytes(&mut self) -> Result<Bytes, String> {
        let mut first = None;
        let mut rest = Vec::new();
        while let Some(chunk) = self.chunk().await {
            let chunk = chunk?;
            match &first {
                None => first = Some(chunk),
                Some(head) => {
                    if rest.is_empty() {
                        rest.extend_from_slice(head);
                    }
                    rest.extend_from_slice(&chunk);
                }
            }
        }
        Ok(if rest.is_empty() {
            first.unwrap_or_default()
        } else {
            Bytes::from(rest)
        })
    }
}

#[derive(Debug)]
struct Pool {
    host: String,
    port: u16,
    /// `Some` for `https://`.
    #[cfg(feature = "tls")]
    tls: Option<super::tls::Tls>,
    host_header: HeaderValue,
    /// `Authorization` from the URL's `user:password@`, if any.
    basic_auth: Option<HeaderValue>,
    /// The request target (path and query): HTTP/1.1 origin form.
    target: Uri,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// The most recently used idle connection. Whether the server closed it meanwhile shows when
    /// it is polled again (before the message is written: see [`send_plain`]).
    fn checkout(&self) -> Option<Conn> {
        lock(&self.idle).pop()
    }

    fn checkin(&self, conn: Conn) {
        if !conn.is_open() {
            return;
        }
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    async fn connect(&self) -> Result<Conn, Failure> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| Failure::Connect(os_reason(&e)))?;
        // Messages are single small writes: do not let them wait for ACKs.
        let _ = tcp.set_nodelay(true);
        #[cfg(feature = "tls")]
        let stream = match &self.tls {
            Some(tls) => Stream::Tls(Box::new(tls.connect(tcp).await.map_err(Failure::Connect)?)),
            None => Stream::Plain(tcp),
        };
        #[cfg(not(feature = "tls"))]
        let stream = tcp;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| Failure::Request(e.to_string()))?;
        Ok(Conn {
            sender,
            conn: Some(Box::pin(conn)),
        })
    }
}

/// One HTTP/1.1 connection: hyper's request handle and the connection it polls.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection ended (dropping it fails whatever was queued on it).
    conn: Option<Pin<Box<Connection>>>,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("open", &self.is_open())
            .finish()
    }
}

impl Conn {
    /// Lets hyper read and write; forgets the connection once it has ended.
    fn poll_io(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = self.conn.as_mut() {
            if let Poll::Ready(result) = conn.as_mut().poll(cx) {
                if let Err(err) = result {
                    tracing::debug!(error = %err, "Upstream connection ended");
                }
                self.conn = None;
            }
        }
    }

    fn is_open(&self) -> bool {
        self.conn.is_some() && !self.sender.is_closed()
    }
}

async fn send_plain(
    pool: &Arc<Pool>,
    target: &Uri,
    method: Method,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<Response, Failure> {
    if !headers.contains_key(HOST) {
        headers.insert(HOST, pool.host_header.clone());
    }
    if let Some(auth) = &pool.basic_auth {
        if !headers.contains_key(AUTHORIZATION) {
            headers.insert(AUTHORIZATION, auth.clone());
        }
    }
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = method;
    *req.uri_mut() = target.clone();
    *req.headers_mut() = headers;
    let mut stale = 0;
    loop {
        let (mut conn, pooled) = match pool.checkout() {
            Some(conn) => (conn, true),
            None => (pool.connect().await?, false),
        };
        // Polling the connection first lets hyper see an EOF or error that arrived while it sat
        // idle: the message then goes out on another one.
        let ready = poll_fn(|cx| {
            conn.poll_io(cx);
            conn.sender.poll_ready(cx)
        })
        .await;
        if let Err(err) = ready {
            if pooled && stale < MAX_STALE {
                stale += 1;
                continue;
            }
            return Err(Failure::Request(err.to_string()));
        }
        let mut sent = std::pin::pin!(conn.sender.try_send_request(req));
        let head = poll_fn(|cx| {
            conn.poll_io(cx);
            sent.as_mut().poll(cx)
        })
        .await;
        match head {
            Ok(resp) => {
                let (parts, incoming) = resp.into_parts();
                return Ok(Response {
                    status: parts.status,
                    headers: parts.headers,
                    body: PlainBody {
                        incoming,
                        conn: Some(conn),
                        pool: pool.clone(),
                    },
                });
            }
            Err(mut err) => match err.take_message() {
                // Nothing was written: the pooled connection had been closed; try another.
                Some(unsent) if pooled && stale < MAX_STALE => {
                    stale += 1;
                    req = unsent;
                }
                _ => return Err(Failure::Request(err.error().to_string())),
            },
        }
    }
}

/// An I/O error as a person reads it: `connection refused (os error 111)`.
fn os_reason(err: &std::io::Error) -> String {
    let text = err.to_string();
    let mut chars = text.chars();
    chars.next().map_or(text.clone(), |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// `%XX` escapes decoded (a URL's `user:password`).
fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match escaped {
            Some((hi, lo)) => {
                out.push(u8::try_from(hi * 16 + lo).expect("two hex digits fit a byte"));
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

/// A response body that drives its connection while it is read, and returns the connection to
/// the pool at its end.
pub(crate) struct PlainBody {
    incoming: Incoming,
    conn: Option<Conn>,
    pool: Arc<Pool>,
}

impl std::fmt::Debug for PlainBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainBody").finish_non_exhaustive()
    }
}

impl PlainBody {
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, String>>> {
        loop {
            // The body first: hyper reads body bytes only once the body asks for them, and
            // the connection polled right after hands them over in this same pass (polled the
            // other way round, the ask would cost a wake-up and a second pass of the task).
            let mut frame = Pin::new(&mut self.incoming).poll_frame(cx);
            if frame.is_pending() {
                if let Some(conn) = self.conn.as_mut() {
                    conn.poll_io(cx);
                }
                frame = Pin::new(&mut self.incoming).poll_frame(cx);
            }
            match std::task::ready!(frame) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(Ok(data)));
                    }
                    // Trailers: nothing the gateway reads.
                }
                Some(Err(err)) => {
                    self.conn = None;
                    return Poll::Ready(Some(Err(err.to_string())));
                }
                None => {
                    if let Some(conn) = self.conn.take() {
                        self.pool.checkin(conn);
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}

impl Drop for PlainBody {
    fn drop(&mut self) {
        // A body nobody read (202, empty answers) leaves the connection reusable; one dropped
        // mid-stream does not, and closes with it.
        if let Some(conn) = self.conn.take() {
            if self.incoming.is_end_stream() {
                self.pool.checkin(conn);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server answering `{}` to each POST of a 2-byte body; with `keep_alive` false it closes
    /// each connection after one answer without saying so (as a keep-alive timeout does).
    /// Returns its URL and a count of connections.
    async fn server(keep_alive: bool) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n");
                        match end {
                            Some(at) if buf.len() >= at + 4 + 2 => {
                                let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
                                assert!(head.starts_with("post /mcp http/1.1\r\n"), "{head}");
                                assert!(head.contains("\r\nhost: 127.0.0.1:"), "{head}");
                                buf.drain(..at + 4 + 2);
                                tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
                                    .await
                                    .unwrap();
                                if !keep_alive {
                                    return;
                                }
                            }
                            _ => {
                                let n = tcp.read(&mut chunk).await.unwrap_or(0);
                                if n == 0 {
                                    return;
                                }
                                buf.extend_from_slice(&chunk[..n]);
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    async fn three_calls(url: &str) {
        let client = Client::new(url, &HttpOptions::default()).unwrap();
        for _ in 0..3 {
            let mut resp = client
                .send(Method::POST, HeaderMap::new(), Bytes::from_static(b"{}"))
                .await
                .unwrap();
            assert_eq!(resp.status, StatusCode::OK);
            assert_eq!(&resp.body.bytes().await.unwrap()[..], b"{}");
            // Let a server's FIN arrive.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn a_connection_is_reused() {
        let (url, accepted) = server(true).await;
        three_calls(&url).await;
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_closed_while_idle_is_replaced() {
        let (url, accepted) = server(false).await;
        three_calls(&url).await;
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn credentials_in_the_url_become_basic_authorization() {
        let client =
            Client::new("http://me:p%40ss@127.0.0.1:1/mcp", &HttpOptions::default()).unwrap();
        let pool = &client.pool;
        assert_eq!(pool.host_header, "127.0.0.1:1");
        // base64("me:p@ss")
        assert_eq!(pool.basic_auth.as_ref().unwrap(), "Basic bWU6cEBzcw==");
        assert_eq!(percent_decode(b"a%2"), b"a%2");
    }

    #[test]
    fn urls_without_a_client() {
        let none = HttpOptions::default();
        assert!(Client::new("ftp://x/mcp", &none).is_err());
        assert!(Client::new("not a url", &none).is_err());
        #[cfg(not(feature = "tls"))]
        assert!(
            Client::new("https://example.com/mcp", &none)
                .unwrap_err()
                .contains("tls")
        );
        #[cfg(feature = "tls")]
        {
            assert_eq!(
                Client::new("https://example.com/mcp", &none)
                    .unwrap()
                    .pool
                    .port,
                443
            );
            let missing = none.with_ca_file("/nonexistent/ca.pem");
            let err = Client::new("https://example.com/mcp", &missing).unwrap_err();
            assert!(
                err.starts_with("ca_file: cannot read /nonexistent/ca.pem"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_failure_with_the_os_reason() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let client = Client::new(
            &format!("http://127.0.0.1:{port}/mcp"),
            &HttpOptions::default(),
        )
        .unwrap();
        let err = client
            .send(Method::POST, HeaderMap::new(), Bytes::new())
            .await
            .unwrap_err();
        let Failure::Connect(reason) = err else {
            panic!("{err:?}")
        };
        assert!(reason.starts_with("connection refused"), "{reason}");
    }
}
