//! A token is the one credential a browser's socket presents, so anyone
//! can send anything as one: whatever text arrives is a grant only when
//! it is a token this server signed and that has not expired; anything
//! else is refused (`Invalid`, or `Expired` for a good signature past its
//! `exp`), never a panic. Claims of any shape signed with the secret (a
//! leaked secret, or a minting bug) are checked as strictly.
//!
//! `cargo test -p herenow-server --lib fuzz`; `PROPTEST_CASES=100000`
//! for a longer run.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use proptest::prelude::*;

use crate::fuzzing::cases;
use serde_json::{Value, json};

use super::*;

fn tokens() -> Tokens {
    Tokens::new(&b"fuzz".repeat(8))
}

fn member() -> impl Strategy<Value = MemberKey> {
    (any::<bool>(), "[^\\p{Cc}]{1,24}").prop_filter_map("a valid id", |(guest, id)| {
        let id = MemberId::new(&id).ok()?;
        Some(if guest {
            MemberKey::guest(id)
        } else {
            MemberKey::user(id)
        })
    })
}

fn spaces() -> impl Strategy<Value = Spaces> {
    prop_oneof![
        Just(Spaces::All),
        proptest::collection::vec("[A-Za-z0-9._:@-]{1,16}", 1..=MAX_TOKEN_SPACES)
            .prop_filter_map("valid names", |n| Spaces::parse(&n).ok()),
    ]
}

fn watch() -> impl Strategy<Value = WatchGrant> {
    prop_oneof![
        Just(WatchGrant::Friends),
        Just(WatchGrant::Any),
        Just(WatchGrant::None)
    ]
}

/// A claim's value: the right type mostly, anything sometimes.
fn claim(right: BoxedStrategy<Value>) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        6 => right.prop_map(Some),
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => any::<i64>().prop_map(|n| Some(json!(n))),
        1 => any::<f64>().prop_map(|f| Some(json!(f))),
        1 => any::<String>().prop_map(|s| Some(json!(s))),
        1 => Just(Some(json!({"a": [1]}))),
    ]
}

/// Claims of any shape around the real ones.
fn claims() -> impl Strategy<Value = Value> {
    let now = now_s() as i64;
    (
        claim("[^\\p{Cc}]{0,24}".prop_map(|s| json!(s)).boxed()),
        claim(
            proptest::sample::select(&["user", "guest", "admin", ""][..])
                .prop_map(|s| json!(s))
                .boxed(),
        ),
        claim(
            proptest::collection::vec(
                prop_oneof![
                    "[A-Za-z0-9._:@-]{1,12}".prop_map(|s| json!(s)),
                    Just(json!("*")),
                    any::<String>().prop_map(|s| json!(s)),
                    any::<i64>().prop_map(|n| json!(n)),
                ],
                0..40,
            )
            .prop_map(Value::Array)
            .boxed(),
        ),
        claim(
            proptest::sample::select(&["friends", "any", "none", "all"][..])
                .prop_map(|s| json!(s))
                .boxed(),
        ),
        claim(
            prop_oneof![
                (now - 100..now + 100_000).prop_map(|t| json!(t)),
                Just(json!(u64::MAX)),
                Just(json!(0)),
            ]
            .boxed(),
        ),
        claim((now - 100..now + 100).prop_map(|t| json!(t)).boxed()),
        claim(
            proptest::sample::select(&["herenow", "other", ""][..])
                .prop_map(|s| json!(s))
                .boxed(),
        ),
    )
        .prop_map(|(sub, kind, spaces, watch, exp, iat, iss)| {
            let mut o = serde_json::Map::new();
            for (k, v) in [
                ("sub", sub),
                ("kind", kind),
                ("spaces", spaces),
                ("watch", watch),
                ("exp", exp),
                ("iat", iat),
                ("iss", iss),
            ] {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            }
            Value::Object(o)
        })
}

/// A grant follows from `claims` only when every claim is as it must be.
fn grant_fits(g: &Grant, claims: &Value) -> bool {
    let kind = match claims.get("kind") {
        None => Some(MemberKind::User),
        Some(k) if k == "user" => Some(MemberKind::User),
        Some(k) if k == "guest" => Some(MemberKind::Guest),
        Some(_) => None,
    };
    claims["iss"] == ISSUER
        && claims["sub"] == g.member.id.as_str()
        && kind == Some(g.member.kind)
        && claims["exp"].as_u64() == Some(g.expires_at_s)
        && g.expires_at_s > now_s()
        && claims["spaces"].as_array().is_some_and(|a| {
            a.iter()
                .map(|s| s.as_str())
                .collect::<Option<Vec<_>>>()
                .and_then(|names| Spaces::parse(&names).ok())
                .as_ref()
                == Some(&g.spaces)
        })
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn fuzz_any_text_is_refused(text in any::<String>()) {
        prop_assert!(matches!(tokens().verify(&text), Err(TokenError::Invalid(_))));
    }

    /// Three dot-separated base64url parts of anything: refused.
    #[test]
    fn fuzz_jwt_shaped_text_is_refused(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 3),
        header in proptest::sample::select(&[
            r#"{"alg":"HS256","typ":"JWT"}"#, r#"{"alg":"none"}"#, r#"{"alg":"HS512"}"#,
            r#"{"alg":"RS256"}"#, "{}", "[]",
        ][..]),
    ) {
        let text = [header.as_bytes(), &parts[1], &parts[2]]
            .map(|p| URL_SAFE_NO_PAD.encode(p))
            .join(".");
        prop_assert!(matches!(tokens().verify(&text), Err(TokenError::Invalid(_))));
        let raw = parts.iter().map(|p| URL_SAFE_NO_PAD.encode(p)).collect::<Vec<_>>().join(".");
        prop_assert!(matches!(tokens().verify(&raw), Err(TokenError::Invalid(_))));
    }

    #[test]
    fn fuzz_minted_tokens_round_trip(
        member in member(),
        spaces in spaces(),
        watch in watch(),
        ttl in 1..=MAX_TTL_S,
    ) {
        let t = tokens();
        let iat = now_s();
        let token = t.mint_watching(&member, &spaces, watch, iat, ttl).unwrap();
        let g = t.verify(&token).unwrap();
        prop_assert_eq!(g, Grant { member, spaces, watch, expires_at_s: iat + ttl });
    }

    /// A token changed anywhere is refused, or (a change the encoding
    /// ignores) grants exactly what it did.
    #[test]
    fn fuzz_mutated_tokens_are_refused_or_unchanged(
        member in member(),
        spaces in spaces(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..4),
    ) {
        let t = tokens();
        let token = t.mint(&member, &spaces, now_s(), 600).unwrap();
        let before = t.verify(&token).unwrap();
        let mut bytes = token.into_bytes();
        for (at, b, how) in edits {
            let n = bytes.len();
            match how {
                0 => bytes[at % n] = b,
                1 => bytes.truncate(at % n),
                2 => bytes.insert(at % (n + 1), b),
                _ => {
                    bytes.remove(at % n);
                }
            }
            if bytes.is_empty() {
                break;
            }
        }
        match t.verify(&String::from_utf8_lossy(&bytes)) {
            Ok(g) => prop_assert_eq!(g, before),
            Err(e) => prop_assert!(matches!(e, TokenError::Invalid(_)), "{e:?}"),
        }
    }

    /// Claims of any shape, signed with the server's own secret: a grant
    /// only when every claim is right, and then exactly what they say.
    #[test]
    fn fuzz_any_claims_signed_with_the_secret(claims in claims()) {
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(&b"fuzz".repeat(8)),
        )
        .unwrap();
        match tokens().verify(&token) {
            Ok(g) => prop_assert!(grant_fits(&g, &claims), "{claims} granted {g:?}"),
            Err(TokenError::Expired) => {
                prop_assert!(claims["exp"].as_u64().is_some_and(|e| e <= now_s()), "{claims}");
            }
            Err(TokenError::Invalid(_)) => {}
        }
    }
}

/// A token the size of a whole WebSocket frame (64 KiB) is refused as
/// any other, without trouble.
#[test]
fn fuzz_a_frame_sized_token_is_refused() {
    let t = tokens();
    for text in [
        "a".repeat(64 * 1024),
        format!(
            "{}.{}.{}",
            "e".repeat(30_000),
            "e".repeat(30_000),
            "e".repeat(4_000)
        ),
        ".".repeat(64 * 1024),
    ] {
        assert!(matches!(t.verify(&text), Err(TokenError::Invalid(_))));
    }
}
