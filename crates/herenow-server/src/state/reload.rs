//! [`AppState::reload`]: new settings applied while the server serves,
//! without dropping a socket (`herenow serve` does it on `SIGHUP`).
//!
//! What changes live: the API keys, the Pusher apps (added, removed, keys
//! and secrets, per-app limits), the webhook endpoints (`--webhook`,
//! `--webhook-secret`, `--pusher-webhook` and its client events) and the
//! spaces' defaults. Each is swapped whole where requests read it (an
//! `ArcSwap` load, no lock on the request path), so a request or a
//! socket's action sees the old settings or the new ones, never a mix
//! within one setting. Everything else (the store, bounds on connections
//! and streams, timers, the token secret, the demo) takes a restart: a
//! difference there is reported ([`ReloadReport::needs_restart`]) and
//! left as it runs.
//!
//! Everything is checked before anything changes: a configuration that
//! does not check, or a store that cannot take it (webhooks need an
//! outbox), is refused whole with the reason, and the server serves on as
//! it did.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use super::AppState;
use crate::config::{Config, ConfigError, RedisLayout, StoreSpec};
use crate::pusher::AppsChange;
use crate::webhooks::{StartError, WebhooksChange, differing_flags};

/// What a reload changed, and what it left for a restart. `Display` is
/// one line for a log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// API keys added and removed (a key whose scope changed is both);
    /// `None`: the same keys.
    pub api_keys: Option<(usize, usize)>,
    /// The Pusher apps.
    pub pusher: AppsChange,
    /// The webhook endpoints.
    pub webhooks: WebhooksChange,
    /// Whether the spaces' defaults changed.
    pub space_defaults: bool,
    /// Settings that differ from those served but were left as they are:
    /// each its flag's name (`max_connections`), with the reason where it
    /// is not plain (`pusher_apps: …`).
    pub needs_restart: Vec<String>,
}

impl ReloadReport {
    /// Whether nothing was applied.
    pub fn is_empty(&self) -> bool {
        self.api_keys.is_none()
            && self.pusher.is_empty()
            && self.webhooks.is_empty()
            && !self.space_defaults
    }
}

impl fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if let Some((added, removed)) = self.api_keys {
            parts.push(format!("api_keys: {added} added, {removed} removed"));
        }
        let p = &self.pusher;
        if !p.is_empty() {
            let mut apps = Vec::new();
            if !p.added.is_empty() {
                apps.push(format!("added {}", p.added.join(", ")));
            }
            if !p.removed.is_empty() {
                apps.push(format!(
                    "removed {} ({} sockets closed)",
                    p.removed.join(", "),
                    p.closed
                ));
            }
            for (id, what) in &p.changed {
                apps.push(format!("{id}: {}", what.join(", ")));
            }
            parts.push(format!("pusher apps: {}", apps.join("; ")));
        }
        let w = &self.webhooks;
        if w.added + w.removed > 0 {
            parts.push(format!(
                "webhook endpoints: {} added, {} removed, {} now",
                w.added, w.removed, w.endpoints
            ));
        }
        if w.default_secret {
            parts.push("webhook_secret changed".to_owned());
        }
        if self.space_defaults {
            parts.push("space defaults changed".to_owned());
        }
        if parts.is_empty() {
            parts.push("nothing changed".to_owned());
        }
        f.write_str(&parts.join("; "))
    }
}

/// Why a reload was refused; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new settings do not check, or the store cannot serve them.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store failed to open its webhook outbox for the first
    /// endpoints.
    #[error("the store's webhook outbox: {0}")]
    Store(herenow_core::Error),
}

impl From<StartError> for ReloadError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::Config(e) => ReloadError::Config(e.into()),
            StartError::Store(e) => ReloadError::Store(e),
        }
    }
}

impl AppState {
    /// Serves `new` from now on, for every setting that can change while
    /// running (see the module documentation); reports what changed and
    /// what takes a restart. One reload runs at a time.
    ///
    /// `new` is checked as at start except against the listening address
    /// (the caller's: `herenow serve` runs [`Config::check`] with its own
    /// first, as `herenow config check` does), and against the store
    /// ([`Backend::check`](crate::Backend::check)).
    pub async fn reload(&self, new: Config) -> Result<ReloadReport, ReloadError> {
        let _one = self.0.reloading.lock().await;
        // Loopback: the address check is the caller's (see above).
        new.check(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        self.0.backend.check(&new)?;
        let running = self.0.config.load_full();
        let mut report = ReloadReport {
            needs_restart: needs_restart(&running, &new)
                .into_iter()
                .map(str::to_owned)
                .collect(),
            ..ReloadReport::default()
        };

        // The one step that may fail (a store call) first.
        let mut pusher = running.pusher.clone();
        let mut planned = None;
        match (&self.0.pusher, new.pusher.is_enabled()) {
            (Some(hub), _) => {
                let (apps, change) = hub.plan_apps(&new.pusher);
                if !change.kept_prefix.is_empty() {
                    report.needs_restart.push(format!(
                        "pusher_apps: the order of apps {} (a restart moves their presence \
                         channels to other spaces)",
                        change.kept_prefix.join(", ")
                    ));
                }
                pusher = new.pusher.clone();
                planned = Some((hub, apps, change));
            }
            (None, true) => report.needs_restart.push(
                "pusher_apps: serving the Pusher protocol on a server started without apps".into(),
            ),
            (None, false) => {}
        }
        let mut hooks = new.webhooks.clone();
        hooks.pusher = match &planned {
            Some((_, apps, _)) => pusher.webhook_targets_of(apps),
            None => Vec::new(),
        };
        report.webhooks = self.0.webhooks.reconfigure(&hooks).await?;
        report.needs_restart.extend(
            report
                .webhooks
                .needs_restart
                .iter()
                .map(|s| (*s).to_owned()),
        );

        if let Some((hub, apps, mut change)) = planned {
            hub.set_apps(&apps, &mut change);
            report.pusher = change;
        }
        let mut api_keys = running.api_keys.clone();
        if running.api_keys.is_empty() != new.api_keys.is_empty() {
            report.needs_restart.push(
                "api_keys: from none to some or back (the API open to any caller or not)".into(),
            );
        } else {
            let (added, removed) = self.0.keys.replace(new.api_keys.clone());
            if added + removed > 0 {
                report.api_keys = Some((added, removed));
            }
            api_keys = new.api_keys.clone();
        }
        let mut space_defaults = running.space_defaults;
        if new.space_defaults != running.space_defaults {
            match self.0.backend.set_space_defaults(new.space_defaults) {
                Ok(()) => {
                    report.space_defaults = true;
                    space_defaults = new.space_defaults;
                }
                Err(why) => report.needs_restart.push(format!(
                    "space defaults (online_after, away_after, …): {why}"
                )),
            }
        }
        // What runs now: the running settings with what was applied.
        let mut webhooks = running.webhooks.clone();
        webhooks.endpoints = new.webhooks.endpoints;
        webhooks.default_secret = new.webhooks.default_secret;
        self.0.config.store(Arc::new(Config {
            api_keys,
            space_defaults,
            pusher,
            webhooks,
            ..(*running).clone()
        }));
        Ok(report)
    }
}

/// The flags of the settings in which `new` differs from `running` that
/// only a restart applies (the webhooks' own are
/// [`Webhooks::reconfigure`](crate::webhooks::Webhooks::reconfigure)'s).
fn needs_restart(running: &Config, new: &Config) -> Vec<&'static str> {
    let mut flags = store_differences(&running.store, &new.store);
    flags.extend(differing_flags([
        (running.demo == new.demo, "demo"),
        (
            running.max_connections == new.max_connections,
            "max_connections",
        ),
        (
            running.max_ws_connections == new.max_ws_connections,
            "ws_max_connections",
        ),
        (
            running.ws_ttl == new.ws_ttl && running.ws_ping == new.ws_ping,
            "ws_ttl",
        ),
        (running.ping_interval == new.ping_interval, "ping_interval"),
        (running.pong_wait == new.pong_wait, "pong_wait"),
        (running.drain == new.drain, "drain"),
        (running.token_secret == new.token_secret, "token_secret"),
        (
            running.max_event_streams == new.max_event_streams,
            "max_event_streams",
        ),
        (
            running.request_timeout == new.request_timeout,
            "request_timeout",
        ),
    ]));
    flags
}

/// The flags in which two stores differ.
fn store_differences(a: &StoreSpec, b: &StoreSpec) -> Vec<&'static str> {
    match (a, b) {
        (
            StoreSpec::Memory {
                data_dir,
                snapshot_interval,
                space_stripes,
            },
            StoreSpec::Memory {
                data_dir: d,
                snapshot_interval: i,
                space_stripes: s,
            },
        ) => differing_flags([
            (data_dir == d, "data_dir"),
            (snapshot_interval == i, "snapshot_interval"),
            (space_stripes == s, "space_stripes"),
        ]),
        (
            StoreSpec::Redis { target, layout },
            StoreSpec::Redis {
                target: t,
                layout: l,
            },
        ) => {
            let mut flags = differing_flags([(target == t, "store")]);
            flags.extend(layout_differences(layout, l));
            flags
        }
        _ => vec!["store"],
    }
}

/// The flags in which two Redis layouts differ.
fn layout_differences(a: &RedisLayout, b: &RedisLayout) -> Vec<&'static str> {
    match (a, b) {
        (
            RedisLayout::Herenow {
                shards,
                space_shards,
                wait_replicas,
                wait_timeout,
            },
            RedisLayout::Herenow {
                shards: s,
                space_shards: ss,
                wait_replicas: r,
                wait_timeout: t,
            },
        ) => differing_flags([
            (shards == s, "redis_shards"),
            (space_shards == ss, "redis_space_shards"),
            (wait_replicas == r, "redis_wait_replicas"),
            (wait_timeout == t, "redis_wait_timeout"),
        ]),
        #[cfg(feature = "redis")]
        (
            RedisLayout::Seed {
                layout,
                key,
                guest_key,
            },
            RedisLayout::Seed {
                layout: l,
                key: k,
                guest_key: g,
            },
        ) => differing_flags([
            (layout == l, "redis_layout"),
            (key == k, "redis_key"),
            (guest_key == g, "redis_guest_key"),
        ]),
        #[cfg(feature = "redis")]
        _ => vec!["redis_layout"],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn settings_that_take_a_restart_are_named_by_their_flags() {
        let running = Config::default();
        assert!(needs_restart(&running, &running.clone()).is_empty());
        let new = Config {
            max_connections: 1,
            drain: Duration::from_secs(1),
            store: StoreSpec::Memory {
                data_dir: Some("/data".into()),
                snapshot_interval: Duration::from_secs(30),
                space_stripes: None,
            },
            api_keys: vec!["0123456789:write".parse().unwrap()],
            ..Config::default()
        };
        assert_eq!(
            needs_restart(&running, &new),
            ["data_dir", "max_connections", "drain"]
        );
        let redis = |url: &str, shards| StoreSpec::Redis {
            target: crate::config::RedisTarget::Standalone(url.into()),
            layout: RedisLayout::Herenow {
                shards,
                space_shards: Default::default(),
                wait_replicas: 0,
                wait_timeout: Duration::from_millis(250),
            },
        };
        assert_eq!(
            store_differences(&redis("redis://a:1", 1), &redis("redis://b:1", 2)),
            ["store", "redis_shards"]
        );
        assert_eq!(
            store_differences(&StoreSpec::default(), &redis("redis://a:1", 1)),
            ["store"]
        );
    }

    #[test]
    fn the_report_is_one_line() {
        let report = ReloadReport {
            api_keys: Some((1, 1)),
            pusher: AppsChange {
                added: vec!["9".into()],
                removed: vec!["8".into()],
                changed: vec![("7".into(), vec!["secret"])],
                closed: 2,
                kept_prefix: Vec::new(),
            },
            space_defaults: true,
            ..ReloadReport::default()
        };
        assert_eq!(
            report.to_string(),
            "api_keys: 1 added, 1 removed; pusher apps: added 9; removed 8 (2 sockets closed); \
             7: secret; space defaults changed"
        );
        assert_eq!(ReloadReport::default().to_string(), "nothing changed");
        assert!(ReloadReport::default().is_empty());
    }
}
