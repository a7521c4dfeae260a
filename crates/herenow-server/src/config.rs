//! Server configuration, as built by the binary from flags and environment.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herenow_core::{SpaceConfig, SpaceName};

use crate::webhooks::{WebhookConfig, WebhookError};

use crate::pusher::{PusherConfig, PusherConfigError};

/// What an API key may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Queries only: for pages and dashboards that must not change
    /// presence.
    Read,
    /// Queries, heartbeats, leaves, friends, configuration, explicit times.
    Write,
}

/// An API key and its scope, from `--api-key KEY:SCOPE`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The secret a client sends as `Authorization: Bearer KEY`.
    pub key: String,
    /// What requests carrying this key may do.
    pub scope: Scope,
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        write!(f, "ApiKey(***:{:?})", self.scope)
    }
}

impl std::str::FromStr for ApiKey {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (key, scope) = s.rsplit_once(':').ok_or(ConfigError::ApiKeyFormat)?;
        let scope = match scope {
            "read" => Scope::Read,
            "write" => Scope::Write,
            _ => return Err(ConfigError::ApiKeyFormat),
        };
        if key.len() < 8 || key.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(ConfigError::ApiKeyTooWeak);
        }
        Ok(ApiKey {
            key: key.to_owned(),
            scope,
        })
    }
}

/// The secret that signs WebSocket tokens (HS256), from `--token-secret`.
///
/// At least 32 bytes: RFC 7518 §3.2 requires an HS256 key at least as long
/// as the hash. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSecret(Vec<u8>);

/// The shortest token secret accepted, in bytes.
pub const MIN_TOKEN_SECRET_BYTES: usize = 32;

impl TokenSecret {
    /// Wraps `secret`, refusing one shorter than
    /// [`MIN_TOKEN_SECRET_BYTES`].
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<Self, ConfigError> {
        let secret = secret.into();
        if secret.len() < MIN_TOKEN_SECRET_BYTES {
            return Err(ConfigError::TokenSecretTooShort(secret.len()));
        }
        Ok(Self(secret))
    }

    /// The secret's bytes, for the HS256 signer.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for TokenSecret {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for TokenSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenSecret(***)")
    }
}

impl std::str::FromStr for TokenSecret {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s.as_bytes().to_vec())
    }
}

/// Where presence lives, as `--store` names it: `memory` or a Redis
/// address. It is half of a [`StoreSpec`]: the flags that only mean
/// something for one kind of store (`--data-dir`, `--redis-layout`, …)
/// complete it, and the binary refuses those that do not fit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreTarget {
    /// The embedded in-memory store.
    #[default]
    Memory,
    /// Redis, one server or a cluster.
    Redis(RedisTarget),
}

/// The schemes `--store` accepts, for error messages.
const ACCEPTED_STORES: &str =
    "memory, redis[s]://HOST:PORT[/DB], redis[s]+cluster://H1:P1,H2:P2,… (rediss: TLS)";

/// A Redis deployment, its URL kept as given: the Redis crate reads it
/// again with its own rules (TLS, database number, seed nodes), so only
/// its shape is checked here.
///
/// `Debug` and [`RedisTarget::redacted`] hide a password given in the URL
/// (`redis://:secret@host:6379`), so logs and errors can name the address
/// safely.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One Redis server: `redis://[USER:PASSWORD@]HOST:PORT[/DB]`.
    Standalone(String),
    /// A Redis Cluster: `redis+cluster://H1:P1,H2:P2,…` (seed nodes).
    Cluster(String),
}

impl RedisTarget {
    /// The URL as given, password included: for connecting, never for
    /// printing (use [`RedisTarget::redacted`]).
    pub fn url(&self) -> &str {
        match self {
            RedisTarget::Standalone(url) | RedisTarget::Cluster(url) => url,
        }
    }

    /// `redis` or `redis-cluster`, for logs, metrics and errors.
    pub fn name(&self) -> &'static str {
        match self {
            RedisTarget::Standalone(_) => "redis",
            RedisTarget::Cluster(_) => "redis-cluster",
        }
    }

    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        redact(self.url())
    }
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            RedisTarget::Standalone(_) => "Standalone",
            RedisTarget::Cluster(_) => "Cluster",
        };
        write!(f, "{kind}({:?})", self.redacted())
    }
}

/// Which keys presence is kept under in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisLayout {
    /// herenow's own layout (events, live connections, sweep leases), with
    /// every space split over `shards` shard keys unless `space_shards`
    /// names it. Every server on one Redis must use the same counts.
    Herenow {
        /// Shard keys per space, 1 to 1024; 1 is one sorted set per kind.
        shards: u16,
        /// Per-space exceptions to `shards` (one huge space over many
        /// shards, the others over one).
        space_shards: HashMap<SpaceName, u16>,
        /// Replicas that must have each heartbeat and leave before it is
        /// acknowledged (Redis `WAIT`); 0 acknowledges once the master has
        /// it. See `RedisOptions::wait_replicas`.
        wait_replicas: u16,
        /// Longest wait for them, more than zero and at most
        /// [`MAX_REDIS_WAIT`].
        wait_timeout: Duration,
    },
    /// A seed's own keys, so a site running the seed's code shares them
    /// with herenow; what the layout cannot answer is `Unsupported`.
    #[cfg(feature = "redis")]
    Seed {
        /// `sorted-set`, `minute-buckets` or `rotation`.
        layout: herenow_redis::SeedLayout,
        /// The key template the seed's code uses (`whos_online:users`,
        /// `presence:{space}`, `active.users:{minute}`,
        /// `wo_user_{generation}`).
        key: String,
        /// The guests' key template; none means guests are not tracked in
        /// that layout.
        guest_key: Option<String>,
    },
}

impl Default for RedisLayout {
    fn default() -> Self {
        RedisLayout::Herenow {
            shards: 1,
            space_shards: HashMap::new(),
            wait_replicas: 0,
            wait_timeout: DEFAULT_REDIS_WAIT,
        }
    }
}

/// How long a write waits for its replicas unless told otherwise (with
/// `wait_replicas` above 0).
pub const DEFAULT_REDIS_WAIT: Duration = Duration::from_millis(250);

/// The longest wait for replicas: half the Redis store's timeout (2 s), so
/// the wait a failover costs never times a call out.
pub const MAX_REDIS_WAIT: Duration = Duration::from_secs(1);

/// How often the memory store's snapshot is written unless told otherwise.
pub const DEFAULT_SNAPSHOT_INTERVAL: Duration = Duration::from_secs(30);

/// How long a socket may send nothing before the server pings it,
/// unless told otherwise (`--ping-interval`).
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(20);

/// How long a pinged socket has to answer, unless told otherwise
/// (`--pong-wait`): with [`DEFAULT_PING_INTERVAL`], a socket that vanished
/// without a close is closed within 30 s.
pub const DEFAULT_PONG_WAIT: Duration = Duration::from_secs(10);

/// How long the shutdown waits for sockets to close, unless told otherwise
/// (`--drain`).
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(10);

/// The longest ping interval, pong wait or drain: 10 minutes, the longest
/// WebSocket TTL.
pub const MAX_SOCKET_TIMER: Duration = Duration::from_secs(600);

/// Time between ticks on the memory store: its rounds are cheap and local.
pub(crate) const MEMORY_TICK: Duration = Duration::from_millis(250);

/// Time between ticks on Redis: a round costs a script call per space and
/// is shared by every server through the sweep lease.
pub(crate) const REDIS_TICK: Duration = Duration::from_secs(1);

/// Which store to run on, with the settings that go with it and only
/// those: a data directory belongs to the memory store, a key layout to
/// Redis, a seed layout's key template to that layout. A combination that
/// means nothing (`--data-dir` with Redis, shards with a seed layout)
/// cannot be written, so no check at start has to refuse it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded in-memory store, alone on one server.
    Memory {
        /// Where its snapshot is kept, so a restart loses nothing; `None`:
        /// nowhere.
        data_dir: Option<PathBuf>,
        /// How often the snapshot is written while running.
        snapshot_interval: Duration,
        /// The stripes each space is split over (1 to
        /// [`herenow_memory::MAX_STRIPES`]; 1: whole spaces), so
        /// several cores can write one busy space at once; `None`: as many
        /// as [`herenow_memory::default_space_stripes`] gives for the
        /// server's runtime workers (4 from 8 workers, else 1).
        space_stripes: Option<usize>,
    },
    /// Redis or Redis Cluster, which keeps the state itself and shares it
    /// between any number of servers.
    Redis {
        /// Where Redis is: one server, or a cluster's seed nodes.
        target: RedisTarget,
        /// Whose keys: herenow's own, or a seed's to share with its code.
        layout: RedisLayout,
    },
}

impl Default for StoreSpec {
    fn default() -> Self {
        StoreSpec::Memory {
            data_dir: None,
            snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL,
            space_stripes: None,
        }
    }
}

/// `scheme://user:password@host…` → `scheme://user:***@host…`; nodes of a
/// cluster spec are redacted one by one.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let nodes: Vec<String> = rest
        .split(',')
        .map(|node| match node.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***@{host}"),
                None => format!("***@{host}"),
            },
            None => node.to_owned(),
        })
        .collect();
    format!("{scheme}://{}", nodes.join(","))
}

/// Checks `[USER:PASSWORD@]HOST:PORT`: a non-empty host and a port number.
fn check_node(node: &str) -> Result<(), &'static str> {
    let hostport = node.rsplit_once('@').map_or(node, |(_, h)| h);
    let (host, port) = hostport
        .rsplit_once(':')
        .ok_or("every address needs a port: HOST:PORT")?;
    if host.is_empty() || host.contains(['/', '?', '#', ' ']) {
        return Err("every address needs a host: HOST:PORT");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(()),
        _ => Err("the port in HOST:PORT must be a number from 1 to 65535"),
    }
}

impl std::str::FromStr for StoreTarget {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &'static str| ConfigError::BadStore {
            spec: redact(s),
            why,
        };
        if s == "memory" {
            return Ok(StoreTarget::Memory);
        }
        // TLS changes the transport, not the shape of the address.
        let plain = s.strip_prefix("rediss").map(|rest| format!("redis{rest}"));
        let plain = plain.as_deref().unwrap_or(s);
        if let Some(rest) = plain.strip_prefix("redis+cluster://") {
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            if rest.is_empty() {
                return Err(bad("redis+cluster:// needs at least one HOST:PORT"));
            }
            if rest.contains(['/', '?']) {
                return Err(bad(
                    "expected redis+cluster://H1:P1,H2:P2,… (a cluster has no database number)",
                ));
            }
            for node in rest.split(',') {
                check_node(node.trim()).map_err(bad)?;
            }
            return Ok(StoreTarget::Redis(RedisTarget::Cluster(s.to_owned())));
        }
        if let Some(rest) = plain.strip_prefix("redis://") {
            if rest.contains(['?', '#', ',']) {
                return Err(bad("expected redis://HOST:PORT[/DB]"));
            }
            let rest = rest.strip_suffix('/').unwrap_or(rest);
            let (node, db) = match rest.split_once('/') {
                Some((node, db)) => (node, Some(db)),
                None => (rest, None),
            };
            check_node(node).map_err(bad)?;
            if let Some(db) = db
                && db.parse::<u16>().is_err()
            {
                return Err(bad("the database in redis://HOST:PORT/DB must be a number"));
            }
            return Ok(StoreTarget::Redis(RedisTarget::Standalone(s.to_owned())));
        }
        Err(ConfigError::UnknownStore(redact(s)))
    }
}

/// Everything [`crate::run`] needs besides the listener.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store, with the settings of its kind.
    pub store: StoreSpec,
    /// API keys; empty means no authentication (loopback only).
    pub api_keys: Vec<ApiKey>,
    /// Run the visitor simulator in a `demo` space, so the page moves
    /// without real traffic.
    pub demo: bool,
    /// The policy (thresholds, window, retention) of spaces never
    /// configured through the API.
    pub space_defaults: SpaceConfig,
    /// Most concurrent connections, WebSockets included; further clients
    /// wait in the kernel's accept queue until one closes.
    pub max_connections: usize,
    /// Most concurrent WebSocket connections (`/v1/ws`); one more upgrade
    /// is refused with a `503` rather than queued. Each also holds one of
    /// `max_connections`, so keep this below it.
    pub max_ws_connections: usize,
    /// How long a WebSocket connection lives without a message: the
    /// socket closes (`4004`) and the store drops its presence after this.
    /// Between 1 s and 10 min.
    pub ws_ttl: Duration,
    /// How often WebSocket clients are asked to ping (`ping_ms` in
    /// `welcome`); at most half of `ws_ttl`.
    pub ws_ping: Duration,
    /// How long a socket of either protocol may send nothing at all
    /// before the server asks whether it is still there: a WebSocket Ping
    /// frame on `/v1/ws` (browsers answer it by themselves), `pusher:ping`
    /// on a Pusher socket, whose clients are told it as
    /// `activity_timeout`. Longer than zero, at most
    /// [`MAX_SOCKET_TIMER`].
    pub ping_interval: Duration,
    /// How long a socket has to send anything (a pong or any other frame)
    /// once pinged before it is closed (`/v1/ws`: `4005`; Pusher: `4201`)
    /// and its presence handed to the grace. A socket that vanished
    /// without a close is so found within `ping_interval + pong_wait`.
    /// Longer than zero, at most [`MAX_SOCKET_TIMER`].
    pub pong_wait: Duration,
    /// How long the shutdown waits for sockets to close once it began:
    /// each is told to reconnect at once (`/v1/ws`: `1012`; Pusher:
    /// `4200`) and hands its presence to the grace. Longer than zero, at
    /// most [`MAX_SOCKET_TIMER`].
    pub drain: Duration,
    /// The secret that signs WebSocket tokens. `None`: a random one per
    /// process, so tokens die with it, and servers sharing a Redis store
    /// do not accept each other's tokens.
    pub token_secret: Option<TokenSecret>,
    /// Most concurrent Server-Sent Event streams; one more is refused with
    /// a `503` rather than queued, so a reconnect storm cannot starve the
    /// JSON API of connections.
    pub max_event_streams: usize,
    /// How long a non-streaming request may take before it is answered with
    /// a `503` problem.
    pub request_timeout: Duration,
    /// Where events go (`--webhook`), and how they are delivered; no
    /// endpoint: no webhooks, and the store keeps no outbox.
    pub webhooks: WebhookConfig,
    /// The Pusher apps (`--pusher-app`); none: nothing of the Pusher
    /// protocol is served.
    pub pusher: PusherConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            store: StoreSpec::default(),
            api_keys: Vec::new(),
            demo: false,
            space_defaults: SpaceConfig::default(),
            // 12,000 WebSockets and 4,000 more for the JSON API and event
            // streams: a 10,000-socket load test fits with room to spare.
            max_connections: 16_000,
            max_ws_connections: 12_000,
            ws_ttl: Duration::from_secs(30),
            ws_ping: Duration::from_secs(10),
            ping_interval: DEFAULT_PING_INTERVAL,
            pong_wait: DEFAULT_PONG_WAIT,
            drain: DEFAULT_DRAIN,
            token_secret: None,
            max_event_streams: 1_024,
            request_timeout: Duration::from_secs(10),
            webhooks: WebhookConfig::default(),
            pusher: PusherConfig::default(),
        }
    }
}

impl Config {
    /// Checks the configuration against the address it will serve on, and
    /// against this build (a Redis store needs the `redis` feature).
    pub fn check(&self, listen: SocketAddr) -> Result<(), ConfigError> {
        if self.api_keys.is_empty() && !listen.ip().is_loopback() {
            return Err(ConfigError::OpenOnNetwork(listen));
        }
        #[cfg(not(feature = "redis"))]
        if let StoreSpec::Redis { target, .. } = &self.store {
            return Err(ConfigError::NoRedisSupport(target.redacted()));
        }
        if let StoreSpec::Redis {
            layout:
                RedisLayout::Herenow {
                    shards,
                    space_shards,
                    wait_replicas,
                    wait_timeout,
                },
            ..
        } = &self.store
        {
            if std::iter::once(shards)
                .chain(space_shards.values())
                .any(|n| !(1..=1024).contains(n))
            {
                return Err(ConfigError::BadShards);
            }
            if *wait_replicas > 0 && (wait_timeout.is_zero() || *wait_timeout > MAX_REDIS_WAIT) {
                return Err(ConfigError::BadRedisWait(*wait_timeout));
            }
        }
        if let StoreSpec::Memory {
            space_stripes: Some(n),
            ..
        } = &self.store
            && !(1..=herenow_memory::MAX_STRIPES).contains(n)
        {
            return Err(ConfigError::BadStripes(*n));
        }
        self.space_defaults
            .validate()
            .map_err(ConfigError::SpaceDefaults)?;
        for (name, zero) in [
            ("max_connections", self.max_connections == 0),
            ("max_event_streams", self.max_event_streams == 0),
            ("request_timeout", self.request_timeout.is_zero()),
            ("max_ws_connections", self.max_ws_connections == 0),
        ] {
            if zero {
                return Err(ConfigError::ZeroLimit(name));
            }
        }
        let ttl = self.ws_ttl.as_millis();
        if ttl < u128::from(herenow_core::limits::MIN_CONN_TTL_MS)
            || ttl > u128::from(herenow_core::limits::MAX_CONN_TTL_MS)
        {
            return Err(ConfigError::WsTtl(self.ws_ttl));
        }
        if self.ws_ping.is_zero() || self.ws_ping > self.ws_ttl / 2 {
            return Err(ConfigError::WsPing {
                ping: self.ws_ping,
                ttl: self.ws_ttl,
            });
        }
        for (flag, value) in [
            ("ping_interval", self.ping_interval),
            ("pong_wait", self.pong_wait),
            ("drain", self.drain),
        ] {
            if value.is_zero() || value > MAX_SOCKET_TIMER {
                return Err(ConfigError::SocketTimer { flag, value });
            }
        }
        self.webhooks.check()?;
        self.pusher.check()?;
        let lanes = self.webhooks.endpoints.len() + self.pusher.webhook_targets().len();
        if lanes > crate::webhooks::endpoint::MAX_ENDPOINTS {
            return Err(WebhookError::TooManyEndpoints(lanes).into());
        }
        Ok(())
    }
}

/// A configuration that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No API key while listening beyond loopback.
    #[error(
        "refusing to listen on {0} without an API key: anyone on the network could \
         read and write presence. Pass --api-key KEY:write (and KEY:read), or listen on 127.0.0.1"
    )]
    OpenOnNetwork(SocketAddr),
    /// `--api-key` not of the form `KEY:read` or `KEY:write`.
    #[error("an API key must look like KEY:read or KEY:write")]
    ApiKeyFormat,
    /// An API key shorter than 8 characters or with spaces.
    #[error("an API key must be at least 8 characters without spaces or control characters")]
    ApiKeyTooWeak,
    /// `--store` names no known store.
    #[error("unknown store {0:?}; --store takes one of: {ACCEPTED_STORES}")]
    UnknownStore(String),
    /// A `redis://` or `redis+cluster://` spec that does not parse.
    #[error("bad store {spec:?}: {why}")]
    BadStore {
        /// The spec, password redacted.
        spec: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A shard count out of range.
    #[error("a space is split over 1 to 1024 shards")]
    BadShards,
    /// A stripe count out of range.
    #[error("a space of the memory store is split over 1 to 64 stripes; got {0}")]
    BadStripes(usize),
    /// A wait for Redis replicas out of range.
    #[error(
        "the wait for Redis replicas must be more than zero and at most {MAX_REDIS_WAIT:?}; got {0:?}"
    )]
    BadRedisWait(Duration),
    /// A Redis store asked of a build without the `redis` feature, which
    /// has the memory store only. Never a fallback to memory.
    #[error(
        "--store {0}: this build of herenow has no Redis support (built without the \
         `redis` feature); use --store memory or a build with Redis"
    )]
    NoRedisSupport(String),
    /// Default thresholds that do not fit together.
    #[error("space defaults: {0}")]
    SpaceDefaults(herenow_core::InvalidInput),
    /// A bound of zero, which would refuse every client.
    #[error("{0} must be greater than zero")]
    ZeroLimit(&'static str),
    /// A token secret too short to sign with HS256.
    #[error(
        "the token secret is {0} bytes; HS256 needs at least {MIN_TOKEN_SECRET_BYTES} \
         (try: openssl rand -base64 48)"
    )]
    TokenSecretTooShort(usize),
    /// A webhook that cannot be delivered to as configured.
    #[error(transparent)]
    Webhook(#[from] WebhookError),
    /// A Pusher app that cannot be served.
    #[error(transparent)]
    Pusher(#[from] PusherConfigError),
    /// A WebSocket TTL the stores do not accept.
    #[error("the WebSocket TTL must be between 1s and 10m; got {0:?}")]
    WsTtl(Duration),
    /// A clients' ping interval (`ws_ping`) too long for the TTL.
    #[error(
        "the clients' ping interval ({ping:?}, `ping_ms`) must be longer than zero and at most half \
         the TTL ({ttl:?}), so one lost ping does not drop a client"
    )]
    WsPing {
        /// The ping interval asked for.
        ping: Duration,
        /// The TTL it must fit in twice.
        ttl: Duration,
    },
    /// A ping interval, pong wait or drain of zero or past
    /// [`MAX_SOCKET_TIMER`].
    #[error("{flag} must be longer than zero and at most 10m; got {value:?}")]
    SocketTimer {
        /// The setting: `ping_interval`, `pong_wait` or `drain`.
        flag: &'static str,
        /// The duration asked for.
        value: Duration,
    },
    /// A flag that needs a capability the store does not offer (see
    /// [`herenow_core::capability`]): refused at start, not answered
    /// `501` on every request that needs it.
    #[error(
        "{flag} needs {needs}, which the store ({store}) does not offer: drop {flag}, or use \
         the memory store or herenow's own Redis layout"
    )]
    StoreLacks {
        /// The store, as it names itself (a seed's layout names the
        /// layout).
        store: String,
        /// The flag given.
        flag: &'static str,
        /// What the flag needs.
        needs: herenow_core::Capability,
    },
}

#[cfg(test)]
mod tests;
