//! The settings of a `url` upstream beyond its URL and headers: which HTTP transport it speaks
//! (`transport`) and its TLS files (`ca_file`, `client_cert_file`, `client_key_file`), with
//! their validation. `check` reads the files: they must exist and hold PEM of the right kind.

use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;

use super::problems::{At, Section};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// How a `url` upstream is spoken to.
///
/// ```
/// use mcp_budget::policy::{HttpOptions, HttpTransport, UpstreamSpec};
///
/// let spec = UpstreamSpec::http("legacy", "https://mcp.example.com/sse")
///     .with_http(HttpOptions::default().with_transport(HttpTransport::Sse).with_ca_file("ca.pem"));
/// assert_eq!(spec.http.transport, HttpTransport::Sse);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Streamable HTTP (falling back to HTTP+SSE when the server refuses it), or HTTP+SSE.
    pub transport: HttpTransport,
    /// PEM file of the CA certificates that the server's certificate must chain to; when
    /// set, they replace the built-in (Mozilla) roots for this upstream.
    pub ca_file: Option<PathBuf>,
    /// PEM file of the client certificate (chain) for mutual TLS.
    pub client_cert_file: Option<PathBuf>,
    /// PEM file of the private key of `client_cert_file`.
    pub client_key_file: Option<PathBuf>,
}

impl HttpOptions {
    /// Sets the transport.
    #[must_use]
    pub fn with_transport(mut self, transport: HttpTransport) -> Self {
        self.transport = transport;
        self
    }

    /// Trusts the CA certificates in `path` (PEM) instead of the built-in roots.
    #[must_use]
    pub fn with_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// Presents the certificate in `cert` with the key in `key` (both PEM): mutual TLS.
    #[must_use]
    pub fn with_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert_file = Some(cert.into());
        self.client_key_file = Some(key.into());
        self
    }
}

/// The HTTP transport of a `url` upstream (policy key `transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HttpTransport {
    /// `"streamable"` (default): streamable HTTP; a server that refuses its first POST with a
    /// 4xx is tried as HTTP+SSE, as the spec's backwards-compatibility section says.
    #[default]
    Streamable,
    /// `"sse"`: the 2024-11-05 HTTP+SSE transport (GET an event stream, POST to the endpoint
    /// it names).
    Sse,
}

/// The raw keys, as the policy file gave them.
#[derive(Debug, Default)]
pub(super) struct RawHttp {
    pub(super) transport: Option<String>,
    pub(super) ca_file: Option<PathBuf>,
    pub(super) client_cert_file: Option<PathBuf>,
    pub(super) client_key_file: Option<PathBuf>,
}

impl RawHttp {
    /// Whether any key is set (they apply to `url` upstreams only).
    pub(super) fn any(&self) -> bool {
        self.transport.is_some()
            || self.ca_file.is_some()
            || self.client_cert_file.is_some()
            || self.client_key_file.is_some()
    }
}

impl Section for RawHttp {
    type Valid = HttpOptions;
    type Context<'c> = ();

    /// The options; problems at the upstream's `transport`, `ca_file`, ... keys.
    fn validate(self, (): (), mut at: At<'_>) -> HttpOptions {
        let transport = at.parse("transport", self.transport.as_deref(), |t| match t {
            "streamable" | "auto" => Ok(HttpTransport::Streamable),
            "sse" => Ok(HttpTransport::Sse),
            other => Err(format!("{other:?} is not one of \"streamable\", \"sse\"")),
        });
        let transport = transport.unwrap_or_default();
        tls_files(
            &mut at,
            self.ca_file.as_deref(),
            self.client_cert_file.as_deref(),
            self.client_key_file.as_deref(),
        );
        HttpOptions {
            transport,
            ca_file: self.ca_file,
            client_cert_file: self.client_cert_file,
            client_key_file: self.client_key_file,
        }
    }
}

/// The certificates of a PEM file (at least one).
///
/// # Errors
/// Why the file cannot be used, naming it.
/// Checks TLS files as written at `ca_file`, `client_cert_file` and `client_key_file`: each
/// readable PEM of its kind, and a client certificate only with its key.
pub(super) fn tls_files(
    at: &mut At<'_>,
    ca_file: Option<&Path>,
    client_cert_file: Option<&Path>,
    client_key_file: Option<&Path>,
) {
    at.file_exists("ca_file", ca_file, certificates);
    match (client_cert_file, client_key_file) {
        (Some(cert), Some(key)) => {
            at.file_exists("client_cert_file", Some(cert), certificates);
            at.file_exists("client_key_file", Some(key), private_key);
        }
        (Some(_), None) => at.push_at(
            "client_key_file",
            "client_cert_file needs client_key_file (the certificate's private key)",
        ),
        (None, Some(_)) => at.push_at(
            "client_cert_file",
            "client_key_file needs client_cert_file (the certificate it belongs to)",
        ),
        (None, None) => {}
    }
}

pub(crate) fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: not readable PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "{}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// Why the file cannot be used, naming it.
pub(crate) fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        format!(
            "{}: holds no PEM private key (-----BEGIN PRIVATE KEY-----): {e}",
            path.display()
        )
    })
}

/// The bytes of `path`, or why they cannot be read (naming the file).
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, String> {
    crate::files::read_bytes(path, crate::files::MAX_CONFIG_BYTES)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::problems::Problems;

    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUZ0cq\n-----END CERTIFICATE-----\n";

    #[test]
    fn transport_values_and_paired_client_files() {
        let raw = RawHttp {
            transport: Some("sse".into()),
            ..RawHttp::default()
        };
        let mut problems = Problems::new();
        let options = raw.validate((), problems.root());
        assert_eq!(options.transport, HttpTransport::Sse);
        assert!(problems.is_empty());

        let raw = RawHttp {
            transport: Some("websocket".into()),
            client_key_file: Some("k.pem".into()),
            ..RawHttp::default()
        };
        let mut problems = Problems::new();
        raw.validate((), problems.root());
        let fields: Vec<_> = problems.pairs().into_iter().map(|p| p.0).collect();
        assert_eq!(fields, ["transport", "client_cert_file"]);
    }

    #[test]
    fn files_must_exist_and_hold_pem_of_their_kind() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(certificates(&missing).unwrap_err().contains("cannot read"));
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not pem").unwrap();
        assert!(
            certificates(&junk)
                .unwrap_err()
                .contains("no PEM certificate")
        );
        assert!(
            private_key(&junk)
                .unwrap_err()
                .contains("no PEM private key")
        );
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, CERT).unwrap();
        assert_eq!(certificates(&cert).unwrap().len(), 1);
        // A certificate is not a key.
        assert!(private_key(&cert).is_err());
    }
}
