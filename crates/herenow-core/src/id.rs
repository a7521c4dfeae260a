//! Validated identifiers: space names, member ids and member keys.
//!
//! Every string that reaches a store passes through these constructors, so a
//! store never has to re-check lengths or characters.

use std::fmt;

use compact_str::CompactString;
use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::limits;

/// The name of a space ("the whole site", "room:42", "doc-7f3a").
///
/// 1 to [`limits::MAX_SPACE_BYTES`] bytes of ASCII letters, digits and
/// `- _ . : @`. The set is narrow on purpose: a space name appears in URL
/// paths and in Redis key names, and must need no escaping in either.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct SpaceName(CompactString);

impl SpaceName {
    /// Checks `name` and wraps it.
    pub fn new(name: &str) -> Result<Self, InvalidInput> {
        if name.is_empty() {
            return Err(InvalidInput::EmptySpaceName);
        }
        if name.len() > limits::MAX_SPACE_BYTES {
            return Err(InvalidInput::SpaceNameTooLong { len: name.len() });
        }
        if let Some(c) = name.chars().find(|c| !is_space_char(*c)) {
            return Err(InvalidInput::SpaceNameChar { found: c });
        }
        match name {
            "." => return Err(InvalidInput::SpaceNameDots(".")),
            ".." => return Err(InvalidInput::SpaceNameDots("..")),
            _ => {}
        }
        Ok(Self(CompactString::from(name)))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_space_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@')
}

impl<'de> Deserialize<'de> for SpaceName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        SpaceName::new(&s).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for SpaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SpaceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// A member's identifier: a user id, or a guest's session id or address.
///
/// 1 to [`limits::MAX_ID_BYTES`] bytes of UTF-8 without control characters.
/// Ids of up to 24 bytes are stored inline, without a heap allocation.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct MemberId(CompactString);

impl MemberId {
    /// Checks `id` and wraps it.
    pub fn new(id: &str) -> Result<Self, InvalidInput> {
        if id.is_empty() {
            return Err(InvalidInput::EmptyId);
        }
        if id.len() > limits::MAX_ID_BYTES {
            return Err(InvalidInput::IdTooLong { len: id.len() });
        }
        if id.chars().any(char::is_control) {
            return Err(InvalidInput::IdControlChar);
        }
        Ok(Self(CompactString::from(id)))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The id's string, for a store that keeps ids compactly (the memory
    /// engine's spaces) and gives them back with
    /// [`from_compact_unchecked`](Self::from_compact_unchecked).
    pub fn into_compact(self) -> CompactString {
        self.0
    }

    /// Wraps `s` without checking it again: only for the text of an id
    /// that was checked when it was made (kept by a store from
    /// [`into_compact`](Self::into_compact) or [`as_str`](Self::as_str)).
    /// Anything else goes through [`MemberId::new`].
    pub fn from_compact_unchecked(s: CompactString) -> Self {
        Self(s)
    }
}

impl<'de> Deserialize<'de> for MemberId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        MemberId::new(&s).map_err(serde::de::Error::custom)
    }
}

/// Lets maps keyed by ids be searched with a `&str` (the hash and order
/// of a [`MemberId`] are those of its string).
impl std::borrow::Borrow<str> for MemberId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// Whether a member is an authenticated user or an anonymous guest.
///
/// Users and guests live in separate namespaces of a space (seed 000 keeps
/// them in separate sets): user `1.2.3.4` and guest `1.2.3.4` are two members,
/// and they are listed and counted apart.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MemberKind {
    /// An authenticated user: the default.
    #[default]
    User,
    /// An anonymous visitor (seed 000's guests by IP): counted and listed
    /// apart, with no friend set.
    Guest,
}

impl MemberKind {
    /// Both kinds, users first.
    pub const ALL: [MemberKind; 2] = [MemberKind::User, MemberKind::Guest];

    /// 0 for users, 1 for guests: an index into per-kind arrays.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The lowercase name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MemberKind::User => "user",
            MemberKind::Guest => "guest",
        }
    }

    /// The one-letter code stores write in keys, script arguments, events
    /// and cursors: `u` for users, `g` for guests.
    pub fn letter(self) -> &'static str {
        match self {
            MemberKind::User => "u",
            MemberKind::Guest => "g",
        }
    }

    /// The kind a [`letter`](Self::letter) names; `None` for anything else.
    pub fn from_letter(letter: &str) -> Option<MemberKind> {
        match letter {
            "u" => Some(MemberKind::User),
            "g" => Some(MemberKind::Guest),
            _ => None,
        }
    }
}

/// A member of a space: its kind and id.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemberKey {
    /// User or guest.
    #[serde(default)]
    pub kind: MemberKind,
    /// The id, unique within its kind only.
    pub id: MemberId,
}

impl MemberKey {
    /// A user key.
    pub fn user(id: MemberId) -> Self {
        Self {
            kind: MemberKind::User,
            id,
        }
    }

    /// A guest key.
    pub fn guest(id: MemberId) -> Self {
        Self {
            kind: MemberKind::Guest,
            id,
        }
    }
}

impl fmt::Debug for MemberKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_names() {
        assert!(SpaceName::new("room:42").is_ok());
        assert!(SpaceName::new("a.b-c_d@e").is_ok());
        assert_eq!(SpaceName::new(""), Err(InvalidInput::EmptySpaceName));
        assert_eq!(
            SpaceName::new("a/b"),
            Err(InvalidInput::SpaceNameChar { found: '/' })
        );
        assert_eq!(SpaceName::new(".."), Err(InvalidInput::SpaceNameDots("..")));
        assert_eq!(SpaceName::new("."), Err(InvalidInput::SpaceNameDots(".")));
        assert!(SpaceName::new("..a").is_ok(), "only the two dot names");
        assert_eq!(
            SpaceName::new(&"x".repeat(129)),
            Err(InvalidInput::SpaceNameTooLong { len: 129 })
        );
        assert!(SpaceName::new(&"x".repeat(128)).is_ok());
    }

    #[test]
    fn member_ids() {
        assert!(MemberId::new("alice").is_ok());
        assert!(MemberId::new("Zoë 🙂").is_ok());
        assert_eq!(MemberId::new(""), Err(InvalidInput::EmptyId));
        assert_eq!(MemberId::new("a\nb"), Err(InvalidInput::IdControlChar));
        assert_eq!(
            MemberId::new(&"x".repeat(257)),
            Err(InvalidInput::IdTooLong { len: 257 })
        );
        assert!(MemberId::new(&"x".repeat(256)).is_ok());
    }

    #[test]
    fn ids_deserialize_with_checks() {
        let ok: MemberKey = serde_json::from_str(r#"{"id":"bob"}"#).unwrap();
        assert_eq!(ok.kind, MemberKind::User);
        assert!(serde_json::from_str::<MemberKey>(r#"{"id":""}"#).is_err());
        assert!(serde_json::from_str::<MemberKey>(r#"{"id":"b","kind":"robot"}"#).is_err());
    }
}
