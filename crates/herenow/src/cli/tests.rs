//! What clap accepts and refuses, flag by flag: the command line's tests.

use super::*;
use clap::CommandFactory;
use herenow_server::RedisTarget;

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("herenow").chain(args.iter().copied()))
}

#[test]
fn durations_need_a_unit_and_must_be_positive() {
    assert_eq!(positive_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(positive_duration("10m"), Ok(Duration::from_secs(600)));
    assert_eq!(positive_duration("1h 30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(positive_duration("1500ms"), Ok(Duration::from_millis(1500)));
    assert!(positive_duration("10").is_err());
    assert!(positive_duration("0s").is_err());
    assert!(positive_duration("10us").is_err());
    assert!(positive_duration("soon").is_err());
    assert!(positive_duration("").is_err());
}

#[test]
fn meta_must_be_a_json_object() {
    assert!(json_object(r#"{"name":"Alice"}"#).is_ok());
    assert!(json_object("{name}").is_err());
    assert!(json_object("[1]").is_err());
    assert!(json_object("\"x\"").is_err());
}

#[test]
fn server_url_must_be_http() {
    assert!(server_url("http://127.0.0.1:7700").is_ok());
    assert!(server_url("http://presence.example.com/herenow/").is_ok());
    assert!(server_url("https://presence.example.com").is_err());
    assert!(server_url("127.0.0.1:7700").is_err());
    assert!(server_url("ftp://host").is_err());
    assert!(server_url("http://host/?a=b").is_err());
}

#[test]
fn serve_defaults() {
    let Command::Serve(s) = parse(&["serve"]).unwrap().command else {
        panic!("not serve");
    };
    assert_eq!(s.listen, "127.0.0.1:7700".parse().unwrap());
    assert_eq!(s.store, StoreTarget::Memory);
    assert_eq!(s.online_after, Duration::from_secs(60));
    assert_eq!(s.away_after, Duration::from_secs(300));
    assert_eq!(s.window, Duration::from_secs(600));
    assert_eq!(s.retention, Duration::from_secs(900));
    assert_eq!(s.remember, Duration::from_secs(30 * 24 * 3600));
    assert_eq!(remember_duration("0"), Ok(Duration::ZERO));
    assert!(remember_duration("1097d").is_err());
    assert!(remember_duration("soon").is_err());
    assert_eq!(s.grace, Duration::from_secs(5));
    for zero in ["0", "0s", "0ms"] {
        assert_eq!(grace_duration(zero), Ok(Duration::ZERO), "{zero}");
    }
    assert_eq!(grace_duration("1500ms"), Ok(Duration::from_millis(1500)));
    assert_eq!(grace_duration("5m"), Ok(Duration::from_secs(300)));
    assert_eq!(s.snapshot_interval, Duration::from_secs(30));
    assert_eq!(s.ping_interval, herenow_server::DEFAULT_PING_INTERVAL);
    assert_eq!(s.pong_wait, herenow_server::DEFAULT_PONG_WAIT);
    assert_eq!(s.drain, herenow_server::DEFAULT_DRAIN);
    assert_eq!(
        (s.ping_interval, s.pong_wait, s.drain),
        (
            Duration::from_secs(20),
            Duration::from_secs(10),
            Duration::from_secs(10)
        )
    );
    assert!(s.api_keys.is_empty());
    assert_eq!(s.log_format, LogFormat::Text);
}

#[test]
fn serve_takes_redis_and_cluster_stores() {
    let store = |spec: &str| match parse(&["serve", "--store", spec]).unwrap().command {
        Command::Serve(s) => s.store,
        _ => panic!("not serve"),
    };
    assert_eq!(
        store("redis://127.0.0.1:6400/2"),
        StoreTarget::Redis(RedisTarget::Standalone("redis://127.0.0.1:6400/2".into()))
    );
    assert_eq!(
        store("redis+cluster://10.0.0.1:7000,10.0.0.2:7000"),
        StoreTarget::Redis(RedisTarget::Cluster(
            "redis+cluster://10.0.0.1:7000,10.0.0.2:7000".into()
        ))
    );
}

#[test]
fn serve_takes_repeated_and_comma_separated_api_keys() {
    let Command::Serve(s) = parse(&[
        "serve",
        "--api-key",
        "secret-one:write",
        "--api-key",
        "secret-two:read,secret-three:read",
    ])
    .unwrap()
    .command
    else {
        panic!("not serve");
    };
    assert_eq!(s.api_keys.len(), 3);
    assert_eq!(s.api_keys[0].scope, herenow_server::Scope::Write);
    assert_eq!(s.api_keys[2].key, "secret-three");
}

#[test]
fn serve_refuses_bad_input() {
    for bad in [
        &["serve", "--api-key", "nocolon"][..],
        &["serve", "--api-key", "short:read"],
        &["serve", "--api-key", "longenough:admin"],
        &["serve", "--store", "floppy"],
        &["serve", "--store", "redis://"],
        &["serve", "--store", "redis://host"],
        &["serve", "--store", "redis://host:port"],
        &["serve", "--store", "redis://host:6379/db"],
        &["serve", "--store", "redis+cluster://"],
        &["serve", "--store", "redis+cluster://a:1,b"],
        &["serve", "--store", "rediss://"],
        &["serve", "--redis-shards", "0"],
        &["serve", "--redis-shards", "1025"],
        &["serve", "--redis-space-shards", "lobby"],
        &["serve", "--redis-space-shards", "lobby=0"],
        &["serve", "--redis-space-shards", "bad/space=2"],
        &["serve", "--listen", "nowhere"],
        &["serve", "--window", "10"],
        &["serve", "--max-connections", "0"],
        &["serve", "--ws-max-connections", "0"],
        &["serve", "--ws-ttl", "30"],
        &["serve", "--ping-interval", "0"],
        &["serve", "--ping-interval", "0s"],
        &["serve", "--ping-interval", "20"],
        &["serve", "--ping-interval", "soon"],
        &["serve", "--ping-interval", "11m"],
        &["serve", "--pong-wait", "0ms"],
        &["serve", "--pong-wait", "10"],
        &["serve", "--pong-wait=-1s"],
        &["serve", "--drain", "0s"],
        &["serve", "--drain", "ten seconds"],
        &["serve", "--drain", "1h"],
        &["serve", "--grace", "5"],
        &["serve", "--grace", "5m1s"],
        &["serve", "--grace", "later"],
        &["serve", "--grace=-1s"],
    ] {
        let err = parse(bad).unwrap_err();
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::ValueValidation,
            "{bad:?}"
        );
    }
    assert_eq!(
        parse(&["serve", "--log-format", "xml"]).unwrap_err().kind(),
        clap::error::ErrorKind::InvalidValue
    );
}

#[test]
fn token_takes_spaces_kind_and_ttl() {
    let cli = parse(&[
        "token", "ann", "--space", "room:1", "--space", "room:2", "--guest", "--ttl", "10m",
    ])
    .unwrap();
    let Command::Client(ClientCommand::Token(t)) = cli.command else {
        panic!("not token");
    };
    assert_eq!(t.user, "ann");
    assert_eq!(t.spaces, ["room:1", "room:2"]);
    assert!(t.guest);
    assert_eq!(t.ttl, Duration::from_secs(600));
    let cli = parse(&["token", "bo", "--space", "*"]).unwrap();
    let Command::Client(ClientCommand::Token(t)) = cli.command else {
        panic!("not token");
    };
    assert_eq!(t.ttl, Duration::from_secs(3600));
    assert!(!t.guest);
}

#[test]
fn client_options_go_before_or_after_the_arguments() {
    let cli = parse(&[
        "online",
        "--json",
        "lobby",
        "--server",
        "http://10.0.0.1:80",
        "--all",
        "--order",
        "id",
    ])
    .unwrap();
    let Command::Client(ClientCommand::Online(o)) = cli.command else {
        panic!("not online");
    };
    assert!(o.client.json && o.all && !o.guests);
    assert_eq!(o.order, Some(Order::Id));
    assert_eq!(o.client.server.as_str(), "http://10.0.0.1/");

    let cli = parse(&[
        "friends", "--json", "online", "lobby", "alice", "--window", "5m",
    ])
    .unwrap();
    let Command::Client(ClientCommand::Friends(f)) = cli.command else {
        panic!("not friends");
    };
    assert!(f.client.json);
    assert!(
        matches!(f.command, FriendsCommand::Online { window: Some(w), .. } if w == Duration::from_secs(300))
    );
}

#[test]
fn user_commands_take_ids() {
    let Command::Client(ClientCommand::User(u)) =
        parse(&["user", "ann", "--json"]).unwrap().command
    else {
        panic!("not user");
    };
    assert_eq!(u.id, "ann");
    assert!(u.client.json);
    let cli = parse(&["users", "status", "ann", "bob", "--json"]).unwrap();
    let Command::Client(ClientCommand::Users(u)) = cli.command else {
        panic!("not users");
    };
    assert!(u.client.json);
    let UsersCommand::Status { ids } = u.command;
    assert_eq!(ids, ["ann", "bob"]);
    let Command::Client(ClientCommand::Erase(e)) = parse(&["erase", "ann"]).unwrap().command else {
        panic!("not erase");
    };
    assert_eq!(e.id, "ann");
    for bad in [&["user"][..], &["users", "status"], &["erase"]] {
        assert_eq!(
            parse(bad).unwrap_err().kind(),
            clap::error::ErrorKind::MissingRequiredArgument,
            "{bad:?}"
        );
    }
    // One user at a time: `erase` does not take a list by accident.
    assert_eq!(
        parse(&["erase", "ann", "bob"]).unwrap_err().kind(),
        clap::error::ErrorKind::UnknownArgument
    );
}

#[test]
fn client_refuses_bad_input_before_any_request() {
    for (bad, kind) in [
        (
            &["seen", "lobby", "a", "--meta", "{oops"][..],
            clap::error::ErrorKind::ValueValidation,
        ),
        (
            &["seen", "lobby"],
            clap::error::ErrorKind::MissingRequiredArgument,
        ),
        (
            &["online", "lobby", "--window", "ten"],
            clap::error::ErrorKind::ValueValidation,
        ),
        (
            &["online", "lobby", "--limit", "0"],
            clap::error::ErrorKind::ValueValidation,
        ),
        (
            &["online", "lobby", "--guests", "--all"],
            clap::error::ErrorKind::ArgumentConflict,
        ),
        (
            &["count", "lobby", "--server", "localhost"],
            clap::error::ErrorKind::ValueValidation,
        ),
        (
            &["token", "ann"],
            clap::error::ErrorKind::MissingRequiredArgument,
        ),
        (
            &["token", "ann", "--space", "s", "--ttl", "25h"],
            clap::error::ErrorKind::ValueValidation,
        ),
        (
            &["token", "ann", "--space", "s", "--ttl", "1500ms"],
            clap::error::ErrorKind::ValueValidation,
        ),
    ] {
        assert_eq!(parse(bad).unwrap_err().kind(), kind, "{bad:?}");
    }
}
