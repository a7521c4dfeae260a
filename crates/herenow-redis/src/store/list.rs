//! Listing a space: most recent first here, by id in `by_id.rs`.
//!
//! Most recent first: every shard answers its own first `limit + 1`
//! members per kind after the cursor (at once), and the merge keeps the
//! first `limit` in the one total order (score, kind, id) descending, so
//! pages stay exact however many shards.

use redis::Value;

use herenow_core::cursor::RecentCursor;
use herenow_core::{
    InvalidInput, KindFilter, ListQuery, MemberId, MemberKey, MemberKind, MemberStatus, Metadata,
    Millis, Order, Page, Result, SpaceConfig, SpaceName,
};

use super::RedisStore;
use crate::reply::{array, bad_reply, int, meta_of, opt_string, thresholds_of, window_error};
use crate::scripts;

impl RedisStore {
    /// [`PresenceStore::list`](herenow_core::PresenceStore::list), in
    /// either order (see the module documentation).
    pub(super) async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        query.check_limit()?;
        if query.window_ms == Some(0) {
            return Err(self.zero_window(space).await);
        }
        let now = self.ctx.clock.now_ms();
        let limit = query.limit;
        let window = query.window_ms.unwrap_or(0);
        // The sorted sets keep times: most recent first unless asked
        // otherwise.
        match query.order_or(Order::Recent) {
            Order::Recent => {
                let cursor = match &query.cursor {
                    None => None,
                    Some(c) => Some(RecentCursor::decode(c).ok_or(InvalidInput::BadCursor)?),
                };
                let (cs, ck, cm) = match &cursor {
                    None => (String::new(), "", ""),
                    Some(c) => (
                        c.at_ms.to_string(),
                        c.member.kind.letter(),
                        c.member.id.as_str(),
                    ),
                };
                let shards = self.ctx.keys.all(space);
                let calls = shards.iter().map(|k| {
                    let (cs, ck, cm) = (&cs, ck, cm);
                    async move {
                        let v: Value = self
                            .ctx
                            .invoke(
                                "list",
                                scripts::LIST_RECENT
                                    .key(&k.zu)
                                    .key(&k.zg)
                                    .key(&k.meta)
                                    .key(&k.config)
                                    .arg(&self.ctx.defaults_args()[..])
                                    .arg(now)
                                    .arg(window)
                                    .arg(limit)
                                    .arg(kinds_letter(query.kinds))
                                    .arg(cs)
                                    .arg(ck)
                                    .arg(cm),
                            )
                            .await?;
                        array(v)
                    }
                });
                let replies = futures::future::try_join_all(calls).await?;
                let mut config = None;
                let mut items = Vec::new();
                for v in replies {
                    if let Some(e) = window_error(&v, query.window_ms)? {
                        return Err(e);
                    }
                    config.get_or_insert(thresholds_of(&v[1..], self.ctx.defaults())?);
                    let mut it = v.into_iter().skip(5);
                    items.extend(items_of(it.next(), MemberKind::User, 0)?);
                    items.extend(items_of(it.next(), MemberKind::Guest, 0)?);
                }
                let config = config.ok_or_else(|| bad_reply("no shard answered"))?;
                // (score, kind, id) descending, users above guests: the
                // order the script's per-kind cursors assume.
                items.sort_by(|a, b| {
                    b.0.cmp(&a.0)
                        .then_with(|| a.1.cmp(&b.1))
                        .then_with(|| b.2.as_bytes().cmp(a.2.as_bytes()))
                });
                let more = items.len() > limit;
                items.truncate(limit);
                let next_cursor = if more {
                    items
                        .last()
                        .and_then(|(s, kind, id, _)| recent_cursor(*s, *kind, id))
                } else {
                    None
                };
                let members = items
                    .into_iter()
                    .map(|i| to_status(i, &config, now))
                    .collect::<Result<_>>()?;
                Ok(Page {
                    members,
                    next_cursor,
                    order: Order::Recent,
                })
            }
            Order::Id => self.list_by_id(space, query, now).await,
        }
    }
}

fn kinds_letter(kinds: KindFilter) -> &'static str {
    match kinds {
        KindFilter::Users => "u",
        KindFilter::Guests => "g",
        KindFilter::All => "a",
    }
}

/// The cursor after the last member of a most-recent-first page. Ties of
/// score are broken by kind and id, so the tiebreak is 0.
fn recent_cursor(score: Millis, kind: MemberKind, id: &str) -> Option<String> {
    let id = MemberId::new(id).ok()?;
    Some(
        RecentCursor {
            at_ms: score,
            tiebreak: 0,
            member: MemberKey { kind, id },
        }
        .encode(),
    )
}

/// One listed member before merging: (score, kind, id, meta).
type Item = (Millis, MemberKind, String, Option<Metadata>);

fn items_of(v: Option<Value>, kind: MemberKind, skip: usize) -> Result<Vec<Item>> {
    let flat = array(v.unwrap_or(Value::Nil))?;
    let mut it = flat.into_iter().skip(skip);
    let mut out = Vec::new();
    while let Some(id) = it.next() {
        let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a member id"))?;
        let score = int(it.next().as_ref())? as Millis;
        let meta = meta_of(it.next())?;
        out.push((score, kind, id, meta));
    }
    Ok(out)
}

fn to_status(item: Item, config: &SpaceConfig, now: Millis) -> Result<MemberStatus> {
    let (score, kind, id, meta) = item;
    Ok(MemberStatus {
        member: MemberKey {
            kind,
            id: MemberId::new(&id).map_err(|_| bad_reply("a stored member id"))?,
        },
        status: config.status(Some(score), now),
        last_seen_ms: Some(score),
        meta,
    })
}
