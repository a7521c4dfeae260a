//! herenow-core: the presence domain, the store seam and its contract.
//!
//! This crate is what herenow *means*: who is in a space, since when, with
//! what status; each module's doc says its part, ARCHITECTURE.md places
//! them. The [`PresenceStore`] trait is what every store has; the
//! [`capability`] traits what only some offer, so a server learns at start
//! what its store can do. `contract` (feature `contract`) holds the
//! scenarios every store must pass, `fuzzing` (feature `fuzzing`) the
//! property tests' strategies.
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
