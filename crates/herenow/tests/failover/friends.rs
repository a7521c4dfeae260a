//! The failover test's friend-set writes: users whose friend set lives on
//! the master that is killed, one new friend added at a time through both
//! servers, every `2xx` recorded; afterwards each set is read back.
//!
//! Friend sets are not buffered while their slot has no master (only
//! heartbeats and leaves are): such a write answers `503` and is not
//! acknowledged, so it may or may not be there afterwards.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herenow_testkit::RedisCluster;
use serde_json::{Value, json};

use crate::Load;
use crate::support::get_json;

/// Pause between one writer's requests.
const PACE: Duration = Duration::from_millis(50);

/// What the writer saw.
#[derive(Default)]
pub struct FriendAcks {
    /// (user, friend added, when its `2xx` arrived).
    pub acked: Vec<(String, String, Instant)>,
    /// Answers other than `2xx`: status and body.
    pub refused: Vec<String>,
}

/// `n` user ids whose friend set (`herenow:friends:USER`, the default
/// prefix) is in a slot of master `master`.
pub fn users_on(cluster: &RedisCluster, master: usize, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("fo-user-{i}"))
        .filter(|u| {
            cluster.master_of(cluster.slot_of(&format!("herenow:friends:{u}"))) == Some(master)
        })
        .take(n)
        .collect()
}

/// Adds friend `f0`, `f1`, … to `users` in turn, through `urls` in turn,
/// until the load stops.
pub async fn adder(
    http: reqwest::Client,
    urls: [String; 2],
    users: Vec<String>,
    load: Arc<Load>,
    acks: Arc<Mutex<FriendAcks>>,
) {
    let mut n = 0usize;
    while !load.stop.load(Ordering::SeqCst) {
        let started = Instant::now();
        let (user, friend) = (&users[n % users.len()], format!("f{n}"));
        let r = http
            .post(format!("{}/v1/friends/{user}/add", urls[n % 2]))
            .json(&json!({ "friends": [friend] }))
            .send()
            .await;
        load.took(started);
        let answered = Instant::now();
        {
            let mut a = acks.lock().unwrap();
            match r {
                Ok(r) if r.status().is_success() => a.acked.push((user.clone(), friend, answered)),
                Ok(r) => a.refused.push(format!("{user} + {friend}: {}", r.status())),
                Err(e) => a.refused.push(format!("{user} + {friend}: {e}")),
            }
        }
        n += 1;
        tokio::time::sleep(PACE.saturating_sub(started.elapsed())).await;
    }
}

/// The acknowledged additions missing from the sets read through `url`.
pub async fn lost(
    http: &reqwest::Client,
    url: &str,
    users: &[String],
    acks: &FriendAcks,
) -> Vec<(String, String, Instant)> {
    let mut lost = Vec::new();
    for user in users {
        let got = get_json(http, &format!("{url}/v1/friends/{user}")).await;
        let set: Vec<&str> = got["friends"]
            .as_array()
            .unwrap_or_else(|| panic!("friends of {user}: {got}"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        lost.extend(
            acks.acked
                .iter()
                .filter(|(u, f, _)| u == user && !set.contains(&f.as_str()))
                .cloned(),
        );
    }
    lost
}
