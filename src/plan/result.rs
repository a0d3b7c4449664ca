//! Result budgets (`[budget.tools."server/tool"] max_result_tokens`): a `tools/call` result whose
//! text is over its budget is cut, never silently.
//!
//! The text blocks of `content` are kept in order while they fit; the block that crosses the
//! budget is cut at the longest prefix that still fits (a token boundary as the counter sees
//! it), the text blocks after it are dropped, and one text block says what happened:
//! `[… cut: N of M tokens shown; ask for less]`. Other blocks (images, resources) are kept.
//! `structuredContent` is kept only if it fits the budget together with the text shown.
//!
//! ```
//! use mcp_budget::plan::cut_result;
//! use serde_json::json;
//!
//! let words = |t: &str| t.split_whitespace().count();
//! let mut result = json!({"content": [{"type": "text", "text": "one two three four five six"}]});
//! let cut = cut_result(&mut result, 3, &words).expect("over budget");
//! assert_eq!((cut.shown, cut.total), (3, 6));
//! assert_eq!(result["content"][0]["text"], "one two three");
//! assert_eq!(result["content"][1]["text"], "[… cut: 3 of 6 tokens shown; ask for less]");
//! ```

use serde_json::Value;

/// What a cut removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Tokens of text kept.
    pub shown: usize,
    /// Tokens of text the result had.
    pub total: usize,
    /// Whether `structuredContent` was dropped (it did not fit).
    pub structured_dropped: bool,
}

/// The note that ends a cut result.
#[must_use]
pub fn cut_note(cut: &Cut) -> String {
    let structured = if cut.structured_dropped {
        "; structuredContent dropped"
    } else {
        ""
    };
    format!(
        "[… cut: {} of {} tokens shown{structured}; ask for less]",
        cut.shown, cut.total
    )
}

/// Cuts `result` (a `tools/call` result) to `max` tokens of text as counted by `count`; `None`
/// (and `result` untouched) when it fits or has no text to cut.
pub fn cut_result(result: &mut Value, max: usize, count: &dyn Fn(&str) -> usize) -> Option<Cut> {
    let blocks = result.get("content")?.as_array()?;
    let texts: Vec<usize> = blocks
        .iter()
        .map(|b| b.get("text").and_then(Value::as_str).map_or(0, count))
        .collect();
    let total: usize = texts.iter().sum();
    if total <= max {
        return None;
    }
    let mut left = max;
    // Once a block is cut, the text after it is dropped (a gap in the middle would mislead).
    let mut cutting = false;
    let mut kept = Vec::with_capacity(blocks.len() + 1);
    for (block, &tokens) in blocks.iter().zip(&texts) {
        let Some(text) = block.get("text").and_then(Value::as_str) else {
            kept.push(block.clone());
            continue;
        };
        if cutting {
            continue;
        }
        if tokens <= left {
            left -= tokens;
            kept.push(block.clone());
            continue;
        }
        cutting = true;
        // Trailing blanks cost tokens and say nothing.
        let prefix = longest_prefix(text, left, count).trim_end();
        if !prefix.is_empty() {
            left -= count(prefix).min(left);
            let mut cut = block.clone();
            cut["text"] = Value::String(prefix.to_owned());
            kept.push(cut);
        }
    }
    let shown = max - left;
    let structured_dropped = result.get("structuredContent").is_some_and(|s| {
        let tokens = count(&s.to_string());
        shown + tokens > max
    });
    let cut = Cut {
        shown,
        total,
        structured_dropped,
    };
    kept.push(serde_json::json!({"type": "text", "text": cut_note(&cut)}));
    let object = result.as_object_mut()?;
    object.insert("content".into(), Value::Array(kept));
    if structured_dropped {
        object.remove("structuredContent");
    }
    Some(cut)
}

/// The longest prefix of `text` (at a character boundary) of at most `max` tokens: a binary
/// search over byte lengths, bounded by 32 bytes a token (no BPE token of the supported
/// encodings is longer in practice), so a huge text costs a few counts of a short prefix.
pub(crate) fn longest_prefix<'a>(
    text: &'a str,
    max: usize,
    count: &dyn Fn(&str) -> usize,
) -> &'a str {
    let floor = |mut at: usize| {
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    let (mut lo, mut hi) = (0, floor(text.len().min(max.saturating_mul(32))));
    while lo < hi {
        let mid = floor(lo + (hi - lo).div_ceil(2));
        if mid <= lo {
            break;
        }
        if count(&text[..mid]) <= max {
            lo = mid;
        } else {
            hi = floor(mid - 1);
        }
    }
    &text[..lo]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn words(t: &str) -> usize {
        t.split_whitespace().count()
    }

    #[test]
    fn fitting_results_are_untouched() {
        let mut r =
            json!({"content": [{"type": "text", "text": "a b"}], "structuredContent": {"x": 1}});
        let before = r.clone();
        assert_eq!(cut_result(&mut r, 2, &words), None);
        assert_eq!(r, before);
        assert_eq!(cut_result(&mut json!({"isError": true}), 0, &words), None);
    }

    #[test]
    fn later_text_is_dropped_other_blocks_kept_structured_only_if_it_fits() {
        let mut r = json!({
            "content": [
                {"type": "text", "text": "a b c"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "text", "text": "d e f g"},
                {"type": "text", "text": "h"},
            ],
            "structuredContent": {"big": "x y z"},
        });
        let cut = cut_result(&mut r, 4, &words).unwrap();
        assert_eq!((cut.shown, cut.total, cut.structured_dropped), (4, 8, true));
        let content = r["content"].as_array().unwrap();
        let texts: Vec<&str> = content.iter().filter_map(|b| b["text"].as_str()).collect();
        assert_eq!(
            texts,
            [
                "a b c",
                "d",
                "[… cut: 4 of 8 tokens shown; structuredContent dropped; ask for less]"
            ]
        );
        assert_eq!(content[1]["type"], "image");
        assert!(r.get("structuredContent").is_none());
    }

    #[test]
    fn a_prefix_is_cut_at_a_character_boundary() {
        let text = "é".repeat(100);
        let chars = |t: &str| t.chars().count();
        let prefix = longest_prefix(&text, 7, &chars);
        assert_eq!(prefix.chars().count(), 7);
        assert_eq!(longest_prefix("abc", 0, &chars), "");
        assert_eq!(longest_prefix("abc", 9, &chars), "abc");
    }
}
