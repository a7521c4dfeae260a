//! The client commands: one function per command, each one or a few
//! requests (docs/API.md) and one print.

use std::time::Duration;

use anyhow::{Context as _, Result};
use clap::ValueEnum as _;
use herenow_core::limits::MAX_BATCH;
use herenow_core::store::{ErasureReport, HeartbeatReport};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cli::{
    ClientCommand, CountArgs, EraseArgs, FriendsArgs, FriendsCommand, LeaveArgs, OnlineArgs,
    SeenArgs, StatusArgs, TokenArgs, UserArgs, UsersArgs, UsersCommand, WatchArg,
};
use crate::client::Api;
use crate::output::{self, Members, SeenAnywhere, Users, now_ms, parse, print};

/// Runs a client command to completion.
pub fn main(command: ClientCommand) -> Result<()> {
    // One request at a time: a single-threaded runtime is all it needs.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        match command {
            ClientCommand::Seen(a) => seen(a).await,
            ClientCommand::Leave(a) => leave(a).await,
            ClientCommand::Online(a) => online(a).await,
            ClientCommand::Count(a) => count(a).await,
            ClientCommand::Status(a) => status(a).await,
            ClientCommand::Friends(a) => friends(a).await,
            ClientCommand::User(a) => user(a).await,
            ClientCommand::Users(a) => users(a).await,
            ClientCommand::Erase(a) => erase(a).await,
            ClientCommand::Token(a) => token(a).await,
            ClientCommand::Webhooks(a) => crate::webhooks::run(a).await,
        }
    })
}

fn kind(guest: bool) -> &'static str {
    if guest { "guest" } else { "user" }
}

/// A duration as the query string wants it: whole milliseconds with a unit.
fn duration_query(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// One heartbeat, as the server's `HeartbeatBody` reads it.
#[derive(Serialize)]
struct HeartbeatBody<'a> {
    id: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<&'a serde_json::Value>,
}

#[derive(Serialize)]
struct MemberRef<'a> {
    id: &'a str,
    kind: &'static str,
}

/// A batch of heartbeats, as the server's `HeartbeatsBody` reads it.
#[derive(Serialize)]
struct HeartbeatsBody<'a> {
    heartbeats: Vec<HeartbeatBody<'a>>,
}

#[derive(Serialize)]
struct MemberList<'a> {
    members: Vec<MemberRef<'a>>,
}

#[derive(Serialize)]
struct FriendList<'a> {
    friends: &'a [String],
}

fn member_refs(ids: &[String], guest: bool) -> MemberList<'_> {
    MemberList {
        members: ids
            .iter()
            .map(|id| MemberRef {
                id,
                kind: kind(guest),
            })
            .collect(),
    }
}

/// Request bodies are kept under this, below the API's 4 MiB body limit
/// with room to spare: 10,000 ids with metadata would not fit in one.
const BODY_BUDGET: usize = 3 * 1024 * 1024;

/// Bytes one member adds to a request body besides its JSON-encoded id:
/// `{"id":…,"kind":"guest"},` and the metadata.
const MEMBER_OVERHEAD: usize = 32;

/// The length of `id` as a JSON string, quotes and escapes included.
fn json_len(id: &str) -> usize {
    serde_json::to_string(id).map_or(id.len() * 6 + 2, |s| s.len())
}

/// Splits `items` into batches of at most [`MAX_BATCH`] whose bodies,
/// by `size`, stay within [`BODY_BUDGET`]. One item larger than the
/// budget goes alone, for the server to refuse with a clear problem.
fn batches<T>(items: &[T], size: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, item) in items.iter().enumerate() {
        let s = size(item);
        if i > start && (i - start == MAX_BATCH || bytes + s > BODY_BUDGET) {
            out.push(&items[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += s;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

/// Batches of member ids, each with `extra` bytes (metadata) per member.
fn id_batches(ids: &[String], extra: usize) -> Vec<&[String]> {
    batches(ids, |id| json_len(id) + MEMBER_OVERHEAD + extra)
}

/// Appends the pairs that have a value to `url`'s query, in order. (Called
/// with none set, it still leaves a bare `?`.)
fn append_query<const N: usize>(url: &mut Url, pairs: [(&str, Option<String>); N]) {
    url.query_pairs_mut()
        .extend_pairs(pairs.into_iter().filter_map(|(k, v)| Some((k, v?))));
}

fn space_url(api: &Api, space: &str, rest: &[&str]) -> Url {
    let mut segments = vec!["v1", "spaces", space];
    segments.extend_from_slice(rest);
    api.url(&segments)
}

/// POSTs `body` of each batch to `url`, folding the answers with `add`;
/// the answer to print: the one as is, or the fold of several in the same
/// shape.
async fn post_batches<'a, T, A, B>(
    api: &Api,
    url: Url,
    batches: &[&'a [T]],
    body: impl Fn(&'a [T]) -> B,
    add: impl Fn(&mut A, A),
) -> Result<String>
where
    A: Default + Serialize + DeserializeOwned,
    B: Serialize,
{
    let mut total = A::default();
    let mut last_body = String::new();
    for batch in batches {
        last_body = api
            .send(Method::POST, url.clone(), Some(&body(batch)))
            .await?;
        add(&mut total, parse(&last_body)?);
    }
    if batches.len() > 1 {
        last_body = serde_json::to_string(&total)?;
    }
    Ok(last_body)
}

async fn seen(a: SeenArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let kind = kind(a.guest);
    let beat = |id| HeartbeatBody {
        id,
        kind,
        meta: a.meta.as_ref(),
    };
    let body = if let [id] = a.ids.as_slice() {
        let url = space_url(&api, &a.space, &["heartbeat"]);
        let body = api.send(Method::POST, url, Some(&beat(id))).await?;
        parse::<HeartbeatReport>(&body)?;
        body
    } else {
        // One request per 10,000 ids (the API's batch bound) or per 3 MiB of
        // body, answers summed.
        let url = space_url(&api, &a.space, &["heartbeats"]);
        let meta_len = a.meta.as_ref().map_or(0, |m| m.to_string().len() + 8);
        let chunks = id_batches(&a.ids, meta_len);
        let add = |total: &mut HeartbeatReport, one| *total += one;
        let batch = |chunk| HeartbeatsBody {
            heartbeats: <[String]>::iter(chunk).map(|id| beat(id)).collect(),
        };
        post_batches(&api, url, &chunks, batch, add).await?
    };
    print(a.client.json, &body, |answer| {
        output::heartbeat_line(&a.space, &answer)
    })
}

async fn leave(a: LeaveArgs) -> Result<()> {
    #[derive(Default, serde::Deserialize, Serialize)]
    struct Left {
        left: u64,
    }
    let api = Api::new(&a.client)?;
    let url = space_url(&api, &a.space, &["leave"]);
    let refs = |chunk| member_refs(chunk, a.guest);
    let add = |total: &mut Left, one: Left| total.left += one.left;
    let body = post_batches(&api, url, &id_batches(&a.ids, 0), refs, add).await?;
    print(a.client.json, &body, |Left { left }| {
        // Fewer than asked: some were not present (or named twice).
        let absent = (a.ids.len() as u64).saturating_sub(left);
        let mut line = format!(
            "{}: {} left",
            a.space,
            output::counted(left, "member", "members")
        );
        if absent > 0 {
            line.push_str(&format!(", {absent} not present"));
        }
        line + "\n"
    })
}

async fn online(a: OnlineArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let kind = if a.all {
        "all"
    } else if a.guests {
        "guests"
    } else {
        "users"
    };
    let order = a.order.and_then(|o| o.to_possible_value());
    let mut url = space_url(&api, &a.space, &["online"]);
    append_query(
        &mut url,
        [
            ("window", a.window.map(duration_query)),
            ("kind", Some(kind.to_owned())),
            ("order", order.map(|o| o.get_name().to_owned())),
            ("limit", a.limit.map(|l| l.to_string())),
            ("cursor", a.cursor),
        ],
    );
    let body = api.get(url).await?;
    print(a.client.json, &body, |page| {
        output::online_listing(&a.space, &page, now_ms())
    })
}

async fn count(a: CountArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let mut url = space_url(&api, &a.space, &["count"]);
    if let Some(w) = a.window {
        url.query_pairs_mut()
            .append_pair("window", &duration_query(w));
    }
    let body = api.get(url).await?;
    print(a.client.json, &body, |c| output::count_line(&a.space, &c))
}

async fn status(a: StatusArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let url = space_url(&api, &a.space, &["status"]);
    let refs = |chunk| member_refs(chunk, a.guest);
    let add = |all: &mut Members, one: Members| all.members.extend(one.members);
    let body = post_batches(&api, url, &id_batches(&a.ids, 0), refs, add).await?;
    print(a.client.json, &body, |all: Members| {
        output::members_table(&all.members, now_ms())
    })
}

async fn friends(a: FriendsArgs) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Size {
        friends: u64,
    }
    #[derive(serde::Deserialize)]
    struct Listing {
        friends: Vec<String>,
    }
    let api = Api::new(&a.client)?;
    let (user, method, action, ids) = match &a.command {
        FriendsCommand::Set { user, ids } => (user, Method::PUT, None, ids),
        FriendsCommand::Add { user, ids } => (user, Method::POST, Some("add"), ids),
        FriendsCommand::Remove { user, ids } => (user, Method::POST, Some("remove"), ids),
        FriendsCommand::List { user } => {
            let body = api.get(api.url(&["v1", "friends", user])).await?;
            return print(a.client.json, &body, |listing: Listing| {
                if listing.friends.is_empty() {
                    format!("{user} has no friends set\n")
                } else {
                    listing.friends.join("\n") + "\n"
                }
            });
        }
        FriendsCommand::Online {
            space,
            user,
            window,
            limit,
        } => {
            let mut url = space_url(&api, space, &["friends", user, "online"]);
            append_query(
                &mut url,
                [
                    ("window", window.map(duration_query)),
                    ("limit", limit.map(|l| l.to_string())),
                ],
            );
            let body = api.get(url).await?;
            return print(a.client.json, &body, |found: Members| {
                if found.members.is_empty() {
                    format!("none of {user}'s friends seen in {space}\n")
                } else {
                    output::members_table(&found.members, now_ms())
                }
            });
        }
    };
    let mut segments = vec!["v1", "friends", user];
    segments.extend(action);
    let url = api.url(&segments);
    let body = api
        .send(method, url, Some(&FriendList { friends: ids }))
        .await?;
    print(a.client.json, &body, |size: Size| {
        format!(
            "{user} has {}\n",
            output::counted(size.friends, "friend", "friends")
        )
    })
}

#[derive(Serialize)]
struct UserIds<'a> {
    ids: &'a [String],
}

async fn user(a: UserArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let body = api.get(api.url(&["v1", "users", &a.id])).await?;
    print(a.client.json, &body, |one: SeenAnywhere| {
        output::users_table(&[one], now_ms())
    })
}

async fn users(a: UsersArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let UsersCommand::Status { ids } = &a.command;
    let url = api.url(&["v1", "users", "status"]);
    // Batches as for `status`: 10,000 ids or 3 MiB of body each.
    let chunks = batches(ids.as_slice(), |id| json_len(id) + 1);
    let add = |all: &mut Users, one: Users| all.users.extend(one.users);
    let body = post_batches(&api, url, &chunks, |ids| UserIds { ids }, add).await?;
    print(a.client.json, &body, |all: Users| {
        output::users_table(&all.users, now_ms())
    })
}

async fn erase(a: EraseArgs) -> Result<()> {
    let api = Api::new(&a.client)?;
    let url = api.url(&["v1", "users", &a.id]);
    let body = api.send(Method::DELETE, url, None::<&()>).await?;
    print(a.client.json, &body, |report: ErasureReport| {
        output::erasure_line(&a.id, &report)
    })
}

#[derive(Serialize)]
struct TokenRequest<'a> {
    user: &'a str,
    kind: &'static str,
    spaces: &'a [String],
    ttl_s: u64,
    watch: WatchArg,
}

async fn token(a: TokenArgs) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Minted {
        token: String,
    }
    let api = Api::new(&a.client)?;
    let body = api
        .send(
            Method::POST,
            api.url(&["v1", "tokens"]),
            Some(&TokenRequest {
                user: &a.user,
                kind: kind(a.guest),
                spaces: &a.spaces,
                ttl_s: a.ttl.as_secs(),
                watch: a.watch,
            }),
        )
        .await?;
    // The token alone, so `$(herenow token …)` is the token.
    print(a.client.json, &body, |minted: Minted| {
        format!("{}\n", minted.token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_go_to_the_server_in_milliseconds() {
        assert_eq!(duration_query(Duration::from_secs(600)), "600000ms");
        assert_eq!(duration_query(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn batches_are_bounded_by_count_and_by_bytes() {
        let lens = |b: &[&[u32]]| b.iter().map(|c| c.len()).collect::<Vec<_>>();
        let items: Vec<u32> = (0..25_001).collect();
        assert_eq!(lens(&batches(&items, |_| 10)), [10_000, 10_000, 5_001]);
        assert!(batches(&items[..0], |_| 10).is_empty());
        // 1 KiB each: 3,072 fit in the budget.
        assert_eq!(
            lens(&batches(&items[..7_000], |_| 1024)),
            [3_072, 3_072, 856]
        );
        // Larger than the budget alone: sent alone, for the server to refuse.
        assert_eq!(lens(&batches(&items[..3], |_| BODY_BUDGET + 1)), [1, 1, 1]);
    }

    #[test]
    fn batch_estimates_cover_the_real_body() {
        // The estimate must not undercount, or a batch could pass 4 MiB.
        let meta = serde_json::json!({"name": "x".repeat(900)});
        let meta_len = meta.to_string().len() + 8;
        let ids: Vec<String> = (0..5_000).map(|i| format!("\"quoted\\{i}\"")).collect();
        for chunk in id_batches(&ids, meta_len) {
            let body = HeartbeatsBody {
                heartbeats: chunk
                    .iter()
                    .map(|id| HeartbeatBody {
                        id,
                        kind: "guest",
                        meta: Some(&meta),
                    })
                    .collect(),
            };
            assert!(serde_json::to_vec(&body).unwrap().len() <= BODY_BUDGET + 64);
        }
        assert!(id_batches(&ids, meta_len).len() > 1);
    }

    #[test]
    fn request_bodies_match_the_api() {
        let meta = serde_json::json!({"name": "Alice"});
        let beat = HeartbeatBody {
            id: "alice",
            kind: "user",
            meta: Some(&meta),
        };
        assert_eq!(
            serde_json::to_string(&beat).unwrap(),
            r#"{"id":"alice","kind":"user","meta":{"name":"Alice"}}"#
        );
        let ids = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(
            serde_json::to_string(&member_refs(&ids, true)).unwrap(),
            r#"{"members":[{"id":"a","kind":"guest"},{"id":"b","kind":"guest"}]}"#
        );
        assert_eq!(
            serde_json::to_string(&FriendList { friends: &ids }).unwrap(),
            r#"{"friends":["a","b"]}"#
        );
        assert_eq!(
            serde_json::to_string(&UserIds { ids: &ids }).unwrap(),
            r#"{"ids":["a","b"]}"#
        );
        assert_eq!(
            serde_json::to_string(&TokenRequest {
                user: "ann",
                kind: "guest",
                spaces: &ids,
                ttl_s: 60,
                watch: WatchArg::Any,
            })
            .unwrap(),
            r#"{"user":"ann","kind":"guest","spaces":["a","b"],"ttl_s":60,"watch":"any"}"#
        );
    }
}
