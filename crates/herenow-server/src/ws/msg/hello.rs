//! `hello`: presents the token (unless the upgrade URL had one).

use crate::ws::session::Session;
use crate::ws::wire::{Hello, Ref, WsError};

impl Hello<'_> {
    /// Verifies the token and welcomes the client; see `Session::hello`.
    pub(in crate::ws) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.hello(&self.token, r)
    }
}
