//! Issue 35, "a store seam of capabilities": the backend learns when it
//! is built what its store offers, and a flag that needs a capability the
//! store lacks is refused then, naming the store and the flag
//! ([`ConfigError::StoreLacks`]). Without such a flag, requests that need
//! it still answer `501 unsupported` (`api_users.rs`).

mod support;

use std::sync::Arc;

use herenow_core::{Capability, ManualClock};
use herenow_memory::MemoryStore;
use herenow_server::{Backend, Config, ConfigError, PusherApp, PusherConfig};
use herenow_server::{WebhookConfig, WebhookEndpoint as Endpoint, WebhookSecret as Secret};
use support::{T0, memory_store, store_over_memory};

/// The memory store's presence, none of its capabilities: what a new
/// backend that implements the core trait alone offers.
struct PresenceOnly(Arc<MemoryStore>);

store_over_memory!(PresenceOnly, "presence-only", {});

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// The configuration `herenow serve` builds from `--webhook` (when
/// `endpoint`) and `--webhook-secret` (when `secret`).
fn config(endpoint: bool, secret: bool) -> Config {
    let secret = secret.then(|| SECRET.parse::<Secret>().unwrap());
    let endpoints = if endpoint {
        // Signed by its own secret where no --webhook-secret is given.
        let spec = format!("https://example.com/hook,secret={SECRET}");
        vec![Endpoint::parse(&spec, 0, secret.as_ref()).unwrap()]
    } else {
        Vec::new()
    };
    Config {
        webhooks: WebhookConfig {
            endpoints,
            default_secret: secret,
            ..WebhookConfig::default()
        },
        ..Config::default()
    }
}

#[test]
fn issue_35_the_backend_knows_what_its_store_offers() {
    let clock = ManualClock::new(T0);
    let memory = Backend::memory(memory_store(&clock));
    let bare = Backend::custom(Arc::new(PresenceOnly(memory_store(&clock))));
    for c in Capability::ALL {
        assert!(memory.offers(c), "the memory store offers {c}");
        assert!(!bare.offers(c), "a presence-only store offers no {c}");
    }
}

#[test]
fn issue_35_flags_that_need_a_missing_capability_are_refused_at_start() {
    let clock = ManualClock::new(T0);
    let bare = Backend::custom(Arc::new(PresenceOnly(memory_store(&clock))));
    let memory = Backend::memory(memory_store(&clock));
    for (endpoint, secret, refused) in [
        (true, false, Some(("--webhook", Capability::WebhookOutbox))),
        (true, true, Some(("--webhook", Capability::WebhookOutbox))),
        // Without --webhook the secret signs spaces' endpoints only.
        (
            false,
            true,
            Some(("--webhook-secret", Capability::SpaceWebhooks)),
        ),
        (false, false, None),
    ] {
        let config = config(endpoint, secret);
        let case = format!("--webhook {endpoint}, --webhook-secret {secret}");
        match (bare.check(&config), refused) {
            (Err(ConfigError::StoreLacks { store, flag, needs }), Some((f, c))) => {
                assert_eq!(
                    (store.as_str(), flag, needs),
                    ("presence-only", f, c),
                    "{case}"
                );
            }
            (Ok(()), None) => {}
            (other, _) => panic!("{case}: {other:?}"),
        }
        // A store that offers everything takes every flag.
        assert!(memory.check(&config).is_ok(), "{case}");
    }
}

/// The memory store's live connections and relay, without its webhook
/// outbox: a store that serves Pusher's sockets but keeps no events for
/// webhooks.
struct LiveOnly(Arc<MemoryStore>);

store_over_memory!(LiveOnly, "live-only", {
    fn live_connections(&self) -> Option<&dyn herenow_core::LiveConnections> {
        self.0.live_connections()
    }
    fn relay(&self) -> Option<&dyn herenow_core::Relay> {
        self.0.relay()
    }
});

/// Live connections without a relay: one server's sockets could not
/// reach another's.
struct NoRelay(Arc<MemoryStore>);

store_over_memory!(NoRelay, "no-relay", {
    fn live_connections(&self) -> Option<&dyn herenow_core::LiveConnections> {
        self.0.live_connections()
    }
});

#[test]
fn issue_38_pusher_needs_live_connections_and_a_relay_and_its_webhooks_the_outbox() {
    let clock = ManualClock::new(T0);
    let live_only = Backend::custom(Arc::new(LiveOnly(memory_store(&clock))));
    let memory = Backend::memory(memory_store(&clock));
    let pusher = |webhooks: &[&str]| Config {
        pusher: PusherConfig {
            apps: vec!["1:key-a:secret-aaaa".parse::<PusherApp>().unwrap()],
            webhooks: webhooks.iter().map(|w| w.parse().unwrap()).collect(),
            webhook_client_events: false,
        },
        ..Config::default()
    };
    // Sockets alone need live connections and the relay only.
    assert!(live_only.check(&pusher(&[])).is_ok());
    let no_relay = Backend::custom(Arc::new(NoRelay(memory_store(&clock))));
    match no_relay.check(&pusher(&[])) {
        Err(ConfigError::StoreLacks { store, flag, needs }) => assert_eq!(
            (store.as_str(), flag, needs),
            ("no-relay", "--pusher-app", Capability::Relay)
        ),
        other => panic!("{other:?}"),
    }
    match live_only.check(&pusher(&["https://example.com/pusher"])) {
        Err(ConfigError::StoreLacks { store, flag, needs }) => assert_eq!(
            (store.as_str(), flag, needs),
            ("live-only", "--pusher-webhook", Capability::WebhookOutbox)
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        memory
            .check(&pusher(&["https://example.com/pusher"]))
            .is_ok()
    );
}
