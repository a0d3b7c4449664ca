//! JSON with comments, as VS Code writes `mcp.json` and `settings.json` (JSONC): `//` and
//! `/* */` comments and trailing commas, made plain JSON for `serde_json`.
//!
//! A small scanner rather than a crate: it only has to tell strings (with their escapes) from
//! the rest, and every byte it removes becomes a space (a newline stays a newline), so the
//! line and column of a later parse error are the file's own. Plain JSON comes back as it is.

/// `text` with its comments and trailing commas blanked out, and a leading byte order mark
/// dropped. An unterminated comment is blanked to the end (the parse then fails where the
/// JSON ends).
pub(crate) fn to_json(text: &str) -> String {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    // The last comma outside a string, while only blanks and comments followed it.
    let mut comma: Option<usize> = None;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                comma = None;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                let end =
                    (bytes[i..].iter().position(|b| *b == b'\n')).map_or(bytes.len(), |n| i + n);
                blank(&mut out[i..end]);
                i = end;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = (bytes[i + 2..].windows(2).position(|w| w == b"*/"))
                    .map_or(bytes.len(), |n| i + 2 + n + 2);
                blank(&mut out[i..end]);
                i = end;
            }
            b',' => {
                comma = Some(i);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(at) = comma.take() {
                    out[at] = b' ';
                }
                i += 1;
            }
            b if b.is_ascii_whitespace() => i += 1,
            _ => {
                comma = None;
                i += 1;
            }
        }
    }
    // Only ASCII bytes outside strings were replaced by ASCII: still UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

/// Blanks a comment, keeping its line breaks (and so every later line number).
fn blank(bytes: &mut [u8]) {
    for b in bytes {
        if *b != b'\n' && *b != b'\r' {
            *b = b' ';
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_go_and_strings_stay() {
        let jsonc = "\u{feff}{\n  // the servers\n  \"servers\": {\n    /* a \"quoted\" */ \"a\": {\"url\": \"http://h//x?a=/*b*/\", \"t\": \"q\\\"//\",},\n  },\n}\n";
        let plain = to_json(jsonc);
        let value: serde_json::Value = serde_json::from_str(&plain).unwrap();
        assert_eq!(value["servers"]["a"]["url"], "http://h//x?a=/*b*/");
        assert_eq!(value["servers"]["a"]["t"], "q\"//");
        assert_eq!(plain.lines().count(), jsonc.lines().count(), "lines kept");
        let json = "{\"a\": [1, 2], \"b\": \"c,]\"}";
        assert_eq!(to_json(json), json);
    }

    #[test]
    fn an_unterminated_comment_or_string_does_not_panic() {
        for text in [
            "{\"a\": 1 /* open",
            "{\"a\": \"open",
            "{\"a\": \"\\",
            "/",
            "// x",
        ] {
            let _ = to_json(text);
        }
    }
}
