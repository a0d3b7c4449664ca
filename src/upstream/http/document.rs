//! One `GET` of a document through the upstream HTTP client (TLS with the webpki roots under
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
    let client = Client::new(url, &HttpOptions::default())?;
    let mut response = client
        .send(Method::GET, HeaderMap::new(), Bytes::new())
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if response.status != StatusCode::OK {
        return Err(format!("GET {url}: HTTP {}", response.status));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.body.chunk().await {
        body.extend_from_slice(&chunk.map_err(|e| format!("GET {url}: {e}"))?);
        if body.len() > limit {
            return Err(format!("GET {url}: the body is over {limit} bytes"));
        }
    }
    Ok(Bytes::from(body))
}
