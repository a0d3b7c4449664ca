//! What a call names, and where the catalog routes it: worked out once per request.
//!
//! A `tools/call` or `prompts/get` names a tool or prompt by its exposed name, routed to the
//! upstream that lists it under its own name; `resources/read` and `resources/subscribe` name
//! a URI (routed as [`Catalog::resource`] says); `completion/complete` names the prompt or
//! resource of its `ref`. The layers that decide on the called upstream read this (through
//! [`McpRequest::routed`](crate::context::McpRequest::routed), which keeps it with the
//! request, so the layers below reuse it) instead of each asking the catalog again; so does the
//! gateway's forwarding of a `tools/call` or `prompts/get` ([`crate::gateway`]), which finds
//! the upstream by the catalog position this carries.
//!
//! ```
//! use mcp_budget::catalog::{Catalog, CatalogTool};
//! use mcp_budget::jsonrpc::{to_raw, Id, Message};
//! use mcp_budget::mcp::view::RequestView;
//! use mcp_budget::routing::{self, Reach};
//! use serde_json::json;
//!
//! let tool = CatalogTool::new("time", json!({"name": "now", "inputSchema": {"type": "object"}}))?;
//! let catalog = Catalog::from_tools(vec![tool], "__");
//! let params = json!({"name": "time__now"});
//! let call = Message::request(Id::Number(1), "tools/call", Some(to_raw(&params)));
//! let routed = routing::routed(&call, &RequestView::of(&call), &catalog).expect("a call");
//! assert_eq!(routed.upstream(), Some("time"));
//! assert_eq!(routed.reach, Reach::Upstream { at: 0, server: "time".into(), own: "now".into() });
//! assert_eq!(routed.own(), Some("now"));
//! # Ok::<(), mcp_budget::catalog::CatalogError>(())
//! ```

use serde_json::Value;

use crate::authz::Kind;
use crate::catalog::Catalog;
use crate::catalog::Item;
use crate::jsonrpc::Message;
use crate::mcp::method::Names;
use crate::mcp::view::RequestView;

/// What a call names, resolved through the catalog as the gateway routes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    /// A tool, a prompt, or a resource (by URI).
    pub kind: Kind,
    /// The name or URI as the client sent it (empty when it sent none).
    pub exposed: String,
    /// Whether the client sent a name or URI at all.
    pub given: bool,
    /// Where the catalog routes it.
    #[doc(hidden)]
    pub reach: Reach,
}

/// Where the catalog routes a called name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The upstream `server` serves it, as `own` (its own name there; a resource's URI).
    Upstream {
        /// The upstream's position in the catalog (what the gateway forwards by).
        at: usize,
        /// The upstream's id.
        server: String,
        /// The name (or URI) the upstream knows it by.
        own: String,
    },
    /// A URI the catalog places with no upstream: the gateway sends it to the only upstream
    /// with resources, so it may reach any of them.
    AnyUpstream,
    /// A tool or prompt held out of the catalog (pinning or sanitizing quarantined it):
    /// calls and gets of it are refused, never routed.
    Quarantined {
        /// The upstream's id.
        server: String,
        /// The upstream's own tool or prompt name.
        own: String,
    },
    /// No name the catalog knows.
    Nowhere,
}

impl Routed {
    /// The upstream the call is routed to, when it names one the catalog places.
    #[must_use]
    pub fn upstream(&self) -> Option<&str> {
        match &self.reach {
            Reach::Upstream { server, .. } if self.given => Some(server),
            _ => None,
        }
    }

    /// The name (or URI) the upstream knows it by, when the catalog places it with one.
    #[must_use]
    pub fn own(&self) -> Option<&str> {
        match &self.reach {
            Reach::Upstream { own, .. } => Some(own),
            _ => None,
        }
    }
}

/// What `message` calls, resolved through `catalog`; `None` for a method that calls nothing
/// (`view` is the message's [`RequestView`]).
#[must_use]
pub fn routed(message: &Message, view: &RequestView, catalog: &Catalog) -> Option<Routed> {
    let named = |kind: Kind, given: Option<&str>| Routed {
        kind,
        exposed: given.unwrap_or_default().to_owned(),
        given: given.is_some(),
        reach: reach_of_name(catalog, kind, given.unwrap_or_default()),
    };
    let by_uri = |given: Option<&str>| Routed {
        kind: Kind::Resource,
        exposed: given.unwrap_or_default().to_owned(),
        given: given.is_some(),
        reach: resource(catalog, given.unwrap_or_default()),
    };
    Some(match view.method().names()? {
        Names::Tool => named(Kind::Tool, view.name()),
        Names::Prompt => named(Kind::Prompt, view.name()),
        Names::Uri => by_uri(view.uri()),
        Names::Completed => {
            let params: Value = message.params_as().unwrap_or_default();
            let reference = &params["ref"];
            let text = |key: &str| reference[key].as_str();
            match reference["type"].as_str() {
                Some("ref/resource") => by_uri(text("uri")),
                // Anything else is a prompt, or an error the gateway gives.
                _ => named(Kind::Prompt, text("name")),
            }
        }
    })
}

/// The catalog position of the upstream that lists the tool (`kind`) or prompt exposed as
/// `exposed`, and its own name for it: what [`Reach::Upstream`] carries, found without
/// allocating (the gateway's forwarding asks this when no layer routed the call already).
#[must_use]
pub fn named<'c>(catalog: &'c Catalog, kind: Kind, exposed: &str) -> Option<(usize, &'c str)> {
    match kind {
        Kind::Tool => catalog.tool(exposed),
        _ => catalog.prompt(exposed),
    }
}

/// [`named`] with the upstream's id: (catalog position, upstream id, own name), borrowed
/// from the catalog (what [`Reach::Upstream`] holds as copies).
#[must_use]
pub fn placed<'c>(
    catalog: &'c Catalog,
    kind: Kind,
    exposed: &str,
) -> Option<(usize, &'c str, &'c str)> {
    let (at, own) = named(catalog, kind, exposed)?;
    Some((at, catalog.names().get(at)?.as_str(), own))
}

/// Where the tool or prompt exposed as `exposed` is routed.
fn reach_of_name(catalog: &Catalog, kind: Kind, exposed: &str) -> Reach {
    if let Some((at, server, own)) = placed(catalog, kind, exposed) {
        return Reach::Upstream {
            at,
            server: server.to_owned(),
            own: own.to_owned(),
        };
    }
    // Most catalogs quarantine nothing: then a miss costs no second look-up.
    let item = match kind {
        Kind::Tool => Item::Tool,
        _ => Item::Prompt,
    };
    let quarantined = catalog
        .any_quarantined()
        .then(|| catalog.quarantined_as(item, exposed))
        .flatten();
    match quarantined {
        Some(q) => Reach::Quarantined {
            server: q.server.clone(),
            own: q.name.clone(),
        },
        None => Reach::Nowhere,
    }
}

/// Where resource `uri` is routed (for a call of it, or an item of a list).
#[must_use]
pub fn resource(catalog: &Catalog, uri: &str) -> Reach {
    match catalog.resource(uri) {
        Some(at) => match catalog.names().get(at) {
            Some(server) => Reach::Upstream {
                at,
                server: server.clone(),
                own: uri.to_owned(),
            },
            None => Reach::Nowhere,
        },
        None => Reach::AnyUpstream,
    }
}

pub mod resolve;

#[cfg(test)]
mod tests;
