//! Removal of text a person cannot see but a model reads: Unicode tag characters, bidi
//! controls, zero-width and other invisible format characters, ANSI escape sequences, and
//! C0/C1 controls other than `\n` and `\t`.
//!
//! Nothing else changes: no normalization (NFKC would rewrite ordinary text), no escaping.
//! A `\r` is kept where it starts a `\r\n` line end (files and tool output from Windows); a
//! lone `\r` (which returns a terminal's cursor to hide what came before) is removed.
//! Variation selectors U+FE00–FE0F stay (emoji presentation); the supplement
//! U+E0100–E01EF, which has no use in tool text but can smuggle bytes, is removed.

use std::borrow::Cow;

/// How many characters of each kind [`strip`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// Unicode tag characters (U+E0000–E007F): invisible ASCII look-alikes.
    pub tag: usize,
    /// Bidi embedding, override and isolate controls (U+202A–202E, U+2066–2069).
    pub bidi: usize,
    /// Zero-width and other invisible format characters (U+200B–200D, U+2060–2064, U+FEFF,
    /// U+180E, U+00AD, U+FFF9–FFFB, U+E0100–E01EF).
    pub invisible: usize,
    /// ANSI escape sequences (each counted once, whatever its length).
    pub ansi: usize,
    /// C0 and C1 control characters and DEL, other than `\n`, `\t` and the `\r` of `\r\n`.
    pub control: usize,
}

impl Counts {
    /// All removals together.
    #[must_use]
    pub fn total(&self) -> usize {
        self.tag + self.bidi + self.invisible + self.ansi + self.control
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.tag += other.tag;
        self.bidi += other.bidi;
        self.invisible += other.invisible;
        self.ansi += other.ansi;
        self.control += other.control;
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts = [
            (self.tag, "tag"),
            (self.bidi, "bidi"),
            (self.invisible, "invisible"),
            (self.ansi, "ansi"),
            (self.control, "control"),
        ];
        let mut first = true;
        for (n, what) in parts.into_iter().filter(|(n, _)| *n > 0) {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{n} {what}")?;
        }
        Ok(())
    }
}

/// Whether `bytes` (UTF-8 text, or JSON text with its escapes) may hold anything [`strip`]
/// removes. A quick scan that lets clean text through without decoding it: every character
/// removed is an ASCII control, a JSON `\u`/`\r` escape, or starts with one of a few UTF-8
/// lead bytes.
#[must_use]
pub fn may_need(bytes: &[u8]) -> bool {
    let mut escaped = false;
    for &b in bytes {
        if escaped {
            if b == b'u' || b == b'r' {
                return true;
            }
            escaped = false;
            continue;
        }
        match b {
            b'\\' => escaped = true,
            b'\n' | b'\t' => {}
            0x00..=0x1f | 0x7f | 0xc2 | 0xe1 | 0xe2 | 0xef | 0xf3 => return true,
            _ => {}
        }
    }
    false
}

/// What kind of removable character `c` is, if any (ANSI sequences are found by [`strip`]).
fn kind(c: char) -> Option<Kind> {
    match c {
        '\u{E0000}'..='\u{E007F}' => Some(Kind::Tag),
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => Some(Kind::Bidi),
        '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{180E}'
        | '\u{00AD}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{E0100}'..='\u{E01EF}' => Some(Kind::Invisible),
        '\n' | '\t' => None,
        '\u{0}'..='\u{1F}' | '\u{7F}'..='\u{9F}' => Some(Kind::Control),
        _ => None,
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Tag,
    Bidi,
    Invisible,
    Control,
}

/// `s` without the characters of the module docs, counting them into `counts`. Borrowed when
/// nothing is removed. Idempotent: stripping stripped text changes nothing.
///
/// ```
/// use mcp_budget::sanitize::strip::{strip, Counts};
///
/// let mut counts = Counts::default();
/// let clean = strip("Adds\u{200b} two\u{e0041}\u{e0042} numbers \x1b[31mnow\x1b[0m\r\n", &mut counts);
/// assert_eq!(clean, "Adds two numbers now\r\n");
/// assert_eq!((counts.invisible, counts.tag, counts.ansi), (1, 2, 2));
/// assert!(matches!(strip("plain — text", &mut counts), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn strip<'a>(s: &'a str, counts: &mut Counts) -> Cow<'a, str> {
    if !may_need(s.as_bytes()) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    let mut changed = false;
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            out.push(c);
            continue;
        }
        // ESC or C1 CSI: an ANSI sequence (CSI, OSC, or a two-character escape).
        if c == '\u{1b}' || c == '\u{9b}' {
            skip_ansi(c, &mut chars);
            counts.ansi += 1;
            changed = true;
            continue;
        }
        match kind(c) {
            Some(Kind::Tag) => counts.tag += 1,
            Some(Kind::Bidi) => counts.bidi += 1,
            Some(Kind::Invisible) => counts.invisible += 1,
            Some(Kind::Control) => counts.control += 1,
            None => {
                out.push(c);
                continue;
            }
        }
        changed = true;
    }
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(s)
    }
}

/// Skips the rest of an ANSI sequence started by `first` (ESC or C1 CSI) — ECMA-48: CSI
/// parameters and intermediates up to a final byte; OSC/DCS/APC/PM/SOS strings up to BEL or
/// ST; otherwise one following character.
fn skip_ansi(first: char, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    let intro = if first == '\u{9b}' {
        '['
    } else {
        match chars.next() {
            Some(c) => c,
            None => return,
        }
    };
    match intro {
        '[' => {
            // Parameters 0x30–0x3F, intermediates 0x20–0x2F, one final 0x40–0x7E.
            while let Some(&c) = chars.peek() {
                if ('\u{30}'..='\u{3f}').contains(&c) || ('\u{20}'..='\u{2f}').contains(&c) {
                    chars.next();
                } else {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        chars.next();
                    }
                    return;
                }
            }
        }
        ']' | 'P' | 'X' | '^' | '_' => {
            // A control string: up to BEL or ST (ESC \), never past a line end, so a stray
            // OSC cannot swallow the rest of a description.
            while let Some(&c) = chars.peek() {
                match c {
                    '\u{7}' => {
                        chars.next();
                        return;
                    }
                    '\u{1b}' => {
                        chars.next();
                        if chars.peek() == Some(&'\\') {
                            chars.next();
                        }
                        return;
                    }
                    '\n' => return,
                    _ => {
                        chars.next();
                    }
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clean(s: &str) -> (String, Counts) {
        let mut counts = Counts::default();
        let out = strip(s, &mut counts).into_owned();
        (out, counts)
    }

    #[test]
    fn removes_each_kind_and_counts_it() {
        let tags: String = "ignore"
            .chars()
            .map(|c| char::from_u32(0xE0000 + c as u32).unwrap())
            .collect();
        let (out, counts) = clean(&format!(
            "a{tags}b\u{202e}c\u{2066}d\u{feff}e\u{7}f\u{85}g\x1b]8;;http://x\x07h"
        ));
        assert_eq!(out, "abcdefgh");
        assert_eq!(
            counts,
            Counts {
                tag: 6,
                bidi: 2,
                invisible: 1,
                ansi: 1,
                control: 2
            }
        );
        assert_eq!(
            counts.to_string(),
            "6 tag, 2 bidi, 1 invisible, 1 ansi, 2 control"
        );
    }

    #[test]
    fn keeps_ordinary_text_untouched() {
        for s in [
            "Line one\nline\ttwo\r\n",
            "Größe — «quoted» “smart” café ﬁ ①",
            "日本語のテキスト، العربية עברית",
            "emoji ❤️ 👍🏽",
            "\\u200b written as an escape is text",
        ] {
            let mut counts = Counts::default();
            assert!(matches!(strip(s, &mut counts), Cow::Borrowed(_)), "{s}");
            assert_eq!(counts.total(), 0);
        }
    }

    #[test]
    fn lone_carriage_return_goes_crlf_stays() {
        assert_eq!(clean("a\rb\r\nc").0, "ab\r\nc");
    }

    #[test]
    fn csi_with_parameters_and_c1_csi() {
        assert_eq!(clean("\x1b[1;31mred\x1b[0m \u{9b}2Jx").0, "red x");
        assert_eq!(clean("end\x1b").0, "end");
    }

    #[test]
    fn quick_scan_sees_json_escapes() {
        assert!(may_need(br#""a\u200bb""#));
        assert!(may_need(br#""a\rb""#));
        assert!(!may_need(br#""a\nb\t\"c\\""#));
        assert!(!may_need("plain ascii and é".as_bytes()));
    }

    proptest! {
        #[test]
        fn stripping_is_idempotent(s in "(\\PC|[\u{0}-\u{1f}\u{7f}-\u{9f}\u{200b}-\u{200d}\u{202a}-\u{202e}\u{2066}-\u{2069}\u{e0000}-\u{e007f}\u{1b}\\[;0-9m\r\n])*") {
            let (once, _) = clean(&s);
            let (twice, counts) = clean(&once);
            prop_assert_eq!(&once, &twice);
            prop_assert_eq!(counts.total(), 0);
        }
    }
}
