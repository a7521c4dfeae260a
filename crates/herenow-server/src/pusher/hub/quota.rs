//! [`Quota`]: each app's sockets on this server, against its
//! `max_connections`.
//!
//! A socket takes a [`Slot`] before it is upgraded and holds it until it
//! ends, so the count is exact whatever the order sockets come and go in,
//! and a socket over the limit is refused (`4004`) without ever being
//! served. A reload that lowers the limit closes nobody.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

type Counts = Arc<Mutex<HashMap<Arc<str>, usize>>>;

/// The apps' socket counts.
#[derive(Default)]
pub(crate) struct Quota {
    counts: Counts,
}

/// One socket's place in its app's count, given back when dropped.
pub(crate) struct Slot {
    counts: Counts,
    app: Arc<str>,
}

impl Quota {
    /// A place for one more socket of `app`, or `None` when it holds `max`
    /// (if any) already.
    pub(crate) fn take(&self, app: &str, max: Option<usize>) -> Option<Slot> {
        let mut counts = self.counts.lock();
        let n = counts.get(app).copied().unwrap_or(0);
        if max.is_some_and(|max| n >= max) {
            return None;
        }
        let app: Arc<str> = match counts.get_key_value(app) {
            Some((key, _)) => key.clone(),
            None => Arc::from(app),
        };
        counts.insert(app.clone(), n + 1);
        Some(Slot {
            counts: self.counts.clone(),
            app,
        })
    }

    /// The sockets `app` holds now.
    #[cfg(test)]
    fn count(&self, app: &str) -> usize {
        self.counts.lock().get(app).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        if let Some(n) = counts.get_mut(&self.app) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.app);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_count_each_app_against_its_limit() {
        let q = Quota::default();
        let a1 = q.take("a", Some(2)).unwrap();
        let a2 = q.take("a", Some(2)).unwrap();
        assert!(q.take("a", Some(2)).is_none());
        // Another app, and no limit at all, are not held back.
        let b = q.take("b", Some(1)).unwrap();
        let unbounded: Vec<Slot> = (0..5).map(|_| q.take("a", None).unwrap()).collect();
        assert_eq!(q.count("a"), 7);
        drop(unbounded);
        drop(a1);
        assert_eq!(q.count("a"), 1);
        let a3 = q.take("a", Some(2)).unwrap();
        // A lower limit refuses newcomers and closes nobody.
        assert!(q.take("a", Some(1)).is_none());
        drop((a2, a3, b));
        assert_eq!((q.count("a"), q.count("b")), (0, 0));
        assert!(q.counts.lock().is_empty());
    }
}
