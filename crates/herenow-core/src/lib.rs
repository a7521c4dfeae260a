//! herenow-core: the presence domain, the store seam and its contract.
//!
//! This crate is what herenow *means*: who is in a space, since when, with
//! what status. It holds
//!
//! - [`id`]: validated space names, member ids and keys (users and guests);
//! - [`time`] and [`policy`]: millisecond timestamps, the injected [`Clock`],
//!   and the thresholds that turn a last-seen time into a [`Status`];
//! - [`store`] and [`values`]: the [`PresenceStore`] trait every backend
//!   implements (the presence operations every store has), and the values
//!   that cross it;
//! - [`capability`]: what only some stores offer, one trait each
//!   ([`LiveConnections`], [`Following`], [`WebhookOutbox`],
//!   [`SpaceWebhooks`], [`UserIndex`], [`Relay`]), reached through
//!   [`PresenceStore`]'s accessors;
//! - [`conn`]: live connections (WebSocket presence): many per member,
//!   each with its own metadata, expiring unless pinged;
//! - [`cursor`]: the one format of listing cursors, shared by every store;
//! - [`event`] and [`feed`]: join / away / back / leave / update events and
//!   subscriptions;
//! - [`follow`]: following users across spaces, the store's side of
//!   watching a contact list;
//! - [`outbox`]: the webhook outbox's events and options;
//! - [`relay`]: opaque messages relayed to every server sharing a store;
//! - [`meta`]: members' metadata, a bounded JSON object;
//! - [`limits`] and [`error`]: the bounds on every input and the errors,
//!   classified once;
//! - `contract` (feature `contract`): the scenarios every store must pass,
//!   run by each store crate's tests;
//! - `fuzzing` (feature `fuzzing`): the property tests' strategies for
//!   valid values and mutated encodings, shared with the stores' decoder
//!   tests.
//!
//! It is not a server and holds no engine: it does no I/O (no files, no
//! sockets) and knows nothing of HTTP or Redis. The stores implement its
//! trait in their own crates (herenow-memory, the embedded default;
//! herenow-redis); the server crate maps its errors to problem responses.

#![forbid(unsafe_code)]

pub mod capability;
pub mod conn;
#[cfg(feature = "contract")]
pub mod contract;
pub mod cursor;
pub mod error;
pub mod event;
pub mod feed;
pub mod follow;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod id;
pub mod limits;
pub mod meta;
pub mod outbox;
pub mod policy;
pub mod relay;
pub mod store;
pub mod time;
pub mod values;

pub use capability::{Following, LiveConnections, Relay, SpaceWebhooks, UserIndex, WebhookOutbox};
pub use conn::{Attach, AttachReport, ConnId, Connection, DetachReport};
pub use error::{Error, ErrorKind, InvalidInput, Result};
pub use event::{Event, EventKind, EventReceiver, LeaveReason, RecvError, Subscription};
pub use follow::{FollowTap, UserChange, UserFeed};
pub use id::{MemberId, MemberKey, MemberKind, SpaceName};
pub use meta::Metadata;
pub use outbox::{OutboxEvent, OutboxKind, OutboxOptions, OutboxStats, SpaceHook};
pub use policy::{SpaceConfig, Status};
pub use relay::{RelayFeed, RelayMessage, RelayTap};
pub use store::{
    Capability, Counts, ErasureReport, Heartbeat, HeartbeatReport, KindFilter, ListQuery,
    MemberStatus, Order, Page, PresenceStore, SeenAnywhere, SpaceSummary, TickReport,
};
pub use time::{Clock, ManualClock, Millis, SystemClock};
