use super::*;
use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::json;

const PRIVATE: &[u8] = include_bytes!("../../../tests/fixtures/jwt/es256-private.pem");
const OTHER: &[u8] = include_bytes!("../../../tests/fixtures/jwt/other-private.pem");
const JWKS: &str = include_str!("../../../tests/fixtures/jwt/jwks.json");

fn keys() -> JwkSet {
    serde_json::from_str(JWKS).expect("jwks")
}

fn rules() -> JwtRules {
    JwtRules {
        issuers: vec!["https://issuer.test".into()],
        audiences: vec!["https://gateway.test/mcp".into()],
        principal_claim: "sub".into(),
        leeway_secs: 30,
    }
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs(),
    )
    .expect("time fits")
}

fn mint(claims: &Value, pem: &[u8], kid: Option<&str>) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = kid.map(str::to_owned);
    encode(
        &header,
        claims,
        &EncodingKey::from_ec_pem(pem).expect("key"),
    )
    .expect("sign")
}

fn good_claims() -> Value {
    json!({
        "iss": "https://issuer.test",
        "aud": "https://gateway.test/mcp",
        "sub": "alice",
        "exp": now() + 300,
        "scope": "tools:read github:read",
    })
}

#[test]
fn a_good_token_names_its_principal_and_scopes() {
    let token = mint(&good_claims(), PRIVATE, Some("test-es256"));
    assert_eq!(
        verify(&token, &keys(), &rules()),
        Ok(Verified {
            principal: "alice".into(),
            scopes: vec!["tools:read".into(), "github:read".into()],
        })
    );
}

#[test]
fn scp_lists_are_scopes_too() {
    let mut claims = good_claims();
    claims.as_object_mut().expect("object").remove("scope");
    claims["scp"] = json!(["a", "b"]);
    let token = mint(&claims, PRIVATE, None);
    assert_eq!(
        verify(&token, &keys(), &rules()).map(|v| v.scopes),
        Ok(vec!["a".into(), "b".into()])
    );
}

#[test]
fn every_failed_check_says_which() {
    let cases: Vec<(&str, String)> = vec![
        ("expired", {
            let mut c = good_claims();
            c["exp"] = json!(now() - 120);
            mint(&c, PRIVATE, None)
        }),
        ("not valid yet", {
            let mut c = good_claims();
            c["nbf"] = json!(now() + 600);
            mint(&c, PRIVATE, None)
        }),
        ("another audience", {
            let mut c = good_claims();
            c["aud"] = json!("https://elsewhere.test");
            mint(&c, PRIVATE, None)
        }),
        ("another issuer", {
            let mut c = good_claims();
            c["iss"] = json!("https://evil.test");
            mint(&c, PRIVATE, None)
        }),
        ("signature", mint(&good_claims(), OTHER, None)),
        (
            "no key with kid",
            mint(&good_claims(), PRIVATE, Some("nope")),
        ),
        ("no \"sub\" claim", {
            let mut c = good_claims();
            c.as_object_mut().expect("object").remove("sub");
            mint(&c, PRIVATE, None)
        }),
        ("not a JWT", "garbage".to_owned()),
    ];
    for (want, token) in cases {
        let got = verify(&token, &keys(), &rules()).expect_err(want);
        assert!(got.to_string().contains(want), "{want}: {got}");
    }
}

#[test]
fn leeway_forgives_small_clock_skew() {
    let mut c = good_claims();
    c["exp"] = json!(now() - 10);
    let token = mint(&c, PRIVATE, None);
    // 10 s past `exp` is within the 30 s leeway: accepted, with its principal and scopes.
    assert_eq!(
        verify(&token, &keys(), &rules()),
        Ok(Verified {
            principal: "alice".into(),
            scopes: vec!["tools:read".into(), "github:read".into()],
        })
    );
}

#[test]
fn a_symmetric_algorithm_is_refused_before_any_key_is_used() {
    // The classic confusion: sign with HS256 using the public key's bytes as the secret.
    let token = encode(
        &Header::new(Algorithm::HS256),
        &good_claims(),
        &EncodingKey::from_secret(JWKS.as_bytes()).expect("secret"),
    )
    .expect("sign");
    let got = verify(&token, &keys(), &rules()).expect_err("refused");
    assert!(got.to_string().contains("HS256"), "{got}");
}

#[test]
fn a_token_must_use_the_algorithm_its_key_is_marked_with() {
    let token = mint(&good_claims(), PRIVATE, Some("test-es256"));
    let mut pinned = keys();
    for key in &mut pinned.keys {
        key.common.key_algorithm = Some(KeyAlgorithm::ES384);
    }
    let err = verify(&token, &pinned, &rules()).unwrap_err();
    assert_eq!(
        err,
        JwtError::Invalid("the token's algorithm ES256 is not its key's (ES384)".into())
    );
    for key in &mut pinned.keys {
        key.common.key_algorithm = Some(KeyAlgorithm::ES256);
    }
    assert!(verify(&token, &pinned, &rules()).is_ok());
}
