//! Listing by id (`order=id`) without an index by id.
//!
//! The default layout keeps one sorted set per kind, ordered by last seen
//! (a second copy of every id would double a space's memory). A by-id page
//! reads the ids of every member in the window in
//! bounded slices ([`scripts::ID_SLICE`], [`SLICE`] ids per call, so Redis
//! is never blocked for long), keeps those after the cursor, sorts them
//! here, and reads last seen and metadata of the page's members only (the
//! status script). That is exact, and costs O(members in the window) per
//! page instead of O(page): so a window holding more than
//! [`RedisOptions::id_order_max`](crate::RedisOptions::id_order_max)
//! members is refused with [`Error::Unsupported`], naming the limit and
//! pointing to `order=recent`.
//!
//! Slices are not one atomic read. They run in ascending (score, member)
//! order, each resuming strictly after the last member the previous one
//! returned, and a heartbeat only ever raises a member's score: so every
//! member present for the whole listing is read at least once (a member
//! that moves up while the scan runs may be read twice; it is listed once).
//! Members that join or leave during the listing may or may not appear, as
//! with any concurrent write; one that left between the scan and the final
//! read is left out of the page.

use redis::Value;

use herenow_core::{
    Error, InvalidInput, ListQuery, MemberId, MemberKey, MemberKind, Millis, Order, Page, Result,
    SpaceName,
};

use herenow_core::cursor::IdCursor;

use super::RedisStore;
use crate::reply::{array, bad_reply, int, opt_string, window_error};
use crate::scripts;

/// Most ids one slice reads: one short script call.
pub(crate) const SLICE: usize = 2_048;

/// One sorted set to scan: a kind of one shard.
struct Part {
    z: String,
    config: String,
    kind: MemberKind,
}

/// What one slice answered.
struct Slice {
    /// Members in the window (first slice only).
    in_window: Option<u64>,
    /// Ids in ascending (score, id) order.
    ids: Vec<String>,
    /// The score of the last id.
    last: Option<Millis>,
}

enum SliceError {
    /// The window is out of range: the space's retention.
    Window(Millis),
    Store(Error),
}

impl From<Error> for SliceError {
    fn from(e: Error) -> Self {
        SliceError::Store(e)
    }
}

impl RedisStore {
    /// [`PresenceStore::list`](herenow_core::PresenceStore::list) with
    /// `order=id`: see the module documentation.
    pub(super) async fn list_by_id(
        &self,
        space: &SpaceName,
        query: &ListQuery,
        now: Millis,
    ) -> Result<Page> {
        let cursor = match &query.cursor {
            None => None,
            Some(c) => {
                let c = IdCursor::decode(c).ok_or(InvalidInput::BadCursor)?;
                Some((c.member.id.as_str().to_owned(), c.member.kind))
            }
        };
        let window = query.window_ms.unwrap_or(0);
        // Every kind asked for, in every shard.
        let parts: Vec<Part> = self
            .ctx
            .keys
            .all(space)
            .into_iter()
            .flat_map(|k| {
                MemberKind::ALL
                    .into_iter()
                    .filter(|kind| query.kinds.admits(*kind))
                    .map(move |kind| Part {
                        z: match kind {
                            MemberKind::User => k.zu.clone(),
                            MemberKind::Guest => k.zg.clone(),
                        },
                        config: k.config.clone(),
                        kind,
                    })
            })
            .collect();
        // The first slice of every part at once: it also says how many
        // members the window holds, which decides whether to go on.
        let firsts = futures::future::try_join_all(
            parts.iter().map(|p| self.id_slice(p, now, window, None)),
        )
        .await;
        let firsts = match firsts {
            Ok(f) => f,
            Err(SliceError::Window(max_ms)) => {
                return Err(InvalidInput::WindowOutOfRange {
                    window_ms: window,
                    max_ms,
                }
                .into());
            }
            Err(SliceError::Store(e)) => return Err(e),
        };
        let in_window: u64 = firsts.iter().filter_map(|f| f.in_window).sum();
        let max = self.ctx.opts.id_order_max as u64;
        if in_window > max {
            return Err(too_many(in_window, max));
        }
        // The rest of every part, each scan resuming after its last member.
        // A scan that reads far more than the window held (members joining
        // faster than it reads) stops rather than chase them forever.
        let budget = (2 * max).max(2 * SLICE as u64);
        let after = cursor.as_ref().map(|(id, kind)| (id.as_bytes(), *kind));
        let scans = parts.iter().zip(firsts).map(|(part, first)| async move {
            let mut out: Vec<(String, MemberKind)> = Vec::new();
            let mut read = first.ids.len() as u64;
            let mut slice = first;
            loop {
                let full = slice.ids.len() == SLICE;
                let resume = match (slice.last, slice.ids.last()) {
                    (Some(s), Some(id)) => Some((s, id.clone())),
                    _ => None,
                };
                out.extend(
                    slice
                        .ids
                        .into_iter()
                        .filter(|id| after.is_none_or(|a| (id.as_bytes(), part.kind) > a))
                        .map(|id| (id, part.kind)),
                );
                let (true, Some(resume)) = (full, resume) else {
                    return Ok(out);
                };
                if read > budget {
                    return Err(too_many(read, max));
                }
                slice = match self.id_slice(part, now, window, Some(resume)).await {
                    Ok(s) => s,
                    Err(SliceError::Store(e)) => return Err(e),
                    Err(SliceError::Window(_)) => {
                        return Err(bad_reply("a window that changed while listing"));
                    }
                };
                read += slice.ids.len() as u64;
            }
        });
        let mut found: Vec<(String, MemberKind)> =
            futures::future::try_join_all(scans).await?.concat();
        // (id, kind) ascending, users before guests for one id; a member
        // read twice (it moved up during the scan) is listed once.
        found.sort_unstable_by(|a, b| (a.0.as_bytes(), a.1).cmp(&(b.0.as_bytes(), b.1)));
        found.dedup();
        let more = found.len() > query.limit;
        found.truncate(query.limit);
        let next_cursor = if more {
            found.last().and_then(|(id, kind)| {
                let member = MemberKey {
                    kind: *kind,
                    id: MemberId::new(id).ok()?,
                };
                Some(IdCursor { member }.encode())
            })
        } else {
            None
        };
        let members: Vec<MemberKey> = found
            .into_iter()
            .map(|(id, kind)| {
                Ok(MemberKey {
                    kind,
                    id: MemberId::new(&id).map_err(|_| bad_reply("a stored member id"))?,
                })
            })
            .collect::<Result<_>>()?;
        let members = if members.is_empty() {
            Vec::new()
        } else {
            let (_, statuses) = self.status_with_config(space, &members, now).await?;
            // A member that left since the scan is not listed.
            statuses
                .into_iter()
                .filter(|m| m.last_seen_ms.is_some())
                .collect()
        };
        Ok(Page {
            members,
            next_cursor,
            order: Order::Id,
        })
    }

    /// One slice of `part` after `after` (score, id), or from the window's
    /// edge.
    async fn id_slice(
        &self,
        part: &Part,
        now: Millis,
        window: Millis,
        after: Option<(Millis, String)>,
    ) -> std::result::Result<Slice, SliceError> {
        let (cs, cm) = match after {
            None => (String::new(), String::new()),
            Some((s, m)) => (s.to_string(), m),
        };
        let v: Value = self
            .ctx
            .invoke(
                "list",
                scripts::ID_SLICE
                    .key(&part.z)
                    .key(&part.config)
                    .arg(&self.ctx.defaults_args()[..])
                    .arg(now)
                    .arg(window)
                    .arg(cs)
                    .arg(cm)
                    .arg(SLICE),
            )
            .await?;
        let v = array(v)?;
        if let Some(Error::Invalid(InvalidInput::WindowOutOfRange { max_ms, .. })) =
            window_error(&v, None)?
        {
            return Err(SliceError::Window(max_ms));
        }
        let in_window = int(v.get(1))?;
        let mut it = v.into_iter().skip(2);
        let last = opt_string(it.next())?
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<Millis>().map_err(|_| bad_reply("a score")))
            .transpose()?;
        let ids = array(it.next().unwrap_or(Value::Nil))?
            .into_iter()
            .map(|id| opt_string(Some(id))?.ok_or_else(|| bad_reply("a member id")))
            .collect::<Result<_>>()?;
        Ok(Slice {
            in_window: u64::try_from(in_window).ok(),
            ids,
            last,
        })
    }
}

/// `order=id` over a window too large to sort per page.
fn too_many(in_window: u64, max: u64) -> Error {
    Error::Unsupported {
        what: "order=id over a window this large (list with order=recent, or a narrower window)",
        store: format!(
            "the redis store: it sorts a window by id per page, for at most {max} members \
             (RedisOptions::id_order_max), and this one holds {in_window}"
        ),
    }
}
