//! A deployment's own equivalents (`[discover] vocabulary_file`, `mcp-budget search
//! --vocabulary`): the words its users say for the words its tools use ("changeset" for
//! "merge request"), one way, as a JSON object `{"word": ["equivalent", ...]}`.

use serde_json::Value;

/// Most entries a vocabulary file may hold: a curated list, not a thesaurus (each entry costs
/// a lookup per query word that matches it, and widens every search that says it).
pub const MAX_VOCABULARY_ENTRIES: usize = 10_000;

/// Equivalents a deployment adds to search, parsed from `{"word": ["equivalent", ...]}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    entries: Vec<(String, Vec<String>)>,
}

/// Why a vocabulary file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VocabularyError(String);

impl Vocabulary {
    /// Parses `{"word": ["equivalent", ...]}`: each key a word or phrase users say, each value
    /// the words the tools use for it (a string alone is one equivalent).
    ///
    /// # Errors
    /// Text that is not such an object, an empty word, or more than [`MAX_VOCABULARY_ENTRIES`] words.
    #[doc(hidden)]
    pub fn parse(text: &str) -> Result<Self, VocabularyError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| VocabularyError(format!("not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(VocabularyError(
                "expected an object {\"word\": [\"equivalent\", ...]}".to_owned(),
            ));
        };
        if map.len() > MAX_VOCABULARY_ENTRIES {
            return Err(VocabularyError(format!(
                "{} words, more than the {MAX_VOCABULARY_ENTRIES} a vocabulary may hold",
                map.len()
            )));
        }
        let mut entries = Vec::with_capacity(map.len());
        for (word, others) in map {
            let others = match others {
                Value::String(one) => vec![one],
                Value::Array(list) => list
                    .into_iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s),
                        other => Err(VocabularyError(format!(
                            "{word:?}: equivalents are strings, got {other}"
                        ))),
                    })
                    .collect::<Result<_, _>>()?,
                other => {
                    return Err(VocabularyError(format!(
                        "{word:?}: expected a list of words, got {other}"
                    )));
                }
            };
            if word.trim().is_empty() || others.iter().any(|o| o.trim().is_empty()) {
                return Err(VocabularyError(format!("{word:?}: an empty word")));
            }
            entries.push((word, others));
        }
        Ok(Self { entries })
    }

    /// The words and their equivalents, in the file's order.
    #[must_use]
    pub fn entries(&self) -> &[(String, Vec<String>)] {
        &self.entries
    }

    /// Whether it adds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_and_single_words_and_refuses_the_rest() {
        let v = Vocabulary::parse(r#"{"changeset": ["merge request", "mr"], "ticket": "issue"}"#)
            .unwrap();
        assert_eq!(v.entries().len(), 2);
        assert_eq!(
            v.entries()[1],
            ("ticket".to_owned(), vec!["issue".to_owned()])
        );
        for bad in [
            "[]",
            "{\"a\": 3}",
            "{\"a\": [3]}",
            "{\"\": [\"b\"]}",
            "{\"a\": [\" \"]}",
            "nope",
        ] {
            assert!(Vocabulary::parse(bad).is_err(), "{bad}");
        }
        assert!(Vocabulary::parse("{}").unwrap().is_empty());
    }
}
