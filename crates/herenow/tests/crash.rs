//! Issue 8: a crash of the embedded store loses nothing it acknowledged.
//!
//! Under a load of heartbeats, friend writes and config writes, `herenow
//! serve --data-dir D` is killed with SIGKILL at random moments, 20 times
//! in one run (with a snapshot interval short enough that some kills land
//! while the journal is being folded into a snapshot). After every
//! restart on the same D:
//!
//! - every acknowledged friend-set and config write is there (a write in
//!   flight at the kill may or may not be: it was never acknowledged);
//! - every member's last seen is within 1 s of its newest acknowledged
//!   heartbeat (heartbeats are synced every half second at most).
//!
//! Every other start splits spaces over three stripes (`--space-stripes
//! 3`), so the same journal and snapshots are read back into whole and
//! striped spaces in turn, and written by both.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod support;
use support::{Server, get_json, now_ms, post_json, temp_dir};

const KILLS: usize = 20;
const WRITERS: usize = 3;
const MEMBERS: usize = 50;
const SPACES: [&str; 2] = ["crash-a", "crash-b"];

/// A cheap deterministic generator, so a failure can be replayed from the
/// seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the tests know was acknowledged, and what was in flight at the
/// kill (acknowledged or not: either outcome is right).
#[derive(Default)]
struct Model {
    /// user → its acknowledged friend set, and the set a write in flight
    /// would give.
    friends: HashMap<String, (BTreeSet<String>, Option<BTreeSet<String>>)>,
    /// space → its acknowledged `online_ms`, and one in flight.
    configs: HashMap<String, (u64, Option<u64>)>,
    /// (space, member) → the start time of its newest acknowledged
    /// heartbeat: the server stamped it no earlier.
    beats: HashMap<(String, String), u64>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn issue_8_sigkill_under_load_loses_nothing_acknowledged() {
    let dir = temp_dir("crash");
    let data = dir.to_str().unwrap().to_owned();
    let seed = now_ms() | 1;
    eprintln!("crash test seed {seed}");
    let mut rng = Rng(seed);
    let model = Arc::new(Mutex::new(Model::default()));
    // The workspace's reqwest has rustls without a built-in provider (the
    // server's webhooks bring ring): a client needs one installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    for round in 0..=KILLS {
        let stripes = if round % 2 == 1 { "3" } else { "1" };
        let mut server = Server::start(&[
            "--data-dir",
            &data,
            "--snapshot-interval",
            "1s",
            "--space-stripes",
            stripes,
        ]);
        check(&http, &server.url, &model, round).await;
        if round == KILLS {
            break;
        }
        let url = Arc::new(server.url.clone());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            tasks.push(tokio::spawn(friend_writer(
                http.clone(),
                url.clone(),
                model.clone(),
                stop.clone(),
                format!("w{w}"),
                seed.wrapping_add(round as u64 * 31 + w as u64),
            )));
        }
        tasks.push(tokio::spawn(config_writer(
            http.clone(),
            url.clone(),
            model.clone(),
            stop.clone(),
            seed.wrapping_add(round as u64 * 7),
        )));
        for s in SPACES {
            tasks.push(tokio::spawn(heartbeater(
                http.clone(),
                url.clone(),
                model.clone(),
                stop.clone(),
                s,
            )));
        }
        // A random moment: between 0.2 s and 1.7 s of load (the snapshot
        // writer runs every second, so some kills land mid-fold).
        tokio::time::sleep(Duration::from_millis(200 + rng.below(1_500))).await;
        server.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in tasks {
            t.await.unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compares the restarted server with the model, then takes what it
/// holds as the new truth for writes that were in flight.
async fn check(http: &reqwest::Client, url: &str, model: &Mutex<Model>, round: usize) {
    let (friends, configs, beats) = {
        let m = model.lock().unwrap();
        (m.friends.clone(), m.configs.clone(), m.beats.clone())
    };
    for (user, (acked, in_flight)) in friends {
        let got = get_json(http, &format!("{url}/v1/friends/{user}")).await;
        let got: BTreeSet<String> = got["friends"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_owned())
            .collect();
        assert!(
            got == acked || in_flight.as_ref() == Some(&got),
            "round {round}: friends of {user} are {got:?}; acknowledged {acked:?}, in flight {in_flight:?}"
        );
        model.lock().unwrap().friends.insert(user, (got, None));
    }
    for (space, (acked, in_flight)) in configs {
        let got = get_json(http, &format!("{url}/v1/spaces/{space}/config")).await;
        let got = got["online_ms"].as_u64().unwrap();
        assert!(
            got == acked || in_flight == Some(got),
            "round {round}: online_ms of {space} is {got}; acknowledged {acked}, in flight {in_flight:?}"
        );
        model.lock().unwrap().configs.insert(space, (got, None));
    }
    // The most a member's last seen came back older than its newest
    // acknowledged heartbeat, printed for runs under load.
    let mut worst = 0;
    for s in SPACES {
        let members: Vec<Value> = (0..MEMBERS)
            .map(|i| json!({"id": format!("m{i}")}))
            .collect();
        let got = post_json(
            http,
            &format!("{url}/v1/spaces/{s}/status"),
            &json!({ "members": members }),
        )
        .await;
        for m in got["members"].as_array().unwrap() {
            let id = m["id"].as_str().unwrap().to_owned();
            let Some(&acked) = beats.get(&(s.to_owned(), id.clone())) else {
                continue;
            };
            let seen = m["last_seen_ms"].as_u64().unwrap_or(0);
            let lost = acked.saturating_sub(seen);
            if lost > worst {
                worst = lost;
            }
            assert!(
                seen + 1_000 >= acked,
                "round {round}: {s}/{id} last seen {seen}, but a heartbeat sent at {acked} was acknowledged ({} ms lost)",
                acked - seen
            );
        }
        // Paged most recent first, seven a page (across stripes when
        // striped): every member heartbeated once, none twice.
        if beats.keys().any(|(space, _)| space == s) {
            let mut listed = Vec::new();
            let mut cursor = String::new();
            loop {
                let page =
                    get_json(http, &format!("{url}/v1/spaces/{s}/online?limit=7{cursor}")).await;
                let members = page["members"].as_array();
                for m in members.unwrap_or_else(|| panic!("round {round}: {page}")) {
                    listed.push(m["id"].as_str().unwrap().to_owned());
                }
                match page["next_cursor"].as_str() {
                    Some(c) => cursor = format!("&cursor={c}"),
                    None => break,
                }
            }
            let distinct: BTreeSet<&String> = listed.iter().collect();
            assert_eq!(
                distinct.len(),
                listed.len(),
                "round {round}: {s} listed {listed:?}"
            );
            assert_eq!(
                listed.len(),
                MEMBERS,
                "round {round}: {s} listed {listed:?}"
            );
        }
    }
    eprintln!("round {round}: last seen at most {worst} ms behind an acknowledged heartbeat");
}

async fn friend_writer(
    http: reqwest::Client,
    url: Arc<String>,
    model: Arc<Mutex<Model>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    prefix: String,
    seed: u64,
) {
    let mut rng = Rng(seed | 1);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let user = format!("{prefix}-u{}", rng.below(5));
        let pool: Vec<String> = (0..4).map(|_| format!("f{}", rng.below(20))).collect();
        let current = {
            let m = model.lock().unwrap();
            m.friends
                .get(&user)
                .map(|f| f.0.clone())
                .unwrap_or_default()
        };
        let (request, next) = match rng.below(3) {
            0 => (
                http.put(format!("{url}/v1/friends/{user}")),
                pool.iter().cloned().collect::<BTreeSet<_>>(),
            ),
            1 => {
                let mut n = current.clone();
                n.extend(pool.iter().cloned());
                (http.post(format!("{url}/v1/friends/{user}/add")), n)
            }
            _ => {
                let mut n = current.clone();
                for f in &pool {
                    n.remove(f);
                }
                (http.post(format!("{url}/v1/friends/{user}/remove")), n)
            }
        };
        model
            .lock()
            .unwrap()
            .friends
            .entry(user.clone())
            .or_default()
            .1 = Some(next.clone());
        match request.json(&json!({ "friends": pool })).send().await {
            Ok(r) if r.status().is_success() => {
                model.lock().unwrap().friends.insert(user, (next, None));
            }
            Ok(r) => panic!("friend write answered {}", r.status()),
            // The server died with the write in flight: it stays pending.
            Err(_) => return,
        }
    }
}

async fn config_writer(
    http: reqwest::Client,
    url: Arc<String>,
    model: Arc<Mutex<Model>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    seed: u64,
) {
    let mut rng = Rng(seed | 1);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let space = SPACES[rng.below(2) as usize].to_owned();
        let online_ms = 1_000 * (1 + rng.below(59));
        {
            let mut m = model.lock().unwrap();
            let entry = m.configs.entry(space.clone()).or_insert((60_000, None));
            entry.1 = Some(online_ms);
        }
        let body = json!({
            "online_ms": online_ms,
            "away_ms": 300_000,
            "window_ms": 600_000,
            "retention_ms": 900_000,
        });
        match http
            .put(format!("{url}/v1/spaces/{space}/config"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                model
                    .lock()
                    .unwrap()
                    .configs
                    .insert(space, (online_ms, None));
            }
            Ok(r) => panic!("config write answered {}", r.status()),
            Err(_) => return,
        }
    }
}

async fn heartbeater(
    http: reqwest::Client,
    url: Arc<String>,
    model: Arc<Mutex<Model>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    space: &'static str,
) {
    let members: Vec<Value> = (0..MEMBERS)
        .map(|i| json!({"id": format!("m{i}")}))
        .collect();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let sent = now_ms();
        let started = Instant::now();
        match http
            .post(format!("{url}/v1/spaces/{space}/heartbeats"))
            .json(&json!({ "heartbeats": members }))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                let mut m = model.lock().unwrap();
                for i in 0..MEMBERS {
                    m.beats.insert((space.to_owned(), format!("m{i}")), sent);
                }
            }
            Ok(r) => panic!("heartbeats answered {}", r.status()),
            Err(_) => return,
        }
        // About twenty batches a second per space.
        tokio::time::sleep(Duration::from_millis(50).saturating_sub(started.elapsed())).await;
    }
}
