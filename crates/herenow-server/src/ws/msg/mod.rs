//! One file per client message (docs/PROTOCOL.md). Each defines the
//! message's fields (unknown fields refused) and `apply`, which checks
//! them, acts on the session and answers; an `Err` becomes an `error`
//! reply (or, for a bad token, a close).

pub mod hello;
pub mod invisible;
pub mod join;
pub mod leave;
pub mod ping;
pub mod subscribe;
pub mod unsubscribe;
pub mod update;

use herenow_core::Metadata;

use super::WsError;

/// Checks metadata as it came in a message: a JSON object of at most
/// 1 KiB (`null` and absence mean none).
fn metadata(value: Option<&serde_json::Value>) -> Result<Option<Metadata>, WsError> {
    match value {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => Ok(Some(Metadata::from_json(&v.to_string())?)),
    }
}
