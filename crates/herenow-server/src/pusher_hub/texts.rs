//! [`MemberTexts`]: the `member_added` / `member_removed` frame of a store
//! event, serialized once for all of this server's sockets in its channel.
//!
//! Every socket subscribed to a presence channel reads the same
//! `Arc<Event>` from the store's subscription; the first to read it
//! serializes the frame and the others find it here. An entry holds a
//! `Weak` of its event, so the address it is keyed by cannot be reused by
//! another event while the entry lives: a hit is always the same event.
//! At most [`KEPT`] entries are kept, the oldest evicted first; a socket
//! that reads an event after its entry went (one far behind) serializes
//! it again, which costs time, never correctness.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Weak};

use herenow_core::Event;
use parking_lot::Mutex;

/// Most frames kept.
const KEPT: usize = 1024;

struct Entry {
    event: Weak<Event>,
    channel: Box<str>,
    text: Arc<str>,
}

#[derive(Default)]
struct Inner {
    by_event: HashMap<usize, Entry>,
    /// Keys of `by_event`, oldest first; each once.
    order: VecDeque<usize>,
}

/// Member frames by the event they come from.
#[derive(Default)]
pub(crate) struct MemberTexts {
    inner: Mutex<Inner>,
}

impl MemberTexts {
    /// The frame of `event` in `channel`: the one made already, or
    /// `make`'s (made outside the lock, then kept).
    pub(crate) fn get_or_make(
        &self,
        event: &Arc<Event>,
        channel: &str,
        make: impl FnOnce() -> Arc<str>,
    ) -> Arc<str> {
        let key = Arc::as_ptr(event) as usize;
        if let Some(e) = self.inner.lock().by_event.get(&key)
            && std::ptr::eq(e.event.as_ptr(), Arc::as_ptr(event))
            && &*e.channel == channel
        {
            return e.text.clone();
        }
        let text = make();
        let mut inner = self.inner.lock();
        let entry = Entry {
            event: Arc::downgrade(event),
            channel: channel.into(),
            text: text.clone(),
        };
        if inner.by_event.insert(key, entry).is_none() {
            inner.order.push_back(key);
            while inner.order.len() > KEPT {
                if let Some(old) = inner.order.pop_front() {
                    inner.by_event.remove(&old);
                }
            }
        }
        text
    }

    /// Frames kept now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().by_event.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use herenow_core::{EventKind, MemberId, MemberKey, SpaceName, Status};

    fn event(id: &str) -> Arc<Event> {
        Arc::new(Event {
            space: SpaceName::new("presence-x").unwrap(),
            kind: EventKind::Join,
            member: MemberKey::user(MemberId::new(id).unwrap()),
            status: Status::Online,
            last_seen_ms: Some(1),
            meta: None,
            reason: None,
            conn: None,
        })
    }

    #[test]
    fn one_event_is_serialized_once_per_channel() {
        let texts = MemberTexts::default();
        let e = event("a");
        let mut made = 0;
        for _ in 0..3 {
            let t = texts.get_or_make(&e, "presence-x", || {
                made += 1;
                Arc::from("frame")
            });
            assert_eq!(&*t, "frame");
        }
        assert_eq!(made, 1);
        let other = texts.get_or_make(&e, "presence-y", || Arc::from("other"));
        assert_eq!(
            &*other, "other",
            "another channel is not served the first's frame"
        );
        let f = event("b");
        let t = texts.get_or_make(&f, "presence-x", || Arc::from("b's"));
        assert_eq!(&*t, "b's", "another event is not served the first's frame");
    }

    #[test]
    fn entries_are_bounded() {
        let texts = MemberTexts::default();
        let events: Vec<_> = (0..KEPT + 10).map(|i| event(&format!("u{i}"))).collect();
        for e in &events {
            texts.get_or_make(e, "presence-x", || Arc::from("f"));
        }
        assert_eq!(texts.len(), KEPT);
    }
}
