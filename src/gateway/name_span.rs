//! Finding and replacing the `name` of a `tools/call` or `prompts/get` in the raw params, so
//! that the hot path restores the upstream's own name without parsing the params into a DOM.

use std::borrow::Cow;
use std::ops::Range;

use serde_json::value::RawValue;

/// Where the string member `name` of a JSON object's raw text is, so that it can be replaced
/// without parsing the rest into a DOM.
pub(super) struct NameSpan<'a> {
    raw: &'a str,
    /// The name, unescaped.
    pub(super) name: Cow<'a, str>,
    /// Byte range of the name's JSON string (quotes included) in `raw`.
    span: Range<usize>,
}

impl<'a> NameSpan<'a> {
    /// `None` when the params need the general path: not an object, no string `name`,
    /// duplicate keys (the general path keeps the last), more keys than worth checking, or
    /// line breaks (a stdio upstream needs the message on one line, which only the general
    /// path's re-serialization guarantees).
    pub(super) fn find(params: &'a RawValue) -> Option<Self> {
        use serde::de::{Deserializer, MapAccess, Visitor};

        /// A key, borrowed when it has no escapes.
        #[derive(serde::Deserialize)]
        struct Key<'k>(#[serde(borrow)] Cow<'k, str>);

        struct Find<'a> {
            raw: &'a str,
        }
        impl<'de: 'a, 'a> Visitor<'de> for Find<'a> {
            type Value = Option<NameSpan<'a>>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                const MAX_KEYS: usize = 32;
                let mut keys: Vec<Cow<'de, str>> = Vec::new();
                let mut found = None;
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    if keys.len() == MAX_KEYS || keys.contains(&key) {
                        return Ok(None);
                    }
                    if key == "name" {
                        let text = value.get();
                        let Ok(Key(name)) = serde_json::from_str::<Key<'de>>(text) else {
                            return Ok(None);
                        };
                        let start = text.as_ptr() as usize - self.raw.as_ptr() as usize;
                        found = Some((name, start..start + text.len()));
                    }
                    keys.push(key);
                }
                Ok(found.map(|(name, span)| NameSpan {
                    raw: self.raw,
                    name,
                    span,
                }))
            }
        }

        let raw = params.get();
        if raw.contains(['\n', '\r']) {
            return None;
        }
        let mut de = serde_json::Deserializer::from_str(raw);
        let found = (&mut de).deserialize_map(Find { raw }).ok()??;
        de.end().ok()?;
        Some(found)
    }

    /// The params with the name replaced by `name`.
    pub(super) fn splice(&self, name: &str) -> Box<RawValue> {
        let quoted = serde_json::to_string(name).expect("a string always serializes");
        let mut out = String::with_capacity(self.raw.len() + quoted.len());
        out.push_str(&self.raw[..self.span.start]);
        out.push_str(&quoted);
        out.push_str(&self.raw[self.span.end..]);
        RawValue::from_string(out).expect("splicing a string keeps JSON valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_splice_keeps_every_other_byte_and_falls_back_when_unsure() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let params = raw(
            r#"{"_meta":{"name":"x"},"name":"a\u00e9__b","arguments":{"n":1.50,"big":123456789012345678901234567890}}"#,
        );
        let found = NameSpan::find(&params).unwrap();
        assert_eq!(found.name, "a\u{e9}__b");
        assert_eq!(
            found.splice("b\"q").get(),
            r#"{"_meta":{"name":"x"},"name":"b\"q","arguments":{"n":1.50,"big":123456789012345678901234567890}}"#
        );
        for fallback in [
            r#"{"name":"a","name":"b"}"#,
            "{\"name\":\n\"a\"}",
            r#"{"name":1}"#,
            r#"{"arguments":{}}"#,
            r#"["name"]"#,
        ] {
            assert!(NameSpan::find(&raw(fallback)).is_none(), "{fallback}");
        }
    }
}
