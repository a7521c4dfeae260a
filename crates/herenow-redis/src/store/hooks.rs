//! The webhook endpoints spaces name ([`herenow_core::outbox::SpaceHook`]):
//! one JSON string per space in the slot of its shard 0, a version
//! counter every server reads on each claim so it caches them and looks
//! again only after a change, and the set of spaces that may name some
//! (`P:{~outbox}:hooked`), which tells the switch whether any does.

use herenow_core::outbox::SpaceHook;
use herenow_core::{Result, SpaceName};

use super::RedisStore;
use crate::reply::bad_reply;

impl RedisStore {
    /// [`SpaceWebhooks::space_hooks`](herenow_core::SpaceWebhooks::space_hooks).
    pub(super) async fn space_hooks(&self, space: &SpaceName) -> Result<Vec<SpaceHook>> {
        let key = self.ctx.keys.space_hooks(space);
        let json: Option<String> = self
            .ctx
            .query("space_hooks", redis::cmd("GET").arg(&key))
            .await?;
        let Some(json) = json else {
            return Ok(Vec::new());
        };
        // Checked again on the way in: anyone with access to Redis could
        // have written the key.
        let hooks: Vec<SpaceHook> =
            serde_json::from_str(&json).map_err(|_| bad_reply("a space's webhook endpoints"))?;
        SpaceHook::check_all(&hooks).map_err(|_| bad_reply("a space's webhook endpoints"))?;
        Ok(hooks)
    }

    /// [`SpaceWebhooks::set_space_hooks`](herenow_core::SpaceWebhooks::set_space_hooks):
    /// opens the outbox first (with the default cap, unless a server opened
    /// it already with its own), lists the space among those naming
    /// endpoints, then writes the endpoints and lists it again, then
    /// counts the version up, so a server that sees the new version reads
    /// the new endpoints. Listing it again after the write keeps a
    /// concurrent check of the list (`store/outbox_lease.rs`) from leaving
    /// it off.
    pub(super) async fn set_space_hooks(
        &self,
        space: &SpaceName,
        hooks: &[SpaceHook],
    ) -> Result<()> {
        SpaceHook::check_all(hooks)?;
        let hooked = self.ctx.keys.hooked_spaces();
        if !hooks.is_empty() {
            self.outbox_open_if_closed().await?;
            self.list_hooked(&[space.as_str()]).await?;
        }
        let key = self.ctx.keys.space_hooks(space);
        let mut cmd = if hooks.is_empty() {
            redis::cmd("DEL")
        } else {
            redis::cmd("SET")
        };
        cmd.arg(&key);
        if !hooks.is_empty() {
            cmd.arg(serde_json::to_string(hooks).expect("endpoints serialize"));
        }
        self.ctx.query::<()>("set_space_hooks", &cmd).await?;
        if !hooks.is_empty() {
            self.list_hooked(&[space.as_str()]).await?;
        }
        let version = self.ctx.keys.hooks_version();
        self.ctx
            .query::<()>("set_space_hooks", redis::cmd("INCR").arg(&version))
            .await?;
        let mut written = vec![key.as_str(), version.as_str()];
        if !hooks.is_empty() {
            written.push(hooked.as_str());
        }
        self.ctx.replicated(written).await
    }

    /// Lists `spaces` (names; none is a no-op) among the spaces that may
    /// name endpoints.
    pub(super) async fn list_hooked<S: AsRef<str>>(&self, spaces: &[S]) -> Result<()> {
        if spaces.is_empty() {
            return Ok(());
        }
        let hooked = self.ctx.keys.hooked_spaces();
        let mut cmd = redis::cmd("SADD");
        cmd.arg(&hooked);
        for s in spaces {
            cmd.arg(s.as_ref());
        }
        self.ctx.query("set_space_hooks", &cmd).await
    }
}

impl RedisStore {
    /// [`SpaceWebhooks::space_hooks_version`](herenow_core::SpaceWebhooks::space_hooks_version).
    pub(super) async fn space_hooks_version(&self) -> Result<u64> {
        let key = self.ctx.keys.hooks_version();
        let v: Option<u64> = self
            .ctx
            .query("space_hooks_version", redis::cmd("GET").arg(&key))
            .await?;
        Ok(v.unwrap_or(0))
    }
}
