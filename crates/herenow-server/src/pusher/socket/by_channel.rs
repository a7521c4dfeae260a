//! [`ByChannel`]: what a socket keeps per channel it subscribed to.
//!
//! A socket lives long and subscribes to a channel or two (at most
//! `MAX_CHANNELS`), so this is a vector searched in order, holding
//! exactly its entries: a `HashMap` keeps at least four slots, which for
//! a presence membership is half a kilobyte per socket.

/// Values by channel name, each name once.
#[derive(Debug)]
pub(super) struct ByChannel<V>(Vec<(Box<str>, V)>);

impl<V> Default for ByChannel<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<V> ByChannel<V> {
    pub(super) fn get(&self, channel: &str) -> Option<&V> {
        self.0.iter().find(|(c, _)| **c == *channel).map(|(_, v)| v)
    }

    pub(super) fn contains_key(&self, channel: &str) -> bool {
        self.get(channel).is_some()
    }

    /// Sets `channel`'s value, replacing the one it had.
    pub(super) fn insert(&mut self, channel: &str, value: V) {
        if let Some((_, v)) = self.0.iter_mut().find(|(c, _)| **c == *channel) {
            *v = value;
            return;
        }
        // One more slot, not the vector's usual doubling.
        self.0.reserve_exact(1);
        self.0.push((channel.into(), value));
    }

    pub(super) fn remove(&mut self, channel: &str) -> Option<V> {
        let i = self.0.iter().position(|(c, _)| **c == *channel)?;
        let (_, value) = self.0.swap_remove(i);
        if self.0.is_empty() {
            self.0 = Vec::new();
        }
        Some(value)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(c, _)| &**c)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }
}

impl<V> IntoIterator for ByChannel<V> {
    type Item = (Box<str>, V);
    type IntoIter = std::vec::IntoIter<(Box<str>, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_each_channel_once_in_exactly_its_room() {
        let mut map = ByChannel::default();
        map.insert("a", 1);
        map.insert("b", 2);
        map.insert("a", 3);
        assert_eq!(map.len(), 2);
        assert_eq!(map.0.capacity(), 2, "no spare slots");
        assert_eq!(
            (map.get("a"), map.get("b"), map.get("c")),
            (Some(&3), Some(&2), None)
        );
        assert!(map.contains_key("b"));
        assert_eq!(map.remove("a"), Some(3));
        assert_eq!(map.remove("a"), None);
        assert_eq!(map.keys().collect::<Vec<_>>(), ["b"]);
        assert_eq!(map.values().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(map.remove("b"), Some(2));
        assert_eq!(map.0.capacity(), 0, "an empty map holds nothing");
    }
}
