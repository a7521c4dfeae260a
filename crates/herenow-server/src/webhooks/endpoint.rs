//! What the operator configures: [`WebhookConfig`], its endpoints
//! ([`Endpoint`], parsed from `--webhook URL[,events=…][,spaces=GLOB]
//! [,secret=whsec_…][,name=NAME]`), and the filter that decides which
//! events an endpoint wants.

use std::time::Duration;

use herenow_core::outbox::{OutboxEvent, OutboxKind, OutboxOptions, SpaceHook};
use herenow_core::{Millis, SpaceName};
use reqwest::Url;
use sha2::{Digest, Sha256};

use super::allow::SpaceWebhookAllow;
use super::sign::{PusherSigner, Secret, SecretError, Signer};

/// Most endpoints one server delivers to: each has a queue and a task.
pub const MAX_ENDPOINTS: usize = 32;

/// Most events in one request.
pub const MAX_BATCH_EVENTS: usize = 100;

/// Most bytes in one request's body.
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// The `User-Agent` of webhook requests.
pub const USER_AGENT: &str = concat!("herenow-webhooks/", env!("CARGO_PKG_VERSION"));

/// Webhooks as the operator configured them; none by default, and then
/// the store keeps no outbox at all.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Where events go; empty turns webhooks off.
    pub endpoints: Vec<Endpoint>,
    /// How long one request may take before it counts as failed and is
    /// retried.
    pub timeout: Duration,
    /// How long after it happened an event is still delivered: a failing
    /// batch is retried until its oldest event is this old, and an older
    /// event is dropped and counted without a request.
    pub max_age: Duration,
    /// Events waiting per endpoint; past it new events are dropped for
    /// that endpoint and counted (`overflow`).
    pub queue_limit: usize,
    /// How long events claimed by a server stay its own without being
    /// acknowledged before another server takes them over (a server that
    /// died mid-delivery).
    pub reclaim_idle: Duration,
    /// Events the store keeps undelivered at most
    /// ([`herenow_core::outbox::OutboxOptions::max_events`]); older ones are
    /// trimmed and counted.
    pub outbox_max: u64,
    /// How often the outbox is polled for new events.
    pub poll: Duration,
    /// The first retry's longest delay; doubled per attempt (full jitter).
    pub backoff_base: Duration,
    /// The longest delay between two attempts, `Retry-After` included.
    pub backoff_cap: Duration,
    /// `--webhook-secret`: signs for endpoints given without a secret of
    /// their own, the operator's and those a space's configuration names.
    pub default_secret: Option<Secret>,
    /// `--space-webhook-allow`: hosts and networks spaces' endpoints may
    /// reach although they are loopback, private, link-local…; empty by
    /// default. The operator's endpoints are never restricted.
    pub space_allow: SpaceWebhookAllow,
    /// `--pusher-webhook`: endpoints that get presence channels' events
    /// (and client events, if asked) in Pusher's format, one per app and
    /// URL; delivered like the operator's endpoints.
    pub pusher: Vec<PusherTarget>,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            timeout: Duration::from_secs(10),
            max_age: Duration::from_secs(24 * 3600),
            queue_limit: 10_000,
            reclaim_idle: Duration::from_secs(60),
            outbox_max: 100_000,
            poll: Duration::from_millis(100),
            backoff_base: Duration::from_secs(1),
            backoff_cap: Duration::from_secs(600),
            default_secret: None,
            space_allow: SpaceWebhookAllow::default(),
            pusher: Vec::new(),
        }
    }
}

impl WebhookConfig {
    /// What the store's outbox keeps, as these settings say; `for_spaces`
    /// when only spaces' endpoints want it
    /// ([`OutboxOptions::for_spaces`]).
    pub(crate) fn outbox_options(&self, for_spaces: bool) -> OutboxOptions {
        OutboxOptions {
            max_events: self.outbox_max,
            for_spaces,
            // How long an event is worth delivering: the maximum age, at
            // least 1 ms.
            keep_ms: Millis::try_from(self.max_age.as_millis())
                .unwrap_or(Millis::MAX)
                .max(1),
        }
    }

    /// Checks the settings together: bounds above zero, names unique, at
    /// most `MAX_ENDPOINTS` (32), and a reclaim time longer than a request.
    pub fn check(&self) -> Result<(), WebhookError> {
        let all = self.endpoints.len() + self.pusher.len();
        if all > MAX_ENDPOINTS {
            return Err(WebhookError::TooManyEndpoints(all));
        }
        for (i, e) in self.endpoints.iter().enumerate() {
            if self.endpoints[..i].iter().any(|o| o.name == e.name) {
                return Err(WebhookError::DuplicateName(e.name.clone()));
            }
        }
        for (what, zero) in [
            ("webhook timeout", self.timeout.is_zero()),
            ("webhook max age", self.max_age.is_zero()),
            ("webhook queue limit", self.queue_limit == 0),
            ("webhook outbox size", self.outbox_max == 0),
            ("webhook poll interval", self.poll.is_zero()),
            ("webhook backoff", self.backoff_base.is_zero()),
        ] {
            if zero {
                return Err(WebhookError::Zero(what));
            }
        }
        if self.reclaim_idle <= self.timeout {
            return Err(WebhookError::ReclaimTooShort {
                reclaim: self.reclaim_idle,
                timeout: self.timeout,
            });
        }
        Ok(())
    }
}

/// One receiver of webhooks. `Debug` shows the URL redacted and never the
/// secret; two are equal when they are the same endpoint, secret included.
#[derive(Clone, PartialEq)]
pub struct Endpoint {
    /// Its label in metrics, logs and `GET /v1/webhooks`: `name=` or
    /// `INDEX:HOST`.
    pub name: String,
    /// Where requests go (`http` or `https`).
    pub url: Url,
    /// Which events it wants.
    pub filter: Filter,
    /// What its requests are signed with, and so their format.
    pub signer: Signer,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("name", &self.name)
            .field("url", &self.redacted_url())
            .field("filter", &self.filter)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Parses one `--webhook` value; `index` names it when it has no
    /// `name=`, and `default_secret` (`--webhook-secret`) signs for it
    /// when it has no `secret=`.
    ///
    /// The grammar is `URL[,KEY=VALUE]…` with keys `events` (a list of
    /// kinds that goes on over the following commas: `events=join,leave`),
    /// `spaces` (a glob with `*` and `?`), `secret` and `name`. A URL that
    /// holds a comma must write it `%2C`.
    pub fn parse(
        spec: &str,
        index: usize,
        default_secret: Option<&Secret>,
    ) -> Result<Self, WebhookError> {
        let mut parts = spec.split(',').map(str::trim);
        let url = parse_url(parts.next().unwrap_or_default())?;
        let mut filter = Filter::default();
        let mut events: Option<u8> = None;
        let mut secret: Option<Secret> = None;
        let mut name: Option<String> = None;
        let mut in_events = false;
        for part in parts {
            let Some((key, value)) = part.split_once('=') else {
                if in_events {
                    *events.get_or_insert(0) |= kind_bit(part)?;
                    continue;
                }
                return Err(WebhookError::BadOption(part.to_owned()));
            };
            in_events = false;
            match key.trim() {
                "events" => {
                    in_events = true;
                    *events.get_or_insert(0) |= kind_bit(value.trim())?;
                }
                "spaces" => filter.spaces = Some(SpaceGlob::new(value.trim())?),
                "secret" => secret = Some(value.trim().parse().map_err(WebhookError::Secret)?),
                "name" => name = Some(check_name(value.trim())?),
                _ => return Err(WebhookError::BadOption(key.to_owned())),
            }
        }
        filter.kinds = events.unwrap_or(filter.kinds);
        let secret = secret
            .or_else(|| default_secret.cloned())
            .ok_or(WebhookError::NoSecret)?;
        let name = name.unwrap_or_else(|| format!("{index}:{}", url.host_str().unwrap_or("host")));
        Ok(Endpoint {
            name,
            url,
            filter,
            signer: Signer::Standard(secret),
        })
    }

    /// The endpoint a space's configuration names: its kinds, no glob
    /// (the space is the filter), named `space:HOST:HASH` with a hash of
    /// the URL and the secret, so the same endpoint has the same name on
    /// every server and two secrets for one URL are told apart.
    pub fn of_space_hook(hook: &SpaceHook) -> Result<Self, WebhookError> {
        let url = parse_url(&hook.url)?;
        let secret: Secret = hook.secret.parse().map_err(WebhookError::Secret)?;
        let mut hash = Sha256::new();
        hash.update(hook.url.as_bytes());
        hash.update([0]);
        hash.update(hook.secret.as_bytes());
        let hash = super::sign::hex(&hash.finalize()[..4]);
        let name = format!("space:{}:{hash}", url.host_str().unwrap_or("host"));
        Ok(Endpoint {
            name,
            url,
            filter: Filter::of_kinds(&hook.kinds),
            signer: Signer::Standard(secret),
        })
    }

    /// The URL with a password and a query hidden (`***`): what metrics,
    /// logs and `GET /v1/webhooks` show.
    pub fn redacted_url(&self) -> String {
        let mut url = self.url.clone();
        if url.password().is_some() {
            let _ = url.set_password(Some("***"));
        }
        if url.query().is_some() {
            url.set_query(Some("***"));
        }
        url.to_string()
    }
}

/// The outbox kinds a Pusher endpoint turns into events.
const PUSHER_KINDS: [OutboxKind; 4] = [
    OutboxKind::Join,
    OutboxKind::Leave,
    OutboxKind::Occupied,
    OutboxKind::Vacated,
];

/// One app's webhook endpoint: `--pusher-webhook [APP_ID=]URL` for one
/// app. `Debug` never shows the secret.
#[derive(Clone)]
pub struct PusherTarget {
    /// The app's id.
    pub app_id: String,
    /// The app's key: `X-Pusher-Key`.
    pub key: String,
    /// The app's secret, which signs.
    pub secret: String,
    /// Where the events go.
    pub url: Url,
    /// Whether the app's client events go there too.
    pub client_events: bool,
    /// What the app's presence spaces' names begin with
    /// (`PusherApp::space_prefix`): only those spaces' events go there.
    pub space_prefix: String,
    /// The app's occupancy space: its public and private channels'
    /// events go there too.
    pub occupancy_space: String,
    /// Pusher's webhook format, which the Pusher protocol's module
    /// writes.
    pub format: EventFormat,
}

/// How an endpoint that takes another service's format writes an outbox
/// event: `None` for what that format does not tell.
pub type EventFormat = fn(&herenow_core::outbox::OutboxEvent) -> Option<Vec<u8>>;

impl std::fmt::Debug for PusherTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PusherTarget")
            .field("app_id", &self.app_id)
            .field("key", &self.key)
            .field("host", &self.url.host_str())
            .field("client_events", &self.client_events)
            .finish_non_exhaustive()
    }
}

impl PusherTarget {
    /// The endpoint it delivers to, named `pusher:INDEX:APP:HOST` in
    /// metrics and `GET /v1/webhooks`, wanting the app's presence
    /// channels' joins, leaves and occupancy, and its occupancy space's,
    /// and their messages (client events) if it asked for client events.
    pub fn endpoint(&self, index: usize) -> Endpoint {
        let mut filter = Filter::of_kinds(&PUSHER_KINDS);
        filter.messages = self.client_events;
        // An app id is letters, digits, - and _: globs of space name
        // characters, `*` only at the end of the first.
        let glob = |g: &str| {
            SpaceGlob::new(g).unwrap_or_else(|_| unreachable!("a glob of space name characters"))
        };
        filter.spaces = Some(glob(&format!("{}presence-*", self.space_prefix)));
        filter.or_spaces = Some(glob(&self.occupancy_space));
        Endpoint {
            name: format!(
                "pusher:{index}:{}:{}",
                self.app_id,
                self.url.host_str().unwrap_or("host")
            ),
            url: self.url.clone(),
            filter,
            signer: Signer::Pusher(PusherSigner::new(&self.key, &self.secret)),
        }
    }
}

/// A webhook URL: `http` or `https`, with a host, without a fragment.
pub fn parse_url(text: &str) -> Result<Url, WebhookError> {
    let bad = |why: &'static str| WebhookError::BadUrl {
        url: text.split(['?', '@']).next().unwrap_or_default().to_owned(),
        why,
    };
    let url = Url::parse(text).map_err(|_| bad("not a URL; expected https://HOST[:PORT]/PATH"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("only http and https URLs take webhooks"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("the URL has no host"));
    }
    if url.fragment().is_some() {
        return Err(bad("a webhook URL has no #fragment"));
    }
    Ok(url)
}

fn check_name(name: &str) -> Result<String, WebhookError> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    {
        return Err(WebhookError::BadName(name.to_owned()));
    }
    Ok(name.to_owned())
}

fn kind_bit(name: &str) -> Result<u8, WebhookError> {
    OutboxKind::ALL
        .iter()
        .position(|k| k.as_str() == name)
        .map(|i| 1 << i)
        .ok_or_else(|| WebhookError::BadEvent(name.to_owned()))
}

/// Which events an endpoint wants: kinds, and spaces by glob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// One bit per [`OutboxKind::ALL`] entry.
    kinds: u8,
    /// Spaces whose name matches; `None`: every space.
    pub spaces: Option<SpaceGlob>,
    /// A second glob, with `spaces` only: a space matching either is
    /// wanted (a Pusher app's presence channels and its occupancy space).
    pub or_spaces: Option<SpaceGlob>,
    /// Whether it takes the messages servers keep in the outbox
    /// ([`OutboxKind::Message`]: a Pusher app's client events) of the
    /// spaces it wants. No kind names them.
    pub messages: bool,
}

impl Default for Filter {
    fn default() -> Self {
        Self {
            kinds: (1u8 << OutboxKind::ALL.len()) - 1,
            spaces: None,
            or_spaces: None,
            messages: false,
        }
    }
}

impl Filter {
    /// Every space, events of `kinds` only.
    pub fn of_kinds(kinds: &[OutboxKind]) -> Self {
        let kinds = (OutboxKind::ALL.iter().enumerate())
            .filter(|(_, k)| kinds.contains(k))
            .fold(0, |bits, (i, _)| bits | 1 << i);
        Self {
            kinds,
            ..Self::default()
        }
    }

    /// Whether the endpoint wants `event`.
    pub fn wants(&self, event: &OutboxEvent) -> bool {
        let space = event.space.as_str();
        let kind = match event.kind {
            OutboxKind::Message => self.messages,
            kind => self.wants_kind(kind),
        };
        kind && self.spaces.as_ref().is_none_or(|g| {
            g.matches(space) || self.or_spaces.as_ref().is_some_and(|o| o.matches(space))
        })
    }

    /// The space globs as `GET /v1/webhooks` shows them: `None` for every
    /// space, two globs joined by a space.
    pub fn spaces_text(&self) -> Option<String> {
        let first = self.spaces.as_ref()?.as_str();
        Some(match &self.or_spaces {
            Some(second) => format!("{first} {}", second.as_str()),
            None => first.to_owned(),
        })
    }

    /// Whether the endpoint wants events of `kind`.
    pub fn wants_kind(&self, kind: OutboxKind) -> bool {
        OutboxKind::ALL
            .iter()
            .position(|k| *k == kind)
            .is_some_and(|i| self.kinds & (1 << i) != 0)
    }

    /// The kinds wanted, in [`OutboxKind::ALL`]'s order.
    pub fn kinds(&self) -> Vec<&'static str> {
        OutboxKind::ALL
            .iter()
            .filter(|k| self.wants_kind(**k))
            .map(|k| k.as_str())
            .collect()
    }
}

/// A glob over space names: `*` any run of characters, `?` one, anything
/// else itself (`room:*`, `team-??`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceGlob(String);

impl SpaceGlob {
    /// Checks that the glob could match a space name: the characters of
    /// space names, `*` and `?`.
    pub fn new(glob: &str) -> Result<Self, WebhookError> {
        let plain: String = glob.chars().filter(|c| !matches!(c, '*' | '?')).collect();
        if glob.is_empty()
            || glob.len() > 256
            || (!plain.is_empty() && SpaceName::new(&plain).is_err())
        {
            return Err(WebhookError::BadGlob(glob.to_owned()));
        }
        Ok(Self(glob.to_owned()))
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `name` matches: the classic linear wildcard match, which
    /// backtracks only to the last `*` (space names are ASCII).
    pub fn matches(&self, name: &str) -> bool {
        let (p, s) = (self.0.as_bytes(), name.as_bytes());
        let (mut pi, mut si) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while si < s.len() {
            if pi < p.len() && (p[pi] == b'?' || p[pi] == s[si]) {
                pi += 1;
                si += 1;
            } else if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, si));
                pi += 1;
            } else if let Some((sp, ss)) = star {
                pi = sp + 1;
                si = ss + 1;
                star = Some((sp, ss + 1));
            } else {
                return false;
            }
        }
        p[pi..].iter().all(|&b| b == b'*')
    }
}

/// A webhook configuration that cannot be served. Messages never repeat a
/// secret, nor a URL's password or query.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL does not parse or is not http(s).
    #[error("bad webhook URL {url:?}: {why}")]
    BadUrl {
        /// The URL up to any query or password.
        url: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An option that is not `events`, `spaces`, `secret` or `name`.
    #[error(
        "unknown webhook option {0:?}; a webhook is URL[,events=join,leave,…][,spaces=GLOB]\
         [,secret=whsec_…][,name=NAME]"
    )]
    BadOption(String),
    /// An event kind that does not exist.
    #[error(
        "unknown webhook event {0:?}; events are join, leave, away, back, update, occupied, vacated"
    )]
    BadEvent(String),
    /// A space glob with characters no space name has.
    #[error(
        "bad space glob {0:?}: space names are 1 to 128 ASCII letters, digits and - _ . : @, \
         with * and ? as wildcards"
    )]
    BadGlob(String),
    /// A `name=` that cannot label a metric.
    #[error("bad webhook name {0:?}: 1 to 64 ASCII letters, digits and - _ . :")]
    BadName(String),
    /// Two endpoints with one name.
    #[error("two webhooks are named {0:?}; give each its own name=")]
    DuplicateName(String),
    /// No `secret=` and no `--webhook-secret`.
    #[error(
        "a webhook needs a secret: add secret=whsec_… to it, or set --webhook-secret \
         (HERENOW_WEBHOOK_SECRET) for all"
    )]
    NoSecret,
    /// A secret that is not `whsec_` and 24 to 64 bytes of base64.
    #[error(transparent)]
    Secret(SecretError),
    /// More than `MAX_ENDPOINTS` (32).
    #[error("{0} webhooks; at most {MAX_ENDPOINTS}")]
    TooManyEndpoints(usize),
    /// A bound of zero.
    #[error("the {0} must be greater than zero")]
    Zero(&'static str),
    /// A reclaim time another server would use to take over requests
    /// still running.
    #[error(
        "the webhook reclaim time ({reclaim:?}) must be longer than the request timeout \
         ({timeout:?}), or other servers take over deliveries still in progress"
    )]
    ReclaimTooShort {
        /// `--webhook-reclaim-idle`.
        reclaim: Duration,
        /// `--webhook-timeout`.
        timeout: Duration,
    },
    /// The HTTPS client could not be set up (no usable roots, say).
    #[error("cannot set up the webhook HTTP client: {0}")]
    Client(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn parse(spec: &str) -> Result<Endpoint, WebhookError> {
        Endpoint::parse(spec, 0, None)
    }

    #[test]
    fn specs_parse_with_events_spaces_secret_and_name() {
        let e = parse(&format!(
            "https://hooks.example.com/presence,events=join,leave,occupied,spaces=room:*,\
             secret={SECRET},name=site"
        ))
        .unwrap();
        assert_eq!(e.name, "site");
        assert_eq!(e.url.as_str(), "https://hooks.example.com/presence");
        assert_eq!(e.filter.kinds(), ["join", "leave", "occupied"]);
        assert_eq!(e.filter.spaces.as_ref().unwrap().as_str(), "room:*");
        let e = parse(&format!("http://127.0.0.1:9000/h,secret={SECRET}")).unwrap();
        assert_eq!(e.name, "0:127.0.0.1");
        assert_eq!(e.filter, Filter::default());
        let default: Secret = SECRET.parse().unwrap();
        let e = Endpoint::parse("http://h/x", 3, Some(&default)).unwrap();
        assert_eq!(
            (e.name.as_str(), &e.signer),
            ("3:h", &Signer::Standard(default))
        );
    }

    #[test]
    fn bad_specs_are_refused_by_kind() {
        type Is = fn(&WebhookError) -> bool;
        let cases: [(&str, Is); 10] = [
            ("hooks.example.com", |e| {
                matches!(e, WebhookError::BadUrl { .. })
            }),
            ("ftp://h/x", |e| matches!(e, WebhookError::BadUrl { .. })),
            ("http://h/x#frag", |e| {
                matches!(e, WebhookError::BadUrl { .. })
            }),
            ("http://h/x", |e| matches!(e, WebhookError::NoSecret)),
            ("http://h/x,events=join,arrive", |e| {
                matches!(e, WebhookError::BadEvent(_))
            }),
            ("http://h/x,colour=red", |e| {
                matches!(e, WebhookError::BadOption(_))
            }),
            ("http://h/x,leave", |e| {
                matches!(e, WebhookError::BadOption(_))
            }),
            ("http://h/x,spaces=room/1", |e| {
                matches!(e, WebhookError::BadGlob(_))
            }),
            ("http://h/x,name=a b", |e| {
                matches!(e, WebhookError::BadName(_))
            }),
            ("http://h/x,secret=hunter2hunter2", |e| {
                matches!(e, WebhookError::Secret(SecretError::NoPrefix))
            }),
        ];
        for (spec, ok) in cases {
            let err = parse(spec).unwrap_err();
            assert!(ok(&err), "{spec}: {err:?}");
        }
        let err = parse("https://user:hunter2@h/x?token=hunter2,secret=whsec_aGk=").unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn urls_are_shown_without_passwords_or_queries() {
        let e = parse(&format!("https://u:pw@h/x?token=t,secret={SECRET}")).unwrap();
        assert_eq!(e.redacted_url(), "https://u:***@h/x?***");
    }

    #[test]
    fn globs_match_space_names() {
        let g = |p: &str| SpaceGlob::new(p).unwrap();
        assert!(g("room:*").matches("room:1"));
        assert!(g("room:*").matches("room:"));
        assert!(!g("room:*").matches("lobby"));
        assert!(g("*").matches("anything"));
        assert!(g("team-??").matches("team-42"));
        assert!(!g("team-??").matches("team-4"));
        assert!(g("*a*b*").matches("xxaxxbxx"));
        assert!(!g("*a*b").matches("xxaxxbxx"));
        assert!(g("lobby").matches("lobby") && !g("lobby").matches("lobby2"));
        assert!(SpaceGlob::new("").is_err());
    }

    #[test]
    fn configs_are_checked_together() {
        let secret: Secret = SECRET.parse().unwrap();
        let one = Endpoint::parse("http://h/x,name=a", 0, Some(&secret)).unwrap();
        let config = WebhookConfig {
            endpoints: vec![one.clone(), one],
            ..WebhookConfig::default()
        };
        assert!(matches!(
            config.check(),
            Err(WebhookError::DuplicateName(_))
        ));
        let config = WebhookConfig {
            reclaim_idle: Duration::from_secs(5),
            ..WebhookConfig::default()
        };
        assert!(matches!(
            config.check(),
            Err(WebhookError::ReclaimTooShort { .. })
        ));
        assert!(WebhookConfig::default().check().is_ok());
    }
}
