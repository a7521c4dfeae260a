//! The spaces one connection subscribes to: their event streams, merged
//! into one, and the snapshot page size each asked for (a subscription
//! that starts over after lag sends its snapshot in the same pages).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use herenow_core::{Event, EventReceiver, RecvError, SpaceName};
use tokio_stream::StreamMap;

use super::limits::{DEFAULT_PAGE_SIZE, MAX_SUBSCRIBED};
use crate::ws::wire::WsError;

type EventStream = Pin<Box<dyn Stream<Item = Result<Arc<Event>, RecvError>> + Send + Sync>>;

/// A connection's subscriptions, at most [`MAX_SUBSCRIBED`].
#[derive(Default)]
pub(super) struct Subscriptions {
    streams: StreamMap<SpaceName, EventStream>,
    page_sizes: HashMap<SpaceName, usize>,
}

impl Subscriptions {
    /// Refuses a subscription beyond [`MAX_SUBSCRIBED`]; subscribing
    /// again to a space is always allowed.
    pub(super) fn admit(&self, space: &SpaceName) -> Result<(), WsError> {
        if !self.page_sizes.contains_key(space) && self.page_sizes.len() >= MAX_SUBSCRIBED {
            return Err(WsError::new(
                "too-many-spaces",
                format!("a connection may subscribe to at most {MAX_SUBSCRIBED} spaces"),
            ));
        }
        Ok(())
    }

    /// Follows `space`'s events from now on, in place of any earlier
    /// subscription to it.
    pub(super) fn insert(&mut self, space: SpaceName, events: EventReceiver, page_size: usize) {
        self.streams.insert(space.clone(), into_stream(events));
        self.page_sizes.insert(space, page_size);
    }

    /// Ends the subscription to `space`; false if there was none.
    pub(super) fn remove(&mut self, space: &SpaceName) -> bool {
        self.streams.remove(space);
        self.page_sizes.remove(space).is_some()
    }

    /// The page size `space`'s subscriber asked for.
    pub(super) fn page_size(&self, space: &SpaceName) -> usize {
        self.page_sizes
            .get(space)
            .copied()
            .unwrap_or(DEFAULT_PAGE_SIZE)
    }

    /// Whether no event stream is open (a stream the store closed counts
    /// as gone).
    pub(super) fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The next event of any subscription, with its space. A stream the
    /// store closes is dropped; `None` when there are none.
    pub(super) async fn next(&mut self) -> Option<(SpaceName, Result<Arc<Event>, RecvError>)> {
        self.streams.next().await
    }
}

/// A subscription's events as a stream that ends when the store closes.
fn into_stream(rx: EventReceiver) -> EventStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Err(RecvError::Closed) => None,
            item => Some((item, rx)),
        }
    }))
}
