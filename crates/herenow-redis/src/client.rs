//! The link to Redis: a standalone server through a reconnecting
//! [`ConnectionManager`], or a cluster through redis-rs' async
//! `ClusterConnection`, behind one type, [`RedisClient`], that scripts and
//! commands run on (the *client*: see the crate's note on "connection").
//!
//! Both speak RESP3, so pub/sub messages arrive as pushes on the same
//! multiplexed socket that carries commands (no second socket per
//! store), and both resubscribe by themselves after a reconnect.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SlotAddr};
use redis::{Cmd, Pipeline, PushInfo, RedisFuture, RedisResult, Value};

use herenow_core::{Error, InvalidInput};

use crate::reply::bytes_of;

/// The node, or a cluster's seed nodes, the store connects to, parsed
/// from a `--store` spec (the server's `RedisTarget` is that spec as
/// given, checked for its shape only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedisNodes {
    /// `redis://HOST:PORT[/DB]`: one server.
    Single {
        /// The URL handed to redis-rs, with RESP3 switched on.
        url: String,
    },
    /// `redis+cluster://H1:P1,H2:P2,…`: seed nodes of a cluster.
    Cluster {
        /// One `redis://` URL per seed node.
        nodes: Vec<String>,
    },
}

impl RedisNodes {
    /// Parses `redis://HOST:PORT[/DB]` or `redis+cluster://H1:P1,H2:P2,…`,
    /// and their TLS forms `rediss://` and `rediss+cluster://`. A bad spec
    /// is refused as a configuration error.
    ///
    /// Over TLS the server's certificate is checked against the system's
    /// roots (`SSL_CERT_FILE` / `SSL_CERT_DIR` name others, as for
    /// OpenSSL), and its name against the host given.
    pub fn parse(spec: &str) -> Result<Self, Error> {
        let bad = |why: &'static str| Error::Invalid(InvalidInput::BadConfig { why });
        let (scheme, spec) = match spec.split_once("://") {
            Some(("rediss", rest)) => ("rediss", format!("redis://{rest}")),
            Some(("rediss+cluster", rest)) => ("rediss", format!("redis+cluster://{rest}")),
            _ => ("redis", spec.to_owned()),
        };
        let spec = spec.as_str();
        if let Some(rest) = spec.strip_prefix("redis+cluster://") {
            let rest = rest.trim_end_matches('/');
            if rest.contains('/') || rest.contains('?') {
                return Err(bad(
                    "expected redis+cluster://H1:P1,H2:P2 (a cluster has no database)",
                ));
            }
            let nodes: Vec<String> = rest
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(|n| format!("{scheme}://{n}/?protocol=resp3"))
                .collect();
            if nodes.is_empty() {
                return Err(bad("redis+cluster:// needs at least one HOST:PORT"));
            }
            return Ok(RedisNodes::Cluster { nodes });
        }
        if let Some(rest) = spec.strip_prefix("redis://") {
            if rest.is_empty() || rest.contains('?') {
                return Err(bad("expected redis://HOST:PORT[/DB]"));
            }
            let rest = rest.trim_end_matches('/');
            if let Some((_, db)) = rest.split_once('/')
                && db.parse::<u16>().is_err()
            {
                return Err(bad("the database in redis://HOST:PORT/DB must be a number"));
            }
            return Ok(RedisNodes::Single {
                url: format!("{scheme}://{rest}?protocol=resp3"),
            });
        }
        Err(bad(
            "store must be redis[s]://HOST:PORT[/DB] or redis[s]+cluster://H1:P1,H2:P2",
        ))
    }

    /// Whether it speaks TLS: then a rustls crypto provider must be
    /// installed before connecting (see [`RedisClient::open`]).
    pub fn is_tls(&self) -> bool {
        match self {
            RedisNodes::Single { url } => url.starts_with("rediss://"),
            RedisNodes::Cluster { nodes } => nodes.iter().any(|n| n.starts_with("rediss://")),
        }
    }

    /// Whether this is a cluster: events then go over sharded pub/sub.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisNodes::Cluster { .. })
    }
}

/// The client of a server or a cluster. Cheap to clone: clones share one
/// multiplexed socket, which is what lets many script calls be in flight
/// at once without a pool.
#[derive(Clone)]
pub enum RedisClient {
    /// One server, through redis-rs' manager, which reconnects (and
    /// resubscribes) in the background.
    Single(ConnectionManager),
    /// A cluster: commands are routed to their slot's node, events go over
    /// sharded pub/sub.
    Cluster(ClusterConnection),
}

impl RedisClient {
    /// Connects, sending pub/sub pushes to `push` (the same socket carries
    /// commands and event messages).
    pub async fn open(
        target: &RedisNodes,
        timeout: Duration,
        push: impl Fn(PushInfo) + Send + Sync + 'static,
    ) -> RedisResult<RedisClient> {
        if target.is_tls() {
            // redis-rs leaves the choice of rustls' crypto to the program;
            // an error only means one is installed already.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let sender = move |info: PushInfo| -> Result<(), ()> {
            push(info);
            Ok(())
        };
        match target {
            RedisNodes::Single { url } => {
                let client = redis::Client::open(url.as_str())?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(timeout))
                    .set_response_timeout(Some(timeout))
                    // Few and quick retries: callers get an error within
                    // their timeout, and the manager keeps reconnecting in
                    // the background.
                    .set_number_of_retries(1)
                    .set_max_delay(Duration::from_millis(500))
                    .set_push_sender(sender)
                    .set_automatic_resubscription();
                Ok(RedisClient::Single(
                    client.get_connection_manager_with_config(config).await?,
                ))
            }
            RedisNodes::Cluster { nodes } => {
                let client = ClusterClientBuilder::new(nodes.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .connection_timeout(timeout)
                    .response_timeout(timeout)
                    .retries(2)
                    .push_sender(sender)
                    .build()?;
                Ok(RedisClient::Cluster(client.get_async_connection().await?))
            }
        }
    }

    /// Subscribes to an event channel: `SUBSCRIBE` on a server, `SSUBSCRIBE`
    /// (sharded, routed to the channel's slot) on a cluster.
    pub async fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            RedisClient::Single(c) => c.subscribe(channel).await,
            RedisClient::Cluster(c) => c.ssubscribe(channel).await,
        }
    }

    /// One slot served by each master, so that [`query_on`](Self::query_on)
    /// each reaches every master once: `[0]` on one server (where slots
    /// mean nothing), on a cluster the first slot of each master's ranges
    /// (from `CLUSTER SLOTS`). For commands that see one node's keys only,
    /// such as `SCAN`.
    pub async fn master_slots(&mut self) -> RedisResult<Vec<u16>> {
        let RedisClient::Cluster(c) = self else {
            return Ok(vec![0]);
        };
        let v: Value = redis::cmd("CLUSTER").arg("SLOTS").query_async(c).await?;
        // Each range: start, end, then the master as host, port, id, …
        let mut first: std::collections::BTreeMap<(String, i64), u16> = Default::default();
        let Value::Array(ranges) = v else {
            return Err(unexpected("CLUSTER SLOTS: an array"));
        };
        for r in ranges {
            let Value::Array(r) = r else {
                return Err(unexpected("CLUSTER SLOTS: ranges as arrays"));
            };
            let (Some(Value::Int(start)), Some(Value::Array(master))) = (r.first(), r.get(2))
            else {
                return Err(unexpected("CLUSTER SLOTS: a start and a master"));
            };
            let host = master
                .first()
                .and_then(bytes_of)
                .ok_or_else(|| unexpected("CLUSTER SLOTS: a master's host"))?;
            let Some(Value::Int(port)) = master.get(1) else {
                return Err(unexpected("CLUSTER SLOTS: a master's port"));
            };
            let start = u16::try_from(*start).map_err(|_| unexpected("a slot"))?;
            let slot = first
                .entry((String::from_utf8_lossy(host).into_owned(), *port))
                .or_insert(start);
            *slot = (*slot).min(start);
        }
        Ok(first.into_values().collect())
    }

    /// Runs `cmd` on the master serving `slot` (on one server, there).
    pub async fn query_on(&mut self, slot: u16, cmd: Cmd) -> RedisResult<Value> {
        self.query_routed(Route::new(slot, SlotAddr::Master), cmd)
            .await
    }

    /// Runs `cmd`, a command without keys of its own (`WAIT`, `ROLE`), on
    /// the master serving `key`'s slot: the node, and so the connection,
    /// that carried the writes to `key` (on one server, there).
    pub async fn query_for_key(&mut self, key: &str, cmd: Cmd) -> RedisResult<Value> {
        self.query_routed(Route::with_key(key, SlotAddr::Master), cmd)
            .await
    }

    async fn query_routed(&mut self, route: Route, cmd: Cmd) -> RedisResult<Value> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        match self {
            RedisClient::Single(c) => cmd.query_async(c).await,
            RedisClient::Cluster(c) => {
                let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                // A routed command hands a server's error back as a value
                // (a master demoted in a failover refusing `WAIT`): an
                // error, as the other paths give it.
                c.route_command(cmd, to).await?.extract_error()
            }
        }
    }

    /// Undoes [`subscribe`](Self::subscribe).
    pub async fn unsubscribe(&mut self, channel: &str) -> RedisResult<()> {
        match self {
            RedisClient::Single(c) => c.unsubscribe(channel).await,
            RedisClient::Cluster(c) => c.sunsubscribe(channel).await,
        }
    }
}

/// A reply that does not have the shape a command promises.
fn unexpected(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}

impl RedisClient {
    /// Subscribes to users' channels (`follow.rs`): classic
    /// `SUBSCRIBE` on a server and on a cluster alike, since the scripts
    /// publish there with `PUBLISH`, which a cluster carries to every node
    /// (a cluster client sends it to the node of the first channel's slot).
    pub async fn subscribe_users(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            RedisClient::Single(c) => c.subscribe(channels).await,
            RedisClient::Cluster(c) => c.subscribe(channels).await,
        }
    }

    /// Undoes [`subscribe_users`](Self::subscribe_users).
    pub async fn unsubscribe_users(&mut self, channels: &[String]) -> RedisResult<()> {
        match self {
            RedisClient::Single(c) => c.unsubscribe(channels).await,
            RedisClient::Cluster(c) => c.unsubscribe(channels).await,
        }
    }
}

impl ConnectionLike for RedisClient {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisClient::Single(c) => c.req_packed_command(cmd),
            RedisClient::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisClient::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisClient::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisClient::Single(c) => c.get_db(),
            RedisClient::Cluster(c) => c.get_db(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            RedisNodes::parse("redis://127.0.0.1:6380/2").unwrap(),
            RedisNodes::Single {
                url: "redis://127.0.0.1:6380/2?protocol=resp3".into()
            }
        );
        assert_eq!(
            RedisNodes::parse("redis+cluster://a:1,b:2").unwrap(),
            RedisNodes::Cluster {
                nodes: vec![
                    "redis://a:1/?protocol=resp3".into(),
                    "redis://b:2/?protocol=resp3".into()
                ]
            }
        );
        assert_eq!(
            RedisNodes::parse("rediss://h:6380").unwrap(),
            RedisNodes::Single {
                url: "rediss://h:6380?protocol=resp3".into()
            }
        );
        assert!(RedisNodes::parse("rediss://h:6380").unwrap().is_tls());
        assert!(!RedisNodes::parse("redis://h:6380").unwrap().is_tls());
        assert_eq!(
            RedisNodes::parse("rediss+cluster://a:1").unwrap(),
            RedisNodes::Cluster {
                nodes: vec!["rediss://a:1/?protocol=resp3".into()]
            }
        );
        for bad in [
            "memory",
            "rediss://",
            "http://h:1",
            "redis://",
            "redis://h:1/x",
            "redis+cluster://",
            "redis://h:1?protocol=2",
        ] {
            assert!(RedisNodes::parse(bad).is_err(), "{bad}");
        }
    }
}
