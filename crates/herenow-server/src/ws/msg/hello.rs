//! `hello`: presents the token (unless the upgrade URL had one).

use std::borrow::Cow;

use serde::Deserialize;

use crate::ws::session::Session;
use crate::ws::{Ref, WsError};

/// `{"type": "hello", "token": "eyJ…"}` → `welcome`. A bad token closes
/// the socket with `4001`, an expired one with `4002`; a second `hello`
/// is an `already-hello` error.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello<'a> {
    /// The JWT from `POST /v1/tokens`.
    #[serde(borrow)]
    pub token: Cow<'a, str>,
}

impl Hello<'_> {
    pub(crate) async fn apply(self, s: &mut Session, r: Option<Ref>) -> Result<(), WsError> {
        s.hello(&self.token, r)
    }
}
