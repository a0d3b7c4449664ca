#![allow(clippy::unwrap_used)]

use super::*;
use proptest::prelude::*;

const K1: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8";

fn claims() -> Claims {
    let mut c = Claims::new("alice", "2025-11-25", 1_000, 1_800);
    c.client_capabilities = serde_json::json!({"sampling": {}, "roots": {"listChanged": true}});
    c.client_info = serde_json::json!({"name": "py", "version": "1.0"});
    c.log_level = Some("debug".into());
    c
}

#[test]
fn a_sealed_id_opens_to_the_same_claims_until_it_expires() {
    let sealer = Sealer::from_text(K1).unwrap();
    let c = claims();
    let id = sealer.seal(&c).unwrap();
    assert!(id.starts_with(PREFIX));
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    assert_eq!(sealer.open(&id, 1_000).unwrap(), c);
    assert_eq!(sealer.open(&id, 2_799).unwrap(), c);
    assert_eq!(sealer.open(&id, 2_800), Err(SealError::Expired(2_800)));
}

#[test]
fn the_same_claims_seal_to_different_ids() {
    let sealer = Sealer::from_text(K1).unwrap();
    let c = claims();
    assert_ne!(sealer.seal(&c).unwrap(), sealer.seal(&c).unwrap());
}

#[test]
fn rotation_opens_old_ids_and_seals_with_the_first_key() {
    let old = Sealer::from_text(K1).unwrap();
    let rotated = Sealer::from_text(&format!("{K2}, {K1}")).unwrap();
    let by_old = old.seal(&claims()).unwrap();
    assert_eq!(rotated.open(&by_old, 1_500).unwrap().principal, "alice");
    let by_new = rotated.seal(&claims()).unwrap();
    assert_eq!(old.open(&by_new, 1_500), Err(SealError::UnknownKey));
    assert_ne!(old.sealing_key_id(), rotated.sealing_key_id());
    assert_eq!(rotated.sealing_key_id().len(), 8);
}

#[test]
fn a_key_id_swapped_to_another_key_does_not_authenticate() {
    let both = Sealer::from_text(&format!("{K1}\n{K2}")).unwrap();
    let id = both.seal(&claims()).unwrap();
    let mut raw = URL_SAFE_NO_PAD.decode(&id[PREFIX.len()..]).unwrap();
    raw[..KEY_ID_BYTES].copy_from_slice(&both.keys[1].id);
    let swapped = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw));
    assert_eq!(both.open(&swapped, 1_500), Err(SealError::Forged));
}

#[test]
fn ids_that_are_not_ours_are_malformed() {
    let sealer = Sealer::from_text(K1).unwrap();
    for id in [
        "",
        "s1.",
        "s1.!!!",
        "0f6e1c2a-uuid-like",
        "s2.AAAA",
        "s1.AAAA",
    ] {
        assert_eq!(sealer.open(id, 0), Err(SealError::Malformed), "{id:?}");
    }
    let huge = format!("{PREFIX}{}", "A".repeat(MAX_TOKEN_BYTES));
    assert_eq!(sealer.open(&huge, 0), Err(SealError::Malformed));
}

#[test]
fn bad_keys_say_which_and_how_to_make_one() {
    let none = Sealer::from_text(" , ").unwrap_err();
    assert!(matches!(none, SealError::BadKey { index: 1, .. }), "{none}");
    let short = Sealer::from_text(&format!("{K1},AAAA")).unwrap_err();
    assert_eq!(
        short,
        SealError::BadKey {
            index: 2,
            reason: "3 bytes, not 32".into()
        }
    );
    assert!(short.to_string().contains("openssl rand -base64 32"));
    assert!(matches!(
        Sealer::from_text("not base64 at all!").unwrap_err(),
        SealError::BadKey { index: 1, .. }
    ));
}

#[test]
fn claims_too_large_for_a_header_are_refused() {
    let sealer = Sealer::from_text(K1).unwrap();
    let mut c = claims();
    c.client_info = serde_json::json!({"name": "x".repeat(MAX_TOKEN_BYTES)});
    assert!(matches!(sealer.seal(&c), Err(SealError::TooLarge(n)) if n > MAX_TOKEN_BYTES));
}

#[test]
fn debug_shows_key_ids_not_keys() {
    let sealer = Sealer::from_text(K1).unwrap();
    let shown = format!("{sealer:?}");
    assert!(shown.contains(&sealer.sealing_key_id()));
    assert!(!shown.contains(K1) && !shown.contains("AAECAw"), "{shown}");
}

proptest! {
    /// Any change to any byte of the token's body is refused.
    #[test]
    fn any_altered_byte_is_refused(at in 0usize..10_000, bit in 0u8..8) {
        let sealer = Sealer::from_text(K1).unwrap();
        let id = sealer.seal(&claims()).unwrap();
        let mut raw = URL_SAFE_NO_PAD.decode(&id[PREFIX.len()..]).unwrap();
        let at = at % raw.len();
        raw[at] ^= 1 << bit;
        let altered = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(raw));
        let opened = sealer.open(&altered, 1_500);
        prop_assert!(
            matches!(opened, Err(SealError::Forged | SealError::UnknownKey)),
            "{opened:?}"
        );
    }

    /// Whatever the claims hold, they come back unchanged.
    #[test]
    fn claims_round_trip(principal in "\\PC{0,40}", version in "[0-9-]{0,12}", level in proptest::option::of("[a-z]{1,9}"), life in 1u64..1_000_000) {
        let sealer = Sealer::from_text(K2).unwrap();
        let mut c = Claims::new(&principal, &version, 10, life);
        c.log_level = level;
        let id = sealer.seal(&c).unwrap();
        prop_assert_eq!(sealer.open(&id, 10).unwrap(), c);
    }
}
