//! The webhook endpoints spaces' configurations name
//! ([`herenow_core::outbox::SpaceHook`]): kept beside the spaces (not in them, so
//! a space's lock never guards them), journaled like a policy, and in the
//! snapshot.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use herenow_core::error::Result;
use herenow_core::id::SpaceName;
use herenow_core::outbox::SpaceHook;

use super::MemoryStore;
use crate::changes::ChangeRef;

/// Every space's endpoints, and a version that changes with each set.
#[derive(Default)]
pub(super) struct Hooks {
    by_space: RwLock<HashMap<SpaceName, Arc<[SpaceHook]>>>,
    version: AtomicU64,
}

impl Hooks {
    /// The endpoints of `space`, none if never set.
    pub(super) fn get(&self, space: &SpaceName) -> Vec<SpaceHook> {
        self.by_space
            .read()
            .get(space)
            .map(|h| h.to_vec())
            .unwrap_or_default()
    }

    /// Replaces the endpoints of `space` (checked already), then calls
    /// `record` with whether any space names endpoints now, while still
    /// holding the lock, so the journal's order of sets and the outbox's
    /// switch follow the order they were applied in.
    fn put<T>(&self, space: &SpaceName, hooks: &[SpaceHook], record: impl FnOnce(bool) -> T) -> T {
        let mut map = self.by_space.write();
        if hooks.is_empty() {
            map.remove(space);
        } else {
            map.insert(space.clone(), hooks.into());
        }
        self.version.fetch_add(1, Ordering::Relaxed);
        record(!map.is_empty())
    }

    /// The number [`herenow_core::SpaceWebhooks::space_hooks_version`] answers.
    pub(super) fn version(&self) -> u64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Every space's endpoints, by space name: for the snapshot.
    pub(super) fn export(&self) -> Vec<(String, Vec<SpaceHook>)> {
        let mut all: Vec<(String, Vec<SpaceHook>)> = self
            .by_space
            .read()
            .iter()
            .map(|(s, h)| (s.as_str().to_owned(), h.to_vec()))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }
}

impl MemoryStore {
    /// [`herenow_core::SpaceWebhooks::set_space_hooks`]: checks, replaces,
    /// tells the outbox whether any space names endpoints, and journals.
    pub(super) async fn put_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        SpaceHook::check_all(hooks)?;
        let durable = self.hooks.put(space, hooks, |any| {
            self.shared.outbox.spaces_name_endpoints(any);
            self.shared.record(ChangeRef::SetHooks { space, hooks })
        })?;
        crate::settle(durable).await
    }

    /// Replaces the endpoints of `space` as a replayed change or a
    /// snapshot says (checked again: the bytes come from disk).
    pub(super) fn restore_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        SpaceHook::check_all(hooks)?;
        self.hooks.put(space, hooks, |any| {
            self.shared.outbox.spaces_name_endpoints(any)
        });
        Ok(())
    }
}
