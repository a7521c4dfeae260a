//! [`PresenceStore`] for [`RedisStore`], and every capability it offers
//! (live connections, following users, the webhook outbox, spaces'
//! webhook endpoints, the user index, the relay): the traits' table of contents.
//! Each method hands over to the inherent method of the same name in the
//! file that does the job (`write.rs`, `read.rs`, `list.rs`,
//! `subscribe.rs`, `sweep.rs`, `friends.rs`, `seen_anywhere.rs`,
//! `connections.rs`, `follow.rs`, `relay.rs`, `outbox.rs`, `hooks.rs`),
//! so this file says what the store promises and those say how. Rust finds
//! an inherent method before a trait's, so `self.heartbeat(…)` below is
//! that hand-over, not a recursion: one operation, one name.

use async_trait::async_trait;

use herenow_core::{
    Attach, AttachReport, ConnId, Connection, Counts, DetachReport, ErasureReport, Following,
    Heartbeat, HeartbeatReport, ListQuery, LiveConnections, MemberId, MemberKey, MemberStatus,
    Millis, Page, PresenceStore, Relay, RelayFeed, Result, SeenAnywhere, SpaceConfig, SpaceName,
    SpaceSummary, SpaceWebhooks, Subscription, TickReport, UserFeed, UserIndex, WebhookOutbox,
};

use herenow_core::outbox::{OutboxEvent, OutboxOptions, OutboxStats, SpaceHook};

use super::RedisStore;

#[async_trait]
impl PresenceStore for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn now_ms(&self) -> Millis {
        self.ctx.clock.now_ms()
    }

    /// While Redis fails, heartbeats are accepted into the write buffer and
    /// written back when it answers (see the crate documentation).
    async fn heartbeat(&self, space: &SpaceName, beats: &[Heartbeat]) -> Result<HeartbeatReport> {
        self.heartbeat(space, beats).await
    }

    /// While writes are held, leaves are buffered too and answer 0: whether
    /// the members were present is not known until Redis answers.
    async fn leave(&self, space: &SpaceName, members: &[MemberKey]) -> Result<u64> {
        self.leave(space, members).await
    }

    async fn status(&self, space: &SpaceName, members: &[MemberKey]) -> Result<Vec<MemberStatus>> {
        self.status(space, members).await
    }

    /// One round trip: the status script also answers the space's policy,
    /// so the window is checked against it without a second call. An empty
    /// list (a user without friends) is answered without Redis.
    async fn online_among(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
        window_ms: Option<Millis>,
        limit: usize,
    ) -> Result<Vec<MemberStatus>> {
        self.online_among(space, members, window_ms, limit).await
    }

    /// Most recent first: merged over the shards, exact however many
    /// (see `list.rs`). By id: see `by_id.rs`.
    async fn list(&self, space: &SpaceName, query: &ListQuery) -> Result<Page> {
        self.list(space, query).await
    }

    async fn count(&self, space: &SpaceName, window_ms: Option<Millis>) -> Result<Counts> {
        self.count(space, window_ms).await
    }

    async fn config(&self, space: &SpaceName) -> Result<SpaceConfig> {
        self.config(space).await
    }

    /// Writes the policy to every shard (each script reads its own shard's
    /// copy). Not atomic across shards: a call that fails part-way leaves
    /// shards disagreeing until it is repeated.
    async fn set_config(&self, space: &SpaceName, config: SpaceConfig) -> Result<()> {
        self.set_config(space, config).await
    }

    async fn spaces(&self, after: Option<&SpaceName>, limit: usize) -> Result<Vec<SpaceSummary>> {
        self.spaces(after, limit).await
    }

    async fn set_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        self.set_friends(user, friends).await
    }

    async fn add_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        self.add_friends(user, friends).await
    }

    async fn remove_friends(&self, user: &MemberId, friends: &[MemberId]) -> Result<u64> {
        self.remove_friends(user, friends).await
    }

    async fn friends(&self, user: &MemberId) -> Result<Vec<MemberId>> {
        self.friends(user).await
    }

    /// Every shard's channel, then every shard's snapshot (see
    /// `subscribe.rs`): each shard's events are delivered after its own
    /// snapshot, in order.
    async fn subscribe(&self, space: &SpaceName) -> Result<Subscription> {
        self.subscribe(space).await
    }

    /// Sweeps every registered space whose sweep lease this store holds or
    /// can take; spaces another store holds are skipped (that store sweeps
    /// them).
    async fn tick(&self) -> Result<TickReport> {
        self.follow_outbox_switch().await?;
        self.measure_clock_skew().await?;
        self.sweep().await
    }

    fn live_connections(&self) -> Option<&dyn LiveConnections> {
        Some(self)
    }

    fn following(&self) -> Option<&dyn Following> {
        Some(self)
    }

    fn webhook_outbox(&self) -> Option<&dyn WebhookOutbox> {
        Some(self)
    }

    fn space_webhooks(&self) -> Option<&dyn SpaceWebhooks> {
        Some(self)
    }

    fn user_index(&self) -> Option<&dyn UserIndex> {
        Some(self)
    }

    fn relay(&self) -> Option<&dyn Relay> {
        Some(self)
    }
}

#[async_trait]
impl Relay for RedisStore {
    /// Messages relayed by any server on this Redis, this one included;
    /// lags after the link to Redis dropped, once subscribed again.
    async fn relay_feed(&self) -> Result<RelayFeed> {
        self.relay_feed().await
    }

    /// One `PUBLISH`: every server listening hears it, on a cluster too.
    async fn relay_send(&self, topic: &str, payload: &[u8]) -> Result<()> {
        self.relay_send(topic, payload).await
    }
}

#[async_trait]
impl LiveConnections for RedisStore {
    /// Not buffered while Redis is unavailable: answers
    /// [`Error::Unavailable`](herenow_core::Error::Unavailable) (see
    /// `connections.rs`).
    ///
    /// A connection new to this store is recorded in its set before it is
    /// attached, so a crash right after the attach cannot leave it out of
    /// what the reaper hands to the grace.
    async fn attach(&self, space: &SpaceName, attach: &Attach) -> Result<AttachReport> {
        let first = self
            .record_conn(space, &attach.member, &attach.conn)
            .await?;
        let attached = self.attach_conn(space, attach).await;
        let (report, revived) = match attached {
            Ok(done) => done,
            Err(e) => {
                if first {
                    // Nothing of it in the store: not ours to reap.
                    let _ = self.forget_conn(space, &attach.member, &attach.conn).await;
                }
                return Err(e);
            }
        };
        if revived && !first {
            // Found dead while only slow: the reaper took it from the set.
            self.own_conn(space, &attach.member, &attach.conn, true)
                .await?;
        }
        Ok(report)
    }

    /// Not buffered while Redis is unavailable, like
    /// [`attach`](Self::attach).
    async fn detach(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        let (report, disowned) = futures::join!(
            self.detach_conn(space, member, conn),
            self.forget_conn(space, member, conn)
        );
        disowned?;
        report
    }

    /// Not buffered either: a linger that is lost leaves the connection
    /// to expire after its TTL, then the member leaves without a grace.
    async fn linger(
        &self,
        space: &SpaceName,
        member: &MemberKey,
        conn: &ConnId,
    ) -> Result<DetachReport> {
        let (report, disowned) = futures::join!(
            self.linger_conn(space, member, conn, None),
            self.forget_conn(space, member, conn)
        );
        disowned?;
        report
    }

    async fn connections(
        &self,
        space: &SpaceName,
        members: &[MemberKey],
    ) -> Result<Vec<Vec<Connection>>> {
        self.connections(space, members).await
    }
}

#[async_trait]
impl Following for RedisStore {
    /// Changes of followed users made through any server on this Redis,
    /// on users' channels (see `follow.rs`). Lags after the link to Redis
    /// dropped, once the subscriptions are back. Its events carry no
    /// metadata (the space's events do).
    fn user_feed(&self) -> Result<UserFeed> {
        self.user_feed()
    }

    /// Counted: the first follow of a user subscribes to its channel.
    async fn follow(&self, users: &[MemberId]) -> Result<()> {
        self.follow(users).await
    }

    /// The last unfollow of a user unsubscribes from its channel.
    async fn unfollow(&self, users: &[MemberId]) -> Result<()> {
        self.unfollow(users).await
    }
}

#[async_trait]
impl WebhookOutbox for RedisStore {
    /// Capture by this store's scripts, and by every other store's on the
    /// same Redis while this one renews the switch (see `store/outbox_lease.rs`).
    async fn outbox_open(&self, options: OutboxOptions) -> Result<()> {
        self.outbox_open(options).await
    }

    /// Each space's events go to one consumer at a time, recorded in Redis
    /// by the store's clock; a dead consumer's are taken over once its
    /// last claim is `reclaim_idle_ms` old (see `outbox_scripts.rs`).
    async fn outbox_claim(
        &self,
        consumer: &str,
        max: usize,
        reclaim_idle_ms: Millis,
    ) -> Result<Vec<OutboxEvent>> {
        self.outbox_claim(consumer, max, reclaim_idle_ms).await
    }

    async fn outbox_ack(&self, ids: &[String]) -> Result<()> {
        self.outbox_ack(ids).await
    }

    /// Sums over the streams of the index (bounded: see `store/outbox.rs`).
    async fn outbox_stats(&self) -> Result<OutboxStats> {
        self.outbox_stats().await
    }

    /// In shard 0's stream, while this store captures (its view of the
    /// shared switch).
    async fn outbox_message(&self, space: &SpaceName, body: &str) -> Result<bool> {
        crate::outbox::message(&self.ctx, space, body).await
    }
}

#[async_trait]
impl SpaceWebhooks for RedisStore {
    async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>> {
        self.space_hooks(space).await
    }

    async fn set_space_hooks(&self, space: &SpaceName, hooks: &[SpaceHook]) -> Result<()> {
        self.set_space_hooks(space, hooks).await
    }

    async fn space_hooks_version(&self) -> Result<u64> {
        self.space_hooks_version().await
    }
}

#[async_trait]
impl UserIndex for RedisStore {
    /// From the user's index of spaces (see `seen_anywhere.rs`).
    async fn seen_anywhere(&self, users: &[MemberId]) -> Result<Vec<SeenAnywhere>> {
        self.seen_anywhere(users).await
    }

    /// Atomic per slot, not across them, and refused with
    /// [`Error::Unavailable`](herenow_core::Error::Unavailable) while writes
    /// wait in the outage buffer (see `seen_anywhere.rs`).
    async fn erase_user(&self, user: &MemberId) -> Result<ErasureReport> {
        self.erase_user(user).await
    }
}
