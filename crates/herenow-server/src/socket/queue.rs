//! The channel from a socket's session to its writer (under its
//! [`Inlet`](super::Inlet)): a bounded queue that costs an idle socket
//! almost nothing.
//!
//! Every open socket holds one for its whole life, and most hold a
//! message or two at a time. Tokio's `mpsc` allocates a block of 32 slots
//! up front and keeps up to four after a burst (over a kilobyte each);
//! this queue is a `VecDeque` that grows with what is queued and gives
//! its memory back once drained, behind one small lock, which also holds
//! the receiver's waker: a message queued costs one lock and one wake.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::sync::mpsc::error::TrySendError;

/// Capacity a drained queue may keep; past it, its memory is given back.
const KEEP: usize = 8;

/// A bounded queue of `cap` items: its two ends.
pub(crate) fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            senders: 1,
            receiver: true,
            waiting: None,
            room_wanted: false,
        }),
        cap,
        room: Notify::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

struct Shared<T> {
    state: Mutex<State<T>>,
    cap: usize,
    /// Wakes senders waiting for room: an item taken, or the receiver
    /// gone.
    room: Notify,
}

struct State<T> {
    items: VecDeque<T>,
    senders: usize,
    /// The receiver is still there.
    receiver: bool,
    /// The receiver's waker while it waits: an item, or the last sender
    /// gone, wakes it.
    waiting: Option<Waker>,
    /// A sender waits for [`room`](Sender::room).
    room_wanted: bool,
}

/// The sending end; cloned for each sender.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Sender<T> {
    /// Queues `item` unless the queue is full or the receiver is gone.
    pub(crate) fn try_send(&self, item: T) -> Result<(), TrySendError<T>> {
        self.try_send_leaving(item, 0)
    }

    /// Queues `item` unless that would leave fewer than `kept` slots free
    /// (kept for what must not be refused), or the receiver is gone.
    pub(crate) fn try_send_leaving(&self, item: T, kept: usize) -> Result<(), TrySendError<T>> {
        let mut state = self.shared.state.lock();
        if !state.receiver {
            return Err(TrySendError::Closed(item));
        }
        if state.items.len() + kept >= self.shared.cap {
            return Err(TrySendError::Full(item));
        }
        state.items.push_back(item);
        let waiting = state.waiting.take();
        drop(state);
        wake(waiting);
        Ok(())
    }

    /// Puts `item` ahead of everything queued, past the bound (a close
    /// that cannot wait behind a full queue); false once the receiver is
    /// gone.
    pub(crate) fn push_first(&self, item: T) -> bool {
        let mut state = self.shared.state.lock();
        if !state.receiver {
            return false;
        }
        state.items.push_front(item);
        let waiting = state.waiting.take();
        drop(state);
        wake(waiting);
        true
    }

    /// Free slots now.
    pub(crate) fn capacity(&self) -> usize {
        let state = self.shared.state.lock();
        self.shared.cap.saturating_sub(state.items.len())
    }

    /// Slots in all.
    pub(crate) fn max_capacity(&self) -> usize {
        self.shared.cap
    }

    /// Whether the receiver is gone.
    pub(crate) fn is_closed(&self) -> bool {
        !self.shared.state.lock().receiver
    }

    /// Waits until at least `free` slots are free; false once the receiver
    /// is gone. Reserves nothing: a push may take the room again.
    pub(crate) async fn room(&self, free: usize) -> bool {
        loop {
            // Registered before the check, so a pop between the check and
            // the wait is not missed.
            let notified = self.shared.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.shared.state.lock();
                if !state.receiver {
                    return false;
                }
                if self.shared.cap.saturating_sub(state.items.len()) >= free {
                    return true;
                }
                state.room_wanted = true;
            }
            notified.await;
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.state.lock().senders += 1;
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = self.shared.state.lock();
            state.senders -= 1;
            if state.senders == 0 {
                state.waiting.take()
            } else {
                None
            }
        };
        wake(waiting);
    }
}

/// Wakes the receiver that was waiting, if one was (called once the
/// lock is released).
fn wake(waiting: Option<Waker>) {
    if let Some(waker) = waiting {
        waker.wake();
    }
}

/// The receiving end.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Receiver<T> {
    /// The next item, in order; `None` once every sender is gone and the
    /// queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<T> {
        poll_fn(|cx| match take(&self.shared, Some(cx.waker())) {
            Ok(item) => Poll::Ready(Some(item)),
            Err(Empty::Closed) => Poll::Ready(None),
            Err(Empty::Open) => Poll::Pending,
        })
        .await
    }

    /// The next item if one is queued now, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        take(&self.shared, None).ok()
    }
}

/// Pops the next item; else whether the empty queue is closed, leaving
/// `waker` to be woken when it is not.
fn take<T>(shared: &Shared<T>, waker: Option<&Waker>) -> Result<T, Empty> {
    let mut state = shared.state.lock();
    if let Some(item) = state.items.pop_front() {
        if state.items.is_empty() && state.items.capacity() > KEEP {
            state.items = VecDeque::new();
        }
        let room_wanted = std::mem::take(&mut state.room_wanted);
        drop(state);
        if room_wanted {
            shared.room.notify_waiters();
        }
        return Ok(item);
    }
    if state.senders == 0 {
        return Err(Empty::Closed);
    }
    if let Some(waker) = waker
        && !state.waiting.as_ref().is_some_and(|w| w.will_wake(waker))
    {
        state.waiting = Some(waker.clone());
    }
    Err(Empty::Open)
}

/// An empty queue: closed (every sender gone, nothing more will come)
/// or still open.
enum Empty {
    Closed,
    Open,
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let items = {
            let mut state = self.shared.state.lock();
            state.receiver = false;
            state.waiting = None;
            std::mem::take(&mut state.items)
        };
        // Dropped outside the lock.
        drop(items);
        self.shared.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn items_arrive_in_order_up_to_the_bound() {
        let (tx, mut rx) = channel(3);
        for i in 0..3 {
            tx.try_send(i).unwrap();
        }
        assert!(matches!(tx.try_send(9), Err(TrySendError::Full(9))));
        assert_eq!(tx.capacity(), 0);
        rx.recv().await;
        assert!(
            matches!(tx.try_send_leaving(9, 1), Err(TrySendError::Full(9))),
            "the last slot is kept"
        );
        tx.try_send(3).unwrap();
        for i in 1..4 {
            assert_eq!(rx.recv().await, Some(i));
        }
        assert_eq!(tx.capacity(), 3);
    }

    #[tokio::test]
    async fn the_receiver_ends_once_every_sender_is_gone_and_the_queue_is_drained() {
        let (tx, mut rx) = channel(4);
        let second = tx.clone();
        tx.try_send(1).unwrap();
        drop(tx);
        second.try_send(2).unwrap();
        drop(second);
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_an_item_and_for_the_last_sender() {
        let (tx, mut rx) = channel::<u32>(4);
        let waiting = tokio::spawn(async move {
            let first = rx.recv().await;
            let end = rx.recv().await;
            (first, end)
        });
        tokio::task::yield_now().await;
        tx.try_send(7).unwrap();
        drop(tx);
        let got = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the receiver woke")
            .unwrap();
        assert_eq!(got, (Some(7), None));
    }

    #[tokio::test]
    async fn sending_to_a_gone_receiver_fails_and_frees_what_was_queued() {
        let (tx, rx) = channel(4);
        let item = Arc::new(());
        tx.try_send(item.clone()).unwrap();
        drop(rx);
        assert_eq!(Arc::strong_count(&item), 1, "the queued item was dropped");
        assert!(matches!(tx.try_send(item), Err(TrySendError::Closed(_))));
        assert!(!tx.room(1).await, "no room to wait for without a receiver");
    }

    #[tokio::test]
    async fn room_waits_until_enough_slots_are_free() {
        let (tx, mut rx) = channel(4);
        for i in 0..4 {
            tx.try_send(i).unwrap();
        }
        let waiter = tx.clone();
        let room = tokio::spawn(async move { waiter.room(2).await });
        tokio::task::yield_now().await;
        assert_eq!(rx.recv().await, Some(0));
        tokio::task::yield_now().await;
        assert!(!room.is_finished(), "one free slot is not two");
        assert_eq!(rx.recv().await, Some(1));
        let has_room = tokio::time::timeout(Duration::from_secs(5), room)
            .await
            .expect("room came")
            .unwrap();
        assert!(has_room);
    }

    #[tokio::test]
    async fn try_recv_takes_what_is_queued_without_waiting() {
        let (tx, mut rx) = channel(4);
        assert_eq!(rx.try_recv(), None);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert_eq!(tx.capacity(), 2);
        assert_eq!(rx.try_recv(), Some(1));
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), None);
        assert_eq!(tx.capacity(), tx.max_capacity());
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
    }

    #[tokio::test]
    async fn an_item_pushed_first_overtakes_a_full_queue() {
        let (tx, mut rx) = channel(2);
        tx.try_send(1).unwrap();
        tx.try_send(2).unwrap();
        assert!(tx.push_first(0), "past the bound");
        assert_eq!(rx.recv().await, Some(0));
        assert_eq!(rx.recv().await, Some(1));
        drop(rx);
        assert!(!tx.push_first(9), "nobody to take it");
    }

    #[tokio::test]
    async fn a_drained_queue_gives_its_memory_back() {
        let (tx, mut rx) = channel(1024);
        for i in 0..1000 {
            tx.try_send(i).unwrap();
        }
        while tx.capacity() < 1024 {
            rx.recv().await;
        }
        assert!(rx.shared.state.lock().items.capacity() <= KEEP);
    }
}
