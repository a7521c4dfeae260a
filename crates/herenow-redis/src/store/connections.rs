//! Live connections on Redis: [`RedisStore`]'s attach, detach and listing.
//! The rules are the core's ([`herenow_core::conn`]); the scripts and the
//! keys are in [`crate::conn_scripts`].
//!
//! Attach and detach are not buffered while Redis is unavailable: they
//! answer [`Error::Unavailable`] at once (the server tells the client, which
//! retries), and a connection whose detach was lost expires after its TTL.
//! Buffering them would mean replaying a socket's state that may be long
//! gone by the time Redis answers.
//!
//! In a space split over shards, a member's connections live in the
//! member's shard, and a claim key in the shard the connection id hashes
//! to keeps ids unique per space (see [`crate::key_names`]): an attach claims
//! the id first (renewing the claim on every ping), a detach gives it up,
//! and a connection that just expires leaves its claim to expire in Redis
//! [`CLAIM_SLACK_MS`] after the connection's TTL.

use redis::Value;

use herenow_core::conn::sort_connections;
use herenow_core::store::check_batch;
use herenow_core::{
    Attach, AttachReport, ConnId, Connection, DetachReport, Error, InvalidInput, MemberKey,
    Metadata, Millis, Result, SpaceName, limits,
};

use super::RedisStore;
use crate::conn_scripts;
use crate::key_names::SpaceKeys;
use crate::outbox::{self, Captured};
use crate::reply::{array, bad_reply, int, opt_string};

/// How long a connection id's claim outlives the connection's TTL: time
/// for the sweep to close the connection (and for clocks to disagree)
/// before another member may take the id.
pub const CLAIM_SLACK_MS: u64 = 10_000;

impl RedisStore {
    /// While writes are held in the buffer (Redis failed and the buffer is
    /// not written back yet), connection writes are refused rather than
    /// buffered or slipped past the buffered heartbeats.
    pub(super) fn refuse_while_held(&self) -> Result<()> {
        if self.ctx.health.buffer.holding() {
            return Err(Error::Unavailable {
                reason: "redis is unavailable; live connections are not buffered, retry later"
                    .into(),
                source: None,
            });
        }
        Ok(())
    }

    /// [`LiveConnections::attach`](herenow_core::LiveConnections::attach): one
    /// script call (plus, at most once a minute per space, the registry
    /// mark that lets the sweep find the space). The flag says whether the
    /// connection was lingering before (see `instances.rs`).
    pub(super) async fn attach_conn(
        &self,
        space: &SpaceName,
        a: &Attach,
    ) -> Result<(AttachReport, bool)> {
        a.check()?;
        self.refuse_while_held()?;
        let now = self.ctx.clock.now_ms();
        self.writer.register(space, now).await?;
        let shards = self.ctx.keys.shards(space);
        if shards > 1 && !self.claim(space, &a.member, &a.conn, a.ttl_ms).await? {
            return Err(InvalidInput::ConnIdTaken.into());
        }
        let k = self.ctx.keys.of_member(space, &a.member);
        let mut inv = conn_scripts::ATTACH.prepare_invoke();
        k.add_to(&mut inv);
        inv.arg(now)
            .arg(&self.ctx.defaults_args()[..])
            .arg(self.ctx.publish_arg(space).as_ref())
            .arg(&k.channel)
            .arg(a.member.kind.letter())
            .arg(a.member.id.as_str())
            .arg(a.conn.as_str())
            .arg(a.meta.as_ref().map_or("", Metadata::as_json))
            .arg(if a.invisible { "1" } else { "0" })
            .arg(now.saturating_add(a.ttl_ms))
            .arg(limits::MAX_CONNS_PER_MEMBER);
        let v: Value = self.ctx.invoke("attach", &inv).await?;
        let v = array(v)?;
        match int(v.first())? {
            0 => {}
            -1 => return Err(InvalidInput::ConnIdTaken.into()),
            -2 => return Err(InvalidInput::TooManyConnections.into()),
            _ => return Err(bad_reply("an attach status")),
        }
        outbox::after(&self.ctx, space, &k, Captured::of(v.get(5))).await;
        if int(v.get(4))? != 0 {
            // A user stored anew: into its index of spaces (see
            // `Writer::index_users`).
            let id = [a.member.id.as_str().to_owned()];
            self.writer.index_users(space, &k, &id, now).await?;
        }
        self.conn_replicated(space, &k, &a.conn).await?;
        let report = AttachReport {
            opened: int(v.get(1))? != 0,
            joined: int(v.get(2))? != 0,
            left: int(v.get(3))? != 0,
            resumed: int(v.get(6))? != 0,
        };
        Ok((report, int(v.get(7))? != 0))
    }

    /// [`LiveConnections::detach`](herenow_core::LiveConnections::detach).
    pub(super) async fn detach_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        self.end_conn(&conn_scripts::DETACH, space, member, conn, None)
            .await
    }

    /// [`LiveConnections::linger`](herenow_core::LiveConnections::linger):
    /// one script call. A sharded space's claim on the id stays until it
    /// expires, as an expired connection's does.
    ///
    /// `ended_at`: when the connection ended, if before now (a dead
    /// server's last beat): its grace and its member's last seen count from
    /// then.
    pub(super) async fn linger_conn(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
        ended_at: Option<Millis>,
    ) -> Result<DetachReport> {
        let grace = self.ctx.defaults().grace_ms;
        self.end_conn(
            &conn_scripts::LINGER,
            space,
            member,
            conn,
            Some((grace, ended_at)),
        )
        .await
    }

    /// Ends `member`'s connection `conn` with `script`: [`conn_scripts::DETACH`]
    /// (`linger` `None`) or [`conn_scripts::LINGER`] (`linger`: the default
    /// grace, for spaces without their own, and when it ended), whose
    /// replies have one shape.
    async fn end_conn(
        &self,
        script: &redis::Script,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
        linger: Option<(Millis, Option<Millis>)>,
    ) -> Result<DetachReport> {
        self.refuse_while_held()?;
        let now = self.ctx.clock.now_ms();
        let k = self.ctx.keys.of_member(space, member);
        let mut inv = script.prepare_invoke();
        k.add_to(&mut inv);
        inv.arg(now)
            .arg(&self.ctx.defaults_args()[..])
            .arg(self.ctx.publish_arg(space).as_ref())
            .arg(&k.channel)
            .arg(member.kind.letter())
            .arg(member.id.as_str())
            .arg(conn.as_str());
        if let Some((grace, ended_at)) = linger {
            inv.arg(grace);
            if let Some(at) = ended_at {
                inv.arg(at);
            }
        }
        let what = if linger.is_some() { "linger" } else { "detach" };
        let call = self.ctx.invoke::<Value>(what, &inv);
        let v = if linger.is_none() && self.ctx.keys.shards(space) > 1 {
            // The claim goes with the connection (a claim that is not this
            // member's is left alone).
            let (v, released) = futures::join!(call, self.release(space, member, conn));
            released?;
            v?
        } else {
            call.await?
        };
        let v = array(v)?;
        outbox::after(&self.ctx, space, &k, Captured::of(v.get(2))).await;
        self.conn_replicated(space, &k, conn).await?;
        Ok(DetachReport {
            found: int(v.first())? != 0,
            left: int(v.get(1))? != 0,
        })
    }

    /// [`LiveConnections::connections`](herenow_core::LiveConnections::connections).
    pub(super) async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        check_batch(members.len())?;
        let groups = self
            .ctx
            .keys
            .by_shard(space, members.len(), |i| &members[i]);
        let calls = groups.iter().map(|(shard, idx)| {
            let k = self.ctx.keys.shard(space, *shard);
            let mut inv = conn_scripts::CONNECTIONS.prepare_invoke();
            inv.key(&k.conns).key(&k.cinfo).key(&k.mconn);
            for &i in idx {
                let m = &members[i];
                inv.arg(format!("{}:{}", m.kind.letter(), m.id.as_str()));
            }
            async move {
                let v: Value = self.ctx.invoke("connections", &inv).await?;
                let parts = array(v)?;
                if parts.len() != idx.len() {
                    return Err(bad_reply("one list of connections per member"));
                }
                parts
                    .into_iter()
                    .map(connections_of)
                    .collect::<Result<Vec<_>>>()
            }
        });
        let replies = futures::future::try_join_all(calls).await?;
        let mut out = vec![Vec::new(); members.len()];
        for ((_, idx), lists) in groups.iter().zip(replies) {
            for (&i, list) in idx.iter().zip(lists) {
                out[i] = list;
            }
        }
        Ok(out)
    }

    /// Claims (or renews) `conn` for `member`; false if another member
    /// holds it.
    async fn claim(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
        ttl_ms: u64,
    ) -> Result<bool> {
        let key = self.ctx.keys.claim(space, conn);
        let owner = format!("{}:{}", member.kind.letter(), member.id.as_str());
        let got: i64 = self
            .ctx
            .invoke(
                "attach",
                conn_scripts::CLAIM
                    .key(&key)
                    .arg(&owner)
                    .arg(ttl_ms.saturating_add(CLAIM_SLACK_MS)),
            )
            .await?;
        Ok(got == 1)
    }

    /// Returns once the replicas asked for have an attach or a detach of
    /// `conn`: its member's shard and, in a sharded space, its claim.
    async fn conn_replicated(&self, space: &SpaceName, k: &SpaceKeys, conn: &ConnId) -> Result<()> {
        if !self.ctx.waits_for_replicas() {
            return Ok(());
        }
        let claim = (self.ctx.keys.shards(space) > 1).then(|| self.ctx.keys.claim(space, conn));
        self.ctx
            .replicated(std::iter::once(k.zu.as_str()).chain(claim.as_deref()))
            .await
    }

    /// Gives up `member`'s claim on `conn`, if it holds it.
    async fn release(&self, space: &SpaceName, member: &MemberKey, conn: &ConnId) -> Result<()> {
        let key = self.ctx.keys.claim(space, conn);
        let owner = format!("{}:{}", member.kind.letter(), member.id.as_str());
        let _: i64 = self
            .ctx
            .invoke("detach", conn_scripts::RELEASE.key(&key).arg(&owner))
            .await?;
        Ok(())
    }
}

/// One member's part of the listing: flat `conn, expiry, flag, meta`
/// (flag `0` visible, `1` invisible, `2` lingering).
fn connections_of(part: Value) -> Result<Vec<Connection>> {
    let mut it = array(part)?.into_iter();
    let mut out = Vec::new();
    while let Some(id) = it.next() {
        let id = opt_string(Some(id))?.ok_or_else(|| bad_reply("a connection id"))?;
        let expires_ms = int(it.next().as_ref())? as Millis;
        let flag = opt_string(it.next())?;
        let invisible = flag.as_deref() == Some("1");
        let lingering = flag.as_deref() == Some("2");
        // Checked on the way in; a record that no longer parses (written by
        // something else) loses its metadata rather than failing the read.
        let meta = opt_string(it.next())?
            .filter(|m| !m.is_empty())
            .and_then(|m| Metadata::from_json(&m).ok());
        out.push(Connection {
            conn: ConnId::new(&id).map_err(|_| bad_reply("a stored connection id"))?,
            meta,
            invisible,
            expires_ms,
            lingering,
        });
    }
    sort_connections(&mut out);
    Ok(out)
}
