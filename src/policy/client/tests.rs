use super::*;
use crate::authz::{Decision, Target};
use crate::identity::Credential;
use crate::policy::{ConfigError, Policy};
use serde_json::json;

fn load(text: &str) -> Result<Policy, ConfigError> {
    Policy::from_toml_str(&format!("version = 1\n{text}"), "test")
}

fn problems(text: &str) -> Vec<String> {
    match load(text) {
        Err(ConfigError::Invalid { problems, .. }) => problems
            .iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect(),
        Ok(_) => Vec::new(),
        Err(other) => vec![other.to_string()],
    }
}

const ISSUE_EXAMPLE: &str = r#"
[[client]]
name = "alice"
api_key_env = "ALICE_KEY"
allow = ["github/get_*", "github/list_*", "github/search_*", "time/*"]
deny = ["github/delete_*"]
model = "claude-haiku-4-5"

[[client.rule]]
tools = ["github/*"]
args.owner = { one_of = ["acme"] }
"#;

#[test]
fn the_issue_example_reads_as_written() {
    let policy = load(ISSUE_EXAMPLE).expect("valid");
    let alice = &policy.clients[0];
    assert_eq!(alice.name, "alice");
    assert_eq!(alice.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(alice.key, Some(KeySource::Env("ALICE_KEY".into())));
    let evil = json!({"owner": "evil"});
    assert!(matches!(
        alice.scope.check(Target::tool("github", "get_issue"), evil.as_object()),
        Decision::Deny { reason, .. } if reason == "argument owner='evil' not in [acme]"
    ));
    assert!(!alice.scope.may_see(Target::tool("github", "delete_repo")));

    let env = |name: &str| (name == "ALICE_KEY").then(|| "k-alice".to_owned());
    let dir = policy.directory_with(&env, None).expect("directory");
    let p = dir
        .authenticate(Credential::ApiKey("k-alice"))
        .expect("alice");
    assert_eq!(p.name(), "alice");
    let missing = policy.directory_with(&|_| None, None).expect_err("unset");
    assert!(
        missing.to_string().contains("ALICE_KEY is not set"),
        "{missing}"
    );
}

#[test]
fn every_mistake_in_one_run() {
    let got = problems(
        r#"
[downstream]
stdio_client = "carol"

[[client]]
name = "alice"
api_key_env = "A"
api_key_sha256 = "00"
allow = []
model = "no-such-model"

[[client]]
name = "alice"
api_key_sha256 = "xyz"
allow = ["*"]

[[client.rule]]
tools = []
args.owner = { pattern = "(", min = 5, max = 1 }
args.page = { optional = true }
"#,
    );
    let want = [
        "client[0].api_key_env: give api_key_env or api_key_sha256, not both",
        "client[0].allow: lists nothing",
        "client[0].model",
        "client[1].name: \"alice\" is already a client",
        "client[1].api_key_sha256: must be 64 hex digits",
        "client[1].rule[0].tools: must name at least one tool glob",
        "client[1].rule[0].args.owner.min: 5 is above max 1",
        "client[1].rule[0].args.owner.pattern: not a regular expression",
        "client[1].rule[0].args.page: constrains nothing",
        "downstream.stdio_client: \"carol\" is no [[client]] of this policy",
    ];
    for w in want {
        assert!(
            got.iter().any(|g| g.starts_with(w)),
            "missing {w:?} in {got:#?}"
        );
    }
}

#[test]
fn unknown_constraint_keys_are_refused() {
    let got = problems(
        "[[client]]\nname = \"a\"\nallow = [\"*\"]\n[[client.rule]]\ntools = [\"*\"]\nargs.x = { one_off = [1] }\n",
    );
    assert!(got.iter().any(|g| g.contains("one_off")), "{got:#?}");
}

#[test]
fn jwt_settings_need_an_audience_and_keys() {
    let got = problems("[auth.jwt]\nissuer = \"https://issuer.test\"\n");
    for w in ["auth.jwt.audience", "auth.jwt.jwks_file", "auth.resource"] {
        assert!(
            got.iter().any(|g| g.starts_with(w)),
            "missing {w} in {got:#?}"
        );
    }
    let jwks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jwt/jwks.json");
    let policy = load(&format!(
        "[auth]\nresource = \"https://gw.test/mcp\"\n[auth.jwt]\nissuer = [\"https://issuer.test\"]\njwks_file = {jwks:?}\n\
         [[client]]\nname = \"bob\"\nallow = [\"*\"]\n"
    ))
    .expect("valid");
    let jwt = policy.auth.jwt.as_ref().expect("jwt");
    assert_eq!(
        jwt.rules.audiences,
        ["https://gw.test/mcp"],
        "aud defaults to the resource"
    );
    assert_eq!(jwt.rules.principal_claim, "sub");
    assert!(policy.directory_with(&|_| None, None).is_ok());
}

#[test]
fn a_jwks_file_is_found_next_to_the_policy_and_checked_when_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jwt/jwks.json");
    std::fs::copy(jwks, dir.path().join("keys.json")).unwrap();
    let text = |file: &str| {
        format!(
            "version = 1\n[auth]\nresource = \"https://gw.test/mcp\"\n[auth.jwt]\n\
             issuer = [\"https://issuer.test\"]\njwks_file = {file:?}\n\
             [[client]]\nname = \"bob\"\nallow = [\"*\"]\n"
        )
    };
    // Relative to the policy's folder, not the working directory (the tests run elsewhere).
    let policy_file = dir.path().join("policy.toml");
    std::fs::write(&policy_file, text("keys.json")).unwrap();
    let policy = Policy::load(&policy_file).unwrap_or_else(|e| panic!("{e}"));
    let jwt = policy.auth.jwt.as_ref().unwrap();
    assert_eq!(jwt.jwks, JwksSource::File(dir.path().join("keys.json")));
    // A missing one is a problem with its line, found by `check`, not at `serve`.
    std::fs::write(&policy_file, text("missing.json")).unwrap();
    let err = Policy::load(&policy_file).unwrap_err().to_string();
    assert!(
        err.contains("line 6: auth.jwt.jwks_file: cannot read"),
        "{err}"
    );
}
