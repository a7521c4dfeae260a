//! [`ApiKeys`]: the configured API keys, and the one constant-time lookup of
//! a presented key's scope.
//!
//! A key is compared against every configured key in constant time
//! (`subtle`), and all keys are always compared, so timing tells neither
//! which key nearly matched nor how many bytes of it did. A leaf:
//! [`crate::state::AppState`] holds the keys, [`crate::auth`]'s middleware
//! asks them.

use subtle::{ConditionallySelectable, ConstantTimeEq, ConstantTimeGreater};

use crate::config::{ApiKey, Scope};

/// The API keys a server accepts, with their scopes; none means the API
/// is open (allowed on loopback only, see
/// [`Config::check`](crate::Config::check)).
#[derive(Clone, Default)]
pub struct ApiKeys(Vec<ApiKey>);

impl ApiKeys {
    /// The keys `--api-key` gave, in any order.
    pub fn new(keys: Vec<ApiKey>) -> Self {
        Self(keys)
    }

    /// Whether no key is configured, so every request gets write access
    /// without presenting one.
    pub fn is_open(&self) -> bool {
        self.0.is_empty()
    }

    /// The scope of `presented`, if it is a configured key.
    pub(crate) fn scope_of(&self, presented: &[u8]) -> Option<Scope> {
        // 0: no match, 1: read, 2: write. Every key is compared and the
        // result selected without branching on secret data.
        let mut found = 0u8;
        for key in &self.0 {
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
}
