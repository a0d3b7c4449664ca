//! URLs as they may be shown: the user info (a password, or a token as the user name) and the
//! values of the query (`?token=…`, `?key=…`) replaced by `***`, so that logs, `/status`,
//! `check`, error messages and metric labels never carry a credential written in a URL.
//!
//! Every place that displays an upstream's (or a key set's, an exporter's) URL goes through
//! [`Url`]: `format!("{}", Url(url))`, or [`url`] for an owned string.

use std::fmt;

/// What a redacted part is replaced by.
const HIDDEN: &str = "***";

/// A URL that displays redacted (see the module docs); `Url(s).to_string()` is [`url`]`(s)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Url<'a>(pub(crate) &'a str);

impl fmt::Display for Url<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0;
        // The scheme, kept; a string without one is shown as a path (nothing to hide in it
        // but a query).
        let (scheme, rest) = match text.find("://") {
            Some(at) => text.split_at(at + 3),
            None => ("", text),
        };
        f.write_str(scheme)?;
        let authority_end = if scheme.is_empty() {
            0
        } else {
            rest.find(['/', '?', '#']).unwrap_or(rest.len())
        };
        let (authority, tail) = rest.split_at(authority_end);
        match authority.rsplit_once('@') {
            Some((_, host)) => write!(f, "{HIDDEN}@{host}")?,
            None => f.write_str(authority)?,
        }
        let (before_fragment, fragment) = match tail.find('#') {
            Some(at) => tail.split_at(at),
            None => (tail, ""),
        };
        let Some((path, query)) = before_fragment.split_once('?') else {
            f.write_str(before_fragment)?;
            return f.write_str(fragment);
        };
        write!(f, "{path}?")?;
        for (i, pair) in query.split('&').enumerate() {
            if i > 0 {
                f.write_str("&")?;
            }
            match pair.split_once('=') {
                Some((key, _)) => write!(f, "{key}={HIDDEN}")?,
                // `?TOKEN` alone is a value with no key.
                None if pair.is_empty() => {}
                None => f.write_str(HIDDEN)?,
            }
        }
        // A fragment is never sent, but may hold a token all the same (OAuth implicit flow).
        if !fragment.is_empty() {
            write!(f, "#{HIDDEN}")?;
        }
        Ok(())
    }
}

/// `text` with its user info and query values redacted (see the module docs).
pub(crate) fn url(text: &str) -> String {
    Url(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_and_query_values_are_hidden() {
        let cases = [
            ("http://127.0.0.1:3001/mcp", "http://127.0.0.1:3001/mcp"),
            (
                "https://user:pw@host.example/mcp?token=abc&x=1#frag",
                "https://***@host.example/mcp?token=***&x=***#***",
            ),
            (
                "https://ghp_TOKEN@github.example/",
                "https://***@github.example/",
            ),
            ("http://a:b@c@[::1]:8/p", "http://***@[::1]:8/p"),
            ("http://h/p?SECRET", "http://h/p?***"),
            ("http://h/p?", "http://h/p?"),
            ("http://h?k=v", "http://h?k=***"),
            ("http://h/a@b", "http://h/a@b"),
            ("redis://:pw@redis:6379/0", "redis://***@redis:6379/0"),
            ("not a url ?k=v", "not a url ?k=***"),
            ("", ""),
        ];
        for (given, shown) in cases {
            assert_eq!(url(given), shown, "{given}");
        }
    }
}
