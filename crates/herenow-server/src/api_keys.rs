//! [`ApiKeys`]: the configured API keys, and the one constant-time lookup of
//! a presented key's scope.
//!
//! A key is compared against every configured key in constant time
//! (`subtle`), and all keys are always compared, so timing tells neither
//! which key nearly matched nor how many bytes of it did. A leaf:
//! [`crate::state::AppState`] holds the keys, [`crate::auth`]'s middleware
//! asks them.
//!
//! A reload of the server's settings [`replace`](ApiKeys::replace)s them
//! while requests read them: each check loads the list once (an
//! [`ArcSwap`], no lock), so a request sees the old keys or the new ones,
//! never half of each.

use std::sync::Arc;

use arc_swap::ArcSwap;
use subtle::{ConditionallySelectable, ConstantTimeEq, ConstantTimeGreater};

use crate::config::{ApiKey, Scope};

/// The API keys a server accepts, with their scopes; none means the API
/// is open (allowed on loopback only, see
/// [`Config::check`](crate::Config::check)).
#[derive(Default)]
pub struct ApiKeys(ArcSwap<Vec<ApiKey>>);

impl ApiKeys {
    /// The keys `--api-key` gave, in any order.
    pub fn new(keys: Vec<ApiKey>) -> Self {
        Self(ArcSwap::from_pointee(keys))
    }

    /// Whether no key is configured, so every request gets write access
    /// without presenting one.
    pub fn is_open(&self) -> bool {
        self.0.load().is_empty()
    }

    /// Accepts `keys` from now on, and no other; the number of keys added
    /// and removed (a key whose scope changed is both).
    pub(crate) fn replace(&self, keys: Vec<ApiKey>) -> (usize, usize) {
        let old = self.0.swap(Arc::new(keys));
        let new = self.0.load();
        let added = new.iter().filter(|k| !old.contains(k)).count();
        let removed = old.iter().filter(|k| !new.contains(k)).count();
        (added, removed)
    }

    /// The scope of `presented`, if it is a configured key.
    pub(crate) fn scope_of(&self, presented: &[u8]) -> Option<Scope> {
        // 0: no match, 1: read, 2: write. Every key is compared and the
        // result selected without branching on secret data.
        let mut found = 0u8;
        for key in self.0.load().iter() {
            let equal = key.key.as_bytes().ct_eq(presented);
            let scope = match key.scope {
                Scope::Read => 1u8,
                Scope::Write => 2u8,
            };
            // A write key wins if the same secret were listed twice.
            let better = equal & scope.ct_gt(&found);
            found = u8::conditional_select(&found, &scope, better);
        }
        match found {
            1 => Some(Scope::Read),
            2 => Some(Scope::Write),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> ApiKeys {
        ApiKeys::new(vec![
            "readerkey1:read".parse().unwrap(),
            "writerkey1:write".parse().unwrap(),
        ])
    }

    #[test]
    fn finds_scopes() {
        let k = keys();
        assert_eq!(k.scope_of(b"readerkey1"), Some(Scope::Read));
        assert_eq!(k.scope_of(b"writerkey1"), Some(Scope::Write));
        assert_eq!(k.scope_of(b"writerkey"), None);
        assert_eq!(k.scope_of(b""), None);
    }

    #[test]
    fn replaced_keys_count_what_changed() {
        let k = keys();
        let (added, removed) = k.replace(vec![
            "readerkey1:read".parse().unwrap(),
            "writerkey2:write".parse().unwrap(),
        ]);
        assert_eq!((added, removed), (1, 1));
        assert_eq!(k.scope_of(b"writerkey1"), None);
        assert_eq!(k.scope_of(b"writerkey2"), Some(Scope::Write));
        assert!(!k.is_open());
        assert_eq!(k.replace(Vec::new()), (0, 2));
        assert!(k.is_open());
    }
}
