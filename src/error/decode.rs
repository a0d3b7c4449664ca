//! The JSON-RPC answer to a message that could not be decoded.
//!
//! It lives here rather than beside [`DecodeError`] so that the envelope (`crate::jsonrpc`)
//! imports nothing of `error`: its kinds are `error::kind`'s, its codes `jsonrpc::code`'s.

use crate::error::kind;
use crate::jsonrpc::code::{INVALID_REQUEST, PARSE_ERROR};
use crate::jsonrpc::{DecodeError, ErrorObject, Id, Message};

impl DecodeError {
    /// The JSON-RPC error response that answers this failure.
    #[must_use]
    pub fn to_response(&self) -> Message {
        let (code, kind, id, extra) = match self {
            Self::Parse(_) => (PARSE_ERROR, kind::REQUEST_PARSE, None, None),
            Self::Invalid { id, .. } => (INVALID_REQUEST, kind::REQUEST_INVALID, id.clone(), None),
            Self::Batch => (INVALID_REQUEST, kind::REQUEST_BATCH, None, None),
            Self::LoneSurrogate { message, .. } => {
                (PARSE_ERROR, kind::REQUEST_PARSE, message.id.clone(), None)
            }
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
