//! [`RedisCluster`]: three masters formed with `redis-cli --cluster
//! create`, alone or with a replica each, and what a failover test asks of
//! it: which node masters a key's slot now, which node replicates it, and
//! whether a replica has taken over.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::{RedisServer, cli_binary, raw_command, require};

/// `cluster-node-timeout` of [`RedisCluster::start`]'s nodes (Redis'
/// default is 15 s; nothing fails over in those tests).
pub(crate) const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long forming a cluster may take on a slow, shared machine.
const FORM_DEADLINE: Duration = Duration::from_secs(60);

/// Three masters, every slot assigned, with or without one replica each.
pub struct RedisCluster {
    /// Every node, each a [`RedisServer`] of its own, so a test can stop,
    /// kill or restart one. Which are masters is not fixed: ask
    /// [`master_of`](Self::master_of) (a failover promotes a replica).
    pub nodes: Vec<RedisServer>,
}

/// One line of `CLUSTER NODES`, as a live node sees the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node's id.
    pub id: String,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Whether it is flagged a master (else a replica).
    pub master: bool,
    /// Whether it is flagged failing (`fail` or `fail?`).
    pub failing: bool,
    /// The id of its master, for a replica.
    pub master_id: Option<String>,
    /// The slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Starts three nodes and forms the cluster, no replicas; waits for
    /// `cluster_state:ok` on every node.
    pub fn start() -> Self {
        Self::form(3, 0, DEFAULT_NODE_TIMEOUT)
    }

    /// Starts six nodes and forms three masters with one replica each
    /// (`--cluster-replicas 1`), every node with this
    /// `cluster-node-timeout` (a master silent this long is failed over;
    /// a couple of seconds suit a test). Waits until every node reports
    /// `cluster_state:ok`, sees three masters and three replicas, and
    /// every master has its replica connected and in sync.
    pub fn start_with_replicas(node_timeout: Duration) -> Self {
        Self::form(6, 1, node_timeout)
    }

    fn form(count: usize, replicas: usize, node_timeout: Duration) -> Self {
        require(&cli_binary());
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| RedisServer::start_with(true, false, node_timeout))
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(cli_binary())
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string()])
            .arg("--cluster-yes")
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes };
        let deadline = Instant::now() + FORM_DEADLINE;
        for i in 0..cluster.nodes.len() {
            cluster.wait(deadline, &format!("node {i}: cluster_state:ok"), || {
                cluster.info(i, "CLUSTER INFO", "cluster_state") == Some("ok".into())
            });
        }
        // Pub/sub crosses the cluster bus only where a link is up and
        // known: a PUBLISH made while two nodes still shake hands never
        // reaches the subscribers of one of them, and Valkey drops what
        // arrives on an inbound link it has not yet tied to its node. Both
        // outlast `cluster_state:ok`.
        cluster.wait(deadline, "every node linked to every other", || {
            cluster.meshed()
        });
        if replicas > 0 {
            cluster.wait(
                deadline,
                "three masters, each with a replica in sync",
                || cluster.replicated(),
            );
        }
        cluster
    }

    /// Every node knows every other, none in a handshake or without an
    /// address, reports its link to each `connected`, and has tied an
    /// inbound link to each.
    fn meshed(&self) -> bool {
        (0..self.nodes.len()).all(|i| {
            let Ok(reply) = raw_command(self.nodes[i].port, "CLUSTER NODES") else {
                return false;
            };
            let lines: Vec<Vec<&str>> = reply
                .lines()
                .skip(1)
                .map(|l| l.split_whitespace().collect::<Vec<_>>())
                .filter(|f| f.len() >= 8)
                .collect();
            let outbound = lines.len() == self.nodes.len()
                && lines.iter().all(|f| {
                    f[7] == "connected"
                        && !f[2]
                            .split(',')
                            .any(|flag| flag == "handshake" || flag == "noaddr")
                });
            // `CLUSTER LINKS` lists an inbound link (`from`) once the node
            // knows whose it is.
            let inbound = raw_command(self.nodes[i].port, "CLUSTER LINKS")
                .is_ok_and(|r| r.lines().filter(|l| *l == "from").count() >= self.nodes.len() - 1);
            outbound && inbound
        })
    }

    /// Every node sees three masters and three replicas, every master
    /// reports one replica online, every replica its link to its master up.
    fn replicated(&self) -> bool {
        (0..self.nodes.len()).all(|i| {
            let Some(view) = self.topology_of(i) else {
                return false;
            };
            let masters = view.iter().filter(|n| n.master && !n.failing).count();
            let replicas = view.iter().filter(|n| !n.master && !n.failing).count();
            let me = self.nodes[i].port;
            let in_sync = match view.iter().find(|n| n.port == me) {
                Some(n) if n.master => raw_command(me, "INFO replication")
                    .is_ok_and(|r| r.contains("slave0:") && r.contains("state=online")),
                Some(_) => {
                    self.info(i, "INFO replication", "master_link_status") == Some("up".into())
                }
                None => false,
            };
            masters == 3 && replicas == 3 && in_sync
        })
    }

    /// Polls `cond` every 50 ms until it holds; panics past `deadline`
    /// with every node's log.
    fn wait(&self, deadline: Instant, what: &str, mut cond: impl FnMut() -> bool) {
        while !cond() {
            if Instant::now() >= deadline {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| format!("--- node on port {}:\n{}", n.port, n.log()))
                    .collect();
                panic!("cluster: {what}: not reached in time\n{}", logs.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// One `field:value` line of an `INFO`-style reply of node `i`.
    fn info(&self, i: usize, cmd: &str, field: &str) -> Option<String> {
        let reply = raw_command(self.nodes[i].port, cmd).ok()?;
        reply.lines().find_map(|l| {
            l.strip_prefix(field)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(|v| v.trim().to_owned())
        })
    }

    /// `redis+cluster://` with every node as a seed.
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", addrs.join(","))
    }

    /// Whether node `i`'s process runs (it was not stopped or killed).
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].child.is_some()
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`, asked of a running node).
    pub fn slot_of(&self, key: &str) -> u16 {
        let i = (0..self.nodes.len())
            .find(|&i| self.is_running(i))
            .expect("a running node");
        let reply = raw_command(self.nodes[i].port, &format!("CLUSTER KEYSLOT {key}"))
            .expect("CLUSTER KEYSLOT");
        reply
            .trim()
            .trim_start_matches(':')
            .parse()
            .unwrap_or_else(|_| panic!("CLUSTER KEYSLOT {key}: {reply:?}"))
    }

    /// `CLUSTER NODES` as running node `i` sees it; `None` when it does
    /// not answer.
    pub fn topology_of(&self, i: usize) -> Option<Vec<ClusterNode>> {
        if !self.is_running(i) {
            return None;
        }
        let reply = raw_command(self.nodes[i].port, "CLUSTER NODES").ok()?;
        if !reply.starts_with('$') {
            return None;
        }
        Some(reply.lines().skip(1).filter_map(parse_node).collect())
    }

    /// The node (an index into [`nodes`](Self::nodes)) that serves `slot`
    /// as a master, running and not flagged failing, as the running nodes
    /// see it: `None` while they disagree or none does (a failover in
    /// progress).
    pub fn master_of(&self, slot: u16) -> Option<usize> {
        let mut found = None;
        for i in (0..self.nodes.len()).filter(|&i| self.is_running(i)) {
            let view = self.topology_of(i)?;
            let master = view.iter().find(|n| {
                n.master && !n.failing && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
            })?;
            let index = self.index_of(master.port)?;
            if !self.is_running(index) || found.is_some_and(|f| f != index) {
                return None;
            }
            found = Some(index);
        }
        found
    }

    /// The replica of the master `master` (an index), as that master sees
    /// it.
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        let view = self.topology_of(master)?;
        let id = &view.iter().find(|n| n.port == self.nodes[master].port)?.id;
        let replica = view
            .iter()
            .find(|n| !n.master && n.master_id.as_ref() == Some(id))?;
        self.index_of(replica.port)
    }

    /// Whether running node `i` says it is a master (`INFO replication`,
    /// `role:master`): a replica says so the moment it wins its election.
    pub fn is_master(&self, i: usize) -> bool {
        self.is_running(i) && self.info(i, "INFO replication", "role") == Some("master".into())
    }

    /// Whether every running node reports `cluster_state:ok`.
    pub fn is_ok(&self) -> bool {
        (0..self.nodes.len())
            .filter(|&i| self.is_running(i))
            .all(|i| self.info(i, "CLUSTER INFO", "cluster_state") == Some("ok".into()))
    }

    fn index_of(&self, port: u16) -> Option<usize> {
        self.nodes.iter().position(|n| n.port == port)
    }
}

/// One line of `CLUSTER NODES`: `id ip:port@bus flags master ping pong
/// epoch link slot…`.
fn parse_node(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let addr = f[1].split(['@', ',']).next()?;
    let port = addr.rsplit_once(':')?.1.parse().ok()?;
    let flags: Vec<&str> = f[2].split(',').collect();
    let slots = f[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|v| (v, v)),
        })
        .collect();
    Some(ClusterNode {
        id: f[0].to_owned(),
        port,
        master: flags.contains(&"master"),
        failing: flags.iter().any(|&x| x == "fail" || x == "fail?"),
        master_id: (f[3] != "-").then(|| f[3].to_owned()),
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines() {
        let m = parse_node(
            "07c37dfeb2352e0b 127.0.0.1:30004@40004 myself,master - 0 0 1 connected 0-5460 7000",
        )
        .unwrap();
        assert_eq!(m.port, 30004);
        assert!(m.master && !m.failing);
        assert_eq!(m.master_id, None);
        assert_eq!(m.slots, vec![(0, 5460), (7000, 7000)]);
        let r = parse_node(
            "e7d1eecce10fd6bb 127.0.0.1:30005@40005,host slave,fail? 07c37dfeb2352e0b 0 0 1 connected",
        )
        .unwrap();
        assert_eq!(r.port, 30005);
        assert!(!r.master && r.failing);
        assert_eq!(r.master_id.as_deref(), Some("07c37dfeb2352e0b"));
        assert!(r.slots.is_empty());
    }
}
