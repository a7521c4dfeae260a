//! What the server's integration tests share, API and WebSocket alike.
//!
//! - this file: the clock's start, the deadline that guards against a
//!   hang, member keys, and every construction of an [`AppState`] or a
//!   [`Backend`]: how the server builds its state is the server's business,
//!   so a change there is one edit here;
//! - [`http`]: requests through the router without a socket, answers read
//!   to the end with their status and problem asserts, and raw HTTP/1.1
//!   on a real socket;
//! - [`sse`]: Server-Sent Events read off a response body;
//! - [`ws`]: a server on a loopback socket and a WebSocket client that
//!   reads JSON messages with a deadline;
//! - [`pusher`]: the Pusher app of a test, its signatures and its
//!   sockets, and the signed HTTP API;
//! - [`receiver`]: a webhook receiver with scripted answers, and a
//!   Standard Webhooks verifier of its own.
//!
//! Each test file takes what it needs (`mod support;`), so most of it is
//! unused in any one of them.

#![allow(dead_code)]

pub mod http;
pub mod pusher;
pub mod receiver;
pub mod sse;
pub mod ws;

use std::sync::Arc;
use std::time::Duration;

use herenow_core::{ManualClock, MemberId, MemberKey, PresenceStore, SpaceConfig};
use herenow_memory::MemoryStore;
#[cfg(feature = "redis")]
use herenow_redis::{RedisStore, SeedLayoutStore};
use herenow_server::{AppState, Backend, Config, WebhookConfig};

/// The store's start time: the clock every test starts from.
pub const T0: u64 = 1_700_000_000_000;
/// A guard against a hang; never reached when the server behaves.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A user, by id.
pub fn user_key(id: &str) -> MemberKey {
    MemberKey::user(MemberId::new(id).unwrap())
}

/// A join storm through the store: users `m0`, `m1`, … (`n` of them)
/// heartbeat into `space` in batches of `batch`, each with `pad` bytes
/// of metadata, so the events outgrow a socket's queue and the kernel's
/// buffers. Their ids, in order.
pub async fn join_storm(
    store: &Arc<dyn PresenceStore>,
    space: &str,
    n: usize,
    pad: usize,
    batch: usize,
) -> Vec<String> {
    let space = herenow_core::SpaceName::new(space).unwrap();
    let meta =
        herenow_core::Metadata::from_json(&format!(r#"{{"pad":"{}"}}"#, "x".repeat(pad))).unwrap();
    let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    for chunk in ids.chunks(batch) {
        let beats: Vec<herenow_core::Heartbeat> = chunk
            .iter()
            .map(|id| herenow_core::Heartbeat {
                member: user_key(id),
                at_ms: None,
                meta: Some(meta.clone()),
            })
            .collect();
        store.heartbeat(&space, &beats).await.unwrap();
    }
    ids
}

/// A guest, by id.
pub fn guest_key(id: &str) -> MemberKey {
    MemberKey::guest(MemberId::new(id).unwrap())
}

/// A memory store with the default policy, whose time is `clock`.
pub fn memory_store(clock: &ManualClock) -> Arc<MemoryStore> {
    Arc::new(MemoryStore::new(
        Arc::new(clock.clone()),
        SpaceConfig::default(),
    ))
}

// ----- every construction of the server's state --------------------------

/// The state over a memory store, as the server builds it.
pub fn memory_state(store: Arc<MemoryStore>, config: &Config) -> AppState {
    AppState::new(Backend::memory(store), config)
}

/// The state over any store (one made up by a test, say).
pub fn state_over(store: Arc<dyn PresenceStore>, config: &Config) -> AppState {
    AppState::new(Backend::custom(store), config)
}

/// The state over a Redis store, as the server builds it.
#[cfg(feature = "redis")]
pub fn redis_state(store: Arc<RedisStore>, config: &Config) -> AppState {
    AppState::new(Backend::redis(store), config)
}

/// The state over one of the seeds' layouts, as the server builds it.
#[cfg(feature = "redis")]
pub fn seed_state(store: Arc<SeedLayoutStore>, config: &Config) -> AppState {
    AppState::new(Backend::seed(store), config)
}

/// Webhook settings for tests: a claim every 10 ms, retries from 20 ms
/// up to a second, and spaces' endpoints allowed on loopback, where the
/// tests' receivers listen.
pub fn quick_webhooks() -> WebhookConfig {
    WebhookConfig {
        poll: Duration::from_millis(10),
        backoff_base: Duration::from_millis(20),
        backoff_cap: Duration::from_secs(1),
        space_allow: "127.0.0.0/8".parse().unwrap(),
        ..WebhookConfig::default()
    }
}

/// Starts `state`'s webhooks, until its shutdown.
pub async fn start_webhooks(state: &AppState) {
    state
        .webhooks()
        .start(
            &tokio_util::task::TaskTracker::new(),
            state.shutdown_token(),
        )
        .await
        .unwrap();
}

/// A memory store as the backend `serve` takes.
pub fn memory_backend(store: Arc<MemoryStore>) -> Backend {
    Backend::memory(store)
}

/// A Redis store as the backend `serve` takes.
#[cfg(feature = "redis")]
pub fn redis_backend(store: Arc<RedisStore>) -> Backend {
    Backend::redis(store)
}

/// `impl PresenceStore for $wrapper` over the `Arc<MemoryStore>` in its
/// field `.0`, named `$name`: the trait's required calls forwarded, then
/// the methods given in braces (the ones a test overrides or forwards
/// besides); every other call answers as the trait's default does. For
/// stores a test needs to differ from the memory store in one way.
#[allow(unused_macros)]
macro_rules! store_over_memory {
    ($wrapper:ty, $name:literal, { $($methods:tt)* }) => {
        #[async_trait::async_trait]
        impl herenow_core::PresenceStore for $wrapper {
            fn name(&self) -> &'static str {
                $name
            }
            fn now_ms(&self) -> herenow_core::Millis {
                self.0.now_ms()
            }
            async fn heartbeat(
                &self,
                s: &herenow_core::SpaceName,
                b: &[herenow_core::Heartbeat],
            ) -> herenow_core::Result<herenow_core::store::HeartbeatReport> {
                self.0.heartbeat(s, b).await
            }
            async fn leave(
                &self,
                s: &herenow_core::SpaceName,
                m: &[herenow_core::MemberKey],
            ) -> herenow_core::Result<u64> {
                self.0.leave(s, m).await
            }
            async fn status(
                &self,
                s: &herenow_core::SpaceName,
                m: &[herenow_core::MemberKey],
            ) -> herenow_core::Result<Vec<herenow_core::store::MemberStatus>> {
                self.0.status(s, m).await
            }
            async fn list(
                &self,
                s: &herenow_core::SpaceName,
                q: &herenow_core::store::ListQuery,
            ) -> herenow_core::Result<herenow_core::store::Page> {
                self.0.list(s, q).await
            }
            async fn count(
                &self,
                s: &herenow_core::SpaceName,
                w: Option<herenow_core::Millis>,
            ) -> herenow_core::Result<herenow_core::store::Counts> {
                self.0.count(s, w).await
            }
            async fn config(
                &self,
                s: &herenow_core::SpaceName,
            ) -> herenow_core::Result<herenow_core::SpaceConfig> {
                self.0.config(s).await
            }
            async fn set_config(
                &self,
                s: &herenow_core::SpaceName,
                c: herenow_core::SpaceConfig,
            ) -> herenow_core::Result<()> {
                self.0.set_config(s, c).await
            }
            async fn spaces(
                &self,
                a: Option<&herenow_core::SpaceName>,
                l: usize,
            ) -> herenow_core::Result<Vec<herenow_core::store::SpaceSummary>> {
                self.0.spaces(a, l).await
            }
            async fn set_friends(
                &self,
                u: &herenow_core::MemberId,
                f: &[herenow_core::MemberId],
            ) -> herenow_core::Result<u64> {
                self.0.set_friends(u, f).await
            }
            async fn add_friends(
                &self,
                u: &herenow_core::MemberId,
                f: &[herenow_core::MemberId],
            ) -> herenow_core::Result<u64> {
                self.0.add_friends(u, f).await
            }
            async fn remove_friends(
                &self,
                u: &herenow_core::MemberId,
                f: &[herenow_core::MemberId],
            ) -> herenow_core::Result<u64> {
                self.0.remove_friends(u, f).await
            }
            async fn friends(
                &self,
                u: &herenow_core::MemberId,
            ) -> herenow_core::Result<Vec<herenow_core::MemberId>> {
                self.0.friends(u).await
            }
            async fn subscribe(
                &self,
                s: &herenow_core::SpaceName,
            ) -> herenow_core::Result<herenow_core::Subscription> {
                self.0.subscribe(s).await
            }
            async fn tick(&self) -> herenow_core::Result<herenow_core::store::TickReport> {
                self.0.tick().await
            }
            $($methods)*
        }
    };
}
#[allow(unused_imports)]
pub(crate) use store_over_memory;
