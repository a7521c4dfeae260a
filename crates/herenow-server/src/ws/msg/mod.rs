//! What each client message does, one file per message (docs/PROTOCOL.md).
//! The message's fields are parsed in [`crate::ws::wire`] (unknown
//! fields refused); here its `apply` checks them, acts on the session and
//! answers. An `Err` becomes an `error` reply (or, for a bad token, a
//! close).

mod hello;
mod invisible;
mod join;
mod leave;
mod ping;
mod subscribe;
mod unsubscribe;
mod update;

use herenow_core::Metadata;

use crate::ws::wire::WsError;

/// Checks metadata as it came in a message: a JSON object of at most
/// 1 KiB (`null` and absence mean none).
fn metadata(value: Option<&serde_json::Value>) -> Result<Option<Metadata>, WsError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => Ok(Some(Metadata::from_json(&v.to_string())?)),
    }
}
