//! The lossless JSON-RPC 2.0 envelope.
//!
//! A [`Message`] is decoded once at the edge of the gateway. Its `params`, `result` and
//! `error.data` stay raw JSON ([`RawValue`]) so that what the gateway does not rewrite goes
//! back out byte for byte; layers that rewrite a payload parse just that payload, into views
//! that keep unknown fields (`serde_json` with `preserve_order`).
//!
//! ```
//! use mcp_budget::jsonrpc::{Message, Kind};
//!
//! let msg = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":1}}"#)?;
//! assert_eq!(msg.kind(), Kind::Request);
//! assert_eq!(msg.method(), Some("tools/list"));
//! assert_eq!(msg.params.as_ref().map(|p| p.get()), Some(r#"{"x":1}"#));
//! # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
//! ```

use std::fmt;

mod depth;
mod id_scan;
pub use depth::nesting_depth;
pub use id_scan::IdScanner;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::kind;

/// JSON-RPC error code: invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC error code: the JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC error code: the method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC error code: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC error code: internal error.
pub const INTERNAL_ERROR: i64 = -32603;

/// A request id. MCP allows strings and integers and JSON-RPC any number; `null` only appears
/// in errors answering messages whose id could not be read. Whatever id a client sends comes
/// back in its answer byte for byte: integers that fit an `i64` are [`Id::Number`], every other
/// number (`18446744073709551615`, `1.0`, `1e3`, `-0`) is [`Id::RawNumber`], kept as its text.
/// Objects, arrays and booleans are not ids.
///
/// ```
/// use mcp_budget::jsonrpc::{Id, Message};
///
/// let msg = Message::parse(br#"{"jsonrpc":"2.0","id":1e3,"method":"ping"}"#)?;
/// let id = msg.id.clone().expect("a request has an id");
/// assert!(matches!(id, Id::RawNumber(_)));
/// let answer = Message::response_value(id, &serde_json::json!({}));
/// assert_eq!(answer.to_bytes(), br#"{"jsonrpc":"2.0","id":1e3,"result":{}}"#);
/// # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(untagged)]
pub enum Id {
    /// An integer id that fits an `i64` (the gateway's own upstream ids are these).
    Number(i64),
    /// A string id.
    String(String),
    /// Any other number, as its exact JSON text.
    RawNumber(RawNumber),
    /// `null`, for errors about unreadable requests.
    Null,
}

impl Id {
    /// The id whose JSON text is `raw`, or `None` when that is not a string, a number or
    /// `null`.
    #[must_use]
    pub fn from_raw(raw: &RawValue) -> Option<Self> {
        let text = raw.get();
        match text.as_bytes().first()? {
            b'"' => serde_json::from_str(text).ok().map(Self::String),
            b'n' => Some(Self::Null),
            b'-' | b'0'..=b'9' => Some(
                // JSON integers have no `+` and no leading zeros, so one that parses as an
                // i64 prints back as the same text, except `-0`.
                match text.parse::<i64>() {
                    Ok(n) if text != "-0" => Self::Number(n),
                    _ => Self::RawNumber(RawNumber(raw.to_owned())),
                },
            ),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through the raw text: a number's form (`1.0`, `1e3`, digits beyond u64) is lost
        // once serde has made it an f64.
        let raw = Box::<RawValue>::deserialize(d)?;
        Self::from_raw(&raw).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "an id must be a string or a number, got {}",
                raw.get()
            ))
        })
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
            Self::RawNumber(n) => f.write_str(n.as_str()),
            Self::Null => f.write_str("null"),
        }
    }
}

/// The exact JSON text of a number id that is not an `i64` (see [`Id::RawNumber`]). Two are
/// equal when their texts are: `1.0` and `1` are different ids.
#[derive(Clone, Debug, Serialize)]
pub struct RawNumber(Box<RawValue>);

impl RawNumber {
    /// The number's JSON text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for RawNumber {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for RawNumber {}

impl std::hash::Hash for RawNumber {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for RawNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for RawNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// The error object of an error response; `data` is kept raw.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorObject {
    /// JSON-RPC error code.
    pub code: i64,
    /// Human-readable message.
    pub message: String,
    /// Extra data, kept as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    /// An error with a stable `data.type` and optional extra data fields.
    ///
    /// # Panics
    /// Never: a JSON object always serializes.
    #[must_use]
    pub fn new(code: i64, message: impl Into<String>, kind: &str, extra: Option<Value>) -> Self {
        let mut data = serde_json::Map::new();
        data.insert("type".into(), Value::String(kind.to_owned()));
        if let Some(Value::Object(extra)) = extra {
            data.extend(extra);
        }
        let data = serde_json::value::to_raw_value(&data).expect("a JSON object always serializes");
        Self {
            code,
            message: message.into(),
            data: Some(data),
        }
    }

    /// The stable `data.type` of this error, if it has one.
    #[must_use]
    pub fn kind(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Data {
            #[serde(rename = "type")]
            kind: Option<String>,
        }
        let data = self.data.as_ref()?;
        serde_json::from_str::<Data>(data.get()).ok()?.kind
    }
}

/// What a [`Message`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Has an id and a method: expects exactly one response.
    Request,
    /// Has a method and no id.
    Notification,
    /// Has an id and a result.
    Response,
    /// Has an id and an error.
    Error,
}

/// One JSON-RPC 2.0 message with raw payloads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Message {
    /// Always `"2.0"`.
    pub jsonrpc: Version,
    /// The id; `Some(Id::Null)` when the message carried `"id": null`.
    #[serde(
        default,
        deserialize_with = "present_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub id: Option<Id>,
    /// The method of a request or notification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Parameters, raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Box<RawValue>>,
    /// Result of a successful response, raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// Error of a failed response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

/// The `jsonrpc` member: only `"2.0"` is accepted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Version;

impl Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("2.0")
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor rather than `Cow<str>` (which always allocates): this runs for every
        // message.
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Version;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Version, E> {
                if v == "2.0" {
                    Ok(Version)
                } else {
                    Err(E::custom(format!("jsonrpc must be \"2.0\", got {v:?}")))
                }
            }
        }
        d.deserialize_str(V)
    }
}

fn present_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    Ok(Some(Id::deserialize(d)?))
}

/// A [`Message`] as [`Message::parse`] reads it first: the id through serde's own number
/// parsing, which costs nothing more for the ids clients send (integers, strings); an id that
/// serde reads as a float (a fraction, an exponent, `-0`, an integer beyond 64 bits) fails, and
/// the message is read again with [`Message`]'s own `Deserialize`, which keeps the number's text.
#[derive(Deserialize)]
struct WireMessage {
    jsonrpc: Version,
    #[serde(default, deserialize_with = "present_plain_id")]
    id: Option<Id>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

fn present_plain_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Id;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or a number")
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Id, E> {
            Ok(Id::Number(n))
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Id, E> {
            // A JSON integer has one spelling: its digits are the text the client sent.
            Ok(match i64::try_from(n) {
                Ok(n) => Id::Number(n),
                Err(_) => Id::RawNumber(RawNumber(
                    RawValue::from_string(n.to_string()).map_err(E::custom)?,
                )),
            })
        }
        fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<Id, E> {
            Err(E::custom("this id needs its JSON text"))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Id, E> {
            Ok(Id::String(s.to_owned()))
        }
        fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Id, E> {
            Ok(Id::String(s))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Id, E> {
            Ok(Id::Null)
        }
    }
    Ok(Some(d.deserialize_any(V)?))
}

/// Why bytes could not be decoded into a [`Message`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Not JSON at all (`-32700`).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC 2.0 message (`-32600`); the id, if one could be read.
    #[error("invalid request: {reason}")]
    Invalid {
        /// What is wrong.
        reason: String,
        /// The id of the message, when it could be read.
        id: Option<Id>,
    },
    /// A JSON array: batches were removed from MCP in 2025-06-18 (`-32600`).
    #[error(
        "JSON-RPC batches are not supported by MCP since 2025-06-18; send one message at a time"
    )]
    Batch,
    /// Objects and arrays nested deeper than the limit (`-32600`); see [`nesting_depth`].
    #[error(
        "message nested deeper than {limit} levels of objects and arrays (downstream.max_json_depth)"
    )]
    TooDeep {
        /// The limit.
        limit: usize,
        /// The id of the message, when it could be read.
        id: Option<Id>,
    },
}

impl DecodeError {
    /// The JSON-RPC error response that answers this failure.
    #[must_use]
    pub fn to_response(&self) -> Message {
        let (code, kind, id, extra) = match self {
            Self::Parse(_) => (PARSE_ERROR, kind::REQUEST_PARSE, None, None),
            Self::Invalid { id, .. } => (INVALID_REQUEST, kind::REQUEST_INVALID, id.clone(), None),
            Self::Batch => (INVALID_REQUEST, kind::REQUEST_BATCH, None, None),
            Self::TooDeep { limit, id } => (
                INVALID_REQUEST,
                kind::REQUEST_TOO_DEEP,
                id.clone(),
                Some(serde_json::json!({ "limit": limit })),
            ),
        };
        Message::error(
            id.unwrap_or(Id::Null),
            ErrorObject::new(code, self.to_string(), kind, extra),
        )
    }
}

impl Message {
    /// Decodes one message, telling parse errors (`-32700`) from invalid messages (`-32600`).
    ///
    /// # Errors
    /// [`DecodeError`] when the bytes are not JSON, are a batch, or are not a JSON-RPC message.
    pub fn parse(bytes: &[u8]) -> Result<Self, DecodeError> {
        // serde skips the members it ignores without checking their UTF-8: without this, a
        // message with invalid UTF-8 in an unknown member would be accepted as JSON.
        let text = std::str::from_utf8(bytes).map_err(|e| DecodeError::Parse(e.to_string()))?;
        let message = match serde_json::from_str::<WireMessage>(text) {
            Ok(wire) => Ok(Self {
                jsonrpc: wire.jsonrpc,
                id: wire.id,
                method: wire.method,
                params: wire.params,
                result: wire.result,
                error: wire.error,
            }),
            // An id that needs its text, or a number serde cannot make an f64 of (`1e400`), or
            // a message that is wrong anyway (read twice: the error path only).
            Err(_) => serde_json::from_str::<Self>(text),
        };
        match message {
            // serde also builds a struct from an array of its fields in order
            // (`["2.0",1,"tools/list"]`): an array is a batch, never a message.
            Ok(_) if text.trim_ascii_start().starts_with('[') => Err(DecodeError::Batch),
            Ok(msg) => msg.validate(),
            Err(err) => Err(classify(bytes, &err)),
        }
    }

    /// [`Message::parse`] for a message from a client: one nested deeper than `max_depth`
    /// objects and arrays ([`nesting_depth`]) is refused before it is parsed, with its id
    /// when it has one. The payloads are kept raw and never parsed here, so without this check
    /// a message nested a million levels deep would reach an upstream whole.
    ///
    /// ```
    /// use mcp_budget::jsonrpc::{DecodeError, Id, Message};
    ///
    /// let deep = format!(r#"{{"jsonrpc":"2.0","id":3,"method":"m","params":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
    /// let err = Message::parse_with_max_depth(deep.as_bytes(), 128).unwrap_err();
    /// assert!(matches!(err, DecodeError::TooDeep { limit: 128, id: Some(Id::Number(3)) }));
    /// ```
    ///
    /// # Errors
    /// [`DecodeError::TooDeep`], or what [`Message::parse`] returns.
    pub fn parse_with_max_depth(bytes: &[u8], max_depth: usize) -> Result<Self, DecodeError> {
        if depth::may_nest_deeper(bytes, max_depth) && nesting_depth(bytes, max_depth) > max_depth {
            let mut scan = IdScanner::default();
            scan.feed(bytes);
            return Err(DecodeError::TooDeep {
                limit: max_depth,
                id: scan.id(),
            });
        }
        Self::parse(bytes)
    }

    fn validate(self) -> Result<Self, DecodeError> {
        let invalid = |reason: &str, id: Option<Id>| DecodeError::Invalid {
            reason: reason.to_owned(),
            id,
        };
        match (&self.method, &self.result, &self.error) {
            (Some(_), None, None) => {
                if matches!(self.id, Some(Id::Null)) {
                    return Err(invalid("a request id must be a string or an integer", None));
                }
                Ok(self)
            }
            (None, Some(_), None) | (None, None, Some(_)) if self.id.is_some() => Ok(self),
            (None, Some(_), None) | (None, None, Some(_)) => {
                Err(invalid("a response must carry an id", None))
            }
            (None, None, None) => Err(invalid(
                "a message needs a method (request or notification) or a result or error (response)",
                self.id,
            )),
            _ => Err(invalid(
                "a message cannot carry more than one of method, result and error",
                self.id,
            )),
        }
    }

    /// A request.
    #[must_use]
    pub fn request(id: Id, method: &str, params: Option<Box<RawValue>>) -> Self {
        Self {
            jsonrpc: Version,
            id: Some(id),
            method: Some(method.to_owned()),
            params,
            result: None,
            error: None,
        }
    }

    /// A notification.
    #[must_use]
    pub fn notification(method: &str, params: Option<Box<RawValue>>) -> Self {
        Self {
            jsonrpc: Version,
            id: None,
            method: Some(method.to_owned()),
            params,
            result: None,
            error: None,
        }
    }

    /// A successful response.
    #[must_use]
    pub fn response(id: Id, result: Box<RawValue>) -> Self {
        Self {
            jsonrpc: Version,
            id: Some(id),
            method: None,
            params: None,
            result: Some(result),
            error: None,
        }
    }

    /// A successful response from a JSON value.
    ///
    /// # Panics
    /// Never: a [`Value`] always serializes.
    #[must_use]
    pub fn response_value(id: Id, result: &Value) -> Self {
        Self::response(id, to_raw(result))
    }

    /// An error response.
    #[must_use]
    pub fn error(id: Id, error: ErrorObject) -> Self {
        Self {
            jsonrpc: Version,
            id: Some(id),
            method: None,
            params: None,
            result: None,
            error: Some(error),
        }
    }

    /// What kind of message this is.
    #[must_use]
    pub fn kind(&self) -> Kind {
        match (&self.method, &self.id, &self.error) {
            (Some(_), Some(_), _) => Kind::Request,
            (Some(_), None, _) => Kind::Notification,
            (None, _, Some(_)) => Kind::Error,
            (None, _, None) => Kind::Response,
        }
    }

    /// The method, for requests and notifications.
    #[must_use]
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// Parses the params into `T` (missing params parse as `null`).
    ///
    /// # Errors
    /// The serde error when the params do not have the shape of `T`.
    pub fn params_as<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.params.as_ref().map_or("null", |p| p.get()))
    }

    /// The member `name` of the params as an [`Id`] with its exact text (say the `requestId` of
    /// `notifications/cancelled`); `None` when there is no such member or it is not an id.
    #[must_use]
    pub fn params_id(&self, name: &str) -> Option<Id> {
        let params = self.params.as_ref()?;
        let members: std::collections::HashMap<String, Box<RawValue>> =
            serde_json::from_str(params.get()).ok()?;
        Id::from_raw(members.get(name)?)
    }

    /// Parses the result into `T`.
    ///
    /// # Errors
    /// The serde error when there is no result or it does not have the shape of `T`.
    pub fn result_as<'a, T: Deserialize<'a>>(&'a self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.result.as_ref().map_or("null", |p| p.get()))
    }

    /// Serializes the message as one compact line of JSON (no trailing newline).
    ///
    /// # Panics
    /// Never: every part of a message serializes.
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a message always serializes")
    }
}

/// Turns a JSON value into a raw value.
///
/// # Panics
/// Never: a [`Value`] always serializes.
#[must_use]
pub fn to_raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a JSON value always serializes")
}

/// Queued messages are written together up to about this many bytes.
const WRITE_BATCH: usize = 64 * 1024;

/// Writes the messages of `rx` to `out` as newline-delimited JSON until the channel closes or a
/// write fails: whatever is queued goes out in one write and one flush (stdio peers on both
/// sides of the gateway use it).
pub async fn write_lines<W>(mut rx: tokio::sync::mpsc::UnboundedReceiver<Message>, mut out: W)
where
    W: tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::AsyncWriteExt;
    let mut buf = Vec::new();
    while let Some(msg) = rx.recv().await {
        buf.clear();
        push_line(&mut buf, &msg);
        while buf.len() < WRITE_BATCH {
            let Ok(msg) = rx.try_recv() else { break };
            push_line(&mut buf, &msg);
        }
        if out.write_all(&buf).await.is_err() || out.flush().await.is_err() {
            break;
        }
    }
}

/// Appends `msg` as one line of JSON.
pub(crate) fn push_line(buf: &mut Vec<u8>, msg: &Message) {
    serde_json::to_writer(&mut *buf, msg).expect("a message always serializes");
    buf.push(b'\n');
}

fn classify(bytes: &[u8], err: &serde_json::Error) -> DecodeError {
    // `IgnoredAny` checks the JSON without building it (and without serde's recursion limit).
    if serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_err() {
        return DecodeError::Parse(err.to_string());
    }
    if bytes.trim_ascii_start().first() == Some(&b'[') {
        return DecodeError::Batch;
    }
    let mut scan = IdScanner::default();
    scan.feed(bytes);
    DecodeError::Invalid {
        reason: err.to_string(),
        id: scan.id(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_round_trip_keep_bytes() {
        let raw = br#"{"jsonrpc":"2.0","id":"a","result":{"z":1,"a":{"_meta":{"x":[1,2]}},"unknown":true}}"#;
        let msg = Message::parse(raw).unwrap();
        assert_eq!(msg.kind(), Kind::Response);
        assert_eq!(msg.to_bytes(), raw.to_vec());
    }

    #[test]
    fn null_id_is_kept_distinct_from_absent() {
        let msg =
            Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#)
                .unwrap();
        assert_eq!(msg.id, Some(Id::Null));
        let msg =
            Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(msg.kind(), Kind::Notification);
    }

    #[test]
    fn errors_are_classified() {
        assert!(matches!(
            Message::parse(b"{not json"),
            Err(DecodeError::Parse(_))
        ));
        assert!(matches!(Message::parse(b"[]"), Err(DecodeError::Batch)));
        for (bad, reason) in [
            (
                r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#,
                "jsonrpc must be \"2.0\", got \"1.0\"",
            ),
            (
                r#"{"jsonrpc":2,"id":3,"method":"x"}"#,
                "invalid type: integer `2`, expected a string",
            ),
        ] {
            let err = Message::parse(bad.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(reason), "{err}");
        }
        let err = Message::parse(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::Invalid {
                id: Some(Id::Number(3)),
                ..
            }
        ));
        // Found by fuzzing (`tests/fixtures/fuzz/message/`): invalid UTF-8 in a member serde
        // ignores, and an array whose items spell a message's fields in order.
        let err = Message::parse(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"j\":\"\xff\"}");
        assert!(matches!(err, Err(DecodeError::Parse(_))), "{err:?}");
        let err = Message::parse(br#" ["2.0",1,"tools/list"]"#);
        assert!(matches!(err, Err(DecodeError::Batch)), "{err:?}");
        let err = Message::parse(br#"{"jsonrpc":"2.0","id":4}"#).unwrap_err();
        let resp = err.to_response();
        assert_eq!(resp.id, Some(Id::Number(4)));
        assert_eq!(
            resp.error.unwrap().kind().as_deref(),
            Some("mcp_budget.request.invalid")
        );
    }

    /// Id texts JSON-RPC allows, and whether they are an `i64`.
    const IDS: &[(&str, bool)] = &[
        ("0", true),
        ("-7", true),
        ("9223372036854775807", true),
        ("-9223372036854775808", true),
        ("9223372036854775808", false),
        ("18446744073709551615", false),
        ("-9223372036854775809", false),
        ("123456789012345678901234567890123456789", false),
        ("1.0", false),
        ("1e3", false),
        ("1E+2", false),
        ("-1.5e-7", false),
        ("-0", false),
        ("1E400", false),
        ("0.0", false),
        (r#""a""#, false),
        (r#""""#, false),
        (r#""é\"\n\u001f""#, false),
    ];

    #[test]
    fn every_id_comes_back_as_sent() {
        for &(text, is_i64) in IDS {
            let msg = Message::parse(
                format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#).as_bytes(),
            )
            .unwrap_or_else(|e| panic!("{text}: {e}"));
            let id = msg.id.clone().unwrap();
            assert_eq!(matches!(id, Id::Number(_)), is_i64, "{text}: {id:?}");
            // The `Deserialize` of `Message` (any deserializer) reads the same id.
            let derived: Message = serde_json::from_str(&format!(
                r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#
            ))
            .unwrap();
            assert_eq!(derived.id.as_ref(), Some(&id), "{text}");
            let answer = Message::response_value(id.clone(), &serde_json::json!({}));
            assert_eq!(
                String::from_utf8(answer.to_bytes()).unwrap(),
                format!(r#"{{"jsonrpc":"2.0","id":{text},"result":{{}}}}"#)
            );
            // The same text elsewhere (a cancel's requestId, the id scanner) is the same id.
            let cancel = Message::parse(
                format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"reason":"x","requestId":{text}}}}}"#
                )
                .as_bytes(),
            )
            .unwrap();
            assert_eq!(cancel.params_id("requestId").as_ref(), Some(&id), "{text}");
            let mut set = std::collections::HashSet::new();
            set.insert(id.clone());
            assert!(set.contains(&cancel.params_id("requestId").unwrap()));
            let mut scan = IdScanner::default();
            scan.feed(format!(r#"{{"method":"m","id":{text}}}"#).as_bytes());
            assert_eq!(scan.id().as_ref(), Some(&id), "{text}");
        }
        // A string is the same string, its escapes written as serde writes them.
        let msg = Message::parse(br#"{"jsonrpc":"2.0","id":"\u00e9\/","method":"ping"}"#).unwrap();
        assert_eq!(msg.id, Some(Id::String("é/".into())));
        // Different number texts are different ids, even for the same value.
        let id = |text: &str| Id::from_raw(&RawValue::from_string(text.into()).unwrap());
        assert_ne!(id("1.0"), id("1"));
        assert_ne!(id("1e3"), id("1000"));
        assert_eq!(id("1e3"), id("1e3"));
    }

    #[test]
    fn ids_that_are_not_strings_or_numbers_are_invalid() {
        for text in ["true", "{}", r#"{"a":1}"#, "[1]", "[]"] {
            let err = Message::parse(
                format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#).as_bytes(),
            )
            .unwrap_err();
            assert!(
                matches!(err, DecodeError::Invalid { id: None, .. }),
                "{text}: {err:?}"
            );
            assert_eq!(err.to_response().id, Some(Id::Null));
        }
        // A null request id is answered with null.
        let err = Message::parse(br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { id: None, .. }));
    }

    /// A `tools/call` `levels` deep: its `arguments` are `levels - 2` nested arrays; `before`
    /// and `after` go around `method` and `params`.
    fn nested(levels: usize, before: &str, after: &str) -> Vec<u8> {
        format!(
            r#"{{"jsonrpc":"2.0",{before}"method":"tools/call","params":{{"name":"t","arguments":{}"x"{}}}{after}}}"#,
            "[".repeat(levels - 2),
            "]".repeat(levels - 2)
        )
        .into_bytes()
    }

    #[test]
    fn too_deep_messages_are_refused_with_their_id() {
        let ok = Message::parse_with_max_depth(&nested(128, r#""id":1,"#, ""), 128).unwrap();
        assert_eq!(ok.id, Some(Id::Number(1)));
        for (levels, before, after, id) in [
            (129, r#""id":1,"#, "", Some(Id::Number(1))),
            (
                10_000,
                "",
                r#","id":"late""#,
                Some(Id::String("late".into())),
            ),
            (
                1_000_000,
                r#""id":1e3,"#,
                "",
                Id::from_raw(&RawValue::from_string("1e3".into()).unwrap()),
            ),
            (200, "", "", None),
        ] {
            let err =
                Message::parse_with_max_depth(&nested(levels, before, after), 128).unwrap_err();
            let DecodeError::TooDeep {
                limit: 128,
                id: got,
            } = &err
            else {
                panic!("{levels}: {err:?}");
            };
            assert_eq!(got, &id, "{levels}");
            let resp = err.to_response();
            assert_eq!(resp.id, Some(id.unwrap_or(Id::Null)));
            let error = resp.error.unwrap();
            assert_eq!(error.code, INVALID_REQUEST);
            assert_eq!(error.kind().as_deref(), Some("mcp_budget.request.too_deep"));
            assert!(error.message.contains("128"), "{}", error.message);
            assert!(
                error.message.contains("downstream.max_json_depth"),
                "{}",
                error.message
            );
        }
        // Without the check, a deep payload is kept raw and parses: the check is what stops it.
        assert!(Message::parse(&nested(1_000_000, r#""id":1,"#, "")).is_ok());
    }

    #[test]
    fn errors_of_deep_valid_json_are_still_classified() {
        // Deeper than serde's own recursion limit (128) but within the policy's: still an
        // invalid message with its id, not a parse error.
        let text = nested(500, r#""jsonrpc":"1.0","id":5,"#, "");
        let text = String::from_utf8(text)
            .unwrap()
            .replacen(r#""jsonrpc":"2.0","#, "", 1);
        let err = Message::parse_with_max_depth(text.as_bytes(), 1000).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::Invalid {
                    id: Some(Id::Number(5)),
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
