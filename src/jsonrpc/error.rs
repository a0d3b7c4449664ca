//! The error object of an error response.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

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
