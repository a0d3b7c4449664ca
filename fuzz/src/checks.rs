//! What must hold for any input at the gateway's doors: one function per fuzz target, each
//! panicking when an invariant breaks (a panic is what the fuzzer reports as a crash).
//!
//! Shared by the AFL++ targets (`fuzz/src/bin/*.rs`) and the property tests of the main crate
//! (`tests/it/fuzz_props.rs` includes this file), so a regression found by either shows in both.
//! Where a reference exists (serde), the gateway's reading is compared with it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use mcp_budget::catalog::CatalogTool;
use mcp_budget::fuzzing::{self as entry, StdioLine};
use mcp_budget::jsonrpc::{DecodeError, Id, IdScanner, Kind, Message, RawNumber};
use mcp_budget::mcp::meta::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
use mcp_budget::mcp::modern::{
    MirroredHeaders, check_envelope, check_headers, decode_header_value, encode_header_value,
    request_meta, target_name,
};
use mcp_budget::mcp::params::{check_param_headers, marked, param_headers};
use mcp_budget::plan;
use mcp_budget::policy::{ConfigError, Policy, Transport};
use mcp_budget::tokens::{Bpe, Counter, Encoding, Tokenizer};
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, ReadBuf};

/// Longest id (bytes of JSON text) that the checks expect [`IdScanner`] to keep; it keeps up to
/// 256, so a shorter bound leaves room for whitespace around the value.
const SHORT_ID: usize = 128;

/// Target `message`: a client message as the HTTP body path decodes it
/// ([`Message::parse`]), compared with serde's reading of the same bytes.
pub fn message(data: &[u8]) {
    let parsed = Message::parse(data);
    let value = serde_json::from_slice::<Value>(data);
    let reference = match &value {
        Err(e) if beyond_value(e) => None,
        other => Some(other.as_ref().ok()),
    };
    match &parsed {
        Ok(msg) => {
            if let Some(value) = reference {
                let value = value.expect("a decoded message is valid JSON");
                assert!(value.is_object(), "a decoded message is a JSON object");
                assert!(
                    same_id(msg.id.as_ref(), id_of(value).as_ref()),
                    "the id is the one serde reads: {:?} against {:?}",
                    msg.id,
                    id_of(value)
                );
                assert_eq!(msg.method(), value.get("method").and_then(Value::as_str));
            }
            let bytes = msg.to_bytes();
            let again = Message::parse(&bytes).expect("an encoded message decodes");
            assert_eq!(again.kind(), msg.kind());
            assert_eq!(again.id, msg.id);
            assert_eq!(again.method, msg.method);
            assert_eq!(raw(again.params.as_deref()), raw(msg.params.as_deref()));
            assert_eq!(raw(again.result.as_deref()), raw(msg.result.as_deref()));
            assert_eq!(again.to_bytes(), bytes, "encoding is stable");
            if msg.kind() == Kind::Request {
                assert!(
                    !matches!(msg.id, Some(Id::Null)),
                    "a request id is never null"
                );
            }
        }
        Err(err) => {
            let reply = err.to_response();
            let again = Message::parse(&reply.to_bytes()).expect("an error reply decodes");
            assert_eq!(again.kind(), Kind::Error);
            let kind = again
                .error
                .as_ref()
                .and_then(|e| e.kind())
                .unwrap_or_default();
            assert!(
                kind.starts_with("mcp_budget.request."),
                "stable data.type: {kind}"
            );
            if let Some(value) = reference {
                match (err, value) {
                    (DecodeError::Parse(_), None) => {}
                    (DecodeError::Batch, Some(Value::Array(_))) => {}
                    (DecodeError::Invalid { id, .. }, Some(value)) if !value.is_array() => {
                        assert_eq!(*id, id_of(value), "an invalid message keeps its id");
                    }
                    (err, value) => panic!("{err} for input serde reads as {value:?}"),
                }
            }
        }
    }
}

/// Whether serde's `Value` refused JSON that the grammar allows (RFC 8259): deeper than 128
/// levels, a lone surrogate escape (`"\ud800"`), a number beyond `f64` (`1e400`). The raw
/// payloads of a [`Message`] carry such text as is, so `Value` is no reference for it.
fn beyond_value(err: &serde_json::Error) -> bool {
    let text = err.to_string();
    [
        "recursion limit exceeded",
        "lone leading surrogate in hex escape",
        // Also `"\ud800\x"` (invalid): such input goes unchecked here.
        "unexpected end of hex escape",
        "invalid unicode code point",
        "number out of range",
    ]
    .iter()
    .any(|m| text.starts_with(m))
}

/// The id serde reads from a decoded JSON value (`None` when absent or not an id).
/// Whether the decoder's id is serde's: equal, or the same number spelled as serde's `Value`
/// spells it (the decoder keeps an id's text, `1e0`; a `Value` re-spells its float, `1.0`).
fn same_id(decoded: Option<&Id>, serde: Option<&Id>) -> bool {
    let number = |raw: &RawNumber| serde_json::from_str::<Value>(raw.as_str()).ok();
    match (decoded, serde) {
        (Some(Id::RawNumber(a)), Some(Id::RawNumber(b))) => number(a) == number(b),
        (a, b) => a == b,
    }
}

fn id_of(value: &Value) -> Option<Id> {
    value.get("id").and_then(|id| Id::deserialize(id).ok())
}

fn raw(value: Option<&RawValue>) -> Option<&str> {
    value.map(RawValue::get)
}

/// Splits fuzz input into a chunk plan and a payload: the first byte says how many of the next
/// bytes (0–7) are chunk sizes, each 1–64 bytes; no plan means one chunk.
#[must_use]
pub fn split_plan(data: &[u8]) -> (Vec<usize>, &[u8]) {
    let Some((&n, rest)) = data.split_first() else {
        return (Vec::new(), data);
    };
    let (sizes, payload) = rest.split_at(usize::from(n % 8).min(rest.len()));
    (
        sizes.iter().map(|&b| usize::from(b % 64) + 1).collect(),
        payload,
    )
}

/// The pieces of `data` cut as `sizes` says (cycling; one piece when `sizes` is empty).
fn pieces<'a>(data: &'a [u8], sizes: &'a [usize]) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = data;
    let mut next = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let size = sizes
            .get(next % sizes.len().max(1))
            .copied()
            .unwrap_or(rest.len());
        next += 1;
        let (piece, tail) = rest.split_at(size.clamp(1, rest.len()));
        rest = tail;
        Some(piece)
    })
}

fn scan<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Option<Id> {
    let mut scanner = IdScanner::default();
    for chunk in chunks {
        scanner.feed(chunk);
    }
    scanner.id()
}

/// Target `id_scanner`: the first byte and the chunk plan, then the bytes of a message.
pub fn id_scanner(data: &[u8]) {
    let (sizes, payload) = split_plan(data);
    check_id_scanner(payload, &sizes);
}

/// [`IdScanner`] fed `payload` in the pieces `sizes` cuts reads what it reads in one piece, and
/// the id serde reads wherever serde is a fair reference.
pub fn check_id_scanner(payload: &[u8], sizes: &[usize]) {
    let whole = scan([payload]);
    assert_eq!(
        scan(pieces(payload, sizes)),
        whole,
        "chunking changes the id"
    );
    if let Some(expected) = reference_id(payload) {
        if payload.len() <= SHORT_ID {
            assert_eq!(whole, expected, "the scanner and serde disagree");
        } else if whole.is_some() {
            // A long id may be given up on; a wrong one is never read.
            assert_eq!(whole, expected, "the scanner read a wrong id");
        }
    }
    // The same object written compactly: the scanner reads its id whenever it is short.
    if let Ok(value @ Value::Object(_)) = serde_json::from_slice::<Value>(payload) {
        let text = serde_json::to_vec(&value).expect("a value serializes");
        let id_len = value.get("id").map_or(0, |id| id.to_string().len());
        if id_len <= SHORT_ID {
            assert_eq!(scan(pieces(&text, sizes)), id_of(&value), "compact form");
        }
    }
}

/// The top-level id serde reads from `payload`: `None` when serde is no fair reference (not
/// JSON, a repeated `id`, an `id` key written with escapes, which the scanner never takes).
fn reference_id(payload: &[u8]) -> Option<Option<Id>> {
    match serde_json::from_slice::<Members>(payload) {
        Ok(Members(members)) => {
            let ids: Vec<_> = members.iter().filter(|(k, _, _)| k == "id").collect();
            if ids.iter().any(|(_, escaped, _)| *escaped) || ids.len() > 1 {
                return None;
            }
            Some(
                ids.first()
                    .and_then(|(_, _, raw)| serde_json::from_str::<Id>(raw.get()).ok()),
            )
        }
        // Valid JSON but not an object: no id.
        Err(_) => match serde_json::from_slice::<Value>(payload) {
            Ok(value) if !value.is_object() => Some(None),
            _ => None,
        },
    }
}

/// The top-level members of a JSON object, in order: key, whether the key was written with
/// escapes, raw value.
struct Members(Vec<(String, bool, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut members = Vec::new();
                while let Some(Key(key, escaped)) = map.next_key()? {
                    members.push((key, escaped, map.next_value()?));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(V)
    }
}

/// An object key; `true` when serde had to unescape it (it could not borrow the input).
struct Key(String, bool);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key, E> {
                Ok(Key(v.to_owned(), false))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_owned(), true))
            }
        }
        d.deserialize_str(V)
    }
}

/// An input that hands out its bytes in the pieces of a plan, and says "not yet" before each
/// piece, as a pipe does.
struct Chunked<'a> {
    rest: &'a [u8],
    sizes: &'a [usize],
    next: usize,
    ready: bool,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !std::mem::replace(&mut this.ready, false) {
            this.ready = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let size = match this.sizes.len() {
            0 => this.rest.len(),
            n => this.sizes[this.next % n],
        };
        this.next += 1;
        let n = size.min(this.rest.len()).min(buf.remaining());
        buf.put_slice(&this.rest[..n]);
        this.rest = &this.rest[n..];
        Poll::Ready(Ok(()))
    }
}

/// Target `stdio_lines`: a byte for the line limit (1–256), a byte for the read buffer
/// (1–64), the chunk plan, then the bytes a client writes on stdin.
pub fn stdio_lines(data: &[u8]) {
    let [limit, capacity, rest @ ..] = data else {
        return;
    };
    let (sizes, payload) = split_plan(rest);
    check_stdio_lines(
        payload,
        &sizes,
        usize::from(*capacity % 64) + 1,
        usize::from(*limit) + 1,
    );
}

/// The stdio line reader, fed `payload` in the pieces `sizes` cuts through a buffer of
/// `capacity`, reads every line as a plain split on `\n` does: lines up to `limit` bytes kept
/// whole, longer ones refused with their length and the id found in them.
pub fn check_stdio_lines(payload: &[u8], sizes: &[usize], capacity: usize, limit: usize) {
    let input = Chunked {
        rest: payload,
        sizes,
        next: 0,
        ready: false,
    };
    let read = futures::executor::block_on(entry::stdio_lines(input, capacity, limit))
        .expect("reading from memory cannot fail");
    let expected: Vec<StdioLine> = payload
        .split_inclusive(|&b| b == b'\n')
        .map(|line| {
            let size = line.len() - usize::from(line.ends_with(b"\n"));
            if size <= limit {
                StdioLine::Kept(line.to_vec())
            } else {
                StdioLine::TooLarge {
                    size,
                    id: scan([line]),
                }
            }
        })
        .collect();
    assert_eq!(
        read, expected,
        "limit {limit}, capacity {capacity}, chunks {sizes:?}"
    );
}

/// Target `modern`: fields split by NUL bytes — a message (or bare `params`), then the
/// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers.
pub fn modern(data: &[u8]) {
    let mut fields = data.split(|&b| b == 0);
    let body = fields.next().unwrap_or_default();
    let headers: Vec<String> = fields
        .take(3)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let header = |i: usize| headers.get(i).map(String::as_str);
    for value in &headers {
        check_header_codec(value);
    }
    let msg = match Message::parse(body) {
        Ok(msg) => msg,
        Err(_) => match serde_json::from_slice::<Box<RawValue>>(body) {
            // Bare params: a request for the method the header names.
            Ok(params) => {
                let method = header(1).filter(|m| !m.is_empty()).unwrap_or("tools/call");
                Message::request(Id::Number(1), method, Some(params))
            }
            Err(_) => return,
        },
    };
    let fuzzed = MirroredHeaders {
        protocol_version: header(0),
        method: header(1),
        name: header(2),
    };
    check_modern(&msg, fuzzed);
}

/// The modern `_meta` and header checks agree with each other and with the body:
/// a valid envelope makes a modern request, the headers a client derives from the body pass,
/// and headers that pass mirror the body.
pub fn check_modern(msg: &Message, fuzzed: MirroredHeaders<'_>) {
    let params: Option<Value> = msg.params_as().ok();
    let meta = request_meta(msg);
    let envelope = check_envelope(msg);
    if let Err(err) = &envelope {
        assert_eq!(err.code, mcp_budget::jsonrpc::INVALID_PARAMS);
        assert_eq!(
            err.kind().as_deref(),
            Some("mcp_budget.protocol.invalid_envelope")
        );
    }
    let declared = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    // `request_meta` does not look for a key spelled with `\u` escapes (it would parse every
    // params with one): only there may a valid envelope go unseen.
    let spelled_plainly = !raw(msg.params.as_deref())
        .unwrap_or_default()
        .contains("\\u");
    if envelope.is_ok() && spelled_plainly {
        assert!(meta.is_some(), "a valid envelope is a modern request");
    }
    let Some(meta) = meta else {
        return;
    };
    if params.is_some() {
        assert_eq!(Some(meta.protocol_version.as_str()), declared);
    }
    let has_capabilities = params
        .as_ref()
        .and_then(|p| p.get("_meta"))
        .is_some_and(|m| m.get(META_CLIENT_CAPABILITIES).is_some());
    assert_eq!(envelope.is_ok(), has_capabilities, "{envelope:?}");
    let method = msg.method().unwrap_or_default();
    let target = params.as_ref().and_then(|p| target_name(method, p));
    if let Some(target) = &target {
        check_header_codec(target);
    }
    let encoded = target.as_deref().map(encode_header_value);
    let own = MirroredHeaders {
        protocol_version: Some(&meta.protocol_version),
        method: Some(method),
        name: encoded.as_deref(),
    };
    if let Err(err) = check_headers(msg, &meta, own) {
        panic!("headers derived from the body are refused: {}", err.message);
    }
    match check_headers(msg, &meta, fuzzed) {
        Ok(()) => {
            assert_eq!(
                fuzzed.protocol_version,
                Some(meta.protocol_version.as_str())
            );
            assert_eq!(fuzzed.method, Some(method));
            if let Some(target) = &target {
                let name = fuzzed.name.map(decode_header_value);
                assert_eq!(name, Some(Ok(target.clone())), "Mcp-Name mirrors the body");
            }
        }
        Err(err) => assert_eq!(err.code, mcp_budget::jsonrpc::code::HEADER_MISMATCH),
    }
}

/// A header value the gateway writes is a valid HTTP header value, survives the whitespace
/// trimming HTTP applies to field values (RFC 9110 §5.5), and reads back as itself.
fn check_header_codec(value: &str) {
    let _ = decode_header_value(value);
    let encoded = encode_header_value(value);
    assert!(
        http::HeaderValue::from_str(&encoded).is_ok(),
        "{encoded:?} is not a header value"
    );
    assert_eq!(
        encoded.trim_matches([' ', '\t']),
        encoded,
        "HTTP would trim it"
    );
    assert_eq!(decode_header_value(&encoded).as_deref(), Ok(value));
}

/// Target `param_headers`: fields split by NUL bytes — a tool's `inputSchema`, the call's
/// `arguments`, then `name: value` header lines.
pub fn param_headers_target(data: &[u8]) {
    let mut fields = data.split(|&b| b == 0);
    let Ok(schema) = serde_json::from_slice::<Value>(fields.next().unwrap_or_default()) else {
        return;
    };
    let arguments = fields
        .next()
        .and_then(|f| serde_json::from_slice::<Value>(f).ok())
        .unwrap_or(Value::Null);
    let lines = String::from_utf8_lossy(fields.next().unwrap_or_default()).into_owned();
    let headers: Vec<(String, String)> = lines
        .lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.to_owned()))
        .collect();
    check_param_headers_for(&schema, &arguments, &headers);
}

/// `Mcp-Param-*`: what a client emits for a call is valid HTTP and passes the gateway's own
/// check; any other headers (lower-case names) are judged without a panic, and only with
/// `-32020`.
pub fn check_param_headers_for(schema: &Value, arguments: &Value, headers: &[(String, String)]) {
    let marks = marked(schema);
    let mut tokens: Vec<String> = Vec::new();
    for m in &marks {
        assert!(!m.path.is_empty(), "the root is never marked");
        assert!(matches!(m.kind.as_str(), "string" | "integer" | "boolean"));
        let lower = m.token.to_ascii_lowercase();
        assert!(!tokens.contains(&lower), "a header is marked once");
        tokens.push(lower);
    }
    let emitted = param_headers(&marks, arguments);
    for (name, value) in &emitted {
        assert!(
            http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
            "{name:?}"
        );
        assert!(http::HeaderValue::from_str(value).is_ok(), "{value:?}");
    }
    if let Err(err) = check_param_headers(&marks, arguments, |n| values_of(&emitted, n)) {
        panic!("emitted headers are refused: {} ({emitted:?})", err.message);
    }
    if let Err(err) = check_param_headers(&marks, arguments, |n| values_of(headers, n)) {
        assert_eq!(err.code, mcp_budget::jsonrpc::code::HEADER_MISMATCH);
    }
}

/// Every value of the header `name` in `headers`.
fn values_of<'h>(headers: &'h [(String, String)], name: &str) -> Vec<&'h str> {
    headers
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Loads what the checks share once per process (the tokenizers' tables, tens of milliseconds
/// each): the AFL++ binaries call it before the fork server starts, or the first input of
/// every fork pays for it and may pass for a hang.
pub fn warm_up() {
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        let _ = Bpe::new(encoding).count("warm up");
    }
}

/// Target `policy`: a TOML policy file, loaded and validated as `mcp-budget check` does.
pub fn policy(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Policy::from_toml_str(text, "fuzz.toml") {
        Ok(policy) => check_loaded(&policy),
        Err(err) => check_config_error(&err),
    }
}

/// What a valid policy promises the rest of the gateway.
fn check_loaded(policy: &Policy) {
    let mut names: Vec<&str> = policy.upstreams.iter().map(|u| u.name.as_str()).collect();
    for name in &names {
        assert!(is_server_id(name), "{name:?} passed validation");
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        policy.upstreams.len(),
        "upstream names are unique"
    );
    assert!(policy.downstream.max_message_bytes > 0);
    for u in &policy.upstreams {
        assert!(!u.timeout.is_zero());
        if let Transport::Stdio { command, .. } = &u.transport {
            assert!(!command.trim().is_empty());
        }
    }
    // What the first `tools/list` computes from the policy must not fail: the budget, and the
    // plan of a one-tool catalog counted with the policy's profile.
    let budget = policy.budget.budget();
    let tool = json!({"name": "get_time", "description": "Gets the time in a zone.",
        "inputSchema": {"type": "object", "properties": {"tz": {"type": "string"}}}});
    let catalog = [CatalogTool::new("server", tool).expect("a valid tool")];
    let counter = Counter::new(&policy.budget.profile);
    let rules = policy
        .budget
        .rules(&catalog, &policy.separator, &policy.discover);
    let measured = plan::measure(&counter, &catalog, &rules);
    let plan = plan::plan(&catalog, &measured, &rules);
    assert!(
        plan.exposed_count() <= catalog.len(),
        "{plan:?} for {budget:?}"
    );
    let _ = policy.budget.rule("server", "tool");
    for pattern in &policy.discover.never_defer {
        let _ = pattern.matches("server__tool");
    }
}

fn is_server_id(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn check_config_error(err: &ConfigError) {
    assert!(!err.to_string().is_empty());
    if let ConfigError::Invalid { problems, .. } = err {
        assert!(!problems.is_empty(), "an invalid policy names its problems");
    }
}

/// Target `mcp_json`: a Claude Desktop / Claude Code `mcpServers` JSON file.
pub fn mcp_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match entry::mcp_json(text) {
        Ok(specs) => {
            for spec in &specs {
                assert!(is_server_id(&spec.name), "{:?} was imported", spec.name);
            }
        }
        Err(err) => check_config_error(&err),
    }
}
