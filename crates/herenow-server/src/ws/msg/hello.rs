//! `hello`: presents the token (unless the upgrade URL had one).

use crate::protocol::ws::{Hello, Ref, WsError};
use crate::ws::session::Session;

impl Hello<'_> {
    /// Verifies the token and welcomes the client; see `Session::hello`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.hello(&self.token, r)
    }
}
