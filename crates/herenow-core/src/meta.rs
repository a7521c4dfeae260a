//! Per-member metadata: a small JSON object, kept as checked text.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::InvalidInput;
use crate::limits;

/// A JSON object of at most [`limits::MAX_META_BYTES`] bytes, such as
/// `{"name":"Ada","device":"phone"}`.
///
/// Stored as its JSON text behind an `Arc`: cloning into answers and events
/// is a reference-count bump, and it is never re-parsed.
#[derive(Clone, PartialEq, Eq)]
pub struct Metadata(Arc<str>);

impl Metadata {
    /// Checks that `json` is one JSON object within the size limit, and
    /// keeps it in compact form (so answers do not echo a client's
    /// whitespace, and the limit counts what is stored).
    pub fn from_json(json: &str) -> Result<Self, InvalidInput> {
        // Refuse huge input before parsing it; whitespace may shrink a
        // document, but not by more than this.
        if json.len() > 4 * limits::MAX_META_BYTES {
            return Err(InvalidInput::MetaTooLarge { len: json.len() });
        }
        let value = match serde_json::from_str::<serde_json::Value>(json) {
            Ok(v @ serde_json::Value::Object(_)) => v,
            _ => return Err(InvalidInput::MetaNotObject),
        };
        let compact = value.to_string();
        if compact.len() > limits::MAX_META_BYTES {
            return Err(InvalidInput::MetaTooLarge { len: compact.len() });
        }
        Ok(Self(Arc::from(compact)))
    }

    /// The JSON text, compact (re-serialized when it was checked), at most
    /// [`limits::MAX_META_BYTES`] bytes.
    pub fn as_json(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Metadata {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The text was checked on the way in, so it is valid JSON.
        match RawValue::from_string(self.0.to_string()) {
            Ok(raw) => raw.serialize(s),
            Err(e) => Err(serde::ser::Error::custom(e)),
        }
    }
}

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <Box<RawValue>>::deserialize(d)?;
        Metadata::from_json(raw.get()).map_err(serde::de::Error::custom)
    }
}

/// Optional metadata as its JSON text, for compact binary formats (the
/// memory store's journal and snapshots, the outbox's events in them),
/// which cannot carry a raw JSON value:
/// `#[serde(with = "herenow_core::meta::as_text")]`.
pub mod as_text {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Metadata;

    /// Writes the metadata as its JSON text, or none.
    pub fn serialize<S: Serializer>(meta: &Option<Metadata>, s: S) -> Result<S::Ok, S::Error> {
        meta.as_ref().map(Metadata::as_json).serialize(s)
    }

    /// Reads JSON text back, refusing text that is not valid metadata.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Metadata>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|text| Metadata::from_json(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_small_objects_only() {
        assert!(Metadata::from_json(r#"{"a":1}"#).is_ok());
        assert_eq!(Metadata::from_json("[1]"), Err(InvalidInput::MetaNotObject));
        assert_eq!(Metadata::from_json("{"), Err(InvalidInput::MetaNotObject));
        let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(1100));
        assert!(matches!(
            Metadata::from_json(&big),
            Err(InvalidInput::MetaTooLarge { .. })
        ));
    }

    #[test]
    fn stored_compact() {
        let m = Metadata::from_json("{ \"name\" :  \"Ada\" }").unwrap();
        assert_eq!(m.as_json(), r#"{"name":"Ada"}"#);
        let padded = format!("{{\"a\":1{}}}", " ".repeat(2000));
        assert!(Metadata::from_json(&padded).is_ok());
    }

    #[test]
    fn round_trips_as_json() {
        let m = Metadata::from_json(r#"{"name":"Ada"}"#).unwrap();
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(s, r#"{"name":"Ada"}"#);
        let back: Metadata = serde_json::from_str(&s).unwrap();
        assert_eq!(back, m);
    }
}

/// Metadata arrives from clients (HTTP bodies, WebSocket messages) and
/// from disk (snapshots, journal records): any text is an object within
/// the limit, kept compact, or refused, never a panic.
#[cfg(test)]
mod fuzz {
    use crate::fuzzing::cases;
    use proptest::prelude::*;

    use super::*;

    /// An accepted text is an object of at most the limit, stored in a
    /// form that is accepted again unchanged.
    fn checks(text: &str) {
        match Metadata::from_json(text) {
            Ok(m) => {
                assert!(m.as_json().len() <= limits::MAX_META_BYTES);
                assert!(m.as_json().starts_with('{'));
                assert_eq!(Metadata::from_json(m.as_json()).unwrap(), m);
            }
            Err(e) => assert!(
                matches!(
                    e,
                    InvalidInput::MetaNotObject | InvalidInput::MetaTooLarge { .. }
                ),
                "{e:?}"
            ),
        }
    }

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn fuzz_any_text_is_metadata_or_refused(text in any::<String>()) {
            checks(&text);
        }

        #[test]
        fn fuzz_json_shaped_text_is_metadata_or_refused(
            text in "[{}\\[\\]\":,. 0-9a-z\\\\eE+-]{0,64}"
        ) {
            checks(&text);
            checks(&format!("{{\"k\":{text}}}"));
        }

        #[test]
        fn fuzz_objects_near_the_limit(
            key in "[a-z]{1,8}",
            len in (limits::MAX_META_BYTES - 16)..(limits::MAX_META_BYTES + 16),
            pad in 0usize..3000,
        ) {
            let text = format!(
                "{{{}\"{key}\":\"{}\"}}",
                " ".repeat(pad),
                "v".repeat(len)
            );
            checks(&text);
        }
    }
}
