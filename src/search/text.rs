//! Text → terms: word splitting (snake, kebab, camel case), lower-casing, stop words,
//! Snowball stemming, and CJK bigrams.

use std::collections::HashMap;

use rust_stemmers::{Algorithm, Stemmer};

use super::synonyms::ABBREVIATIONS;

/// How text becomes terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Analysis {
    /// Lower-cased alphanumeric runs, nothing else (the plain BM25 baseline).
    Plain,
    /// Case-split words, stop words dropped, Snowball-stemmed; CJK as unigrams and bigrams.
    Full,
}

/// Splits `text` into words: alphanumeric runs, further split at camel-case boundaries
/// (`getFileInfo` → `get`, `File`, `Info`; `HTMLParser` → `HTML`, `Parser`) and between letters
/// and digits only when the case changes. CJK characters come out one per word, flagged.
pub(crate) fn words(text: &str, mut emit: impl FnMut(&str, bool)) {
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let end_of = |i: usize| chars.get(i).map_or(text.len(), |&(at, _)| at);
    for (i, &(at, c)) in chars.iter().enumerate() {
        if is_cjk(c) {
            if let Some(s) = start.take() {
                emit(&text[s..at], false);
            }
            emit(&text[at..end_of(i + 1)], true);
            continue;
        }
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                emit(&text[s..at], false);
            }
            continue;
        }
        match start {
            None => start = Some(at),
            Some(s) => {
                let prev = chars[i - 1].1;
                let next = chars.get(i + 1).map(|&(_, n)| n);
                // camelCase: a capital after a lower-case letter or digit starts a word;
                // ACRONYMWord: the last capital of a run starts a word when a lower case follows.
                // A plural `s` after an acronym stays with it (`PRs`, `URLs`).
                let plural = next == Some('s')
                    && !chars
                        .get(i + 2)
                        .is_some_and(|&(_, after)| after.is_alphanumeric());
                let boundary = c.is_uppercase()
                    && (prev.is_lowercase()
                        || (prev.is_uppercase()
                            && next.is_some_and(char::is_lowercase)
                            && !plural));
                if boundary {
                    emit(&text[s..at], false);
                    start = Some(at);
                }
            }
        }
    }
    if let Some(s) = start {
        emit(&text[s..], false);
    }
}

/// Han, Hiragana, Katakana and Hangul: scripts written without spaces between words.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xAC00..=0xD7AF)
}

/// English function words that carry no tool-choosing signal. `located` is one in requests ("the
/// file located at ./x" says where, not what); stemmed, it would be `location`.
const STOP_WORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "also", "am", "an", "and", "any", "are", "as", "at",
    "be", "been", "before", "being", "but", "by", "can", "could", "did", "do", "does", "doing",
    "e", "eg", "etc", "for", "from", "further", "g", "had", "has", "have", "having", "he", "her",
    "here", "hers", "him", "his", "how", "i", "ie", "if", "in", "into", "is", "it", "its",
    "itself", "just", "let", "like", "located", "may", "me", "might", "must", "my", "myself", "of",
    "on", "onto", "or", "our", "ours", "please", "shall", "she", "should", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they", "this",
    "those", "through", "to", "too", "us", "via", "want", "was", "we", "were", "what", "when",
    "where", "which", "while", "who", "whom", "whose", "why", "will", "with", "would", "you",
    "your", "yours", "yourself",
];

/// Word → terms memo for [`Analyzer::terms_cached`].
#[derive(Debug, Default)]
pub(crate) struct StemCache(HashMap<String, Vec<String>>);

/// Turns text into index terms.
pub(crate) struct Analyzer {
    stemmer: Stemmer,
    mode: Analysis,
    /// Abbreviation (lower case, singular) → the stemmed terms of its expansion (full analysis
    /// only).
    abbreviations: HashMap<String, Vec<String>>,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl Analyzer {
    pub(crate) fn new(mode: Analysis) -> Self {
        let mut analyzer = Self {
            stemmer: Stemmer::create(Algorithm::English),
            mode,
            abbreviations: HashMap::new(),
        };
        if mode == Analysis::Full {
            for (short, long) in ABBREVIATIONS {
                let expansion: Vec<String> = long
                    .split(' ')
                    .filter_map(|word| analyzer.term(word))
                    .collect();
                analyzer
                    .abbreviations
                    .insert((*short).to_owned(), expansion);
            }
        }
        analyzer
    }

    /// The terms of `text`, in order, duplicates kept.
    pub(crate) fn terms(&self, text: &str) -> Vec<String> {
        self.terms_cached(text, &mut StemCache::default())
    }

    /// [`Self::terms`] without expanding abbreviations, for argument values (`./lib/app.py`
    /// names a path, not a library).
    pub(crate) fn literal_terms(&self, text: &str) -> Vec<String> {
        self.analyze(text, &mut StemCache::default(), false)
    }

    /// [`Self::terms`], remembering each word's term in `cache` (indexing meets the same words
    /// again and again; stemming is the costly step).
    pub(crate) fn terms_cached(&self, text: &str, cache: &mut StemCache) -> Vec<String> {
        self.analyze(text, cache, true)
    }

    fn analyze(&self, text: &str, cache: &mut StemCache, expand: bool) -> Vec<String> {
        let mut out = Vec::new();
        match self.mode {
            Analysis::Plain => {
                for word in text.split(|c: char| !c.is_alphanumeric()) {
                    if !word.is_empty() {
                        out.push(word.to_lowercase());
                    }
                }
            }
            Analysis::Full => {
                let mut previous_cjk: Option<String> = None;
                words(text, |word, cjk| {
                    if cjk {
                        if let Some(prev) = previous_cjk.take() {
                            out.push(format!("{prev}{word}"));
                        }
                        out.push(word.to_owned());
                        previous_cjk = Some(word.to_owned());
                        return;
                    }
                    previous_cjk = None;
                    if !expand {
                        out.extend(self.term(word));
                        return;
                    }
                    match cache.0.get(word) {
                        Some(terms) => out.extend_from_slice(terms),
                        None => {
                            let terms = self.word_terms(word);
                            out.extend_from_slice(&terms);
                            cache.0.insert(word.to_owned(), terms);
                        }
                    }
                });
            }
        }
        out
    }

    /// The terms of one word: its term, or the terms of its expansion when it is a known
    /// abbreviation (`PRs` → `pull`, `request`), so both spellings meet in the index.
    fn word_terms(&self, word: &str) -> Vec<String> {
        let Some(term) = self.term(word) else {
            return Vec::new();
        };
        let lower = word.to_lowercase();
        let singular = lower.strip_suffix('s').unwrap_or(&lower);
        match self
            .abbreviations
            .get(&lower)
            .or_else(|| self.abbreviations.get(singular))
        {
            Some(expansion) => expansion.clone(),
            None => vec![term],
        }
    }

    /// One word as a term: lower-cased and stemmed, or `None` for a stop word. Abbreviations
    /// are not expanded here.
    pub(crate) fn term(&self, word: &str) -> Option<String> {
        let lower = word.to_lowercase();
        if self.mode == Analysis::Plain {
            return Some(lower);
        }
        if STOP_WORDS.binary_search(&lower.as_str()).is_ok() {
            return None;
        }
        if lower.chars().any(|c| c.is_ascii_digit()) {
            return Some(lower);
        }
        Some(self.stemmer.stem(&lower).into_owned())
    }
}

/// The first sentence (or line) of `text`, cut at a word boundary to at most `max` characters
/// (an ellipsis marks a cut).
#[must_use]
pub fn one_line(text: &str, max: usize) -> String {
    let text = text.trim();
    let mut end = text.find('\n').unwrap_or(text.len());
    if let Some(dot) = text[..end].find(". ") {
        end = dot + 1;
    }
    let line = text[..end].trim();
    if line.chars().count() <= max {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    if let Some(space) = cut.rfind(' ') {
        if space > max / 2 {
            cut.truncate(space);
        }
    }
    format!("{}…", cut.trim_end_matches([',', ';', ':', ' ']))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        words(text, |w, _| out.push(w.to_owned()));
        out
    }

    #[test]
    fn stop_words_are_sorted() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
    }

    #[test]
    fn splits_case_styles() {
        assert_eq!(split("get_file_info"), ["get", "file", "info"]);
        assert_eq!(
            split("search-museum-objects"),
            ["search", "museum", "objects"]
        );
        assert_eq!(split("getFileInfo"), ["get", "File", "Info"]);
        assert_eq!(split("HTMLParser v2"), ["HTML", "Parser", "v2"]);
        assert_eq!(split("open PRs"), ["open", "PRs"]);
        assert_eq!(split("查询车票 now"), ["查", "询", "车", "票", "now"]);
    }

    #[test]
    fn full_analysis_stems_and_drops_stop_words() {
        let a = Analyzer::new(Analysis::Full);
        assert_eq!(a.terms("Listing the Directories"), ["list", "directori"]);
        assert_eq!(a.terms("车票"), ["车", "车票", "票"]);
        assert_eq!(
            a.terms("open PRs in the repo"),
            ["open", "pull", "request", "repositori"]
        );
        assert_eq!(a.terms("list_pull_requests"), ["list", "pull", "request"]);
        let plain = Analyzer::new(Analysis::Plain);
        assert_eq!(
            plain.terms("get_file_info the"),
            ["get", "file", "info", "the"]
        );
    }
}
