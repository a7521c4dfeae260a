//! The spaces one connection joined, with its metadata in each, and its
//! visibility: what a ping writes to the store again, and what the session
//! detaches from on its way out.

use herenow_core::{Metadata, SpaceName};

use super::limits::MAX_JOINED;
use crate::ws::wire::WsError;

/// A connection's presence, as the session remembers it: only spaces the
/// store accepted an attach for are recorded.
///
/// The spaces are a vector sorted by name: at most [`MAX_JOINED`] of them,
/// and most connections join one, which a map's node would hold in
/// several hundred bytes.
#[derive(Debug, Default)]
pub(super) struct Joined {
    spaces: Vec<(SpaceName, Option<Metadata>)>,
    invisible: bool,
}

impl Joined {
    /// Refuses a join beyond [`MAX_JOINED`]; joining a space again is
    /// always allowed.
    pub(super) fn admit(&self, space: &SpaceName) -> Result<(), WsError> {
        if self.find(space).is_err() && self.spaces.len() >= MAX_JOINED {
            return Err(WsError::new(
                "too-many-spaces",
                format!("a connection may join at most {MAX_JOINED} spaces"),
            ));
        }
        Ok(())
    }

    /// Refuses a message about a space this connection did not join.
    pub(super) fn require(&self, space: &SpaceName) -> Result<(), WsError> {
        if self.find(space).is_err() {
            return Err(not_joined(space));
        }
        Ok(())
    }

    /// Remembers `space` with this connection's metadata there, once the
    /// store has it.
    pub(super) fn record(&mut self, space: SpaceName, meta: Option<Metadata>) {
        match self.find(&space) {
            Ok(i) => self.spaces[i].1 = meta,
            Err(i) => self.spaces.insert(i, (space, meta)),
        }
    }

    /// Forgets `space`, or refuses when this connection did not join it.
    pub(super) fn forget(&mut self, space: &SpaceName) -> Result<(), WsError> {
        match self.find(space) {
            Ok(i) => {
                self.spaces.remove(i);
                Ok(())
            }
            Err(_) => Err(not_joined(space)),
        }
    }

    /// Forgets every space, for the last detach.
    pub(super) fn take_all(&mut self) -> Vec<SpaceName> {
        std::mem::take(&mut self.spaces)
            .into_iter()
            .map(|(space, _)| space)
            .collect()
    }

    /// Whether no space is joined.
    pub(super) fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }

    /// The joined spaces with this connection's metadata in each.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&SpaceName, &Option<Metadata>)> {
        self.spaces.iter().map(|(space, meta)| (space, meta))
    }

    /// Where `space` is, or where it would go.
    fn find(&self, space: &SpaceName) -> Result<usize, usize> {
        self.spaces.binary_search_by(|(s, _)| s.cmp(space))
    }

    /// Whether this connection hides its member, in every space it joined
    /// and will join.
    pub(super) fn is_invisible(&self) -> bool {
        self.invisible
    }

    /// Hides or shows this connection; true when that changed anything.
    pub(super) fn set_invisible(&mut self, on: bool) -> bool {
        let changed = self.invisible != on;
        self.invisible = on;
        changed
    }
}

fn not_joined(space: &SpaceName) -> WsError {
    WsError::new(
        "not-joined",
        format!("this connection did not join {space}"),
    )
}
