//! The JSON API under `/v1`, one file per resource (see `docs/API.md`).
//!
//! Handlers parse with the problem-rejecting extractors of `extract`,
//! call the store, and answer with DTOs (why DTOs: [`crate::protocol::dto`]):
//! defined in each endpoint's file, in `dto` when several endpoints share
//! them, or in `protocol::dto` when the event stream, the WebSocket and
//! the tokens share them too.

mod dto;
pub mod friends;
pub mod heartbeat;
pub mod history;
pub mod leave;
pub mod members;
pub mod online;
pub mod space_config;
pub mod spaces;
pub mod tokens;
pub mod users;
pub mod webhooks;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::Access;
use crate::config::Scope;
use crate::problem::ApiError;

impl<S: Send + Sync> FromRequestParts<S> for Access {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // The auth middleware always leaves one; were it missing, assume
        // the least a key could do.
        Ok(parts
            .extensions
            .get::<Access>()
            .copied()
            .unwrap_or(Access::Key(Scope::Read)))
    }
}

/// The one answer of a store call asked about one id; `missing` (a bug
/// of the store's, a `500`) when there is none.
fn only<T>(mut answers: Vec<T>, missing: &str) -> Result<T, ApiError> {
    answers
        .pop()
        .ok_or_else(|| herenow_core::Error::Internal(missing.into()).into())
}
