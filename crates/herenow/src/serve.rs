//! `herenow serve`: flags to a [`Config`], a bound listener, the opened
//! store ([`Backend::open`]), a shutdown future from SIGINT/SIGTERM and
//! reloads on SIGHUP ([`crate::reload`]), then [`herenow_server::serve`].
//! Everything else is the server crate's business.

use std::io::{IsTerminal as _, Write as _};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::{Context as _, Result};
use herenow_core::SpaceConfig;
use herenow_server::{
    AppState, Backend, Config, ConfigError, PusherAppLimits, StoreSpec, TokenSecret,
};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

use crate::cli::{LogFormat, ServeArgs};
use crate::config_file::ConfigFile;
use crate::reload::{Hangups, Running};

/// Milliseconds of a duration the CLI already checked to be at least 1 ms;
/// saturating, since no threshold anywhere near `u64::MAX` ms can pass
/// `SpaceConfig::validate` anyway.
fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The server configuration the flags describe, over the store
/// [`store_spec`](crate::store_flags::store_spec) built from them.
/// Settings without a flag keep the server's defaults. Fails for a token
/// secret too short to sign with and for a bad webhook or webhook secret
/// (checked here, not by clap, so a secret is never echoed in an error).
pub fn config(args: &ServeArgs, store: StoreSpec) -> Result<Config, ConfigError> {
    let defaults = Config::default();
    let token_secret = args
        .token_secret
        .as_deref()
        .map(|s| TokenSecret::new(s.as_bytes().to_vec()))
        .transpose()?;
    // A TTL given alone brings its ping interval: a third of it.
    let (ws_ttl, ws_ping) = match args.ws_ttl {
        Some(ttl) => (ttl, ttl / 3),
        None => (defaults.ws_ttl, defaults.ws_ping),
    };
    Ok(Config {
        store,
        api_keys: args.api_keys.clone(),
        demo: args.demo,
        space_defaults: SpaceConfig {
            online_ms: ms(args.online_after),
            away_ms: ms(args.away_after),
            window_ms: ms(args.window),
            retention_ms: ms(args.retention),
            remember_ms: ms(args.remember),
            remember_guests: false,
            grace_ms: ms(args.grace),
        },
        max_connections: args.max_connections as usize,
        max_ws_connections: args
            .ws_max_connections
            .map_or(defaults.max_ws_connections, |n| n as usize),
        ws_ttl,
        ws_ping,
        ping_interval: args.ping_interval,
        pong_wait: args.pong_wait,
        drain: args.drain,
        token_secret,
        max_event_streams: args
            .max_event_streams
            .map_or(defaults.max_event_streams, |n| n as usize),
        request_timeout: args.request_timeout.unwrap_or(defaults.request_timeout),
        webhooks: crate::webhook_flags::config(&args.webhooks)?,
        // Parsed here, not by clap, so a secret is never echoed in an error.
        pusher: herenow_server::PusherConfig {
            apps: args
                .pusher_apps
                .iter()
                .map(|a| a.parse())
                .collect::<Result<_, _>>()?,
            webhooks: args
                .pusher_webhooks
                .iter()
                .filter(|s| !s.trim().is_empty())
                .map(|h| h.parse())
                .collect::<Result<_, _>>()?,
            webhook_client_events: args.pusher_webhook_client_events,
        }
        .with_limits(
            &args
                .pusher_app_limits
                .iter()
                .filter(|s| !s.trim().is_empty())
                .map(|l| l.parse())
                .collect::<Result<Vec<PusherAppLimits>, _>>()?,
        )?,
    })
}

/// Where a browser finds the page: an unspecified address (0.0.0.0, ::)
/// is not one a browser can open, so name loopback instead.
pub fn page_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/", SocketAddr::new(ip, addr.port()))
}

fn init_logging(format: LogFormat) -> Result<()> {
    let filter = EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .context("RUST_LOG is not a valid log filter")?;
    // Logs go to stderr so stdout carries only the "listening" line, which
    // scripts and tests read.
    // Colours only for a person at a terminal, not in a file or a collector.
    // A log line that cannot be written is dropped in silence: told, the
    // subscriber would `eprintln!`, which panics when stderr is a broken
    // pipe (a supervisor gone, `| head`), killing the thread that logged,
    // the signal thread included, and with it the shutdown on SIGTERM.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .log_internal_errors(false);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))
}

/// Runs `herenow serve` on `store` (the flags'
/// [`store_spec`](crate::store_flags::store_spec)) until SIGINT or
/// SIGTERM; `file` is the config file read, which SIGHUP reads again.
pub fn main(args: ServeArgs, store: StoreSpec, file: Option<ConfigFile>) -> Result<()> {
    let config = config(&args, store)?;
    // Refuse a configuration that cannot be served (an open address without
    // keys, thresholds out of order) before touching the network.
    config.check(args.listen)?;
    init_logging(args.log_format)?;
    check_open_files(config.max_connections);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .map_err(|e| bind_error(args.listen, e))?;
        let addr = listener
            .local_addr()
            .context("cannot read the listening address")?;
        // The store first (a Redis that cannot be reached is an error, not
        // a server that prints its address and then dies).
        let backend = Backend::open(&config).await?;
        let state = AppState::new(backend, &config);
        // Webhooks too: a store without an outbox is refused here, not
        // after the address was printed.
        state
            .webhooks()
            .prepare()
            .await
            .map_err(herenow_server::ServerError::from)?;
        // Installed before the "listening" line: a SIGTERM sent as soon as
        // the server is up must shut it down cleanly, not kill it, and a
        // SIGHUP reload it.
        let (hangups, hung_up) = tokio::sync::mpsc::unbounded_channel();
        let shutdown = shutdown_watch(HARD_GRACE + config.drain, hangups)?;
        tokio::spawn(crate::reload::watch(
            hung_up,
            Running::new(&args, file, self::config),
            state.clone(),
        ));
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "herenow listening on http://{addr} (who's online: {})",
            page_url(addr)
        )
        .and_then(|()| out.flush())
        .context("cannot write to stdout")?;
        drop(out);
        // The server logs its own start and stop.
        herenow_server::serve(listener, config, state, shutdown).await?;
        Ok(())
    });
    // Dropping the runtime would wait for every task still running and
    // every blocking call, however long; the server is done by now.
    rt.shutdown_timeout(RUNTIME_GRACE);
    served
}

/// How long tasks still running after the server stopped may take to
/// end before the process exits without them.
const RUNTIME_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn bind_error(addr: SocketAddr, e: std::io::Error) -> anyhow::Error {
    let hint = match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            "; is another herenow running? pass --listen with another port"
        }
        std::io::ErrorKind::PermissionDenied => "; ports below 1024 need privileges",
        std::io::ErrorKind::AddrNotAvailable => "; this machine has no such address",
        _ => "",
    };
    anyhow::anyhow!("cannot listen on {addr}: {e}{hint}")
}

/// Raises the soft limit on open files to the hard one (as Go's runtime
/// does): every connection, WebSocket or not, is a file descriptor, and a
/// soft limit of 1,024 would refuse connections long before
/// `--max-connections`. Warns when even the hard limit is too low.
fn check_open_files(max_connections: usize) {
    match raise_open_files_limit() {
        Some(limit) if limit < max_connections as u64 + 64 => tracing::warn!(
            limit,
            max_connections,
            "the open-file limit is below --max-connections: connections past it will fail; \
             raise it (ulimit -n, LimitNOFILE=) or lower --max-connections"
        ),
        Some(limit) => tracing::debug!(limit, "open-file limit"),
        None => {}
    }
}

/// The soft `RLIMIT_NOFILE` after raising it to the hard limit, or `None`
/// where it cannot be read.
#[cfg(unix)]
pub fn raise_open_files_limit() -> Option<u64> {
    use rlimit::Resource;
    let (soft, hard) = Resource::NOFILE.get().ok()?;
    if soft < hard && Resource::NOFILE.set(hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// The soft `RLIMIT_NOFILE`: not known here.
#[cfg(not(unix))]
pub fn raise_open_files_limit() -> Option<u64> {
    None
}

/// How long the process may take to stop after SIGTERM or SIGINT, beyond
/// the sockets' drain (`--drain`), before the signal thread ends it: past
/// every other grace period of the shutdown.
const HARD_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Watches SIGTERM and SIGINT on a thread of its own, with a runtime of
/// its own, so the server's workers, however busy, cannot delay noticing
/// them. The future completes on the first signal; a process still
/// running `hard_grace` after it is ended by that thread (exit status
/// 1). Each SIGHUP meanwhile is sent on `hangups`. Returns once the
/// signals are handled.
fn shutdown_watch(
    hard_grace: std::time::Duration,
    hangups: tokio::sync::mpsc::UnboundedSender<()>,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let (registered_tx, registered_rx) = std::sync::mpsc::channel::<Result<()>>();
    let (signalled_tx, signalled_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("herenow-signals".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = registered_tx
                        .send(Err(anyhow::Error::new(e)
                            .context("cannot start the signal thread's runtime")));
                    return;
                }
            };
            let signalled = rt.block_on(async move {
                match shutdown_signal().and_then(|s| Ok((s, Hangups::new()?))) {
                    Ok((signal, mut hangup)) => {
                        let _ = registered_tx.send(Ok(()));
                        tokio::pin!(signal);
                        loop {
                            tokio::select! {
                                () = &mut signal => break,
                                // The reload logs what it did.
                                () = hangup.next() => {
                                    let _ = hangups.send(());
                                }
                            }
                        }
                        let _ = signalled_tx.send(());
                        true
                    }
                    Err(e) => {
                        let _ = registered_tx.send(Err(e));
                        false
                    }
                }
            });
            if signalled {
                std::thread::sleep(hard_grace);
                tracing::error!(
                    "the server did not stop within {} s of the signal; exiting",
                    hard_grace.as_secs()
                );
                std::process::exit(1);
            }
        })
        .context("cannot start the signal thread")?;
    registered_rx
        .recv()
        .context("the signal thread ended before handling signals")??;
    Ok(async move {
        if signalled_rx.await.is_err() {
            // The thread is gone without a signal: nothing will come.
            std::future::pending::<()>().await;
        }
    })
}

/// A future that completes on the first SIGINT or SIGTERM.
#[cfg(unix)]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = int.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
}

/// A future that completes on Ctrl-C.
#[cfg(not(unix))]
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()> + Send + 'static> {
    Ok(async {
        if tokio::signal::ctrl_c().await.is_ok() {
            tracing::info!("Ctrl-C: shutting down");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn serve_args(args: &[&str]) -> ServeArgs {
        let argv = ["herenow", "serve"].into_iter().chain(args.iter().copied());
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(s) => s,
            _ => panic!("not serve"),
        }
    }

    /// The config `herenow serve ARGS` runs with.
    fn config_of(args: &[&str]) -> Result<Config, ConfigError> {
        let args = serve_args(args);
        config(&args, crate::store_flags::store_spec(&args).unwrap())
    }

    #[test]
    fn flags_become_the_config() {
        let c = config_of(&[
            "--ws-ttl",
            "15s",
            "--ws-max-connections",
            "9",
            "--token-secret",
            "0123456789abcdef0123456789abcdef",
            "--online-after",
            "30s",
            "--away-after",
            "2m",
            "--window",
            "5m",
            "--retention",
            "1h",
            "--data-dir",
            "/var/lib/herenow",
            "--demo",
            "--max-connections",
            "50",
            "--max-event-streams",
            "7",
            "--request-timeout",
            "3s",
            "--ping-interval",
            "5s",
            "--pong-wait",
            "2500ms",
            "--drain",
            "1m",
        ])
        .unwrap();
        assert_eq!(
            c.space_defaults,
            SpaceConfig {
                online_ms: 30_000,
                away_ms: 120_000,
                window_ms: 300_000,
                retention_ms: 3_600_000,
                ..SpaceConfig::default()
            }
        );
        assert_eq!(
            c.store,
            StoreSpec::Memory {
                data_dir: Some("/var/lib/herenow".into()),
                snapshot_interval: std::time::Duration::from_secs(30),
                space_stripes: None,
            }
        );
        assert!(c.demo);
        assert_eq!(c.max_connections, 50);
        assert_eq!(c.max_event_streams, 7);
        assert_eq!(c.request_timeout, std::time::Duration::from_secs(3));
        assert_eq!(c.ws_ttl, std::time::Duration::from_secs(15));
        assert_eq!(c.ws_ping, std::time::Duration::from_secs(5));
        assert_eq!(c.max_ws_connections, 9);
        assert_eq!(c.ping_interval, std::time::Duration::from_secs(5));
        assert_eq!(c.pong_wait, std::time::Duration::from_millis(2500));
        assert_eq!(c.drain, std::time::Duration::from_secs(60));
        assert_eq!(
            c.token_secret.as_ref().map(|s| s.as_bytes().len()),
            Some(32)
        );
        assert!(c.check("127.0.0.1:7700".parse().unwrap()).is_ok());
    }

    #[test]
    fn the_defaults_are_the_core_defaults() {
        let c = config_of(&[]).unwrap();
        assert_eq!(c.space_defaults, SpaceConfig::default());
        assert_eq!(c.max_connections, Config::default().max_connections);
        assert_eq!(c.store, Config::default().store);
        assert_eq!(c.max_event_streams, Config::default().max_event_streams);
        assert_eq!(c.request_timeout, Config::default().request_timeout);
        assert_eq!(c.max_ws_connections, Config::default().max_ws_connections);
        assert_eq!(c.ws_ttl, Config::default().ws_ttl);
        assert_eq!(c.ws_ping, Config::default().ws_ping);
        assert_eq!(c.ping_interval, Config::default().ping_interval);
        assert_eq!(c.pong_wait, Config::default().pong_wait);
        assert_eq!(c.drain, Config::default().drain);
        assert!(c.token_secret.is_none());
    }

    #[test]
    fn a_short_token_secret_is_refused_without_echoing_it() {
        let err = config_of(&["--token-secret", "hunter2"]).unwrap_err();
        assert!(matches!(err, ConfigError::TokenSecretTooShort(7)));
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn open_addresses_need_a_key_and_thresholds_must_be_ordered() {
        let open: SocketAddr = "0.0.0.0:7700".parse().unwrap();
        assert!(matches!(
            config_of(&[]).unwrap().check(open),
            Err(herenow_server::ConfigError::OpenOnNetwork(_))
        ));
        assert!(
            config_of(&["--api-key", "0123456789:write"])
                .unwrap()
                .check(open)
                .is_ok()
        );
        assert!(matches!(
            config_of(&["--online-after", "10m"])
                .unwrap()
                .check("127.0.0.1:1".parse().unwrap()),
            Err(herenow_server::ConfigError::SpaceDefaults(_))
        ));
    }

    #[cfg(not(feature = "redis"))]
    #[test]
    fn a_build_without_redis_refuses_a_redis_store_before_serving() {
        let c = config_of(&["--store", "redis://127.0.0.1:6379"]).unwrap();
        assert!(matches!(
            c.check("127.0.0.1:7700".parse().unwrap()),
            Err(ConfigError::NoRedisSupport(_))
        ));
        let argv = ["herenow", "serve", "--redis-layout", "sorted-set"];
        assert_eq!(
            Cli::try_parse_from(argv).unwrap_err().kind(),
            clap::error::ErrorKind::ValueValidation
        );
    }

    #[cfg(unix)]
    #[test]
    fn the_open_files_limit_is_raised_to_the_hard_limit() {
        let limit = raise_open_files_limit().expect("readable on unix");
        assert!(limit >= 64);
        // Idempotent: a second call finds it raised already.
        assert_eq!(raise_open_files_limit(), Some(limit));
    }

    #[test]
    fn page_url_is_openable() {
        assert_eq!(
            page_url("0.0.0.0:7700".parse().unwrap()),
            "http://127.0.0.1:7700/"
        );
        assert_eq!(page_url("[::]:80".parse().unwrap()), "http://[::1]:80/");
        assert_eq!(
            page_url("10.1.2.3:7700".parse().unwrap()),
            "http://10.1.2.3:7700/"
        );
    }
}
