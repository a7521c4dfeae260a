//! Lists in request bodies, bounded while they are read.
//!
//! A body is at most 4 MiB, but its parsed form is larger (`{"id":"a"},`
//! is 11 bytes of JSON and some 70 once read: 380,000 heartbeats raised
//! the peak memory by ~80 MB before the batch check refused them;
//! `scripts/bench-body-memory.sh`). These readers stop at the first item
//! past the limit instead, keeping the code the check after parsing gives
//! (`batch-too-large`, see [`TOO_LARGE`]).

use std::fmt;
use std::marker::PhantomData;

use herenow_core::limits::MAX_BATCH;
use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};

use super::objects_only::Object;

/// How a list refused for its length starts its error message; the
/// extractor turns such an error into a `batch-too-large` problem.
pub const TOO_LARGE: &str = "batch-too-large: ";

/// Reads a list of at most `MAX` items; with `OBJECTS`, each item from a
/// JSON object only ([`Object`]).
struct AtMost<T, const MAX: usize, const OBJECTS: bool>(PhantomData<T>);

impl<'de, T: Deserialize<'de>, const MAX: usize, const OBJECTS: bool> Visitor<'de>
    for AtMost<T, MAX, OBJECTS>
{
    type Value = Vec<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list of at most {MAX} items")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        // JSON gives no length ahead; grow as items come.
        let mut items = Vec::new();
        loop {
            let next = if OBJECTS {
                seq.next_element::<Object<T>>()?.map(|o| o.0)
            } else {
                seq.next_element::<T>()?
            };
            let Some(item) = next else { break };
            if items.len() == MAX {
                return Err(de::Error::custom(format_args!(
                    "{TOO_LARGE}the list has more than {MAX} items; the limit is {MAX}"
                )));
            }
            items.push(item);
        }
        Ok(items)
    }
}

/// A list of at most `MAX` items.
pub fn at_most<'de, D, T, const MAX: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(AtMost::<T, MAX, false>(PhantomData))
}

/// A batch: at most [`MAX_BATCH`] items.
pub fn batch<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    at_most::<D, T, MAX_BATCH>(d)
}

/// A batch of structs, each read from a JSON object only ([`Object`]).
pub fn objects<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    d.deserialize_seq(AtMost::<T, MAX_BATCH, true>(PhantomData))
}

/// An optional batch: absent or `null` is `None`, a list is read as
/// [`batch`] reads it.
pub fn opt_batch<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    opt::<D, T, false>(d)
}

/// An optional batch of structs: absent or `null` is `None`, a list is
/// read as [`objects`] reads it.
pub fn opt_objects<'de, D, T>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    opt::<D, T, true>(d)
}

fn opt<'de, D, T, const OBJECTS: bool>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Opt<T, const OBJECTS: bool>(PhantomData<T>);

    impl<'de, T: Deserialize<'de>, const OBJECTS: bool> Visitor<'de> for Opt<T, OBJECTS> {
        type Value = Option<Vec<T>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "null or a list of at most {MAX_BATCH} items")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(AtMost::<T, MAX_BATCH, OBJECTS>(PhantomData))
                .map(Some)
        }
    }

    d.deserialize_option(Opt::<T, OBJECTS>(PhantomData))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::TOO_LARGE;

    #[derive(Debug, Deserialize)]
    struct Three {
        #[serde(deserialize_with = "super::at_most::<_, _, 3>")]
        items: Vec<u32>,
    }

    #[derive(Debug, Deserialize)]
    struct Maybe {
        #[serde(default, deserialize_with = "super::opt_batch")]
        items: Option<Vec<u32>>,
    }

    #[test]
    fn an_optional_list_is_absent_null_or_bounded() {
        let absent: Maybe = serde_json::from_str("{}").unwrap();
        assert_eq!(absent.items, None);
        let null: Maybe = serde_json::from_str(r#"{"items":null}"#).unwrap();
        assert_eq!(null.items, None);
        let some: Maybe = serde_json::from_str(r#"{"items":[7]}"#).unwrap();
        assert_eq!(some.items, Some(vec![7]));
        let many = format!(r#"{{"items":[{}]}}"#, vec!["1"; 10_001].join(","));
        let err = serde_json::from_str::<Maybe>(&many).unwrap_err();
        assert!(err.to_string().starts_with(TOO_LARGE), "{err}");
    }

    #[test]
    fn a_list_is_read_up_to_its_limit_and_refused_past_it() {
        let ok: Three = serde_json::from_str(r#"{"items":[1,2,3]}"#).unwrap();
        assert_eq!(ok.items, [1, 2, 3]);
        let empty: Three = serde_json::from_str(r#"{"items":[]}"#).unwrap();
        assert!(empty.items.is_empty());
        let err = serde_json::from_str::<Three>(r#"{"items":[1,2,3,4]}"#).unwrap_err();
        assert!(err.to_string().starts_with(TOO_LARGE), "{err}");
        assert!(err.to_string().contains("more than 3 items"), "{err}");
        // Not a list, or a bad item: the usual errors.
        assert!(serde_json::from_str::<Three>(r#"{"items":{}}"#).is_err());
        let err = serde_json::from_str::<Three>(r#"{"items":[1,"x"]}"#).unwrap_err();
        assert!(!err.to_string().starts_with(TOO_LARGE), "{err}");
    }
}
