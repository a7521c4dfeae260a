//! Objects only: serde reads a derived struct from a JSON array of its
//! fields too, so `[["bob"]]` would set a friend list; the API's schema
//! allows no such thing, and a client that sends it should be told.
//! [`Object`] reads a struct from a JSON object and refuses anything else
//! (`invalid type: sequence, expected an object`).
//!
//! Every request body is read through it ([`crate::extract::JsonBody`]),
//! and every list of structs in a body through
//! [`bounded::objects`](super::bounded::objects) /
//! [`bounded::opt_objects`](super::bounded::opt_objects), which unwrap
//! each item as they read it (no second copy of a batch).

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};

/// A `T` read from a JSON object only.
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OnlyMaps<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for OnlyMaps<T> {
            type Value = T;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                // The same map, so strings still borrow from the body.
                T::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }

        d.deserialize_map(OnlyMaps(PhantomData)).map(Object)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde::Deserialize;

    use super::Object;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Item<'a> {
        #[serde(borrow)]
        id: Cow<'a, str>,
        #[serde(default)]
        n: u32,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body<'a> {
        #[serde(borrow, deserialize_with = "crate::protocol::bounded::objects")]
        items: Vec<Item<'a>>,
        #[serde(default, deserialize_with = "crate::protocol::bounded::opt_objects")]
        more: Option<Vec<Item<'a>>>,
    }

    fn read(text: &str) -> Result<Body<'_>, serde_json::Error> {
        serde_json::from_str::<Object<Body<'_>>>(text).map(|o| o.0)
    }

    #[test]
    fn structs_are_read_from_objects_and_borrow_from_the_text() {
        let b = read(r#"{"items":[{"id":"a"},{"id":"b","n":2}],"more":[{"id":"c"}]}"#).unwrap();
        assert_eq!(
            b.items[1],
            Item {
                id: "b".into(),
                n: 2
            }
        );
        assert!(matches!(b.items[0].id, Cow::Borrowed("a")));
        assert_eq!(b.more.unwrap()[0].id, "c");
        assert!(read(r#"{"items":[],"more":null}"#).unwrap().more.is_none());
    }

    #[test]
    fn an_array_in_a_structs_place_is_refused() {
        for text in [
            r#"[[{"id":"a"}]]"#,
            r#"{"items":[["a"]]}"#,
            r#"{"items":[{"id":"a"}],"more":[["b", 1]]}"#,
            r#"{"items":["a"]}"#,
            r#""x""#,
        ] {
            let e = read(text).unwrap_err();
            assert!(e.to_string().contains("expected an object"), "{text}: {e}");
        }
        // The struct's own checks still hold inside.
        let e = read(r#"{"items":[{"id":"a","x":1}]}"#).unwrap_err();
        assert!(e.to_string().contains("unknown field `x`"), "{e}");
        let e = read(r#"{"items":[{"n":1}]}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `id`"), "{e}");
    }
}
