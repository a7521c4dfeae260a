//! Issue 13: a Redis Cluster failover under load, measured.
//!
//! Three masters with a replica each (`cluster-node-timeout` 2 s), two
//! real `herenow serve --store redis+cluster://…` processes, and a steady
//! load of heartbeats through both: many members over spaces on every
//! master, each heartbeat with an explicit time, every `2xx` recorded. Then
//! the master of one busy space is killed with SIGKILL while the load goes
//! on, and both servers are polled every 75 ms: `/readyz`, a read of the
//! busy space, `/readyz` again. The test asserts that
//!
//! - heartbeats are acknowledged throughout (buffered while the slot has no
//!   master), and no request takes longer than the request timeout;
//! - reads answer `503` with `Retry-After` from the kill until the replica
//!   is promoted, then `200` for good, within the node timeout plus 8 s,
//!   by themselves (the cluster client finds the new master);
//! - `/readyz` never answers `200` around a failing read, and is `200`
//!   again once reads work and the buffer is written back;
//! - afterwards every member's last seen is at least its newest
//!   acknowledged heartbeat: with `--redis-wait-replicas 1`, for every
//!   member; without it, except members whose newest heartbeat was
//!   acknowledged in the last second before the kill and never repeated
//!   (docs/OPERATIONS.md: asynchronous replication's window);
//! - the same for friend sets on the killed master, written throughout
//!   (`failover/friends.rs`): every acknowledged addition is there
//!   afterwards, with the wait; without it, all but those acknowledged in
//!   the last second before the kill;
//! - no ghost: members whose last heartbeat was before the kill leave
//!   Redis' presence sets at their retention (12 s here) plus the sweep's
//!   second.
//!
//! It prints the windows it measured, for the benchmark page's failover
//! row. The two cases run one after the other (a lock), so each
//! has the machine's two cores to itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herenow_testkit::{RedisCluster, raw_command};
use serde_json::{Value, json};

mod support;
use support::{Server, get_json, now_ms, post_json};

#[path = "failover/friends.rs"]
mod friends;
use friends::FriendAcks;

/// `cluster-node-timeout`: how long a silent master takes to be failed.
const NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reads must work again within the node timeout plus this.
const RECOVERY_SLACK: Duration = Duration::from_secs(8);
/// `--request-timeout` of both servers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The spaces' retention (and window): longer than any outage allowed,
/// so buffered heartbeats are never past it when they are written back.
const RETENTION_MS: u64 = 12_000;
/// Spaces on each master.
const SPACES_PER_MASTER: usize = 2;
/// Members heartbeating throughout, per space.
const LIVE: usize = 10;
/// Members whose last heartbeat is before the kill, per space.
const OLD: usize = 4;
/// Pause between one heartbeater's requests.
const PACE: Duration = Duration::from_millis(100);
/// Pause between one poller's rounds.
const POLL: Duration = Duration::from_millis(75);
/// Without waiting for replicas: what docs/OPERATIONS.md allows to be lost, the
/// heartbeats acknowledged this long before the kill.
const ASYNC_WINDOW: Duration = Duration::from_secs(1);

/// One case at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// What the load saw.
#[derive(Default)]
struct Acked {
    /// (space, member) → newest acknowledged `at_ms`, and when its `2xx`
    /// arrived.
    newest: HashMap<(String, String), (u64, Instant)>,
    /// Heartbeat requests acknowledged, per server, for the busy space,
    /// with when the `2xx` arrived.
    busy_acks: [Vec<Instant>; 2],
    /// Heartbeats not acknowledged: what came back instead.
    refused: Vec<String>,
}

struct Load {
    stop: AtomicBool,
    old_stop: AtomicBool,
    requests: AtomicU64,
    /// The slowest request of any kind, in ms.
    slowest_ms: AtomicU64,
    acked: Mutex<Acked>,
}

/// One polled request.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// When it was sent.
    sent: Instant,
    /// When its answer came.
    done: Instant,
    status: u16,
    retry_after: bool,
}

/// What the pollers saw of one server: reads of the busy space and
/// `/readyz`, each polled on its own every [`POLL`].
#[derive(Default)]
struct Polled {
    reads: Vec<Sample>,
    ready: Vec<Sample>,
}

impl Load {
    fn took(&self, started: Instant) {
        self.slowest_ms
            .fetch_max(started.elapsed().as_millis() as u64, Ordering::SeqCst);
    }
}

async fn heartbeater(
    http: reqwest::Client,
    url: String,
    server: usize,
    space: String,
    busy: bool,
    load: Arc<Load>,
) {
    while !load.stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let at = now_ms();
        let mut ids: Vec<String> = (0..LIVE).map(|i| format!("m{i}")).collect();
        if !load.old_stop.load(Ordering::SeqCst) {
            ids.extend((0..OLD).map(|i| format!("old{i}")));
        }
        let beats: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "at_ms": at}))
            .collect();
        let r = http
            .post(format!("{url}/v1/spaces/{space}/heartbeats"))
            .json(&json!({ "heartbeats": beats }))
            .send()
            .await;
        load.took(started);
        let answered = Instant::now();
        match r {
            Ok(r) if r.status().is_success() => {
                load.requests.fetch_add(1, Ordering::SeqCst);
                let mut a = load.acked.lock().unwrap();
                for id in ids {
                    let e = a.newest.entry((space.clone(), id)).or_insert((0, answered));
                    if at >= e.0 {
                        *e = (at, answered);
                    }
                }
                if busy {
                    a.busy_acks[server].push(answered);
                }
            }
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                load.acked
                    .lock()
                    .unwrap()
                    .refused
                    .push(format!("server {server}, {space}: {status} {body}"));
            }
            Err(e) => load
                .acked
                .lock()
                .unwrap()
                .refused
                .push(format!("server {server}, {space}: {e}")),
        }
        tokio::time::sleep(PACE.saturating_sub(started.elapsed())).await;
    }
}

/// `GET path`, timed.
async fn get(http: &reqwest::Client, url: &str, path: &str, load: &Load) -> Sample {
    let sent = Instant::now();
    let r = http.get(format!("{url}{path}")).send().await;
    load.took(sent);
    match r {
        Ok(r) => Sample {
            sent,
            done: Instant::now(),
            status: r.status().as_u16(),
            retry_after: r.headers().contains_key("retry-after"),
        },
        Err(e) => panic!("GET {url}{path} failed: {e}"),
    }
}

/// Polls `path` every [`POLL`] (or as fast as it answers) until the load
/// stops; `read` says which list the samples go to.
async fn poller(
    http: reqwest::Client,
    url: String,
    path: String,
    read: bool,
    load: Arc<Load>,
    polled: Arc<Mutex<Polled>>,
) {
    while !load.stop.load(Ordering::SeqCst) {
        let sample = get(&http, &url, &path, &load).await;
        {
            let mut p = polled.lock().unwrap();
            if read { &mut p.reads } else { &mut p.ready }.push(sample);
        }
        tokio::time::sleep(POLL.saturating_sub(sample.sent.elapsed())).await;
    }
}

/// Polls `cond` every 50 ms until it holds, panicking with `what` past
/// `within`.
async fn wait_until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `herenow_redis_unreplicated_total` of a server's `/metrics`.
async fn unreplicated(http: &reqwest::Client, url: &str) -> u64 {
    let text = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find(|l| l.starts_with("herenow_redis_unreplicated_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// `SPACES_PER_MASTER` space names on each master: `(space, master)`.
fn pick_spaces(cluster: &RedisCluster) -> Vec<(String, usize)> {
    let mut per: HashMap<usize, usize> = HashMap::new();
    let mut spaces = Vec::new();
    for i in 0.. {
        let space = format!("fo-{i}");
        let master = cluster
            .master_of(cluster.slot_of(&space))
            .expect("a master per slot");
        let n = per.entry(master).or_default();
        if *n < SPACES_PER_MASTER {
            *n += 1;
            spaces.push((space, master));
        }
        if spaces.len() == 3 * SPACES_PER_MASTER {
            return spaces;
        }
    }
    unreachable!()
}

/// The window one server's reads were failing: the first read sent after
/// the kill that failed, and the first good one after it.
struct Window {
    first_fail: Sample,
    first_good: Sample,
}

fn window_of(reads: &[Sample], killed: Instant) -> Option<Window> {
    let after: Vec<&Sample> = reads.iter().filter(|s| s.sent >= killed).collect();
    let fail = after.iter().position(|s| s.status != 200)?;
    let good = after[fail..].iter().find(|s| s.status == 200)?;
    Some(Window {
        first_fail: *after[fail],
        first_good: **good,
    })
}

/// A server's samples from the kill on, one line per change.
fn timeline(p: &Polled, killed: Instant) -> String {
    let mut all: Vec<(Instant, &str, u16)> = p
        .reads
        .iter()
        .map(|s| (s.sent, "read", s.status))
        .chain(p.ready.iter().map(|s| (s.sent, "readyz", s.status)))
        .filter(|x| x.0 >= killed)
        .collect();
    all.sort_by_key(|x| x.0);
    let mut out = Vec::new();
    let mut last: HashMap<&str, u16> = HashMap::new();
    for (at, what, status) in all {
        if last.insert(what, status) != Some(status) {
            out.push(format!(
                "+{:.2}s {what} {status}",
                (at - killed).as_secs_f64()
            ));
        }
    }
    out.join(", ")
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// `a - b` in seconds, with its sign.
fn signed(a: Instant, b: Instant) -> String {
    if a >= b {
        secs(a - b)
    } else {
        format!("-{}", secs(b - a))
    }
}

async fn failover(wait: bool) {
    let _serial = SERIAL.lock().await;
    // The workspace's reqwest has rustls without a provider built in.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut cluster = RedisCluster::start_with_replicas(NODE_TIMEOUT);
    let spaces = pick_spaces(&cluster);
    let (busy, victim) = spaces[0].clone();
    let replica = cluster.replica_of(victim).expect("the victim's replica");
    let friend_users = friends::users_on(&cluster, victim, 4);

    let url = cluster.url();
    let mut args = vec!["--store", url.as_str(), "--request-timeout", "5s"];
    if wait {
        args.extend([
            "--redis-wait-replicas",
            "1",
            "--redis-wait-timeout",
            "500ms",
        ]);
    }
    let servers = [Server::start(&args), Server::start(&args)];
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    for s in &servers {
        let deadline = Instant::now() + Duration::from_secs(30);
        while http
            .get(format!("{}/readyz", s.url))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
            != 200
        {
            assert!(
                Instant::now() < deadline,
                "{} never ready:\n{}",
                s.url,
                s.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // A short retention, so ghosts would show within the test.
    for (space, _) in &spaces {
        let r = http
            .put(format!("{}/v1/spaces/{space}/config", servers[0].url))
            .json(&json!({
                "online_ms": 2_000,
                "away_ms": 5_000,
                "window_ms": RETENTION_MS,
                "retention_ms": RETENTION_MS,
            }))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "config of {space}: {}", r.status());
    }

    let load = Arc::new(Load {
        stop: AtomicBool::new(false),
        old_stop: AtomicBool::new(false),
        requests: AtomicU64::new(0),
        slowest_ms: AtomicU64::new(0),
        acked: Mutex::new(Acked::default()),
    });
    let mut tasks = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        for (space, _) in &spaces {
            tasks.push(tokio::spawn(heartbeater(
                http.clone(),
                s.url.clone(),
                i,
                space.clone(),
                *space == busy,
                load.clone(),
            )));
        }
    }
    let friend_acks = Arc::new(Mutex::new(FriendAcks::default()));
    tasks.push(tokio::spawn(friends::adder(
        http.clone(),
        [servers[0].url.clone(), servers[1].url.clone()],
        friend_users.clone(),
        load.clone(),
        friend_acks.clone(),
    )));
    let polled: [Arc<Mutex<Polled>>; 2] = Default::default();
    let mut pollers = Vec::new();
    for (s, polled) in servers.iter().zip(&polled) {
        for (path, read) in [
            (format!("/v1/spaces/{busy}/online?limit=5"), true),
            ("/readyz".to_owned(), false),
        ] {
            pollers.push(tokio::spawn(poller(
                http.clone(),
                s.url.clone(),
                path,
                read,
                load.clone(),
                polled.clone(),
            )));
        }
    }

    // Steady load first: every member acknowledged, a few rounds each.
    let members = spaces.len() * (LIVE + OLD);
    let rounds = (2 * spaces.len() * 5) as u64;
    wait_until("load before the kill", Duration::from_secs(60), || {
        load.acked.lock().unwrap().newest.len() == members
            && load.requests.load(Ordering::SeqCst) >= rounds
            && friend_acks.lock().unwrap().acked.len() >= 10
    })
    .await;
    let unreplicated_before = [
        unreplicated(&http, &servers[0].url).await,
        unreplicated(&http, &servers[1].url).await,
    ];

    // The old members' last heartbeats are now; then the busy space's
    // master dies.
    load.old_stop.store(true, Ordering::SeqCst);
    let killed = Instant::now();
    cluster.nodes[victim].kill();
    let replica_port = cluster.nodes[replica].port;
    let promotion = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let role = raw_command(replica_port, "INFO replication").unwrap_or_default();
            if role.contains("role:master") {
                return Instant::now();
            }
            assert!(Instant::now() < deadline, "the replica was never promoted");
            std::thread::sleep(Duration::from_millis(20));
        }
    });

    // Both servers' reads fail, then work again by themselves, and
    // /readyz follows.
    let bound = NODE_TIMEOUT + RECOVERY_SLACK;
    let recovered = |p: &Mutex<Polled>| {
        let p = p.lock().unwrap();
        window_of(&p.reads, killed).is_some_and(|w| {
            p.ready
                .iter()
                .any(|r| r.sent > w.first_good.done && r.status == 200)
        })
    };
    let deadline = Instant::now() + bound + Duration::from_secs(5);
    while !polled.iter().all(|p| recovered(p)) {
        if Instant::now() >= deadline {
            let timelines: Vec<String> = polled
                .iter()
                .map(|p| timeline(&p.lock().unwrap(), killed))
                .collect();
            panic!(
                "reads and /readyz not back on both servers within {:?} of the kill:\n\
                 server 0: {}\nserver 1: {}\n--- logs\n{}\n---\n{}",
                bound + Duration::from_secs(5),
                timelines[0],
                timelines[1],
                servers[0].log(),
                servers[1].log()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let promoted = promotion.await.unwrap();
    let back = Instant::now();
    // Every live member heartbeated again after that.
    wait_until(
        "heartbeats after the failover",
        Duration::from_secs(30),
        || {
            let a = load.acked.lock().unwrap();
            a.newest
                .iter()
                .filter(|((_, id), _)| id.starts_with('m'))
                .all(|(_, (_, when))| *when > back)
                && friend_acks
                    .lock()
                    .unwrap()
                    .acked
                    .iter()
                    .any(|(_, _, when)| *when > back)
        },
    )
    .await;
    load.stop.store(true, Ordering::SeqCst);
    for t in tasks.into_iter().chain(pollers) {
        t.await.unwrap();
    }

    // ---- what happened during the failover
    let acked = std::mem::take(&mut *load.acked.lock().unwrap());
    let logs = || format!("{}\n---\n{}", servers[0].log(), servers[1].log());
    assert!(
        acked.refused.is_empty(),
        "heartbeats not acknowledged: {:?}\n{}",
        acked.refused,
        logs()
    );
    let slowest = Duration::from_millis(load.slowest_ms.load(Ordering::SeqCst));
    assert!(
        slowest <= REQUEST_TIMEOUT + Duration::from_secs(1),
        "a request took {slowest:?}"
    );
    let mut report = Vec::new();
    for (i, polled) in polled.iter().enumerate() {
        let p = polled.lock().unwrap();
        for s in &p.reads {
            assert!(
                s.status == 200 || (s.status == 503 && s.retry_after),
                "server {i}: a read answered {} (Retry-After: {})",
                s.status,
                s.retry_after
            );
        }
        // /readyz never says 200 on both sides of a failing read.
        for pair in p.ready.windows(2) {
            let (r1, r2) = (pair[0], pair[1]);
            if r1.status == 200 && r2.status == 200 {
                let lie = p
                    .reads
                    .iter()
                    .find(|f| f.status != 200 && f.sent >= r1.done && f.done <= r2.sent);
                assert!(
                    lie.is_none(),
                    "server {i}: /readyz said 200 before and after a failing read: \
                     {r1:?} {lie:?} {r2:?}"
                );
            }
        }
        let w = window_of(&p.reads, killed).expect("reads failed, then worked");
        let (fail, good) = (w.first_fail, w.first_good);
        assert!(
            p.reads
                .iter()
                .filter(|s| s.sent >= good.sent)
                .all(|s| s.status == 200),
            "server {i}: reads failed again after they had recovered: {}",
            timeline(&p, killed)
        );
        assert!(
            p.ready
                .iter()
                .any(|r| r.status == 503 && r.done >= fail.sent && r.done <= good.done),
            "server {i}: /readyz never said 503 while reads failed"
        );
        let ready_again = p
            .ready
            .iter()
            .find(|r| r.sent >= good.done && r.status == 200)
            .map(|r| r.done)
            .expect("ready again");
        let ended = good.done - killed;
        assert!(
            ended <= bound,
            "server {i}: reads failed until {ended:?} after the kill (bound {bound:?})"
        );
        let during = acked.busy_acks[i]
            .iter()
            .filter(|&&t| t > fail.sent && t < good.done)
            .count();
        assert!(
            during > 0,
            "server {i}: no heartbeat of the busy space acknowledged while its reads failed"
        );
        report.push(format!(
            "server {i}: reads 503 from +{} to +{} (unavailable {}; good again {} after the \
             promotion), readyz 200 again at +{}, {during} heartbeat requests of the busy space \
             acknowledged meanwhile",
            secs(fail.sent - killed),
            secs(good.done - killed),
            secs(good.done - fail.sent),
            signed(good.done, promoted),
            secs(ready_again - killed),
        ));
    }

    // ---- nothing acknowledged was lost
    let mut lost = Vec::new();
    for (space, _) in &spaces {
        let ids: Vec<Value> = (0..LIVE)
            .map(|i| json!({"id": format!("m{i}")}))
            .chain((0..OLD).map(|i| json!({"id": format!("old{i}")})))
            .collect();
        let got = post_json(
            &http,
            &format!("{}/v1/spaces/{space}/status", servers[1].url),
            &json!({ "members": ids }),
        )
        .await;
        for m in got["members"].as_array().unwrap() {
            let id = m["id"].as_str().unwrap().to_owned();
            let (at, when) = acked.newest[&(space.clone(), id.clone())];
            let seen = m["last_seen_ms"].as_u64().unwrap_or(0);
            if seen < at {
                lost.push((space.clone(), id, at, when));
            }
        }
    }
    for (space, id, at, when) in &lost {
        assert!(
            !wait,
            "{space}/{id}: a heartbeat at {at} was acknowledged with --redis-wait-replicas 1 \
             and is lost (unreplicated writes before the kill: {unreplicated_before:?})"
        );
        assert!(
            id.starts_with("old") && killed.saturating_duration_since(*when) <= ASYNC_WINDOW,
            "{space}/{id}: a heartbeat at {at}, acknowledged {:?} before the kill, is lost",
            killed.saturating_duration_since(*when)
        );
    }
    let friend_acks = std::mem::take(&mut *friend_acks.lock().unwrap());
    assert!(
        friend_acks
            .refused
            .iter()
            .all(|r| r.ends_with("503 Service Unavailable")),
        "friend additions answered other than 2xx or 503: {:?}\nthe servers' errors:\n{}",
        friend_acks.refused,
        logs()
            .lines()
            .filter(|l| l.contains("ERROR") || l.contains("internal"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let lost_friends = friends::lost(&http, &servers[0].url, &friend_users, &friend_acks).await;
    for (user, friend, when) in &lost_friends {
        let before = killed.saturating_duration_since(*when);
        assert!(
            !wait,
            "{user} + {friend}: acknowledged {before:?} before the kill with \
             --redis-wait-replicas 1, and lost"
        );
        assert!(
            *when <= killed && before <= ASYNC_WINDOW,
            "{user} + {friend}: acknowledged {before:?} before the kill, and lost"
        );
    }

    // The promoted master has no replica: with the wait on, its writes are
    // counted, not waited on (metrics are sampled every 5 s).
    let mut unreplicated_after = [0, 0];
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        for (i, s) in servers.iter().enumerate() {
            unreplicated_after[i] = unreplicated(&http, &s.url).await;
        }
        if !wait || unreplicated_after.iter().sum::<u64>() > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writes to the promoted master (no replica) were not counted"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // ---- no ghosts: the old members leave Redis at their retention
    let newest_old = acked
        .newest
        .iter()
        .filter(|((_, id), _)| id.starts_with("old"))
        .map(|(_, (at, _))| *at)
        .max()
        .unwrap();
    let due = newest_old + RETENTION_MS + 1_000;
    let old_ids: Vec<String> = (0..OLD).map(|i| format!("old{i}")).collect();
    let ghosts = || {
        let mut ghosts = Vec::new();
        for (space, _) in &spaces {
            let Some(master) = cluster.master_of(cluster.slot_of(space)) else {
                return vec![format!("{space}: no master")];
            };
            let reply = raw_command(
                cluster.nodes[master].port,
                &format!("ZMSCORE herenow:{{{space}}}:u {}", old_ids.join(" ")),
            )
            .unwrap_or_default();
            let present = reply
                .lines()
                .filter(|l| l.starts_with('$') && *l != "$-1")
                .count();
            if present > 0 {
                ghosts.push(format!("{space}: {present} old members still present"));
            }
        }
        ghosts
    };
    loop {
        let g = ghosts();
        if g.is_empty() {
            break;
        }
        assert!(
            now_ms() < due + 4_000,
            "ghosts {} ms past their retention: {g:?}",
            now_ms() - newest_old - RETENTION_MS
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gone_after = now_ms().saturating_sub(newest_old);
    for (space, _) in &spaces {
        let page = get_json(
            &http,
            &format!(
                "{}/v1/spaces/{space}/online?kind=all&limit=100",
                servers[0].url
            ),
        )
        .await;
        let listed: Vec<&str> = page["members"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["id"].as_str())
            .filter(|id| id.starts_with("old"))
            .collect();
        assert!(
            listed.is_empty(),
            "{space}: listed past their retention: {listed:?}"
        );
    }

    eprintln!(
        "failover (--redis-wait-replicas {}): replica promoted {} after the kill; {}; \
         lost {} acknowledged heartbeats; friend additions: {} acknowledged, {} refused, {} \
         lost; unreplicated writes before/after: {:?}/{:?}; \
         slowest request {}; old members gone from Redis {} after their last heartbeat \
         (retention {} s)",
        u8::from(wait),
        secs(promoted - killed),
        report.join("; "),
        lost.len(),
        friend_acks.acked.len(),
        friend_acks.refused.len(),
        lost_friends.len(),
        unreplicated_before,
        unreplicated_after,
        secs(slowest),
        secs(Duration::from_millis(gone_after)),
        RETENTION_MS / 1000,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_13_failover_with_wait_replicas_loses_nothing_acknowledged() {
    failover(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_13_failover_without_wait_loses_at_most_the_last_moments() {
    failover(false).await;
}
