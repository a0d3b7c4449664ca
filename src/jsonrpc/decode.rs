//! Decoding bytes into a [`Message`], and why that can fail.
//!
//! The JSON-RPC answer to a failure ([`DecodeError::to_response`]) is built in
//! `crate::error`, next to every other error object, so that the envelope imports nothing
//! above it.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::depth::{self, nesting_depth};
use super::error::ErrorObject;
use super::id::{Id, present_plain_id};
use super::id_scan::IdScanner;
use super::message::{Message, Version};

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
    /// A `\u` escape of a UTF-16 surrogate that is not half of a pair (`\ud800` alone): JSON
    /// that is not valid Unicode text, so not JSON RFC 8259 lets a receiver rely on (`-32700`).
    /// Never forwarded: replacing it would alter the data silently.
    #[error(
        "parse error: the \\u escape at byte {at} is an unpaired UTF-16 surrogate, which is not Unicode text"
    )]
    LoneSurrogate {
        /// Where the escape starts.
        at: usize,
        /// The message as it was read, to answer it (its id) or to tell what it was.
        message: Box<Message>,
    },
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
            Ok(msg) => match lone_surrogate(text) {
                None => msg.validate(),
                Some(at) => Err(DecodeError::LoneSurrogate {
                    at,
                    message: Box::new(msg),
                }),
            },
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
}

/// Where `text` (JSON serde accepted, so its escapes are well formed) has a `\u` escape of a
/// UTF-16 surrogate that is not half of a pair (a high one followed by a low one), if it has
/// one. `serde_json` keeps such an escape in a raw value untouched, and fails on it only when
/// the string is read. Text with no `\uD` / `\ud` costs two substring searches.
pub(crate) fn lone_surrogate(text: &str) -> Option<usize> {
    if !text.contains("\\ud") && !text.contains("\\uD") {
        return None;
    }
    let b = text.as_bytes();
    let unit = |at: usize| {
        let hex = b.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
    };
    let mut i = 0;
    while let Some(off) = b
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'\\'))
    {
        let at = i + off;
        if b.get(at + 1) != Some(&b'u') {
            i = at + 2; // `\\`, `\"`, `\n`…: the escaped byte is no escape of its own
            continue;
        }
        i = at + 6;
        match unit(at + 2) {
            Some(0xD800..=0xDBFF) => {
                let paired = b.get(at + 6..at + 8) == Some(b"\\u")
                    && matches!(unit(at + 8), Some(0xDC00..=0xDFFF));
                if !paired {
                    return Some(at);
                }
                i = at + 12;
            }
            Some(0xDC00..=0xDFFF) => return Some(at),
            _ => {}
        }
    }
    None
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
