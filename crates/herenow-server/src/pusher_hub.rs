//! What the Pusher protocol's sockets share in one server: the apps, the
//! local sockets' channels and the socket ids. A leaf: [`AppState`] holds
//! it, and the protocol's handlers (`crate::pusher`) reach it through the
//! state, as the WebSocket's sockets reach [`crate::hub`].
//!
//! [`AppState`]: crate::AppState

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::{PusherApp, PusherConfig};

mod channels;

pub use channels::Channels;
pub(crate) use channels::{Out, QUEUE, RESERVE, Subscriber};

/// The Pusher side of a server: its apps and the local sockets'
/// channels. `None` in [`AppState`] when no app is configured.
pub struct Pusher {
    pub(crate) apps: Vec<Arc<PusherApp>>,
    pub(crate) channels: Channels,
    /// This process's random part of socket ids.
    prefix: u64,
    next: AtomicU64,
}

impl Pusher {
    /// The Pusher side for `config`; `None` when it names no app.
    pub fn new(config: &PusherConfig) -> Option<Arc<Self>> {
        if !config.is_enabled() {
            return None;
        }
        Some(Arc::new(Self {
            apps: config.apps.iter().cloned().map(Arc::new).collect(),
            channels: Channels::new(),
            prefix: random_prefix(),
            next: AtomicU64::new(1),
        }))
    }

    /// A number for a new socket, unique in this process.
    pub(crate) fn next_socket(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Socket `number`'s id, `N.M` as the protocol has it: this process's
    /// random number and the socket's, so servers sharing a store (and a
    /// restarted server) do not hand out the same id.
    pub(crate) fn socket_id(&self, number: u64) -> String {
        format!("{}.{number}", self.prefix)
    }

    /// The app with this public key.
    pub(crate) fn by_key(&self, key: &str) -> Option<&Arc<PusherApp>> {
        self.apps.iter().find(|a| a.key == key)
    }

    /// The app with this id.
    pub(crate) fn by_id(&self, id: &str) -> Option<&Arc<PusherApp>> {
        self.apps.iter().find(|a| a.id == id)
    }

    /// The local sockets' channels.
    pub fn channels(&self) -> &Channels {
        &self.channels
    }
}

/// A random number of up to 15 digits.
fn random_prefix() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes[..4].copy_from_slice(&nanos.to_le_bytes());
        bytes[4..].copy_from_slice(&std::process::id().to_le_bytes());
    }
    u64::from_le_bytes(bytes) % 1_000_000_000_000_000
}
