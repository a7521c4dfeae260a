//! What the client prints for people: aligned tables with status dots and
//! "last seen 2m ago", and one-line summaries. (`--json` bypasses all of
//! this and prints the server's answer as is.)
//!
//! The answer types here are lenient on purpose: they ignore fields they do
//! not know, so a newer server does not break an older client.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use anyhow::{Context as _, Result};
use herenow_core::store::{ErasureReport, HeartbeatReport};
use herenow_core::time::{Clock as _, SystemClock};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// One member as the API describes it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Member {
    /// The member id.
    pub id: String,
    /// `user` or `guest`.
    #[serde(default = "user_kind")]
    pub kind: String,
    /// `online`, `away` or `offline`.
    pub status: String,
    /// Milliseconds since the UNIX epoch; `None`: never seen.
    pub last_seen_ms: Option<u64>,
    /// Metadata, when the answer carries it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<serde_json::Value>,
}

fn user_kind() -> String {
    "user".to_owned()
}

/// `{"members": [...]}` and the online listing's extra fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Members {
    /// The members of this page, in the server's order.
    pub members: Vec<Member>,
    /// The cursor of the next page; `None`: last page (or not paged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The window the listing used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
}

/// One user's last seen anywhere, as the API describes it.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct SeenAnywhere {
    /// The user id.
    pub id: String,
    /// The best status over the spaces the user is present in.
    pub status: String,
    /// The newest last-seen time over every space; `None`: never seen
    /// (or erased, or past every space's horizon).
    pub last_seen_ms: Option<u64>,
    /// The space of that time.
    pub space: Option<String>,
}

/// `{"users": [...]}`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Users {
    /// The users, in the order asked.
    pub users: Vec<SeenAnywhere>,
}

/// The answer to a count.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub struct CountAnswer {
    /// Users online within the window.
    pub users: u64,
    /// Guests online within the window.
    pub guests: u64,
    /// Users and guests together.
    pub total: u64,
    /// The window counted, in ms: the one asked for, or the space's.
    pub window_ms: u64,
}

/// The status with its dot: green, yellow, grey in seed 004's words.
pub fn status_cell(status: &str) -> String {
    let dot = match status {
        "online" => "●",
        "away" => "◐",
        "offline" => "○",
        _ => "?",
    };
    format!("{dot} {status}")
}

/// "just now", "42s ago", "2m ago", "1h 5m ago", "3d ago", or "never".
///
/// `now_ms` is the client's clock; a last-seen time slightly ahead of it
/// (clock skew between machines) reads "just now" rather than nonsense.
pub fn ago(now_ms: u64, last_seen_ms: Option<u64>) -> String {
    let Some(seen) = last_seen_ms else {
        return "never".to_owned();
    };
    let secs = now_ms.saturating_sub(seen) / 1000;
    match secs {
        0 => "just now".to_owned(),
        1..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => match (secs / 3600, secs % 3600 / 60) {
            (h, 0) => format!("{h}h ago"),
            (h, m) => format!("{h}h {m}m ago"),
        },
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// A duration in milliseconds as people write it: `10m`, `1h 30m`, `90s`.
pub fn window(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// An aligned table of members: id, kind, status, last seen, and metadata
/// when any member has some. No trailing spaces, so it pastes cleanly.
pub fn members_table(members: &[Member], now_ms: u64) -> String {
    let with_meta = members.iter().any(|m| m.meta.is_some());
    let mut rows: Vec<Vec<String>> = Vec::with_capacity(members.len() + 1);
    let mut header = vec!["ID", "KIND", "STATUS", "LAST SEEN"];
    if with_meta {
        header.push("META");
    }
    rows.push(header.into_iter().map(str::to_owned).collect());
    for m in members {
        let mut row = vec![
            m.id.clone(),
            m.kind.clone(),
            status_cell(&m.status),
            ago(now_ms, m.last_seen_ms),
        ];
        if with_meta {
            row.push(m.meta.as_ref().map(|v| v.to_string()).unwrap_or_default());
        }
        rows.push(row);
    }
    align(&rows)
}

/// An aligned table of users' last seen anywhere: id, status, last seen
/// and the space it was in (empty when never seen).
pub fn users_table(users: &[SeenAnywhere], now_ms: u64) -> String {
    let mut rows = vec![
        ["ID", "STATUS", "LAST SEEN", "SPACE"]
            .map(str::to_owned)
            .to_vec(),
    ];
    rows.extend(users.iter().map(|u| {
        vec![
            u.id.clone(),
            status_cell(&u.status),
            ago(now_ms, u.last_seen_ms),
            u.space.clone().unwrap_or_default(),
        ]
    }));
    align(&rows)
}

/// The `erase` line: what was removed, or that there was nothing.
pub fn erasure_line(user: &str, e: &ErasureReport) -> String {
    if *e == ErasureReport::default() {
        return format!("{user}: nothing to erase (never seen, or erased already)\n");
    }
    let own = if e.friend_set {
        "deleted its friend set"
    } else {
        "had no friend set"
    };
    format!(
        "{user} erased: left {}, forgot {}, {own}, removed from {}\n",
        counted(e.presence, "space", "spaces"),
        counted(e.remembered, "last-seen time", "last-seen times"),
        counted(e.listed_by, "friend set", "friend sets"),
    )
}

/// Pads every column but the last to its widest cell (counted in chars,
/// since ids are UTF-8 and the dots are multi-byte).
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                let pad = widths[c] - cell.chars().count();
                let _ = write!(line, "{cell}{:pad$}  ", "");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The `online` listing: a table, or a line saying nobody is there, and a
/// hint with the cursor when there is a next page.
pub fn online_listing(space: &str, answer: &Members, now_ms: u64) -> String {
    let mut out = String::new();
    let within = answer
        .window_ms
        .map(|w| format!(" within {}", window(w)))
        .unwrap_or_default();
    if answer.members.is_empty() {
        let _ = writeln!(out, "nobody seen in {space}{within}");
    } else {
        out.push_str(&members_table(&answer.members, now_ms));
    }
    if let Some(cursor) = &answer.next_cursor {
        let _ = writeln!(
            out,
            "more: repeat the command with --cursor {cursor} for the next page"
        );
    }
    out
}

/// The `count` line.
pub fn count_line(space: &str, c: &CountAnswer) -> String {
    format!(
        "{space}: {}, {}, {} in all, seen within {}\n",
        counted(c.users, "user", "users"),
        counted(c.guests, "guest", "guests"),
        c.total,
        window(c.window_ms)
    )
}

/// The `seen` line.
pub fn heartbeat_line(space: &str, a: &HeartbeatReport) -> String {
    let mut line = format!("{space}: {} seen, {} joined", a.accepted, a.joined);
    if a.stale > 0 {
        let _ = write!(line, ", {} stale (older than stored, ignored)", a.stale);
    }
    line.push('\n');
    line
}

/// `n` followed by the right noun.
pub fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The client's clock, in milliseconds since the UNIX epoch.
pub fn now_ms() -> u64 {
    SystemClock.now_ms()
}

/// Writes to stdout; a closed pipe (`herenow online lobby | head -1`) is not
/// an error worth reporting.
pub fn emit(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}

/// Prints the server's answer: with `--json` as is, on one line of its
/// own; else what `text` makes of it.
pub fn print<T: DeserializeOwned>(
    json: bool,
    body: &str,
    text: impl FnOnce(T) -> String,
) -> Result<()> {
    if json {
        return emit(&format!("{}\n", body.trim_end()));
    }
    emit(&text(parse(body)?))
}

/// The server's JSON answer as `T`.
pub fn parse<T: DeserializeOwned>(body: &str) -> Result<T> {
    serde_json::from_str(body).context("the server's answer is not what this client understands")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, status: &str, last_seen_ms: Option<u64>) -> Member {
        Member {
            id: id.to_owned(),
            kind: "user".to_owned(),
            status: status.to_owned(),
            last_seen_ms,
            meta: None,
        }
    }

    #[test]
    fn ago_reads_like_people_talk() {
        let now = 1_700_000_000_000;
        assert_eq!(ago(now, None), "never");
        assert_eq!(ago(now, Some(now)), "just now");
        assert_eq!(ago(now, Some(now + 5_000)), "just now");
        assert_eq!(ago(now, Some(now - 999)), "just now");
        assert_eq!(ago(now, Some(now - 42_000)), "42s ago");
        assert_eq!(ago(now, Some(now - 120_500)), "2m ago");
        assert_eq!(ago(now, Some(now - 3_600_000)), "1h ago");
        assert_eq!(ago(now, Some(now - 3_900_000)), "1h 5m ago");
        assert_eq!(ago(now, Some(now - 3 * 86_400_000)), "3d ago");
    }

    #[test]
    fn status_has_a_dot() {
        assert_eq!(status_cell("online"), "● online");
        assert_eq!(status_cell("away"), "◐ away");
        assert_eq!(status_cell("offline"), "○ offline");
        assert_eq!(status_cell("dancing"), "? dancing");
    }

    #[test]
    fn table_is_aligned_without_trailing_spaces() {
        let now = 1_700_000_000_000;
        let mut g = member("g-7f3a", "away", Some(now - 125_000));
        g.kind = "guest".to_owned();
        let rows = [
            member("alice", "online", Some(now - 3_000)),
            g,
            member("émile", "offline", None),
        ];
        let table = members_table(&rows, now);
        let expected = "\
ID      KIND   STATUS     LAST SEEN
alice   user   ● online   3s ago
g-7f3a  guest  ◐ away     2m ago
émile   user   ○ offline  never
";
        assert_eq!(table, expected);
    }

    #[test]
    fn table_shows_meta_only_when_some_member_has_it() {
        let now = 1_700_000_000_000;
        let mut a = member("a", "online", Some(now));
        a.meta = Some(serde_json::json!({"name": "Alice"}));
        let table = members_table(&[a, member("bb", "offline", None)], now);
        let expected = "\
ID  KIND  STATUS     LAST SEEN  META
a   user  ● online   just now   {\"name\":\"Alice\"}
bb  user  ○ offline  never
";
        assert_eq!(table, expected);
    }

    #[test]
    fn listing_hints_at_the_next_page() {
        let now = 1_700_000_000_000;
        let page = Members {
            members: vec![member("alice", "online", Some(now))],
            next_cursor: Some("r18bcfe5681c.2a.7".to_owned()),
            window_ms: Some(600_000),
        };
        let out = online_listing("lobby", &page, now);
        assert!(out.starts_with("ID "));
        assert!(out.ends_with(
            "more: repeat the command with --cursor r18bcfe5681c.2a.7 for the next page\n"
        ));

        let empty = Members {
            members: vec![],
            next_cursor: None,
            window_ms: Some(600_000),
        };
        assert_eq!(
            online_listing("lobby", &empty, now),
            "nobody seen in lobby within 10m\n"
        );
    }

    #[test]
    fn summary_lines() {
        let c = CountAnswer {
            users: 1,
            guests: 3,
            total: 4,
            window_ms: 90_000,
        };
        assert_eq!(
            count_line("lobby", &c),
            "lobby: 1 user, 3 guests, 4 in all, seen within 1m 30s\n"
        );
        let mut a = HeartbeatReport {
            accepted: 2,
            joined: 1,
            stale: 0,
        };
        assert_eq!(heartbeat_line("lobby", &a), "lobby: 2 seen, 1 joined\n");
        a += HeartbeatReport {
            accepted: 1,
            joined: 0,
            stale: 1,
        };
        assert_eq!(
            heartbeat_line("lobby", &a),
            "lobby: 3 seen, 1 joined, 1 stale (older than stored, ignored)\n"
        );
    }

    #[test]
    fn users_table_names_the_space() {
        let now = 1_700_000_000_000;
        let users = [
            SeenAnywhere {
                id: "ann".to_owned(),
                status: "offline".to_owned(),
                last_seen_ms: Some(now - 2 * 86_400_000),
                space: Some("lobby".to_owned()),
            },
            SeenAnywhere {
                id: "nobody".to_owned(),
                status: "offline".to_owned(),
                last_seen_ms: None,
                space: None,
            },
        ];
        let expected = "\
ID      STATUS     LAST SEEN  SPACE
ann     ○ offline  2d ago     lobby
nobody  ○ offline  never
";
        assert_eq!(users_table(&users, now), expected);
    }

    #[test]
    fn erasure_lines() {
        let mut e = ErasureReport {
            presence: 1,
            remembered: 2,
            friend_set: true,
            listed_by: 1,
        };
        assert_eq!(
            erasure_line("ann", &e),
            "ann erased: left 1 space, forgot 2 last-seen times, deleted its friend set, \
             removed from 1 friend set\n"
        );
        e.friend_set = false;
        assert!(erasure_line("ann", &e).contains("had no friend set"));
        let none = ErasureReport {
            presence: 0,
            remembered: 0,
            friend_set: false,
            listed_by: 0,
        };
        assert_eq!(
            erasure_line("ann", &none),
            "ann: nothing to erase (never seen, or erased already)\n"
        );
    }

    #[test]
    fn answers_ignore_unknown_fields() {
        let m: Members = serde_json::from_str(
            r#"{"members":[{"id":"a","kind":"guest","status":"away","last_seen_ms":5,"extra":1}],
                "next_cursor":null,"window_ms":600000,"new_field":true}"#,
        )
        .unwrap();
        assert_eq!(m.members[0].kind, "guest");
        assert_eq!(m.next_cursor, None);
    }
}
