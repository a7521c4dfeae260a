//! Issue 35, "a store seam of capabilities": the backend learns when it
//! is built what its store offers, and a flag that needs a capability the
//! store lacks is refused then, naming the store and the flag
//! ([`ConfigError::StoreLacks`]). Without such a flag, requests that need
//! it still answer `501 unsupported` (`api_users.rs`).

mod support;

use std::sync::Arc;

use herenow_core::{Capability, ManualClock, MemoryStore};
use herenow_server::{Backend, Config, ConfigError};
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
