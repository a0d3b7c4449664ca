//! TLS for HTTPS upstreams: rustls (ring) on the TCP stream under the same hyper HTTP/1.1
//! connection as plain HTTP, so that both go through one client.
//!
//! The server's certificate must chain to Mozilla's roots (compiled in: nothing is fetched at
//! run time) or to the CAs of the file `SSL_CERT_FILE` names in the gateway's environment (a
//! company CA, as OpenSSL-based tools read it; added to the roots, not replacing them), or to
//! the CAs of the upstream's `ca_file`, which replace both. A
//! `client_cert_file` + `client_key_file` are presented when the server asks (mutual TLS).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::policy::HttpOptions;
use crate::policy::http::{certificates, private_key};

/// What an HTTPS connection needs: the configured connector and the name the certificate must
/// carry.
#[derive(Clone)]
pub(super) struct Tls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// The TLS settings for `host` with the upstream's files; `Err` says which file is wrong.
    pub(super) fn new(host: &str, options: &HttpOptions) -> Result<Self, String> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host:?} is not a TLS server name: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        match &options.ca_file {
            Some(path) => {
                for cert in certificates(path).map_err(|e| format!("ca_file: {e}"))? {
                    roots
                        .add(cert)
                        .map_err(|e| format!("ca_file: {}: {e}", path.display()))?;
                }
            }
            None => {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                if let Some(path) = std::env::var_os("SSL_CERT_FILE").filter(|p| !p.is_empty()) {
                    let path = std::path::Path::new(&path);
                    let extra = certificates(path).map_err(|e| format!("SSL_CERT_FILE: {e}"))?;
                    // A system bundle may hold a certificate rustls cannot use: skip it.
                    roots.add_parsable_certificates(extra);
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?
            .with_root_certificates(roots);
        let mut config = match (&options.client_cert_file, &options.client_key_file) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert).map_err(|e| format!("client_cert_file: {e}"))?;
                let key = private_key(key).map_err(|e| format!("client_key_file: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client_cert_file / client_key_file: {e}"))?
            }
            _ => builder.with_no_client_auth(),
        };
        // The connection under it is hyper's HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            connector: TlsConnector::from(Arc::new(config)),
            name,
        })
    }

    /// The TLS handshake on a fresh TCP connection; `Err` is the reason, worded for a person.
    pub(super) async fn connect(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, String> {
        self.connector
            .connect(self.name.clone(), tcp)
            .await
            .map_err(|e| {
                let hint = if e.to_string().contains("certificate") {
                    " (is the server's certificate signed by a CA in the built-in roots, in the file SSL_CERT_FILE names, or in the upstream's ca_file?)"
                } else {
                    ""
                };
                format!("TLS handshake failed: {e}{hint}")
            })
    }
}

/// A connection's byte stream: plain TCP or TLS over it.
#[derive(Debug)]
pub(super) enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }
}
