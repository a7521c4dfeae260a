//! The command line: every flag and its environment variable.
//!
//! Everything a user can get wrong on the command line (a duration without a
//! unit, metadata that is not a JSON object, an API key without a scope, a
//! server URL that is not http) is refused by clap, before any socket is
//! opened or any request is sent; the value parsers are [`crate::parse`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use herenow_server::{ApiKey, StoreTarget};
use reqwest::Url;

pub(crate) use crate::parse::{RedisLayoutArg, SeedLayout, SpaceShards};
use crate::parse::{
    grace_duration, json_object, positive_duration, redis_layout, remember_duration, server_url,
    socket_timer, space_shards, token_ttl,
};
pub(crate) use crate::webhook_flags::{WebhookArgs, WebhooksCommand};

/// herenow: who is here right now, and when was everyone else last seen.
#[derive(Debug, Parser)]
#[command(
    name = "herenow",
    version,
    propagate_version = true,
    after_help = "Examples:
  herenow serve --data-dir /var/lib/herenow
  herenow seen lobby alice bob --meta '{\"page\":\"/home\"}'
  herenow online lobby --all
  herenow status lobby alice carol
  herenow friends set alice bob carol && herenow friends online lobby alice
  herenow user alice && herenow users status alice bob carol
  herenow erase alice
  herenow token alice --space room:1 --ttl 1h --watch any

Client commands talk to --server (HERENOW_SERVER, default http://127.0.0.1:7700);
--json prints the server's answer as is. Exit codes: 0 done, 1 failed, 2 bad usage."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands: the server, and a client for each part of the API.
// One value per process, parsed once: `serve`'s many flags cost nothing
// worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the presence server.
    Serve(ServeArgs),
    /// Check a config file for `serve --config`, or print an example with
    /// every setting.
    Config(ConfigArgs),
    /// The client commands, at the same level as `serve`.
    #[command(flatten)]
    Client(ClientCommand),
}

/// The client commands: each talks to a running server over HTTP.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Record that members are here now (heartbeats).
    Seen(SeenArgs),
    /// Say goodbye for members: they are offline at once.
    Leave(LeaveArgs),
    /// List who is online in a space, most recently seen first.
    Online(OnlineArgs),
    /// Count the users and guests online in a space.
    Count(CountArgs),
    /// Show the status and last-seen time of members.
    Status(StatusArgs),
    /// Manage a user's friends and see which of them are online.
    Friends(FriendsArgs),
    /// Show when a user was last seen anywhere: the newest time over every
    /// space, remembered after leaving (default 30 days), and where.
    User(UserArgs),
    /// Look up many users at once (`users status ID…`).
    Users(UsersArgs),
    /// Erase a user everywhere: presence, remembered last-seen times, its
    /// friend set and its place in others'. For account deletion and
    /// erasure requests; asks nothing, cannot be undone; needs a write key.
    Erase(EraseArgs),
    /// Mint a token for the WebSocket protocol (/v1/ws); needs a write key.
    Token(TokenArgs),
    /// Show each webhook endpoint's state (needs a write key), or send a
    /// signed sample to a URL (`webhooks test URL --secret whsec_…`).
    Webhooks(WebhooksArgs),
}

/// `herenow config`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// What to do with a config file.
    #[command(subcommand)]
    pub command: ConfigCommand,
}

/// `herenow config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check FILE as `herenow serve --config FILE` would read it, with
    /// the HERENOW_* variables set here, and print the settings it gives,
    /// secrets masked; exit 2 when something is wrong.
    Check {
        /// The TOML file.
        file: PathBuf,
    },
    /// Print a config file with every setting, commented out, at its
    /// default (deploy/herenow.example.toml).
    Example,
}

/// `herenow serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A TOML file with any of the settings below, each under its flag's
    /// name in snake case (the repeatable ones plural: `api_keys`,
    /// `pusher_apps`, `webhooks`, `pusher_webhooks`); flags and
    /// environment variables override it, and `${VAR}` in a value is
    /// replaced by that environment variable. `herenow config example`
    /// prints one with every setting.
    #[arg(long, env = "HERENOW_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to listen on. Anything but loopback needs an API key.
    #[arg(long, env = "HERENOW_LISTEN", default_value = "127.0.0.1:7700")]
    pub listen: SocketAddr,

    /// Where presence is kept: `memory` (embedded, one server),
    /// `redis://HOST:PORT[/DB]` (one Redis server) or
    /// `redis+cluster://H1:P1,H2:P2,…` (a Redis Cluster's seed nodes);
    /// `rediss://` and `rediss+cluster://` speak TLS (certificates checked
    /// against the system's roots, or SSL_CERT_FILE). With
    /// Redis any number of herenow servers share one state; a Redis that
    /// cannot be reached at start is an error, never a fallback to memory.
    #[arg(
        long,
        env = "HERENOW_STORE",
        default_value = "memory",
        value_name = "STORE"
    )]
    pub store: StoreTarget,

    /// With Redis: the key layout. `herenow` (its own), or a seed's, to share
    /// keys with code already running it: `sorted-set` (seeds 001/004),
    /// `minute-buckets` (seed 002), `rotation` (seed 000).
    #[arg(long, env = "HERENOW_REDIS_LAYOUT", default_value = "herenow", value_parser = redis_layout)]
    pub redis_layout: RedisLayoutArg,

    /// With a seed layout: the key template, e.g. `whos_online:users`,
    /// `presence:{space}`, `active.users:{minute}`, `wo_user_{generation}`.
    #[arg(long, env = "HERENOW_REDIS_KEY", value_name = "TEMPLATE")]
    pub redis_key: Option<String>,

    /// With a seed layout: the guests' key template (e.g.
    /// `wo_guest_{generation}`); without it guests are not tracked.
    #[arg(long, env = "HERENOW_REDIS_GUEST_KEY", value_name = "TEMPLATE")]
    pub redis_guest_key: Option<String>,

    /// With herenow's Redis layout: split every space over N shard keys
    /// (each its own cluster slot), so one space can outgrow one sorted set
    /// and one node. Every server on one Redis must use the same N.
    #[arg(long, env = "HERENOW_REDIS_SHARDS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub redis_shards: u16,

    /// Per-space shard counts, `SPACE=N,…` (e.g. `lobby=16`): exceptions
    /// to --redis-shards.
    #[arg(long, env = "HERENOW_REDIS_SPACE_SHARDS", value_name = "SPACE=N,…",
          value_parser = space_shards)]
    pub redis_space_shards: Option<SpaceShards>,

    /// With herenow's Redis layout: acknowledge a write (heartbeats and
    /// leaves, friend lists, a space's policy and webhooks, erasure, live
    /// connections) only once N replicas of its master have it (Redis
    /// WAIT), so a failover
    /// loses none that was acknowledged. 0 answers as soon as the master
    /// has it: Redis replicates asynchronously, and a write acknowledged in
    /// a master's last moments may be missing on the replica promoted.
    #[arg(
        long,
        env = "HERENOW_REDIS_WAIT_REPLICAS",
        default_value_t = 0,
        value_name = "N"
    )]
    pub redis_wait_replicas: u16,

    /// With --redis-wait-replicas: the longest wait for the replicas (at
    /// most 1s). A write fewer replicas took in time is acknowledged all
    /// the same and counted (herenow_redis_unreplicated_total); a master
    /// without that many replicas is not waited on.
    #[arg(long, env = "HERENOW_REDIS_WAIT_TIMEOUT", default_value = "250ms",
          value_parser = positive_duration)]
    pub redis_wait_timeout: Duration,

    /// Directory for the memory store's journal and snapshot, so a restart
    /// or a crash loses nothing acknowledged (at most the last second of
    /// heartbeats); not with Redis, which keeps the state itself.
    #[arg(long, env = "HERENOW_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    /// Split every space of the memory store over N stripes (1 to 64), so
    /// several cores can write one busy space at once; reads merge the
    /// stripes and answer as for a whole space (1: whole spaces). Default:
    /// 4 when the server runs 8 worker threads or more, else 1. With
    /// Redis, spaces are split with --redis-shards instead.
    #[arg(long, env = "HERENOW_SPACE_STRIPES", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub space_stripes: Option<u32>,

    /// How often the journal is folded into a new snapshot while running
    /// (bounds start time and disk use; the journal bounds what a crash
    /// loses).
    #[arg(long, env = "HERENOW_SNAPSHOT_INTERVAL", default_value = "30s", value_parser = positive_duration)]
    pub snapshot_interval: Duration,

    /// An API key and its scope, KEY:read or KEY:write; repeat for more
    /// (comma-separated in the environment variable).
    #[arg(
        long = "api-key",
        value_name = "KEY:SCOPE",
        env = "HERENOW_API_KEYS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub api_keys: Vec<ApiKey>,

    /// Simulate visitors in a `demo` space, to see the page move.
    #[arg(long, env = "HERENOW_DEMO")]
    pub demo: bool,

    /// Default for spaces: a member is online while seen within this.
    #[arg(long, env = "HERENOW_ONLINE_AFTER", default_value = "60s", value_parser = positive_duration)]
    pub online_after: Duration,

    /// Default for spaces: a member is away (not offline) while seen within this.
    #[arg(long, env = "HERENOW_AWAY_AFTER", default_value = "5m", value_parser = positive_duration)]
    pub away_after: Duration,

    /// Default for spaces: "who's online" means seen within this window.
    #[arg(long, env = "HERENOW_WINDOW", default_value = "10m", value_parser = positive_duration)]
    pub window: Duration,

    /// Default for spaces: a member is forgotten this long after its last heartbeat.
    #[arg(long, env = "HERENOW_RETENTION", default_value = "15m", value_parser = positive_duration)]
    pub retention: Duration,

    /// Default for spaces: how long a user's last-seen time is remembered
    /// after presence ends (leave or retention), e.g. 30d; 0 turns it off.
    /// At most 1096d.
    #[arg(long, env = "HERENOW_REMEMBER", default_value = "30d", value_parser = remember_duration)]
    pub remember: Duration,

    /// Default for spaces: how long a member whose last live connection
    /// ended without a goodbye (a page reload, a dropped network, a server
    /// stopping or dying) stays present. If a connection of the same user
    /// comes back within it (any server, either protocol) nobody is told
    /// anything; if not, the leave goes out when it ends. 0 turns it off;
    /// at most 5m.
    #[arg(long, env = "HERENOW_GRACE", default_value = "5s", value_parser = grace_duration)]
    pub grace: Duration,

    /// Most connections served at once, WebSockets included; more wait.
    #[arg(long, env = "HERENOW_MAX_CONNECTIONS", default_value_t = 16_000,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,

    /// Most WebSocket connections open at once; one more is refused with
    /// a 503 (default 12000). Each also counts against --max-connections.
    #[arg(long, env = "HERENOW_WS_MAX_CONNECTIONS", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub ws_max_connections: Option<u32>,

    /// A WebSocket connection that sends nothing for this long is dropped
    /// from its spaces and closed; clients are asked to ping every third
    /// of it (default 30s; 1s to 10m).
    #[arg(long, env = "HERENOW_WS_TTL", value_name = "DURATION", value_parser = positive_duration)]
    pub ws_ttl: Option<Duration>,

    /// A socket (/v1/ws or Pusher) that sends nothing for this long is
    /// pinged: a WebSocket Ping frame on /v1/ws, which browsers answer by
    /// themselves, pusher:ping on a Pusher socket (whose clients are told
    /// it as activity_timeout). Longer than zero, at most 10m.
    #[arg(long, env = "HERENOW_PING_INTERVAL", default_value = "20s", value_parser = socket_timer)]
    pub ping_interval: Duration,

    /// A pinged socket that sends nothing within this is closed (/v1/ws:
    /// 4005, Pusher: 4201) and its members go through --grace: with
    /// --ping-interval, a socket whose network vanished is found within
    /// 30s by default. Longer than zero, at most 10m.
    #[arg(long, env = "HERENOW_PONG_WAIT", default_value = "10s", value_parser = socket_timer)]
    pub pong_wait: Duration,

    /// On SIGTERM or SIGINT the server stops taking connections, answers
    /// /readyz with 503, tells every socket to reconnect now (/v1/ws:
    /// 1012, Pusher: 4200; their members stay for --grace meanwhile) and
    /// waits this long at most for them to close. Longer than zero, at
    /// most 10m.
    #[arg(long, env = "HERENOW_DRAIN", default_value = "10s", value_parser = socket_timer)]
    pub drain: Duration,

    /// The secret that signs WebSocket tokens, at least 32 bytes. Servers
    /// sharing a Redis store must share it; without it each server
    /// process makes a random one.
    #[arg(
        long,
        env = "HERENOW_TOKEN_SECRET",
        value_name = "SECRET",
        hide_env_values = true
    )]
    pub token_secret: Option<String>,

    /// Most Server-Sent Event streams open at once; one more is refused
    /// with a 503 (default 1024).
    #[arg(long, env = "HERENOW_MAX_EVENT_STREAMS", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_event_streams: Option<u32>,

    /// How long a request may take before it is answered with a 503
    /// (default 10s).
    #[arg(long, env = "HERENOW_REQUEST_TIMEOUT", value_name = "DURATION",
          value_parser = positive_duration)]
    pub request_timeout: Option<Duration>,

    /// A Pusher Channels app to serve, ID:KEY:SECRET (pusher-js and
    /// Laravel Echo connect to /app/KEY, Pusher's server libraries call
    /// /apps/ID); repeat for more (comma-separated in the environment
    /// variable). Without one nothing of the Pusher protocol is served.
    #[arg(
        long = "pusher-app",
        value_name = "ID:KEY:SECRET",
        env = "HERENOW_PUSHER_APPS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub pusher_apps: Vec<String>,

    /// Limits of one Pusher app, over those every app has:
    /// APP_ID:LIMIT=N[,LIMIT=N]… with max_connections (its sockets on this
    /// server; unbounded but for --ws-max-connections by default),
    /// client_events_per_second (10), max_presence_members (10000),
    /// max_event_bytes (an HTTP API event's data; 10240) and
    /// max_client_event_bytes (10240). Repeat for more apps, separated by
    /// spaces in the environment variable.
    #[arg(
        long = "pusher-app-limits",
        value_name = "APP_ID:LIMIT=N,…",
        env = "HERENOW_PUSHER_APP_LIMITS",
        value_delimiter = ' '
    )]
    pub pusher_app_limits: Vec<String>,

    /// Send the Pusher apps' webhooks to this URL in Pusher's format
    /// (channel_occupied, channel_vacated, member_added, member_removed
    /// of presence channels, signed with X-Pusher-Key and
    /// X-Pusher-Signature): URL for every app's (each signed by its app),
    /// APP_ID=URL for one app's. Repeat for more (comma-separated in the
    /// environment variable). Delivered once by one server through the
    /// store's webhook outbox, with --webhook's retries and limits.
    #[arg(
        long = "pusher-webhook",
        value_name = "[APP_ID=]URL",
        env = "HERENOW_PUSHER_WEBHOOK",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub pusher_webhooks: Vec<String>,

    /// Send client events (client-*, Laravel Echo's whisper) to the
    /// --pusher-webhook endpoints too, as Pusher's client_event webhook.
    /// The server whose socket sent one keeps it in the webhook outbox:
    /// give every server sharing a store this flag.
    #[arg(long, env = "HERENOW_PUSHER_WEBHOOK_CLIENT_EVENTS")]
    pub pusher_webhook_client_events: bool,

    /// Webhooks: where events go and how they are delivered (boxed: the
    /// flags would make `Command` lopsided).
    #[command(flatten)]
    pub webhooks: Box<WebhookArgs>,

    /// Log lines as text for people or JSON for collectors; the level comes
    /// from RUST_LOG (default info).
    #[arg(long, env = "HERENOW_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How `herenow serve` writes its log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the server is and how to talk to it; every client command has these.
#[derive(Debug, Args)]
pub struct ClientOpts {
    /// The server's base URL (plain http).
    #[arg(
        long,
        env = "HERENOW_SERVER",
        default_value = "http://127.0.0.1:7700",
        value_parser = server_url,
        global = true
    )]
    pub server: Url,

    /// API key, sent as `Authorization: Bearer KEY`.
    #[arg(long, env = "HERENOW_API_KEY", hide_env_values = true, global = true)]
    pub api_key: Option<String>,

    /// Print the server's JSON answer as is, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `herenow seen`.
#[derive(Debug, Args)]
pub struct SeenArgs {
    /// The space, e.g. `lobby`.
    pub space: String,
    /// Member ids; many are sent as batches of up to 10,000.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// The ids are guests (anonymous visitors), not users.
    #[arg(long)]
    pub guest: bool,
    /// Metadata for every member named, a JSON object of at most 1 KiB.
    #[arg(long, value_name = "JSON", value_parser = json_object)]
    pub meta: Option<serde_json::Value>,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow leave`.
#[derive(Debug, Args)]
pub struct LeaveArgs {
    /// The space, e.g. `lobby`.
    pub space: String,
    /// Member ids; they are offline at once.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// The ids are guests (anonymous visitors), not users.
    #[arg(long)]
    pub guest: bool,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// How `online` orders its list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Order {
    /// Most recently seen first.
    Recent,
    /// By id, bytewise (a Redis store refuses it past 10,000 members in
    /// the window).
    Id,
}

/// `herenow online`.
#[derive(Debug, Args)]
pub struct OnlineArgs {
    /// The space, e.g. `lobby`.
    pub space: String,
    /// Seen within this (default: the space's window).
    #[arg(long, value_parser = positive_duration)]
    pub window: Option<Duration>,
    /// Members per page, 1 to 1,000 (default 100).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: Option<u32>,
    /// List guests instead of users.
    #[arg(long, conflicts_with = "all")]
    pub guests: bool,
    /// List users and guests.
    #[arg(long)]
    pub all: bool,
    /// Order of the list (default: most recently seen first).
    #[arg(long, value_enum)]
    pub order: Option<Order>,
    /// Continue from a previous page's cursor (same other options).
    #[arg(long)]
    pub cursor: Option<String>,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow count`.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// The space, e.g. `lobby`.
    pub space: String,
    /// Seen within this (default: the space's window).
    #[arg(long, value_parser = positive_duration)]
    pub window: Option<Duration>,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The space, e.g. `lobby`.
    pub space: String,
    /// Member ids, answered in the order given.
    #[arg(required = true, value_name = "ID")]
    pub ids: Vec<String>,
    /// The ids are guests (anonymous visitors), not users.
    #[arg(long)]
    pub guest: bool,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow friends`.
#[derive(Debug, Args)]
pub struct FriendsArgs {
    /// What to do with friends.
    #[command(subcommand)]
    pub command: FriendsCommand,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow friends …`.
#[derive(Debug, Subcommand)]
pub enum FriendsCommand {
    /// Replace a user's friends (no ids: none).
    Set {
        /// The user whose friend set is replaced.
        user: String,
        /// The friends' user ids.
        #[arg(value_name = "ID")]
        ids: Vec<String>,
    },
    /// Add friends to a user's set.
    Add {
        /// The user whose friend set grows.
        user: String,
        /// The friends' user ids.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Remove friends from a user's set.
    Remove {
        /// The user whose friend set shrinks.
        user: String,
        /// The friends' user ids.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// List a user's friends.
    List {
        /// The user whose friends to list.
        user: String,
    },
    /// List a user's friends seen in a space within the window.
    Online {
        /// The space, e.g. `lobby`.
        space: String,
        /// The user whose friends to look up (friend sets are global).
        user: String,
        /// Seen within this (default: the space's window).
        #[arg(long, value_parser = positive_duration)]
        window: Option<Duration>,
        /// At most this many, 1 to 1,000 (default 100).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: Option<u32>,
    },
}

/// `herenow user`.
#[derive(Debug, Args)]
pub struct UserArgs {
    /// The user id.
    pub id: String,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow users`.
#[derive(Debug, Args)]
pub struct UsersArgs {
    /// What to look up.
    #[command(subcommand)]
    pub command: UsersCommand,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow users …`.
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Show when users were last seen anywhere, in the order given.
    Status {
        /// User ids; many are sent as batches of up to 10,000.
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

/// `herenow erase`.
#[derive(Debug, Args)]
pub struct EraseArgs {
    /// The user id to erase.
    pub id: String,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The member id the token is for.
    pub user: String,
    /// A space the token allows; repeat for more (up to 32), or `*` for
    /// every space.
    #[arg(long = "space", required = true, value_name = "SPACE")]
    pub spaces: Vec<String>,
    /// The member is a guest (an anonymous visitor), not a user.
    #[arg(long)]
    pub guest: bool,
    /// How long the token is accepted: 1s to 24h.
    #[arg(long, default_value = "1h", value_parser = token_ttl)]
    pub ttl: Duration,
    /// Whom the socket may watch: its user's friends, any user, or
    /// nobody.
    #[arg(long, value_enum, default_value_t = WatchArg::Friends)]
    pub watch: WatchArg,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow webhooks`.
#[derive(Debug, Args)]
pub struct WebhooksArgs {
    /// Without a subcommand: print each endpoint's state (`GET
    /// /v1/webhooks`, a write key).
    #[command(subcommand)]
    pub command: Option<WebhooksCommand>,
    #[command(flatten)]
    pub client: ClientOpts,
}

/// `herenow token --watch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchArg {
    /// Its user's friends only.
    Friends,
    /// Any user.
    Any,
    /// Nobody.
    None,
}

#[cfg(test)]
mod tests;
