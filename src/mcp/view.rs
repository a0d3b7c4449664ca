//! The request view: what the stack reads of a request, computed once where the message is
//! decoded (the downstream), carried beside it in [`McpRequest`](crate::context::McpRequest).
//!
//! One pass over the params finds the tool or prompt `name`, the `uri`, and where the
//! `arguments` and the `_meta` sit in the params' text (spans, not copies: a large argument
//! is never copied or parsed on the way through); `_meta` is parsed only when it names a
//! protocol version (or the transport already knows the request is modern), and then once,
//! for the era, the [`RequestMeta`] and the envelope check. Layers read the view instead of
//! parsing the params again; a layer that rewrites the params builds a new view
//! ([`RequestView::rebuilt`]).
//!
//! Duplicate keys read as a `serde_json::Value` reads them (the last one wins), and
//! [`RequestView::typed_name`] is what a typed parse would accept (no repeated key).
//!
//! ```
//! use mcp_budget::jsonrpc::Message;
//! use mcp_budget::mcp::Era;
//! use mcp_budget::mcp::method::Method;
//! use mcp_budget::mcp::view::RequestView;
//!
//! let msg = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"now","arguments":{"tz":"UTC"}}}"#)?;
//! let view = RequestView::of(&msg);
//! assert_eq!(view.method(), &Method::ToolsCall);
//! assert_eq!(view.name(), Some("now"));
//! assert_eq!(view.arguments(&msg), Some(r#"{"tz":"UTC"}"#));
//! assert_eq!(view.era(), Era::Legacy);
//! # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
//! ```

use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::jsonrpc::{ErrorObject, Id, Kind, Message};
use crate::mcp::Era;
use crate::mcp::method::Method;
use crate::mcp::modern::{self, RequestMeta};

/// What the stack reads of one message (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct RequestView {
    /// Parsed once, here: the layers and the gateway ask it ([`Method`]'s predicates).
    method: Method,
    name: Option<Box<str>>,
    uri: Option<Box<str>>,
    /// `name`, `arguments` or `_meta` came twice (a typed parse refuses such params).
    repeated: bool,
    arguments: Option<Range<usize>>,
    meta: Option<Range<usize>>,
    progress_token: Option<Id>,
    era: Era,
    /// The transport said the request is modern (kept by [`RequestView::rebuilt`]).
    modern_by_transport: bool,
    request_meta: Option<RequestMeta>,
    envelope_error: Option<ErrorObject>,
}

impl RequestView {
    /// The view of `message`; its era is what the params' `_meta` says.
    #[must_use]
    pub fn of(message: &Message) -> Self {
        Self::build(message, false)
    }

    /// The view of a `message` the transport knows is modern (HTTP: a 2026-07-28
    /// `MCP-Protocol-Version` header, no session), whatever its `_meta` says.
    #[must_use]
    pub fn of_modern(message: &Message) -> Self {
        Self::build(message, true)
    }

    /// The view of `message`, a rewrite of the message this view was made of (say its params
    /// changed): the same era rules.
    #[must_use]
    pub fn rebuilt(&self, message: &Message) -> Self {
        Self::build(message, self.modern_by_transport)
    }

    fn build(message: &Message, modern_by_transport: bool) -> Self {
        let mut view = Self {
            // An answer has no method: `Other("")`, as the gateway has always read it (an
            // empty name allocates nothing).
            method: message.method().map(Method::parse).unwrap_or_default(),
            modern_by_transport,
            ..Self::default()
        };
        // Only requests are read: notifications and answers pass every layer untouched.
        if message.kind() != Kind::Request {
            return view;
        }
        let text = message.params.as_ref().map_or("null", |p| p.get());
        let fields = serde_json::from_str::<Fields<'_>>(text).unwrap_or_default();
        let span = |raw: &RawValue| {
            let start = raw.get().as_ptr() as usize - text.as_ptr() as usize;
            start..start + raw.get().len()
        };
        view.name = fields.name.and_then(string_of);
        view.uri = fields.uri.and_then(string_of);
        view.repeated = fields.repeated;
        view.arguments = fields.arguments.map(span);
        view.meta = fields.meta.map(span);
        if let Some(meta) = fields.meta {
            view.read_meta(meta.get(), text, modern_by_transport);
        } else if modern_by_transport {
            view.era = Era::Modern;
            view.envelope_error = modern::check_meta_envelope(None).err();
        }
        view
    }

    /// The progress token, and for a modern request the modern fields and the envelope check.
    fn read_meta(&mut self, meta: &str, params: &str, modern_by_transport: bool) {
        if meta.contains("progressToken") {
            #[derive(Deserialize)]
            struct Progress {
                #[serde(rename = "progressToken")]
                token: Option<Id>,
            }
            self.progress_token = serde_json::from_str::<Progress>(meta)
                .ok()
                .and_then(|p| p.token);
        }
        // The cheap test of `modern::request_meta` first: most 2025-era traffic never parses
        // its `_meta`.
        let names_version = params.contains(super::meta::META_PROTOCOL_VERSION)
            || params.contains(super::meta::META_PROTOCOL_VERSION_ESCAPED);
        if !names_version && !modern_by_transport {
            return;
        }
        let meta: Option<Value> = serde_json::from_str(meta).ok();
        self.request_meta = meta
            .as_ref()
            .filter(|_| names_version)
            .and_then(modern::meta_of);
        if modern_by_transport || self.request_meta.is_some() {
            self.era = Era::Modern;
            self.envelope_error = modern::check_meta_envelope(meta.as_ref()).err();
        }
    }

    /// The method, parsed once (`Method::Other("")` for an answer, which has none).
    #[must_use]
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// `params.name` when it is a string (the last one when repeated, as a `Value` reads it).
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// `params.name` as a typed parse reads it: `None` also when `name`, `arguments` or
    /// `_meta` came twice.
    #[must_use]
    pub fn typed_name(&self) -> Option<&str> {
        self.name().filter(|_| !self.repeated)
    }

    /// The name of a `tools/call` or `prompts/get` (for logs); `None` for other methods.
    #[must_use]
    pub fn tool_or_prompt(&self) -> Option<&str> {
        self.method
            .takes_arguments()
            .then(|| self.typed_name())
            .flatten()
    }

    /// `params.uri` when it is a string.
    #[must_use]
    pub fn uri(&self) -> Option<&str> {
        self.uri.as_deref()
    }

    /// What `Mcp-Name` must mirror: the field of [`Method::mirrored_field`] for this method
    /// (`name` or `uri`), when it is a string.
    #[must_use]
    pub fn target_name(&self) -> Option<&str> {
        if self.method.mirrored_field()? == "uri" {
            self.uri()
        } else {
            self.name()
        }
    }

    /// The text of `params.arguments` in `message` (the message this view was made of).
    #[must_use]
    pub fn arguments<'m>(&self, message: &'m Message) -> Option<&'m str> {
        slice(message, self.arguments.as_ref()?)
    }

    /// `params.arguments` as a value (`null` when absent or unreadable).
    #[must_use]
    pub fn arguments_value(&self, message: &Message) -> Value {
        self.arguments(message)
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }

    /// The text of `params._meta` in `message` (the message this view was made of).
    #[must_use]
    pub fn meta<'m>(&self, message: &'m Message) -> Option<&'m str> {
        slice(message, self.meta.as_ref()?)
    }

    /// `params._meta.progressToken`, when it is an id (a string or a number).
    #[must_use]
    pub fn progress_token(&self) -> Option<&Id> {
        self.progress_token.as_ref()
    }

    /// The protocol era of the request.
    #[must_use]
    pub fn era(&self) -> Era {
        self.era
    }

    /// Whether the request is modern (2026-07-28).
    #[must_use]
    pub fn is_modern(&self) -> bool {
        self.era == Era::Modern
    }

    /// The modern fields of `_meta`, when it names a protocol version.
    #[doc(hidden)]
    #[must_use]
    pub fn request_meta(&self) -> Option<&RequestMeta> {
        self.request_meta.as_ref()
    }

    /// For a modern request whose envelope is not whole, the `-32602` error
    /// ([`modern::check_envelope`]).
    #[must_use]
    pub fn envelope_error(&self) -> Option<&ErrorObject> {
        self.envelope_error.as_ref()
    }

    /// For a modern request that names a version the gateway does not serve, or a method
    /// 2026-07-28 removed: the `-32022` or `-32601` error, in that order.
    #[must_use]
    pub fn version_error(&self) -> Option<ErrorObject> {
        let meta = self.request_meta()?;
        if !modern::MODERN_VERSIONS.contains(&meta.protocol_version.as_str()) {
            return Some(modern::unsupported_version(&meta.protocol_version));
        }
        (self.method.removed_in_modern()).then(|| modern::removed_method(self.method.as_str()))
    }

    /// The refusal the era's transport-independent rules give a modern request, first
    /// failure wins: an incomplete envelope, an unsupported version, a removed method.
    /// `None` for a 2025-era request.
    #[must_use]
    pub fn refusal(&self) -> Option<ErrorObject> {
        if !self.is_modern() {
            return None;
        }
        self.envelope_error.clone().or_else(|| self.version_error())
    }
}

/// The text of `range` in the params of `message`.
fn slice<'m>(message: &'m Message, range: &Range<usize>) -> Option<&'m str> {
    message.params.as_ref()?.get().get(range.clone())
}

/// A JSON string's value.
fn string_of(raw: &RawValue) -> Option<Box<str>> {
    serde_json::from_str::<String>(raw.get())
        .ok()
        .map(String::into_boxed_str)
}

/// The params' members the view reads, borrowed from the params' text.
#[derive(Default)]
struct Fields<'a> {
    name: Option<&'a RawValue>,
    uri: Option<&'a RawValue>,
    arguments: Option<&'a RawValue>,
    meta: Option<&'a RawValue>,
    repeated: bool,
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("the params object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut out = Fields::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let slot = match key.as_ref() {
                        "name" => &mut out.name,
                        "uri" => &mut out.uri,
                        "arguments" => &mut out.arguments,
                        "_meta" => &mut out.meta,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    // As typed parses of `name`, `arguments` and `_meta` see it.
                    out.repeated |= slot.is_some() && key != "uri";
                    *slot = Some(map.next_value()?);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Members)
    }
}

#[cfg(test)]
mod tests;
