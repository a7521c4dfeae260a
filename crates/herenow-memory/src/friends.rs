//! Friend sets of the memory store: the three writes, applied to the map
//! under its lock by `MemoryStore::write_friends` (which journals them).

use std::collections::BTreeSet;

use herenow_core::error::{InvalidInput, Result};
use herenow_core::id::MemberId;
use herenow_core::limits;

use super::FriendMap;

/// Replaces `user`'s friend set (itself left out); its new size.
pub(super) fn set_friends(
    all: &mut FriendMap,
    user: &MemberId,
    friends: &[MemberId],
) -> Result<u64> {
    let set: BTreeSet<MemberId> = friends.iter().filter(|f| *f != user).cloned().collect();
    if set.len() > limits::MAX_FRIENDS {
        return Err(InvalidInput::TooManyFriends { len: set.len() }.into());
    }
    let n = set.len() as u64;
    if set.is_empty() {
        all.remove(user);
    } else {
        all.insert(user.clone(), set);
    }
    Ok(n)
}

/// Adds to `user`'s friend set, all or nothing within the bound; its new
/// size.
pub(super) fn add_friends(
    all: &mut FriendMap,
    user: &MemberId,
    friends: &[MemberId],
) -> Result<u64> {
    let current = all.get(user).map_or(0, BTreeSet::len);
    let new: BTreeSet<&MemberId> = friends
        .iter()
        .filter(|f| *f != user && !all.get(user).is_some_and(|s| s.contains(*f)))
        .collect();
    if current + new.len() > limits::MAX_FRIENDS {
        return Err(InvalidInput::TooManyFriends {
            len: current + new.len(),
        }
        .into());
    }
    if new.is_empty() {
        return Ok(current as u64);
    }
    let set = all.entry(user.clone()).or_default();
    set.extend(new.into_iter().cloned());
    Ok(set.len() as u64)
}

/// Removes from `user`'s friend set; its new size.
pub(super) fn remove_friends(all: &mut FriendMap, user: &MemberId, friends: &[MemberId]) -> u64 {
    let Some(set) = all.get_mut(user) else {
        return 0;
    };
    for f in friends {
        set.remove(f);
    }
    let n = set.len() as u64;
    if n == 0 {
        all.remove(user);
    }
    n
}
