//! Whole numbers in request bodies, read as JSON Schema reads them.
//!
//! JSON has one number type: `2` and `2.0` are the same number, and JSON
//! Schema's `integer` accepts both. serde refuses `2.0` for a `u64`, so a
//! client that writes integers as floats (JavaScript's `JSON.stringify`
//! does not, but many others may) would be refused a value the
//! document (`/openapi.json`) says is valid. These readers take any
//! number without a fraction that fits the type; `2.5`, `-1` for an
//! unsigned field, or `1e30` are still refused.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, Visitor};

struct Whole;

impl Visitor<'_> for Whole {
    type Value = i128;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        // Past 2^64 the conversion saturates; such a value is out of range
        // for every field read here, and refused below.
        if v.fract() == 0.0 && v.abs() < 2f64.powi(64) {
            Ok(v as i128)
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }
}

fn whole<'de, D: Deserializer<'de>, T: TryFrom<i128>>(d: D) -> Result<T, D::Error> {
    let n = d.deserialize_any(Whole)?;
    T::try_from(n).map_err(|_| {
        de::Error::invalid_value(
            de::Unexpected::Other("a number out of range"),
            &"a whole number that fits",
        )
    })
}

/// A `u64`; `2.0` reads as `2`.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole(d)
}

/// An optional `u64` (`null` is `None`); use with `#[serde(default)]`.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(Opt(std::marker::PhantomData))
}

/// An optional `i64` (`null` is `None`); use with `#[serde(default)]`.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_option(Opt(std::marker::PhantomData))
}

struct Opt<T>(std::marker::PhantomData<T>);

impl<'de, T: TryFrom<i128>> Visitor<'de> for Opt<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        whole(d).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Body {
        #[serde(deserialize_with = "super::u64")]
        n: u64,
        #[serde(default, deserialize_with = "super::opt_i64")]
        m: Option<i64>,
    }

    fn parse(json: &str) -> Option<(u64, Option<i64>)> {
        serde_json::from_str::<Body>(json).ok().map(|b| (b.n, b.m))
    }

    #[test]
    fn floats_without_a_fraction_are_whole_numbers() {
        assert_eq!(parse(r#"{"n": 2}"#), Some((2, None)));
        assert_eq!(parse(r#"{"n": 2.0, "m": -3.0}"#), Some((2, Some(-3))));
        assert_eq!(parse(r#"{"n": 1e3, "m": null}"#), Some((1000, None)));
        assert_eq!(
            parse(r#"{"n": 18446744073709551615}"#),
            Some((u64::MAX, None))
        );
    }

    #[test]
    fn fractions_negatives_and_overflow_are_refused() {
        assert_eq!(parse(r#"{"n": 2.5}"#), None);
        assert_eq!(parse(r#"{"n": -1}"#), None);
        assert_eq!(parse(r#"{"n": -1.0}"#), None);
        assert_eq!(parse(r#"{"n": 1e30}"#), None);
        assert_eq!(parse(r#"{"n": "2"}"#), None);
        assert_eq!(parse(r#"{"n": 1, "m": 1e19}"#), None);
    }
}
