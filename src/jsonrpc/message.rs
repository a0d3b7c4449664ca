//! The envelope: one JSON-RPC 2.0 message with raw payloads, its constructors and accessors.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::error::ErrorObject;
use super::id::{Id, present_id};

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

impl Message {
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

    /// The id an answer to this message carries: its own, or `null` when it has none (a
    /// notification, which JSON-RPC never answers, only gets one from a gateway error).
    #[must_use]
    pub fn reply_id(&self) -> Id {
        self.id.clone().unwrap_or(Id::Null)
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

    /// The message as one raw JSON value (to carry it whole inside another document: what
    /// replicas forward to each other, `[state]`).
    ///
    /// # Panics
    /// Never: a message always serializes.
    #[must_use]
    pub fn to_raw_value(&self) -> Box<RawValue> {
        serde_json::value::to_raw_value(self).expect("a message always serializes")
    }

    /// The message as a JSON value (for services of `Value`s: embedders, in-process servers).
    ///
    /// # Panics
    /// Never: a message is JSON.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.to_bytes()).expect("a message is JSON")
    }

    /// The message `value` holds, read as [`Message::parse`] reads its text (members of the
    /// envelope that JSON-RPC 2.0 does not define are not kept; `params` and `result` are,
    /// whole).
    ///
    /// ```
    /// use mcp_budget::jsonrpc::Message;
    /// let value = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": true}});
    /// let message = Message::from_value(&value)?;
    /// assert_eq!(message.to_value(), value);
    /// # Ok::<(), mcp_budget::jsonrpc::DecodeError>(())
    /// ```
    ///
    /// # Errors
    /// [`DecodeError`](super::DecodeError) when it is no JSON-RPC message.
    ///
    /// # Panics
    /// Never: a [`Value`] always serializes.
    pub fn from_value(value: &Value) -> Result<Self, super::DecodeError> {
        Self::parse(&serde_json::to_vec(value).expect("a JSON value serializes"))
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
