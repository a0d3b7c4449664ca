//! Request ids, kept as the client wrote them.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

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

pub(super) fn present_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
    Ok(Some(Id::deserialize(d)?))
}

pub(super) fn present_plain_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Id>, D::Error> {
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
