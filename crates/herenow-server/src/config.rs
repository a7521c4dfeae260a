//! Server configuration, as built by the binary from flags and environment.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use herenow_core::SpaceConfig;

/// What an API key may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Queries only.
    Read,
    /// Queries, heartbeats, leaves, friends, configuration, explicit times.
    Write,
}

/// An API key and its scope, from `--api-key KEY:SCOPE`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// The secret.
    pub key: String,
    /// What it may do.
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

/// Which store to run on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StoreSpec {
    /// The embedded in-memory store.
    #[default]
    Memory,
}

impl std::str::FromStr for StoreSpec {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "memory" => Ok(StoreSpec::Memory),
            other => Err(ConfigError::UnknownStore(other.to_owned())),
        }
    }
}

/// Everything [`crate::run`] needs besides the listener.
#[derive(Clone, Debug)]
pub struct Config {
    /// The store.
    pub store: StoreSpec,
    /// Where the memory store keeps its snapshot; `None`: nowhere.
    pub data_dir: Option<PathBuf>,
    /// How often the snapshot is written while running.
    pub snapshot_interval: Duration,
    /// API keys; empty means no authentication (loopback only).
    pub api_keys: Vec<ApiKey>,
    /// Run the visitor simulator.
    pub demo: bool,
    /// The policy of spaces never configured.
    pub space_defaults: SpaceConfig,
    /// Most concurrent connections; further clients wait in the kernel's
    /// accept queue until one closes.
    pub max_connections: usize,
    /// Most concurrent Server-Sent Event streams; one more is refused with
    /// a `503` rather than queued, so a reconnect storm cannot starve the
    /// JSON API of connections.
    pub max_event_streams: usize,
    /// How long a non-streaming request may take before it is answered with
    /// a `503` problem.
    pub request_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            store: StoreSpec::Memory,
            data_dir: None,
            snapshot_interval: Duration::from_secs(30),
            api_keys: Vec::new(),
            demo: false,
            space_defaults: SpaceConfig::default(),
            max_connections: 10_000,
            max_event_streams: 1_024,
            request_timeout: Duration::from_secs(10),
        }
    }
}

impl Config {
    /// Checks the configuration against the address it will serve on.
    pub fn check(&self, listen: SocketAddr) -> Result<(), ConfigError> {
        if self.api_keys.is_empty() && !listen.ip().is_loopback() {
            return Err(ConfigError::OpenOnNetwork(listen));
        }
        self.space_defaults
            .validate()
            .map_err(ConfigError::SpaceDefaults)?;
        if self.max_connections == 0 {
            return Err(ConfigError::ZeroLimit("max_connections"));
        }
        if self.max_event_streams == 0 {
            return Err(ConfigError::ZeroLimit("max_event_streams"));
        }
        if self.request_timeout.is_zero() {
            return Err(ConfigError::ZeroLimit("request_timeout"));
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
    #[error("unknown store {0:?}; this build knows: memory")]
    UnknownStore(String),
    /// Default thresholds that do not fit together.
    #[error("space defaults: {0}")]
    SpaceDefaults(herenow_core::InvalidInput),
    /// A bound of zero, which would refuse every client.
    #[error("{0} must be greater than zero")]
    ZeroLimit(&'static str),
}
