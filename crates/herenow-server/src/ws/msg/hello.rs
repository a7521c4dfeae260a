//! `hello`: presents the token (unless the upgrade URL had one).

use crate::protocol::ws::{Hello, Ref, WsError};
use crate::ws::session::Session;

impl Hello<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.hello(&self.token, r)
    }
}
