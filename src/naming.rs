//! Namespaced tool names: `<server><sep><tool>`, valid for every LLM API.
//!
//! LLM APIs accept tool names matching `^[a-zA-Z0-9_-]{1,64}$`; MCP allows more (`.`, up to
//! 128 characters). A name that does not fit is made to fit deterministically: characters
//! outside the set become `_`, an over-long name is cut, and either change appends `_` and
//! eight hex digits of a hash of the original `server/tool`, so two originals never meet on one
//! name and the same catalog always gets the same names, whatever order it arrived in.
//!
//! ```
//! use mcp_budget::naming::exposed_name;
//!
//! assert_eq!(exposed_name("github", "create_issue", "__"), "github__create_issue");
//! let odd = exposed_name("docs", "search.v2", "__");
//! assert!(odd.starts_with("docs__search_v2_") && odd.len() == "docs__search_v2_".len() + 8);
//! ```

/// Longest tool name LLM APIs accept.
pub const MAX_NAME_LEN: usize = 64;

/// The exposed name of tool `tool` of server `server`.
#[must_use]
pub fn exposed_name(server: &str, tool: &str, separator: &str) -> String {
    let joined = format!("{server}{separator}{tool}");
    let clean = clean(&joined);
    if clean == joined && clean.len() <= MAX_NAME_LEN {
        return clean;
    }
    with_hash(&clean, &format!("{server}/{tool}"))
}

/// The `attempt`-th (from 2) other name of tool `tool` of server `server`, for when its
/// exposed name is another server's too (`a` + `b__c` and `a__b` + `c` both join to `a__b__c`):
/// the joined name, cut to fit, then `_` and eight hex digits of a hash of `server/tool#attempt`.
/// It depends on nothing but its arguments, so the same tool always gets the same name.
///
/// ```
/// use mcp_budget::naming::{disambiguated, is_valid};
///
/// let name = disambiguated("a__b", "c", "__", 2);
/// assert!(name.starts_with("a__b__c_") && is_valid(&name));
/// assert_ne!(name, disambiguated("a__b", "c", "__", 3));
/// ```
#[must_use]
pub fn disambiguated(server: &str, tool: &str, separator: &str, attempt: u32) -> String {
    with_hash(
        &clean(&format!("{server}{separator}{tool}")),
        &format!("{server}/{tool}#{attempt}"),
    )
}

/// `joined` with every character outside `[a-zA-Z0-9_-]` replaced by `_`.
fn clean(joined: &str) -> String {
    joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `clean` (ASCII) cut so that `_` and eight hex digits of a hash of `key` fit, then those.
fn with_hash(clean: &str, key: &str) -> String {
    let suffix = format!("_{:08x}", fnv1a(key.as_bytes()));
    let keep = MAX_NAME_LEN - suffix.len();
    // `clean` is ASCII, so byte slicing is on character boundaries.
    let head = &clean[..clean.len().min(keep)];
    format!("{head}{suffix}")
}

/// The words of a name or a text: alphanumeric runs, split where a lower-case letter meets an
/// upper-case one, lower-cased (the reference plain-BM25 words, no stop words dropped).
///
/// ```
/// use mcp_budget::naming::words;
///
/// let expected = ["word", "document", "server", "add", "paragraph"];
/// assert_eq!(words("word-document-server__addParagraph"), expected);
/// ```
#[must_use]
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && prev_lower)) && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase();
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether `name` is a valid LLM API tool name.
#[must_use]
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// 32-bit FNV-1a: stable across processes and versions (unlike `std`'s hasher).
fn fnv1a(bytes: &[u8]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for &b in bytes {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn long_names_are_cut_and_stay_distinct() {
        let a = exposed_name("server", &"x".repeat(80), "__");
        let b = exposed_name("server", &format!("{}y", "x".repeat(79)), "__");
        assert_eq!(a.len(), MAX_NAME_LEN);
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn always_valid_and_deterministic(server in "[a-z0-9_-]{1,20}", tool in "\\PC{1,100}") {
            let name = exposed_name(&server, &tool, "__");
            prop_assert!(is_valid(&name), "{}", name);
            prop_assert_eq!(name, exposed_name(&server, &tool, "__"));
        }

        #[test]
        fn second_names_are_valid_and_deterministic(server in "[a-z0-9_-]{1,20}", tool in "\\PC{1,100}", n in 2u32..5) {
            let name = disambiguated(&server, &tool, "__", n);
            prop_assert!(is_valid(&name), "{}", name);
            prop_assert_eq!(&name, &disambiguated(&server, &tool, "__", n));
            prop_assert_ne!(name, exposed_name(&server, &tool, "__"));
        }
    }
}
