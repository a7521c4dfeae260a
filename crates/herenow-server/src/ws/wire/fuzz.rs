//! Every text frame a browser sends goes through [`decode`]: whatever it
//! holds (within the 64 KiB frame limit) is a message or an `error` reply
//! naming its `ref`, never a panic. These try noise, JSON of any shape
//! built from the protocol's own words, every message type with random
//! fields (which must come back as sent), and those messages mutated.
//!
//! `cargo test -p herenow-server --lib fuzz`; `PROPTEST_CASES=100000`
//! for a longer run.

use proptest::prelude::*;

use crate::fuzzing::cases;
use serde_json::{Map, Value, json};

use super::*;

/// What any answer of [`decode`] must respect.
fn decodes_or_refuses(text: &str) -> Option<Envelope<'_>> {
    match decode(text) {
        Ok(e) => {
            assert!(crate::protocol::WS_MESSAGE_TYPES.contains(&e.message.kind()));
            Some(e)
        }
        Err(Undecodable { reference, error }) => {
            assert!(
                matches!(error.code, "bad-json" | "bad-message"),
                "{error:?}"
            );
            assert_eq!(error.close, None, "a bad frame never closes the socket");
            if let Some(Ref::Str(s)) = &reference {
                assert!(s.len() <= MAX_REF_BYTES);
            }
            None
        }
    }
}

/// A good `ref`: an integer, or a string of at most 64 bytes.
fn good_reference() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        // At most 16 characters: at most 64 bytes.
        proptest::collection::vec(any::<char>(), 0..=16)
            .prop_map(|c| json!(c.into_iter().collect::<String>())),
        "[ -~]{64}".prop_map(|s| json!(s)),
    ]
}

/// A `ref` as the frame carries it, and whether it is a good one.
fn reference() -> impl Strategy<Value = (Value, bool)> {
    prop_oneof![
        good_reference().prop_map(|r| (r, true)),
        "[a-z]{65,80}".prop_map(|s| (json!(s), false)),
        (i64::MAX as u64 + 1..).prop_map(|n| (json!(n), false)),
        any::<f64>().prop_map(|f| (json!(f), false)),
        Just((json!(null), false)),
        Just((json!({"a": 1}), false)),
    ]
}

/// JSON of any shape, built from the protocol's words so that objects
/// come near to messages.
fn value() -> impl Strategy<Value = Value> {
    let word = prop_oneof![
        proptest::sample::select(
            &[
                "type",
                "ref",
                "space",
                "meta",
                "token",
                "on",
                "users",
                "friends",
                "replace",
                "page_size",
            ][..]
        )
        .prop_map(String::from),
        proptest::sample::select(&crate::protocol::WS_MESSAGE_TYPES[..]).prop_map(String::from),
        any::<String>(),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        word.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((word.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid message of any type with random fields, as a JSON object.
fn message() -> impl Strategy<Value = Value> {
    let space = "[A-Za-z0-9._:@-]{1,20}";
    let meta = prop_oneof![
        Just(json!({})),
        ("[a-z]{1,8}", any::<i64>()).prop_map(|(k, v)| json!({ k: v })),
        "[^\\p{Cc}]{0,30}".prop_map(|v| json!({ "name": v })),
    ];
    prop_oneof![
        "[A-Za-z0-9._-]{0,200}".prop_map(|t| json!({"type": "hello", "token": t})),
        (space, proptest::option::of(meta.clone())).prop_map(|(s, m)| match m {
            Some(m) => json!({"type": "join", "space": s, "meta": m}),
            None => json!({"type": "join", "space": s}),
        }),
        space.prop_map(|s| json!({"type": "leave", "space": s})),
        (space, meta).prop_map(|(s, m)| json!({"type": "update", "space": s, "meta": m})),
        Just(json!({"type": "ping"})),
        (space, proptest::option::of(any::<u64>())).prop_map(|(s, n)| match n {
            Some(n) => json!({"type": "subscribe", "space": s, "page_size": n}),
            None => json!({"type": "subscribe", "space": s}),
        }),
        space.prop_map(|s| json!({"type": "unsubscribe", "space": s})),
        any::<bool>().prop_map(|on| json!({"type": "invisible", "on": on})),
        (
            proptest::collection::vec("[^\\p{Cc}]{1,12}", 0..8),
            any::<bool>(),
            proptest::option::of(space),
            any::<bool>(),
            proptest::option::of(any::<u64>()),
        )
            .prop_map(|(users, friends, space, replace, page_size)| {
                json!({"type": "watch", "users": users, "friends": friends, "space": space,
                       "replace": replace, "page_size": page_size})
            }),
        proptest::option::of(proptest::collection::vec("[^\\p{Cc}]{1,12}", 0..8)).prop_map(
            |users| match users {
                Some(u) => json!({"type": "unwatch", "users": u}),
                None => json!({"type": "unwatch"}),
            }
        ),
    ]
}

/// A decoded message as the JSON it came from: the round trip's other
/// half.
fn to_value(m: &ClientMessage<'_>) -> Value {
    match m {
        ClientMessage::Hello(h) => json!({"type": "hello", "token": h.token}),
        ClientMessage::Join(j) => match &j.meta {
            Some(meta) => json!({"type": "join", "space": j.space, "meta": meta}),
            None => json!({"type": "join", "space": j.space}),
        },
        ClientMessage::Leave(l) => json!({"type": "leave", "space": l.space}),
        ClientMessage::Update(u) => json!({"type": "update", "space": u.space, "meta": u.meta}),
        ClientMessage::Ping(Ping {}) => json!({"type": "ping"}),
        ClientMessage::Subscribe(s) => match s.page_size {
            Some(n) => json!({"type": "subscribe", "space": s.space, "page_size": n}),
            None => json!({"type": "subscribe", "space": s.space}),
        },
        ClientMessage::Unsubscribe(u) => json!({"type": "unsubscribe", "space": u.space}),
        ClientMessage::Invisible(i) => json!({"type": "invisible", "on": i.on}),
        ClientMessage::Watch(w) => json!({"type": "watch", "users": w.users,
            "friends": w.friends, "space": w.space, "replace": w.replace,
            "page_size": w.page_size}),
        ClientMessage::Unwatch(u) => match &u.users {
            Some(users) => json!({"type": "unwatch", "users": users}),
            None => json!({"type": "unwatch"}),
        },
    }
}

/// `value` with `ref` set, as text: compact or spread out.
fn with_ref(mut value: Value, reference: &Value, pretty: bool) -> String {
    if let Value::Object(o) = &mut value {
        o.insert("ref".into(), reference.clone());
    }
    if pretty {
        serde_json::to_string_pretty(&value).unwrap()
    } else {
        value.to_string()
    }
}

proptest! {
    #![proptest_config(cases(1000))]

    #[test]
    fn fuzz_any_text_decodes_or_is_refused(text in any::<String>()) {
        decodes_or_refuses(&text);
    }

    /// JSON near the protocol's: decoded or refused; a refused object
    /// with a good `ref` is answered with that `ref`.
    #[test]
    fn fuzz_any_json_decodes_or_is_refused(
        value in value(),
        (reference, good) in reference(),
    ) {
        decodes_or_refuses(&value.to_string());
        let object = value.is_object();
        let text = with_ref(value, &reference, false);
        if decodes_or_refuses(&text).is_none() && object {
            let got = decode(&text).unwrap_err().reference;
            prop_assert_eq!(got.is_some(), good, "{} -> {:?}", text, got);
        }
    }

    /// Every message type, with random fields and `ref`: decoded to what
    /// was sent.
    #[test]
    fn fuzz_messages_round_trip(
        message in message(),
        reference in good_reference(),
        pretty in any::<bool>(),
    ) {
        let text = with_ref(message.clone(), &reference, pretty);
        let e = decode(&text).unwrap();
        let mut want = message;
        if let Value::Object(o) = &mut want {
            // `null` is absence for the optional fields.
            o.retain(|_, v| !v.is_null());
        }
        let mut got = to_value(&e.message);
        if let Value::Object(o) = &mut got {
            o.retain(|_, v| !v.is_null());
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(serde_json::to_value(e.reference.unwrap()).unwrap(), reference);
    }

    #[test]
    fn fuzz_mutated_messages_decode_or_are_refused(
        message in message(),
        (reference, _) in reference(),
        cuts in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..4), 1..4),
    ) {
        let mut bytes = with_ref(message, &reference, false).into_bytes();
        for (at, b, how) in cuts {
            let n = bytes.len();
            if n == 0 {
                break;
            }
            match how {
                0 => bytes[at % n] = b,
                1 => bytes.truncate(at % n),
                2 => bytes.insert(at % n, b),
                _ => {
                    bytes.remove(at % n);
                }
            }
        }
        decodes_or_refuses(&String::from_utf8_lossy(&bytes));
    }
}

/// Nesting as deep as a 64 KiB frame allows is `bad-json` (serde_json
/// stops at 128 levels), not a stack overflow; so is a `ref` buried in it.
#[test]
fn fuzz_deep_nesting_is_refused_not_a_stack_overflow() {
    for open in ["[", "{\"a\":"] {
        let deep = format!(
            r#"{{"type":"join","space":"a","ref":1,"meta":{}"#,
            open.repeat(60_000 / open.len())
        );
        let e = decode(&deep).unwrap_err();
        assert_eq!(e.error.code, "bad-json");
    }
    let deep_ref = format!(r#"{{"ref":{}}}"#, "[".repeat(60_000));
    assert!(decode(&deep_ref).is_err());
    assert!(ref_of(&deep_ref).is_none());
}
