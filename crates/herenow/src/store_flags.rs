//! `herenow serve`'s store flags, checked together into the server's
//! [`StoreSpec`].
//!
//! Clap checks each flag alone; whether it fits the store `--store` names
//! (`--data-dir` is the memory store's, `--redis-layout` and its key
//! templates are Redis's, shards are herenow's own Redis layout's) is
//! decided here, after parsing, and told as clap's own usage errors are.

use clap::CommandFactory;
use clap::error::ErrorKind;
use herenow_server::{RedisLayout, StoreSpec, StoreTarget};

use crate::cli::{Cli, SeedLayout, ServeArgs};

/// The store `args.store` names, completed by the flags of its kind.
///
/// A flag that means nothing for that store (`--data-dir` with Redis,
/// `--redis-key` without a seed layout, shards with memory or a seed
/// layout) is refused as a usage error naming the flags, as clap
/// refuses its own conflicts: the server's [`StoreSpec`] cannot hold
/// such a combination, so it is caught here or not at all.
pub fn store_spec(args: &ServeArgs) -> Result<StoreSpec, clap::Error> {
    let seed = args.redis_layout.0;
    let keyed = args.redis_key.is_some() || args.redis_guest_key.is_some();
    let sharded = args.redis_shards != 1 || args.redis_space_shards.is_some();
    let waits = args.redis_wait_replicas != 0;
    let target = match &args.store {
        StoreTarget::Memory => {
            if let Some(layout) = seed {
                return Err(conflict(format!(
                    "--redis-layout {layout} is a layout of Redis keys: it needs --store \
                     redis://… or redis+cluster://…"
                )));
            }
            if keyed {
                return Err(conflict(KEY_WITHOUT_LAYOUT));
            }
            if sharded {
                return Err(conflict(SHARDS_WITHOUT_REDIS));
            }
            if waits {
                return Err(conflict(WAIT_WITHOUT_REDIS));
            }
            return Ok(StoreSpec::Memory {
                data_dir: args.data_dir.clone(),
                snapshot_interval: args.snapshot_interval,
                space_stripes: args.space_stripes.map(|n| n as usize),
            });
        }
        StoreTarget::Redis(target) => target.clone(),
    };
    if let Some(n) = args.space_stripes {
        return Err(conflict(format!(
            "--space-stripes {n} splits the memory store's spaces; a Redis store splits \
             them over keys: use --redis-shards (or --redis-space-shards) instead"
        )));
    }
    if let Some(dir) = &args.data_dir {
        return Err(conflict(format!(
            "--data-dir {} is for the memory store's snapshot; with a Redis store the \
             state lives in Redis: drop --data-dir (and let Redis persist with RDB/AOF)",
            dir.display()
        )));
    }
    let layout = match (seed, &args.redis_key) {
        (Some(layout), None) => {
            return Err(conflict(format!(
                "--redis-layout {layout} needs --redis-key TEMPLATE naming the keys the \
                 seed's code uses (e.g. whos_online:users, active.users:{{minute}}, \
                 wo_user_{{generation}})"
            )));
        }
        (Some(_), Some(_)) if sharded => return Err(conflict(SHARDS_WITHOUT_REDIS)),
        (Some(_), Some(_)) if waits => return Err(conflict(WAIT_WITHOUT_REDIS)),
        (Some(layout), Some(key)) => seed_layout(layout, key, &args.redis_guest_key),
        (None, _) if keyed => return Err(conflict(KEY_WITHOUT_LAYOUT)),
        (None, _) => RedisLayout::Herenow {
            shards: args.redis_shards,
            space_shards: args
                .redis_space_shards
                .clone()
                .map(|s| s.0)
                .unwrap_or_default(),
            wait_replicas: args.redis_wait_replicas,
            wait_timeout: args.redis_wait_timeout,
        },
    };
    Ok(StoreSpec::Redis { target, layout })
}

/// A seed layout with its key templates.
#[cfg(feature = "redis")]
fn seed_layout(layout: SeedLayout, key: &str, guest_key: &Option<String>) -> RedisLayout {
    RedisLayout::Seed {
        layout,
        key: key.to_owned(),
        guest_key: guest_key.clone(),
    }
}

/// Never called: without Redis support no seed layout parses.
#[cfg(not(feature = "redis"))]
fn seed_layout(layout: SeedLayout, _: &str, _: &Option<String>) -> RedisLayout {
    match layout {}
}

const KEY_WITHOUT_LAYOUT: &str = "--redis-key and --redis-guest-key go with --redis-layout \
     sorted-set, minute-buckets or rotation";

const SHARDS_WITHOUT_REDIS: &str = "--redis-shards and --redis-space-shards split herenow's own \
     Redis layout; they need --store redis://… (or redis+cluster://…) and no seed --redis-layout";

const WAIT_WITHOUT_REDIS: &str = "--redis-wait-replicas waits for the replicas of herenow's own \
     Redis layout; it needs --store redis://… (or redis+cluster://…) and no seed --redis-layout";

/// A usage error of `herenow serve`: flags that do not go together.
fn conflict(message: impl std::fmt::Display) -> clap::Error {
    let mut cli = Cli::command();
    // Built, so the subcommand's usage line reads `herenow serve …`.
    cli.build();
    cli.find_subcommand_mut("serve")
        .expect("herenow has a serve subcommand")
        .error(ErrorKind::ArgumentConflict, message)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;
    use herenow_server::RedisTarget;

    use super::*;
    use crate::cli::Command;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("herenow").chain(args.iter().copied()))
    }

    fn spec_of(args: &[&str]) -> Result<StoreSpec, clap::Error> {
        match parse(args)?.command {
            Command::Serve(s) => store_spec(&s),
            _ => panic!("not serve"),
        }
    }

    #[test]
    fn serve_builds_the_store_spec_from_the_flags_of_its_kind() {
        assert_eq!(
            spec_of(&["serve", "--data-dir", "/d", "--snapshot-interval", "1m"]).unwrap(),
            StoreSpec::Memory {
                data_dir: Some("/d".into()),
                snapshot_interval: Duration::from_secs(60),
                space_stripes: None,
            }
        );
        assert_eq!(
            spec_of(&["serve", "--space-stripes", "4"]).unwrap(),
            StoreSpec::Memory {
                data_dir: None,
                snapshot_interval: Duration::from_secs(30),
                space_stripes: Some(4),
            }
        );
        for bad in ["0", "65", "many"] {
            let err = spec_of(&["serve", "--space-stripes", bad]).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ValueValidation, "{bad}: {err}");
        }
        let lobby = herenow_core::SpaceName::new("lobby").unwrap();
        assert_eq!(
            spec_of(&[
                "serve",
                "--store",
                "redis://h:1",
                "--redis-shards",
                "4",
                "--redis-space-shards",
                "lobby=16",
            ])
            .unwrap(),
            StoreSpec::Redis {
                target: RedisTarget::Standalone("redis://h:1".into()),
                layout: RedisLayout::Herenow {
                    shards: 4,
                    space_shards: [(lobby, 16)].into(),
                    wait_replicas: 0,
                    wait_timeout: herenow_server::DEFAULT_REDIS_WAIT,
                },
            }
        );
        assert_eq!(
            spec_of(&[
                "serve",
                "--store",
                "redis+cluster://h:1",
                "--redis-wait-replicas",
                "1",
                "--redis-wait-timeout",
                "500ms",
            ])
            .unwrap(),
            StoreSpec::Redis {
                target: RedisTarget::Cluster("redis+cluster://h:1".into()),
                layout: RedisLayout::Herenow {
                    shards: 1,
                    space_shards: Default::default(),
                    wait_replicas: 1,
                    wait_timeout: Duration::from_millis(500),
                },
            }
        );
        #[cfg(feature = "redis")]
        assert_eq!(
            spec_of(&[
                "serve",
                "--store",
                "redis+cluster://h:1",
                "--redis-layout",
                "rotation",
                "--redis-key",
                "wo_user_{generation}",
                "--redis-guest-key",
                "wo_guest_{generation}",
            ])
            .unwrap(),
            StoreSpec::Redis {
                target: RedisTarget::Cluster("redis+cluster://h:1".into()),
                layout: RedisLayout::Seed {
                    layout: SeedLayout::Rotation,
                    key: "wo_user_{generation}".into(),
                    guest_key: Some("wo_guest_{generation}".into()),
                },
            }
        );
    }

    /// Every flag that means nothing for the store named is a usage error
    /// naming the flags (the server's types cannot hold the combination).
    #[test]
    fn serve_refuses_flags_that_do_not_fit_the_store() {
        let refused = |bad: &[&str], flags: &[&str]| {
            let err = spec_of(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{bad:?}");
            let text = err.to_string();
            for flag in flags {
                assert!(text.contains(flag), "{bad:?}: {text}");
            }
        };
        for (bad, flags) in [
            (
                &["serve", "--store", "redis://h:1", "--data-dir", "/d"][..],
                &["--data-dir"][..],
            ),
            (
                &[
                    "serve",
                    "--store",
                    "redis+cluster://h:1",
                    "--data-dir",
                    "/d",
                ],
                &["--data-dir"],
            ),
            (
                &["serve", "--store", "redis://h:1", "--redis-key", "k"],
                &["--redis-key", "--redis-layout"],
            ),
            (
                &["serve", "--redis-guest-key", "k"],
                &["--redis-guest-key", "--redis-layout"],
            ),
            (&["serve", "--redis-shards", "4"], &["--redis-shards"]),
            (
                &["serve", "--redis-space-shards", "lobby=2"],
                &["--redis-space-shards"],
            ),
            (
                &["serve", "--redis-wait-replicas", "1"],
                &["--redis-wait-replicas"],
            ),
            (
                &["serve", "--store", "redis://h:1", "--space-stripes", "4"],
                &["--space-stripes", "--redis-shards"],
            ),
        ] {
            refused(bad, flags);
        }
        // A seed layout parses only in a build with Redis support.
        #[cfg(feature = "redis")]
        for (bad, flags) in [
            (
                &["serve", "--redis-layout", "sorted-set"][..],
                &["--redis-layout", "--store redis"][..],
            ),
            (
                &[
                    "serve",
                    "--store",
                    "redis://h:1",
                    "--redis-layout",
                    "rotation",
                ],
                &["--redis-layout", "--redis-key"],
            ),
            (
                &[
                    "serve",
                    "--store",
                    "redis://h:1",
                    "--redis-layout",
                    "sorted-set",
                    "--redis-key",
                    "k",
                    "--redis-shards",
                    "4",
                ],
                &["--redis-shards", "--redis-layout"],
            ),
            (
                &[
                    "serve",
                    "--store",
                    "redis://h:1",
                    "--redis-layout",
                    "sorted-set",
                    "--redis-key",
                    "k",
                    "--redis-wait-replicas",
                    "1",
                ],
                &["--redis-wait-replicas", "--redis-layout"],
            ),
        ] {
            refused(bad, flags);
        }
    }

    #[test]
    fn serve_defaults_to_the_memory_store_without_snapshots() {
        assert_eq!(spec_of(&["serve"]).unwrap(), StoreSpec::default());
    }
}
