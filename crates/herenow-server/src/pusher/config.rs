//! The Pusher apps this server speaks for: `--pusher-app ID:KEY:SECRET`,
//! and where their webhooks go: `--pusher-webhook [APP_ID=]URL`.

use std::fmt;

use reqwest::Url;

use super::webhook_format::occupancy_space;
use crate::webhooks::endpoint::PusherTarget;
use crate::webhooks::endpoint::parse_url;

mod limits;
pub use limits::PusherAppLimits;

/// The default cap on the members of one presence channel (Pusher's own
/// is 100).
pub const DEFAULT_MAX_PRESENCE_MEMBERS: usize = 10_000;

/// The largest cap on a presence channel's members: a subscriber's
/// `subscription_succeeded` carries the whole roster in one message, read
/// from one store snapshot, which holds at most this many.
pub const MAX_PRESENCE_MEMBERS: usize = herenow_core::limits::MAX_SNAPSHOT;

/// The default rate of client events one socket may send (Pusher's).
pub const DEFAULT_CLIENT_EVENTS_PER_SECOND: u32 = 10;

/// The default bound on an event's data through the HTTP API, and on a
/// client event's (Pusher's 10 KB).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 10 * 1024;

/// The largest bound an app may set on an event's data through the HTTP
/// API: half the largest request body, so a batch still fits one.
pub const MAX_EVENT_BYTES: usize = 128 * 1024;

/// The largest bound an app may set on a client event's data: with its
/// name and channel it must fit one frame a socket may send (32 KiB) and
/// one message of the webhook outbox, its data escaped.
pub const MAX_CLIENT_EVENT_BYTES: usize = 16 * 1024;

/// One Pusher app: its id (in the HTTP API's paths), its key (public, in
/// the WebSocket URL and every signature) and its secret (signs).
#[derive(Clone, PartialEq, Eq)]
pub struct PusherApp {
    /// The app id, as in `/apps/{app_id}/events`.
    pub id: String,
    /// The public key, as in `/app/{key}` and `key:signature`.
    pub key: String,
    /// The secret that signs channel authorizations and API requests.
    pub secret: String,
    /// Most members (distinct users) in one presence channel; a
    /// subscription past it is refused, never trimmed.
    pub max_presence_members: usize,
    /// Client events one socket may send per second (the burst is the
    /// same number); one more is refused with `4301`.
    pub client_events_per_second: u32,
    /// Most sockets of the app on this server at once; one more is
    /// refused with `4004` ("over connection quota"). `None`: only the
    /// server's own bound on sockets.
    pub max_connections: Option<usize>,
    /// Largest `data` of an event through the HTTP API, in bytes; a
    /// larger one is a `413`.
    pub max_event_bytes: usize,
    /// Largest `data` of a client event, in bytes; a larger one is
    /// refused with a `pusher:error`, and the socket stays.
    pub max_client_event_bytes: usize,
    /// What the names of its presence channels' spaces begin with: nothing
    /// for the first app (`presence-x` is the space `presence-x`), `ID:`
    /// for every other, so two apps never share a roster. Set by
    /// [`PusherConfig::served_apps`].
    pub space_prefix: String,
    /// Whether a `--pusher-webhook` goes to it. Set by
    /// [`PusherConfig::served_apps`].
    pub webhooks: bool,
}

impl PusherApp {
    /// The name of the space that is this app's presence channel
    /// `channel` (checked by [`herenow_core::SpaceName::new`] where used).
    pub fn presence_space(&self, channel: &str) -> String {
        format!("{}{channel}", self.space_prefix)
    }

    /// The space of its occupied public and private channels
    /// (`pusher-channels:{id}`).
    pub fn occupancy_space(&self) -> String {
        occupancy_space(&self.id)
    }
}

impl fmt::Debug for PusherApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret.
        f.debug_struct("PusherApp")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("secret", &"***")
            .field("max_presence_members", &self.max_presence_members)
            .field("client_events_per_second", &self.client_events_per_second)
            .field("max_connections", &self.max_connections)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("max_client_event_bytes", &self.max_client_event_bytes)
            .field("webhooks", &self.webhooks)
            .finish()
    }
}

/// Whether `s` may be an app id or key: 1 to 64 ASCII letters, digits,
/// `-` and `_`, so it fits a URL path without escaping.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl std::str::FromStr for PusherApp {
    type Err = PusherConfigError;

    /// `ID:KEY:SECRET`, with the default limits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(3, ':');
        let (Some(id), Some(key), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PusherConfigError::Format);
        };
        if !is_name(id) || !is_name(key) {
            return Err(PusherConfigError::BadName);
        }
        if secret.len() < 8 || secret.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(PusherConfigError::WeakSecret);
        }
        Ok(PusherApp {
            id: id.to_owned(),
            key: key.to_owned(),
            secret: secret.to_owned(),
            max_presence_members: DEFAULT_MAX_PRESENCE_MEMBERS,
            client_events_per_second: DEFAULT_CLIENT_EVENTS_PER_SECOND,
            max_connections: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_client_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            space_prefix: String::new(),
            webhooks: false,
        })
    }
}

/// One `--pusher-webhook`: a URL for one app's webhooks (`APP_ID=URL`),
/// or for every app's (`URL`).
#[derive(Clone, PartialEq, Eq)]
pub struct PusherWebhook {
    /// The app whose events go there; `None`: every app's, each signed by
    /// its app.
    pub app: Option<String>,
    /// Where they go: `http` or `https`.
    pub url: Url,
}

impl fmt::Debug for PusherWebhook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A URL may carry a password or a token.
        f.debug_struct("PusherWebhook")
            .field("app", &self.app)
            .field("host", &self.url.host_str())
            .finish_non_exhaustive()
    }
}

impl std::str::FromStr for PusherWebhook {
    type Err = PusherConfigError;

    /// `URL` or `APP_ID=URL`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (app, url) = match s.split_once('=') {
            Some((app, url)) if is_name(app) => (Some(app.to_owned()), url),
            _ => (None, s),
        };
        let url = parse_url(url).map_err(|e| PusherConfigError::BadWebhook(e.to_string()))?;
        Ok(PusherWebhook { app, url })
    }
}

/// The Pusher protocol's configuration: no apps, nothing of it served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PusherConfig {
    /// The apps, each with its own key, secret and limits.
    pub apps: Vec<PusherApp>,
    /// Where the apps' webhooks go, in Pusher's format; none by default.
    pub webhooks: Vec<PusherWebhook>,
    /// Whether the webhooks carry client events too
    /// (`--pusher-webhook-client-events`; Pusher sends them only when
    /// enabled).
    pub webhook_client_events: bool,
}

impl PusherConfig {
    /// Whether anything of the Pusher protocol is served.
    pub fn is_enabled(&self) -> bool {
        !self.apps.is_empty()
    }

    /// The apps as served: each with its [`PusherApp::space_prefix`]
    /// (none for the first, `ID:` for the others) and whether webhooks go
    /// to it.
    pub fn served_apps(&self) -> Vec<PusherApp> {
        self.apps
            .iter()
            .enumerate()
            .map(|(i, app)| PusherApp {
                space_prefix: if i == 0 {
                    String::new()
                } else {
                    format!("{}:", app.id)
                },
                webhooks: self
                    .webhooks
                    .iter()
                    .any(|h| h.app.as_ref().is_none_or(|id| *id == app.id)),
                ..app.clone()
            })
            .collect()
    }

    /// Each app's webhook endpoints: a `URL` once per app, an
    /// `APP_ID=URL` for its app.
    pub fn webhook_targets(&self) -> Vec<PusherTarget> {
        self.webhook_targets_of(&self.served_apps())
    }

    /// [`webhook_targets`](Self::webhook_targets) of `apps` as served
    /// (their space prefixes), which may be a running server's rather than
    /// [`served_apps`](Self::served_apps).
    pub(crate) fn webhook_targets_of(&self, apps: &[PusherApp]) -> Vec<PusherTarget> {
        let mut targets = Vec::new();
        for hook in &self.webhooks {
            for app in apps {
                if hook.app.as_ref().is_none_or(|id| *id == app.id) {
                    targets.push(PusherTarget {
                        app_id: app.id.clone(),
                        key: app.key.clone(),
                        secret: app.secret.clone(),
                        url: hook.url.clone(),
                        client_events: self.webhook_client_events,
                        space_prefix: app.space_prefix.clone(),
                        occupancy_space: app.occupancy_space(),
                        format: super::webhook_format::event_json,
                    });
                }
            }
        }
        targets
    }

    /// Refuses duplicate ids or keys, limits out of range, and webhooks
    /// without apps, for an unknown app, or given twice.
    pub fn check(&self) -> Result<(), PusherConfigError> {
        if self.apps.is_empty() && (!self.webhooks.is_empty() || self.webhook_client_events) {
            return Err(PusherConfigError::WebhookWithoutApps);
        }
        for (i, hook) in self.webhooks.iter().enumerate() {
            if let Some(id) = &hook.app
                && !self.apps.iter().any(|a| a.id == *id)
            {
                return Err(PusherConfigError::WebhookUnknownApp(id.clone()));
            }
            if self.webhooks[..i].contains(hook) {
                return Err(PusherConfigError::WebhookTwice);
            }
        }
        for (i, app) in self.apps.iter().enumerate() {
            if self.apps[..i]
                .iter()
                .any(|other| other.id == app.id || other.key == app.key)
            {
                return Err(PusherConfigError::Duplicate(app.id.clone()));
            }
            if !(1..=MAX_PRESENCE_MEMBERS).contains(&app.max_presence_members) {
                return Err(PusherConfigError::MemberCap(app.max_presence_members));
            }
            if app.client_events_per_second == 0 {
                return Err(PusherConfigError::ZeroRate);
            }
            if app.max_connections == Some(0) {
                return Err(PusherConfigError::ZeroConnections(app.id.clone()));
            }
            for (limit, got, max) in [
                ("max_event_bytes", app.max_event_bytes, MAX_EVENT_BYTES),
                (
                    "max_client_event_bytes",
                    app.max_client_event_bytes,
                    MAX_CLIENT_EVENT_BYTES,
                ),
            ] {
                if !(1..=max).contains(&got) {
                    return Err(PusherConfigError::ByteCap { limit, max, got });
                }
            }
        }
        Ok(())
    }
}

/// A `--pusher-app` that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PusherConfigError {
    /// Not `ID:KEY:SECRET`.
    #[error("--pusher-app must look like ID:KEY:SECRET")]
    Format,
    /// An id or key with characters a URL path would need escaped.
    #[error("--pusher-app: the app id and key are 1 to 64 letters, digits, - or _")]
    BadName,
    /// A secret shorter than 8 characters or with spaces.
    #[error(
        "--pusher-app: the secret must be at least 8 characters without spaces or control characters"
    )]
    WeakSecret,
    /// Two apps with the same id or key.
    #[error("--pusher-app: two apps share the id or key of app {0:?}")]
    Duplicate(String),
    /// A member cap out of range.
    #[error("a presence channel's member cap must be 1 to {MAX_PRESENCE_MEMBERS}; got {0}")]
    MemberCap(usize),
    /// A client-event rate of zero.
    #[error("the client-event rate must be at least 1 a second")]
    ZeroRate,
    /// A connection cap of zero, which would refuse every socket.
    #[error("app {0:?}: max_connections must be at least 1")]
    ZeroConnections(String),
    /// A bound on events' data out of range.
    #[error("{limit} must be 1 to {max} bytes; got {got}")]
    ByteCap {
        /// The limit: `max_event_bytes` or `max_client_event_bytes`.
        limit: &'static str,
        /// Its largest value.
        max: usize,
        /// The value given.
        got: usize,
    },
    /// A `--pusher-app-limits` that cannot be read.
    #[error(
        "--pusher-app-limits must be APP_ID:LIMIT=N[,LIMIT=N]… with limits max_connections, \
         client_events_per_second, max_presence_members, max_event_bytes, \
         max_client_event_bytes: {0}"
    )]
    BadLimits(String),
    /// A `--pusher-app-limits` for an app not configured.
    #[error("--pusher-app-limits names app {0:?}, which no --pusher-app defines")]
    LimitsUnknownApp(String),
    /// Two `--pusher-app-limits` for one app.
    #[error("--pusher-app-limits: app {0:?} is given twice")]
    LimitsTwice(String),
    /// A `--pusher-webhook` whose URL is not one.
    #[error("--pusher-webhook must be URL or APP_ID=URL: {0}")]
    BadWebhook(String),
    /// A `--pusher-webhook APP_ID=URL` for an app not configured.
    #[error("--pusher-webhook names app {0:?}, which no --pusher-app defines")]
    WebhookUnknownApp(String),
    /// The same `--pusher-webhook` twice.
    #[error("--pusher-webhook: the same webhook is given twice")]
    WebhookTwice,
    /// Pusher webhooks without a Pusher app.
    #[error("--pusher-webhook and --pusher-webhook-client-events need a --pusher-app")]
    WebhookWithoutApps,
}

/// `bad` is refused as a `T` with an error that names `flag`.
#[cfg(test)]
fn refused<T: std::str::FromStr<Err = PusherConfigError>>(bad: &str, flag: &str) {
    match bad.parse::<T>() {
        Ok(_) => panic!("{bad:?} was taken"),
        Err(e) => assert!(e.to_string().contains(flag), "{bad:?}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_parse_and_refuse() {
        let app: PusherApp = "42:app-key:s3cr3t-value".parse().unwrap();
        assert_eq!(
            (app.id.as_str(), app.key.as_str(), app.secret.as_str()),
            ("42", "app-key", "s3cr3t-value")
        );
        assert!(!format!("{app:?}").contains("s3cr3t"));
        // A secret may hold colons.
        assert_eq!(
            "1:k:a:b:c:d:e:f".parse::<PusherApp>().unwrap().secret,
            "a:b:c:d:e:f"
        );
        for (bad, why) in [
            ("42:key", PusherConfigError::Format),
            ("4 2:key:secret-value", PusherConfigError::BadName),
            ("42::secret-value", PusherConfigError::BadName),
            ("42:key:short", PusherConfigError::WeakSecret),
        ] {
            assert_eq!(bad.parse::<PusherApp>(), Err(why), "{bad}");
        }
    }

    #[test]
    fn webhooks_go_to_every_app_or_the_one_named() {
        let apps: Vec<PusherApp> = ["1:key-a:secret-aaaa", "2:key-b:secret-bbbb"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let hook = |s: &str| s.parse::<PusherWebhook>().unwrap();
        let mut config = PusherConfig {
            apps: apps.clone(),
            webhooks: vec![hook("2=https://two.example/h")],
            webhook_client_events: true,
        };
        // Webhooks for app 2 only.
        let hooked: Vec<bool> = config.served_apps().iter().map(|a| a.webhooks).collect();
        assert_eq!(hooked, [false, true]);
        config.webhooks.insert(0, hook("http://all.example/h?a=b"));
        assert_eq!(config.check(), Ok(()));
        let targets: Vec<(String, String, String)> = config
            .webhook_targets()
            .into_iter()
            .map(|t| (t.app_id, t.key, t.url.host_str().unwrap().to_owned()))
            .collect();
        let t = |a: &str, k: &str, h: &str| (a.to_owned(), k.to_owned(), h.to_owned());
        assert_eq!(
            targets,
            [
                t("1", "key-a", "all.example"),
                t("2", "key-b", "all.example"),
                t("2", "key-b", "two.example")
            ]
        );
        assert!(config.webhook_targets().iter().all(|t| t.client_events));
        let hooked: Vec<bool> = config.served_apps().iter().map(|a| a.webhooks).collect();
        assert_eq!(hooked, [true, true]);
        let spaces: Vec<String> = config
            .served_apps()
            .iter()
            .map(PusherApp::occupancy_space)
            .collect();
        assert_eq!(spaces, ["pusher-channels:1", "pusher-channels:2"]);
        assert!(!format!("{:?}", config.webhooks).contains("a=b"));
    }

    #[test]
    fn bad_webhooks_are_refused_naming_the_flag() {
        for bad in [
            "",
            "hooks.example",
            "ftp://h/x",
            "1=",
            "1=not a url",
            "http://h/x#f",
        ] {
            refused::<PusherWebhook>(bad, "--pusher-webhook");
            let err = bad.parse::<PusherWebhook>().unwrap_err();
            assert!(matches!(err, PusherConfigError::BadWebhook(_)), "{err:?}");
        }
        let app: PusherApp = "1:key-a:secret-aaaa".parse().unwrap();
        let hook: PusherWebhook = "http://h/x".parse().unwrap();
        let config = |apps: Vec<PusherApp>, webhooks: Vec<PusherWebhook>| PusherConfig {
            apps,
            webhooks,
            webhook_client_events: false,
        };
        assert_eq!(
            config(vec![], vec![hook.clone()]).check(),
            Err(PusherConfigError::WebhookWithoutApps)
        );
        assert_eq!(
            config(vec![app.clone()], vec!["9=http://h/x".parse().unwrap()]).check(),
            Err(PusherConfigError::WebhookUnknownApp("9".into()))
        );
        assert_eq!(
            config(vec![app], vec![hook.clone(), hook]).check(),
            Err(PusherConfigError::WebhookTwice)
        );
    }

    #[test]
    fn duplicates_and_limits_are_refused() {
        let a: PusherApp = "1:key-a:secret-aaaa".parse().unwrap();
        let mut config = PusherConfig {
            apps: vec![a.clone(), "2:key-a:secret-bbbb".parse().unwrap()],
            ..PusherConfig::default()
        };
        assert_eq!(
            config.check(),
            Err(PusherConfigError::Duplicate("2".into()))
        );
        config.apps = vec![PusherApp {
            max_presence_members: MAX_PRESENCE_MEMBERS + 1,
            ..a.clone()
        }];
        assert!(matches!(
            config.check(),
            Err(PusherConfigError::MemberCap(_))
        ));
        config.apps = vec![PusherApp {
            client_events_per_second: 0,
            ..a.clone()
        }];
        assert_eq!(config.check(), Err(PusherConfigError::ZeroRate));
        config.apps = vec![a];
        assert_eq!(config.check(), Ok(()));
        assert!(config.is_enabled());
        assert!(!PusherConfig::default().is_enabled());
    }
}
