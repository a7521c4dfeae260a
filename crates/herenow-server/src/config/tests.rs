//! The configuration's parsing and checks.

use super::*;

#[test]
fn store_specs_parse() {
    assert_eq!(
        "memory".parse::<StoreTarget>().unwrap(),
        StoreTarget::Memory
    );
    let standalone: fn(String) -> RedisTarget = RedisTarget::Standalone;
    let cluster: fn(String) -> RedisTarget = RedisTarget::Cluster;
    for (ok, target) in [
        ("redis://127.0.0.1:6379", standalone),
        ("redis://127.0.0.1:6379/", standalone),
        ("redis://redis.internal:6400/3", standalone),
        ("redis://:secret@127.0.0.1:6379/0", standalone),
        ("redis://[::1]:6379", standalone),
        ("redis+cluster://127.0.0.1:7000", cluster),
        ("redis+cluster://a:7000,b:7001,c:7002", cluster),
        ("redis+cluster://a:7000, b:7001/", cluster),
    ] {
        assert_eq!(
            ok.parse::<StoreTarget>().unwrap(),
            StoreTarget::Redis(target(ok.into())),
            "{ok}"
        );
    }
}

#[test]
fn bad_store_specs_are_refused_by_kind() {
    for bad in [
        "redis://",
        "redis://host",
        "redis://host:0",
        "redis://host:99999",
        "redis://:6379",
        "redis://host:6379/zero",
        "redis://host:6379?db=1",
        "redis://a:1,b:2",
        "redis+cluster://",
        "redis+cluster://a:1,b",
        "redis+cluster://a:1/0",
    ] {
        assert!(
            matches!(
                bad.parse::<StoreTarget>(),
                Err(ConfigError::BadStore { .. })
            ),
            "{bad}"
        );
    }
    for unknown in ["", "Memory", "floppy", "http://host:6379", "valkey://h:1"] {
        assert!(
            matches!(
                unknown.parse::<StoreTarget>(),
                Err(ConfigError::UnknownStore(_))
            ),
            "{unknown}"
        );
    }
    assert_eq!(
        "rediss://host:6380".parse::<StoreTarget>().unwrap(),
        StoreTarget::Redis(RedisTarget::Standalone("rediss://host:6380".into()))
    );
    assert_eq!(
        "rediss+cluster://a:1,b:2".parse::<StoreTarget>().unwrap(),
        StoreTarget::Redis(RedisTarget::Cluster("rediss+cluster://a:1,b:2".into()))
    );
    assert!(matches!(
        "rediss://".parse::<StoreTarget>(),
        Err(ConfigError::BadStore { .. })
    ));
}

#[test]
fn passwords_never_reach_debug_or_errors() {
    let target: StoreTarget = "redis://user:hunter2@h:6379/1".parse().unwrap();
    assert!(!format!("{target:?}").contains("hunter2"));
    let StoreTarget::Redis(target) = target else {
        panic!("not redis");
    };
    assert_eq!(target.redacted(), "redis://user:***@h:6379/1");
    let spec = StoreSpec::Redis {
        target,
        layout: RedisLayout::default(),
    };
    assert!(!format!("{spec:?}").contains("hunter2"));
    let cluster = RedisTarget::Cluster("redis+cluster://:pw@a:1,:pw@b:2".into());
    assert_eq!(cluster.redacted(), "redis+cluster://:***@a:1,:***@b:2");
    let Err(e) = "redis://:hunter2@h".parse::<StoreTarget>() else {
        panic!("accepted a spec without a port");
    };
    assert!(!e.to_string().contains("hunter2"));
}

#[test]
fn token_secrets_are_long_and_never_printed() {
    assert!(matches!(
        "short".parse::<TokenSecret>(),
        Err(ConfigError::TokenSecretTooShort(5))
    ));
    let secret: TokenSecret = "0123456789abcdef0123456789abcdef".parse().unwrap();
    assert_eq!(secret.as_bytes().len(), 32);
    let config = Config {
        token_secret: Some(secret),
        ..Config::default()
    };
    assert!(!format!("{config:?}").contains("0123456789"));
}

#[test]
fn websocket_timing_is_checked() {
    let listen: SocketAddr = "127.0.0.1:7700".parse().unwrap();
    assert!(Config::default().check(listen).is_ok());
    for (ttl, ping) in [(500, 100), (601_000, 10_000), (30_000, 16_000), (30_000, 0)] {
        let config = Config {
            ws_ttl: Duration::from_millis(ttl),
            ws_ping: Duration::from_millis(ping),
            ..Config::default()
        };
        assert!(config.check(listen).is_err(), "{ttl} {ping}");
    }
    let config = Config {
        max_ws_connections: 0,
        ..Config::default()
    };
    assert!(matches!(
        config.check(listen),
        Err(ConfigError::ZeroLimit("max_ws_connections"))
    ));
}

#[test]
fn the_ping_interval_pong_wait_and_drain_are_checked() {
    let listen: SocketAddr = "127.0.0.1:7700".parse().unwrap();
    let defaults = Config::default();
    // A socket that vanished is closed within 30 s by default.
    assert_eq!(
        defaults.ping_interval + defaults.pong_wait,
        Duration::from_secs(30)
    );
    let short = Config {
        ping_interval: Duration::from_millis(1),
        pong_wait: Duration::from_millis(1),
        drain: Duration::from_millis(1),
        ..Config::default()
    };
    assert!(short.check(listen).is_ok());
    let at_most = Config {
        ping_interval: MAX_SOCKET_TIMER,
        pong_wait: MAX_SOCKET_TIMER,
        drain: MAX_SOCKET_TIMER,
        ..Config::default()
    };
    assert!(at_most.check(listen).is_ok());
    for bad in [Duration::ZERO, MAX_SOCKET_TIMER + Duration::from_millis(1)] {
        for (name, config) in [
            (
                "ping_interval",
                Config {
                    ping_interval: bad,
                    ..Config::default()
                },
            ),
            (
                "pong_wait",
                Config {
                    pong_wait: bad,
                    ..Config::default()
                },
            ),
            (
                "drain",
                Config {
                    drain: bad,
                    ..Config::default()
                },
            ),
        ] {
            assert!(
                matches!(
                    config.check(listen),
                    Err(ConfigError::SocketTimer { flag, value }) if flag == name && value == bad
                ),
                "{name} {bad:?}"
            );
        }
    }
}

#[test]
fn the_redis_stores_tick_once_a_second() {
    assert_eq!(MEMORY_TICK, Duration::from_millis(250));
    assert_eq!(REDIS_TICK, Duration::from_secs(1));
    assert_eq!(
        RedisTarget::Standalone("redis://h:1".into()).name(),
        "redis"
    );
}

#[cfg(not(feature = "redis"))]
#[test]
fn a_build_without_redis_refuses_a_redis_store() {
    let config = Config {
        store: StoreSpec::Redis {
            target: RedisTarget::Standalone("redis://:hunter2@h:1".into()),
            layout: RedisLayout::default(),
        },
        ..Config::default()
    };
    let err = config.check("127.0.0.1:7700".parse().unwrap()).unwrap_err();
    assert!(matches!(err, ConfigError::NoRedisSupport(_)), "{err:?}");
    assert!(!err.to_string().contains("hunter2"));
}

/// Shards outside herenow's Redis layout cannot be written any more
/// (the binary refuses the flags); the range is still checked.
#[cfg(feature = "redis")]
#[test]
fn shard_counts_are_checked_against_their_range() {
    let listen: SocketAddr = "127.0.0.1:7700".parse().unwrap();
    let sharded = |shards: u16, space: u16| Config {
        store: StoreSpec::Redis {
            target: RedisTarget::Standalone("redis://127.0.0.1:6379".into()),
            layout: RedisLayout::Herenow {
                shards,
                space_shards: HashMap::from([(SpaceName::new("lobby").unwrap(), space)]),
                wait_replicas: 0,
                wait_timeout: DEFAULT_REDIS_WAIT,
            },
        },
        ..Config::default()
    };
    assert!(sharded(4, 16).check(listen).is_ok());
    assert!(matches!(
        sharded(0, 1).check(listen),
        Err(ConfigError::BadShards)
    ));
    assert!(matches!(
        sharded(4, 1025).check(listen),
        Err(ConfigError::BadShards)
    ));
}

#[test]
fn stripe_counts_are_checked_against_their_range() {
    let listen: SocketAddr = "127.0.0.1:7700".parse().unwrap();
    let striped = |space_stripes: usize| Config {
        store: StoreSpec::Memory {
            data_dir: None,
            snapshot_interval: DEFAULT_SNAPSHOT_INTERVAL,
            space_stripes: Some(space_stripes),
        },
        ..Config::default()
    };
    assert!(striped(1).check(listen).is_ok());
    assert!(striped(64).check(listen).is_ok());
    assert!(Config::default().check(listen).is_ok(), "by the workers");
    for bad in [0, 65] {
        let err = striped(bad).check(listen).unwrap_err();
        assert!(
            matches!(err, ConfigError::BadStripes(n) if n == bad),
            "{err}"
        );
        assert!(err.to_string().contains("1 to 64 stripes"), "{err}");
    }
}
