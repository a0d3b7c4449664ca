//! Unit tests of the header checks.

use axum::http::HeaderValue;

use super::*;

/// Whether `text` as a `Host` header names localhost.
fn local(text: &str) -> bool {
    parse_authority(text).is_some_and(|(host, _)| is_local_host(host))
}

#[test]
fn local_hosts_pass_and_foreign_ones_do_not() {
    for h in [
        "localhost",
        "LocalHost:8931",
        "127.0.0.1:1",
        "[::1]:80",
        "[::1]",
        "[0:0:0:0:0:0:0:1]:8931",
    ] {
        assert!(local(h), "{h}");
    }
    for h in [
        "evil.example.com",
        "localhost.evil.com:80",
        "127.0.0.2",
        "[::2]",
    ] {
        assert!(!local(h), "{h}");
    }
}

#[test]
fn a_host_is_an_authority_and_nothing_else() {
    assert_eq!(parse_authority("localhost"), Some(("localhost", None)));
    assert_eq!(
        parse_authority("a.b-c_d:65535"),
        Some(("a.b-c_d", Some(65535)))
    );
    assert_eq!(parse_authority("[::1]:8931"), Some(("[::1]", Some(8931))));
    for bad in [
        "",
        "127.0.0.1:80@evil.example",
        "user@localhost",
        "localhost:",
        "localhost:http",
        "localhost:65536",
        "localhost:123456",
        "localhost/mcp",
        "localhost:80/",
        "local host",
        "::1",
        "[::1",
        "[::1]x",
        "[::1]:",
        "[evil.example]",
        "localhost:80:81",
        "localhost?x",
        "localhost#x",
        "[::1]@evil",
    ] {
        assert_eq!(parse_authority(bad), None, "{bad:?}");
    }
}

#[test]
fn an_origin_is_scheme_host_port_and_nothing_else() {
    assert_eq!(
        parse_origin("http://localhost:3000"),
        Some(("http", "localhost", Some(3000)))
    );
    assert_eq!(
        parse_origin("https://[::1]"),
        Some(("https", "[::1]", None))
    );
    assert_eq!(
        parse_origin("vscode-webview://abc"),
        Some(("vscode-webview", "abc", None))
    );
    for bad in [
        "null",
        "",
        "localhost",
        "http://",
        "http://localhost/",
        "http://localhost:3000/x",
        "http://user@localhost",
        "http://127.0.0.1:80@evil.example",
        "1http://localhost",
        "http:/localhost",
    ] {
        assert_eq!(parse_origin(bad), None, "{bad:?}");
    }
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(*k, HeaderValue::from_str(v).unwrap());
    }
    h
}

fn status(result: Result<(), Box<Response>>) -> u16 {
    result.map_or_else(|r| r.status().as_u16(), |()| 200)
}

#[test]
fn host_and_origin_checks_give_400_for_malformed_and_403_for_foreign() {
    let config = HttpConfig::from(&crate::policy::Downstream {
        allowed_hosts: vec!["mcp.example.com".into()],
        allowed_origins: vec!["https://app.example.com".into()],
        ..crate::policy::Downstream::default()
    });
    let uri = axum::http::Uri::from_static("/mcp");
    let check =
        |pairs: &[(&'static str, &str)]| status(check_origin(&headers(pairs), &uri, &config));
    assert_eq!(check(&[("host", "localhost:8931")]), 200);
    assert_eq!(check(&[("host", "MCP.example.com:443")]), 200);
    assert_eq!(check(&[]), 400);
    assert_eq!(
        check(&[("host", "localhost"), ("host", "evil.example")]),
        400
    );
    assert_eq!(check(&[("host", "127.0.0.1:80@evil.example")]), 400);
    assert_eq!(check(&[("host", "evil.example")]), 403);
    let with_origin = |origin: &str| check(&[("host", "localhost"), ("origin", origin)]);
    assert_eq!(with_origin("http://localhost:5173"), 200);
    assert_eq!(with_origin("https://app.example.com"), 200);
    assert_eq!(with_origin("null"), 403);
    assert_eq!(with_origin("http://localhost.evil.com"), 403);
    assert_eq!(with_origin("http://localhost@evil.com"), 403);
    assert_eq!(with_origin("ftp://localhost"), 403);
    assert_eq!(
        check(&[
            ("host", "localhost"),
            ("origin", "http://localhost"),
            ("origin", "http://evil")
        ]),
        403
    );
    // An absolute-form request target names a host too.
    let absolute = axum::http::Uri::from_static("http://evil.example/mcp");
    assert_eq!(
        status(check_origin(
            &headers(&[("host", "localhost")]),
            &absolute,
            &config
        )),
        403
    );
}

#[test]
fn accept_lists_are_read_with_wildcards_and_q_zero() {
    let of = |v: &str| {
        let a = accepts(&headers(&[("accept", v)]));
        (a.json, a.sse)
    };
    assert_eq!(of("application/json, text/event-stream"), (true, true));
    assert_eq!(
        of("text/event-stream;q=0.9, Application/JSON"),
        (true, true)
    );
    assert_eq!(of("*/*"), (true, true));
    assert_eq!(of("application/*, text/*"), (true, true));
    assert_eq!(of("application/json"), (true, false));
    assert_eq!(of("text/event-stream"), (false, true));
    assert_eq!(
        of("application/json, text/event-stream; q=0"),
        (true, false)
    );
    assert_eq!(of("text/html"), (false, false));
    let two = accepts(&headers(&[
        ("accept", "application/json"),
        ("accept", "text/event-stream"),
    ]));
    assert!(two.json && two.sse);
    assert!(!accepts(&HeaderMap::new()).present);
}

#[test]
fn a_json_body_is_application_json_with_any_parameters() {
    let ok = |v: &str| is_json_body(&headers(&[("content-type", v)]));
    assert!(ok("application/json"));
    assert!(ok("Application/JSON; charset=utf-8"));
    assert!(ok(" application/json ;charset=UTF-8"));
    assert!(!ok("text/plain"));
    assert!(!ok("application/json-seq"));
    assert!(!ok("application/x-www-form-urlencoded"));
    assert!(!is_json_body(&HeaderMap::new()));
    assert!(!is_json_body(&headers(&[
        ("content-type", "application/json"),
        ("content-type", "text/plain"),
    ])));
}

fn accepting(v: &str) -> Accepts {
    accepts(&headers(&[("accept", v)]))
}

#[test]
fn a_post_is_answered_in_a_shape_its_accept_allows() {
    let both = accepting("application/json, text/event-stream");
    let json = accepting("application/json");
    let sse = accepting("text/event-stream");
    let none = Accepts::default();
    let html = accepting("text/html");
    for strict in [false, true] {
        assert_eq!(
            reply_shape(both, strict, || unreachable!()),
            Some(Shape::JsonOrSse)
        );
        assert_eq!(reply_shape(html, strict, || true), None);
    }
    // Lenient (the default): either type, or none, in a shape the client reads; the era is not
    // asked.
    assert_eq!(
        reply_shape(json, false, || unreachable!()),
        Some(Shape::Json)
    );
    assert_eq!(reply_shape(sse, false, || unreachable!()), Some(Shape::Sse));
    assert_eq!(
        reply_shape(none, false, || unreachable!()),
        Some(Shape::Json)
    );
    // Strict: JSON only, or no Accept, only for a 2024-11-05 client.
    assert_eq!(reply_shape(json, true, || true), Some(Shape::Json));
    assert_eq!(reply_shape(json, true, || false), None);
    assert_eq!(reply_shape(none, true, || true), Some(Shape::Json));
    assert_eq!(reply_shape(none, true, || false), None);
    assert_eq!(reply_shape(sse, true, || true), None);
}

fn message(json: &str) -> Message {
    Message::parse(json.as_bytes()).unwrap()
}

#[test]
fn the_era_of_an_initialize_is_read_from_its_header_or_params() {
    let init = |version: &str| {
        message(&format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}"}}}}"#
        ))
    };
    let none = HeaderMap::new();
    assert_eq!(http_sse_era_of(&none, &init("2024-11-05")), Some(true));
    assert_eq!(http_sse_era_of(&none, &init("2025-06-18")), Some(false));
    let old = headers(&[("mcp-protocol-version", "2024-11-05")]);
    let ping = message(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(http_sse_era_of(&old, &ping), Some(true));
    // Neither says: the session decides.
    assert_eq!(http_sse_era_of(&none, &ping), None);
}

const MODERN_CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a__b","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

#[test]
fn the_era_of_a_post_is_decided_once() {
    let post_era =
        |m: &Message, h: &HeaderMap| post_era(m, &view_of(m, h), h).map_err(|(id, e)| (id, e.code));
    let none = HeaderMap::new();
    let init = message(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
    assert_eq!(post_era(&init, &none), Ok(PostEra::Initialize));
    let in_session = headers(&[("mcp-session-id", "abc")]);
    let call = message(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#);
    assert_eq!(post_era(&call, &in_session), Ok(PostEra::Session));
    assert_eq!(post_era(&call, &none), Ok(PostEra::Session));
    let modern = message(MODERN_CALL);
    let mirrored = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "a__b"),
    ]);
    assert_eq!(post_era(&modern, &mirrored), Ok(PostEra::Modern));
    // A session header makes it a 2025-era message whatever its `_meta`.
    assert_eq!(post_era(&modern, &in_session), Ok(PostEra::Session));
}

#[test]
fn a_modern_post_that_fails_a_check_gets_its_error_with_its_id() {
    let code = |msg: &Message, h: &HeaderMap| {
        post_era(msg, &view_of(msg, h), h).map_err(|(id, e)| (id, e.code))
    };
    let modern = message(MODERN_CALL);
    let mismatch = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
        ("mcp-name", "a__b"),
    ]);
    assert_eq!(
        code(&modern, &mismatch),
        Err((Id::Number(7), crate::jsonrpc::code::HEADER_MISMATCH))
    );
    let unknown = headers(&[("mcp-protocol-version", "2099-01-01")]);
    let note = message(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(
        code(&note, &unknown),
        Err((Id::Null, crate::jsonrpc::code::UNSUPPORTED_VERSION))
    );
}
