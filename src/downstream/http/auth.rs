//! The caller stage of HTTP: every `POST`, `GET` and `DELETE` presents its credentials
//! (`Authorization: Bearer …` or `X-Api-Key`) and gets a principal, or a `401` / `403` with the
//! `WWW-Authenticate` challenge that points to this gateway's protected-resource metadata
//! (RFC 6750, RFC 9728), which is also served here. Without `[[client]]`, nothing is read: every
//! request is the anonymous principal.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::listen::Peer;
use super::reply::plain_error;
use crate::error::kind;
use crate::identity::challenge::{metadata, metadata_url, www_authenticate};
use crate::identity::{Credential, Gate, Principal, Refusal};

/// The principal of a request, or the response refusing it.
pub(super) fn principal(
    gate: &Gate,
    headers: &HeaderMap,
    uri: &Uri,
) -> Result<Arc<Principal>, Box<Response>> {
    let peer = Peer::current();
    // The open gateway's whole cost: one load of the directory.
    let principal = if gate.is_open() {
        Principal::anonymous()
    } else {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let credential = Credential::from_headers(text("authorization"), text("x-api-key"));
        // A keep-alive connection sends the same API key with every request: verified once.
        match &peer {
            Some(peer) => gate.authenticate_with(credential, &peer.keys),
            None => gate.authenticate(credential),
        }
        .map_err(|refusal| Box::new(refuse(gate, headers, uri, &refusal)))?
    };
    // The connection counts against this client from now on (see `Peer::claim`).
    if let Some(peer) = peer {
        peer.claim(&principal)
            .map_err(|refusal| Box::new(refusal.into_response()))?;
    }
    Ok(principal)
}

/// `401` (missing or invalid credentials) or `403` (a token that grants nothing here), with
/// the challenge and a JSON-RPC error body.
fn refuse(gate: &Gate, headers: &HeaderMap, uri: &Uri, refusal: &Refusal) -> Response {
    let description = refusal.to_string();
    let scopes = gate.protected().scopes_supported.join(" ");
    let (status, kind, error) = match refusal {
        // RFC 6750 §3.1: a request without credentials gets no error code.
        Refusal::Missing => (
            StatusCode::UNAUTHORIZED,
            kind::AUTHENTICATION_REQUIRED,
            None,
        ),
        Refusal::Invalid(_) => (
            StatusCode::UNAUTHORIZED,
            kind::AUTHENTICATION_INVALID,
            Some(("invalid_token", description.as_str())),
        ),
        Refusal::Insufficient(_) => (
            StatusCode::FORBIDDEN,
            kind::AUTHENTICATION_INSUFFICIENT_SCOPE,
            Some(("insufficient_scope", description.as_str())),
        ),
    };
    let scope = matches!(refusal, Refusal::Insufficient(_))
        .then_some(scopes.as_str())
        .filter(|s| !s.is_empty());
    let challenge = www_authenticate(&metadata_url(&resource(gate, headers, uri)), error, scope);
    let mut resp = plain_error(status, &description, kind);
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    resp
}

/// This gateway's resource URI: `[auth] resource`, else the URI the request reached it at.
fn resource(gate: &Gate, headers: &HeaderMap, uri: &Uri) -> String {
    if let Some(resource) = &gate.protected().resource {
        return resource.clone();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}{}", uri.path())
}

/// Whether `a` and `b` are the same client (a 2025-era session belongs to the one that opened
/// it: a session id is no credential).
pub(super) fn same(a: &Principal, b: &Principal) -> bool {
    a.name() == b.name() && a.subject() == b.subject()
}

/// The refusal of a request on a session another client opened.
pub(super) fn foreign_session() -> Box<Response> {
    Box::new(plain_error(
        StatusCode::FORBIDDEN,
        "this session was opened by another client: initialize a session of your own",
        kind::SESSION_FOREIGN,
    ))
}

/// `GET /.well-known/oauth-protected-resource[/<path>]`: the RFC 9728 metadata, when clients or
/// `[auth]` are configured (404 otherwise: an open gateway protects nothing).
pub(super) async fn handle_metadata(
    State(state): State<Arc<AppState>>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let gate = &state.gate;
    let protected = gate.protected();
    if gate.is_open() && protected.resource.is_none() {
        return StatusCode::NOT_FOUND.into_response();
    }
    // The resource the document is about: the path after the well-known prefix.
    let path = uri
        .path()
        .strip_prefix(crate::identity::challenge::METADATA_PATH)
        .unwrap_or_default();
    let resource = protected.resource.clone().unwrap_or_else(|| {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("localhost");
        format!("http://{host}{path}")
    });
    let doc = metadata(
        &resource,
        &protected.authorization_servers,
        &protected.scopes_supported,
    );
    (
        [(header::CONTENT_TYPE, "application/json")],
        doc.to_string(),
    )
        .into_response()
}

/// The client's address: from [`super::serve`]'s connection, or axum's `ConnectInfo`; behind
/// one of `[downstream] trusted_proxies`, the address it forwarded for.
pub(super) fn client_ip(
    state: &AppState,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> Option<IpAddr> {
    let addr = Peer::current().map(|p| p.addr).or_else(|| {
        extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
            .map(|c| c.0)
    })?;
    let (trusted, header) = (&state.config.trusted_proxies, state.config.forwarded_header);
    Some(super::owner::client_addr(
        addr.ip(),
        headers,
        trusted,
        header,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authz::{Glob, Scope};
    use crate::identity::{Client, Directory, Protected, api_key};

    fn gate() -> Gate {
        let alice = Client::new("alice", Scope::new(vec![Glob::new("*")], vec![], vec![]))
            .with_key(api_key::digest("ka"));
        Gate::new(
            Directory::new(vec![alice]),
            Protected {
                resource: Some("https://gw.example/mcp".into()),
                ..Protected::default()
            },
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn refusals_carry_the_challenge_and_a_stable_type() {
        let uri = Uri::from_static("/mcp");
        let gate = gate();
        let missing = principal(&gate, &headers(&[]), &uri).unwrap_err();
        assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            missing.headers()[header::WWW_AUTHENTICATE],
            r#"Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp""#
        );
        let wrong = principal(&gate, &headers(&[("x-api-key", "nope")]), &uri).unwrap_err();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
        let challenge = wrong.headers()[header::WWW_AUTHENTICATE].to_str().unwrap();
        assert!(
            challenge.contains(r#"error="invalid_token""#),
            "{challenge}"
        );
        let ok = principal(&gate, &headers(&[("authorization", "Bearer ka")]), &uri).unwrap();
        assert_eq!(ok.name(), "alice");
        assert!(same(&ok, &ok));
        assert!(!same(&ok, &Principal::anonymous()));
    }

    #[test]
    fn an_open_gate_reads_no_header() {
        let uri = Uri::from_static("/mcp");
        let p = principal(&Gate::open(), &headers(&[("x-api-key", "x")]), &uri).unwrap();
        assert!(Arc::ptr_eq(&p, &Principal::anonymous()));
    }
}
