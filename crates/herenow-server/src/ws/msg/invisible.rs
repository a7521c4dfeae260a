//! `invisible`: hide this connection, or show it again.

use crate::protocol::ws::{Invisible, Ref, WsError};
use crate::ws::session::Session;

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
