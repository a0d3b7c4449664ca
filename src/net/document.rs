//! One `GET` of a document through the gateway's HTTP client (TLS with the webpki roots under
//! the `tls` feature): what the gateway reads from the network besides MCP, such as the JWKS
//! of `[auth.jwt] jwks_url`.

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use super::client::Client;
use crate::policy::HttpOptions;

/// The body of `GET url`, when the answer is `200` and at most `limit` bytes.
///
/// # Errors
/// What went wrong, naming the URL: no connection, another status, a larger body.
pub async fn get_document(url: &str, limit: usize) -> Result<Bytes, String> {
    let shown = crate::redact::Url(url);
    let client = Client::new(url, &HttpOptions::default())?;
    let mut response = client
        .send(Method::GET, HeaderMap::new(), Bytes::new())
        .await
        .map_err(|e| format!("GET {shown}: {e}"))?;
    if response.status != StatusCode::OK {
        return Err(format!("GET {shown}: HTTP {}", response.status));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.body.chunk().await {
        body.extend_from_slice(&chunk.map_err(|e| format!("GET {shown}: {e}"))?);
        if body.len() > limit {
            return Err(format!("GET {shown}: the body is over {limit} bytes"));
        }
    }
    Ok(Bytes::from(body))
}

/// `POST`s to one URL through the gateway's HTTP client, keeping its connections: what the OTLP
/// trace exporter sends an `https://` endpoint's batches with (TLS with the webpki roots, or
/// the CAs of `ca_file` instead).
#[derive(Debug, Clone)]
pub struct Poster {
    client: std::sync::Arc<Client>,
    url: String,
}

impl Poster {
    /// A poster to `url` trusting the CAs in `ca_file` (PEM), else the built-in roots.
    ///
    /// # Errors
    /// The URL is not `http://` / `https://`, or `ca_file` cannot be read.
    pub fn new(url: &str, ca_file: Option<std::path::PathBuf>) -> Result<Self, String> {
        let mut options = HttpOptions::default();
        if let Some(path) = ca_file {
            options = options.with_ca_file(path);
        }
        Ok(Self {
            client: std::sync::Arc::new(Client::new(url, &options)?),
            url: url.to_owned(),
        })
    }

    /// Sends `body` with `headers`: the answer's status, headers and body (at most `limit`
    /// bytes).
    ///
    /// # Errors
    /// What went wrong, naming the URL: no connection, a larger body.
    pub async fn post(
        &self,
        headers: HeaderMap,
        body: Bytes,
        limit: usize,
    ) -> Result<(StatusCode, HeaderMap, Bytes), String> {
        let url = crate::redact::Url(&self.url);
        let mut response = (self.client.send(Method::POST, headers, body).await)
            .map_err(|e| format!("POST {url}: {e}"))?;
        let mut body = Vec::new();
        while let Some(chunk) = response.body.chunk().await {
            body.extend_from_slice(&chunk.map_err(|e| format!("POST {url}: {e}"))?);
            if body.len() > limit {
                return Err(format!("POST {url}: the body is over {limit} bytes"));
            }
        }
        Ok((response.status, response.headers, Bytes::from(body)))
    }
}
