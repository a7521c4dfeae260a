//! [`Feed`]: a broadcast receiver that also tells of losses upstream,
//! under both of the store's fan-outs to servers ([`crate::follow`]'s user
//! changes and [`crate::relay`]'s messages).
//!
//! A reader that falls behind misses items, and a store whose items come
//! through a link that can drop (Redis pub/sub keeps nothing for a client
//! that was away) may lose them before they reach the channel. Either way
//! the feed answers [`RecvError::Lagged`] before any further item, so the
//! reader knows to start over rather than miss items silently.

use std::future::Future;
use std::task::Poll;

use tokio::sync::{broadcast, watch};

use crate::event::RecvError;

/// Items from a store's broadcast channel, losses told first.
pub struct Feed<T> {
    rx: broadcast::Receiver<T>,
    /// Bumped by the store whenever items may have been lost on their way
    /// to it ([`with_losses`](Self::with_losses)); `None` for a store that
    /// loses nothing but what a slow reader misses.
    losses: Option<watch::Receiver<u64>>,
}

impl<T: Clone> Feed<T> {
    /// Wraps a broadcast receiver (for stores outside this crate too).
    pub fn new(rx: broadcast::Receiver<T>) -> Self {
        Self { rx, losses: None }
    }

    /// Wraps a broadcast receiver of a store whose items come through a
    /// link that can drop. The store bumps `losses` once items may have
    /// been lost and the link is whole again; the feed then answers
    /// [`RecvError::Lagged`] (with 0: nobody knows how many were lost)
    /// before any further item. Losses before the feed was made do not
    /// count.
    pub fn with_losses(rx: broadcast::Receiver<T>, losses: watch::Receiver<u64>) -> Self {
        Self {
            rx,
            losses: Some(losses),
        }
    }

    /// Waits for the next item. [`RecvError::Lagged`]: items were lost
    /// (the reader fell behind, or the store lost its link).
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        if let Some(losses) = &mut self.losses {
            // A loss is told first, before the items queued behind it.
            // Both futures are cancel-safe: the one not chosen loses
            // nothing when dropped. `Err(bumped)`: the store bumped its
            // count (true) or dropped its side (false).
            let first = {
                let mut lost = std::pin::pin!(losses.changed());
                let mut next = std::pin::pin!(self.rx.recv());
                std::future::poll_fn(|cx| {
                    if let Poll::Ready(r) = lost.as_mut().poll(cx) {
                        return Poll::Ready(Err(r.is_ok()));
                    }
                    next.as_mut().poll(cx).map(Ok)
                })
                .await
            };
            match first {
                Ok(next) => return lift(next),
                Err(true) => return Err(RecvError::Lagged(0)),
                // No more losses to tell.
                Err(false) => self.losses = None,
            }
        }
        lift(self.rx.recv().await)
    }

    /// The next item if one is queued now, without waiting; a loss the
    /// store told of comes first, as in [`recv`](Self::recv).
    pub fn try_recv(&mut self) -> Option<Result<T, RecvError>> {
        if let Some(losses) = &mut self.losses
            && losses.has_changed().unwrap_or(false)
        {
            losses.borrow_and_update();
            return Some(Err(RecvError::Lagged(0)));
        }
        match self.rx.try_recv() {
            Ok(item) => Some(Ok(item)),
            Err(broadcast::error::TryRecvError::Empty) => None,
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
            Err(broadcast::error::TryRecvError::Closed) => Some(Err(RecvError::Closed)),
        }
    }
}

/// A broadcast receiver's answer as a feed's.
fn lift<T>(r: Result<T, broadcast::error::RecvError>) -> Result<T, RecvError> {
    match r {
        Ok(item) => Ok(item),
        Err(broadcast::error::RecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
        Err(broadcast::error::RecvError::Closed) => Err(RecvError::Closed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_store_that_lost_items_makes_its_feeds_lag_first() {
        let (tx, _) = broadcast::channel(16);
        let (losses, _) = watch::channel(0u64);
        losses.send_modify(|n| *n += 1);
        // A loss before the feed was made is none of its business.
        let mut feed = Feed::with_losses(tx.subscribe(), losses.subscribe());
        tx.send(1).unwrap();
        assert_eq!(feed.recv().await, Ok(1));
        // Queued items wait behind the loss, which is told once.
        tx.send(2).unwrap();
        losses.send_modify(|n| *n += 1);
        losses.send_modify(|n| *n += 1);
        assert_eq!(feed.recv().await, Err(RecvError::Lagged(0)));
        assert_eq!(feed.recv().await, Ok(2));
        // Without waiting, the same order.
        tx.send(3).unwrap();
        losses.send_modify(|n| *n += 1);
        assert_eq!(feed.try_recv(), Some(Err(RecvError::Lagged(0))));
        assert_eq!(feed.try_recv(), Some(Ok(3)));
        assert_eq!(feed.try_recv(), None);
        // The store gone: what is still queued is read, then the end.
        tx.send(4).unwrap();
        drop(losses);
        assert_eq!(feed.recv().await, Ok(4));
        drop(tx);
        assert_eq!(feed.recv().await, Err(RecvError::Closed));
    }

    #[tokio::test]
    async fn a_reader_that_fell_behind_is_told_how_far() {
        let (tx, rx) = broadcast::channel(2);
        let mut feed = Feed::new(rx);
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        assert_eq!(feed.recv().await, Err(RecvError::Lagged(3)));
        assert_eq!(feed.recv().await, Ok(3));
    }
}
