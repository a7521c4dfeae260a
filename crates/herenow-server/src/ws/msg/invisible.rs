//! `invisible`: hide this connection, or show it again.

use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{Ref, WsError};

/// `{"type": "invisible", "on": true}` → `ok`. Re-attaches every joined
/// space with the new visibility; spaces joined later follow it. An
/// invisible connection still subscribes and sees everyone.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Invisible {
    /// Hide (`true`) or show (`false`).
    pub on: bool,
}

impl Invisible {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        if s.invisible != self.on {
            s.invisible = self.on;
            let mut failed = None;
            let joined: Vec<_> = s
                .joined
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (space, meta) in joined {
                if let Err(e) = s.attach(&space, meta).await {
                    // Tried everywhere; the next ping retries the rest.
                    failed.get_or_insert(e);
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        s.ok(r);
        Ok(())
    }
}
