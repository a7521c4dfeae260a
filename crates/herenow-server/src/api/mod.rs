//! The JSON API under `/v1`, one file per resource (see `docs/API.md`).
//!
//! Handlers parse with the problem-rejecting extractors of `extract`,
//! call the store, and answer with DTOs. Core types carry no OpenAPI
//! schemas, so the wire shapes are defined in the server: in each
//! endpoint's file, in `dto` when several endpoints share them, or in
//! [`crate::protocol::dto`] when the event stream, the WebSocket and the
//! tokens share them too (both re-exported here). Most DTOs hold core
//! values (ids, metadata), so building an answer moves them, never copies.

pub mod config;
mod dto;
pub mod friends;
pub mod heartbeat;
pub mod history;
pub mod leave;
pub mod members;
pub mod online;
pub mod spaces;
pub mod tokens;
pub mod users;
pub mod webhooks;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::routing::{get, post};

use crate::auth::Access;
use crate::config::Scope;
use crate::state::AppState;

pub use crate::protocol::dto::{Kind, MemberDto, Presence};
pub use dto::{MemberRef, MembersAnswer, MembersBody};

/// The `/v1` routes, except the event stream.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/spaces", get(spaces::list))
        .route("/v1/spaces/{space}/heartbeat", post(heartbeat::one))
        .route("/v1/spaces/{space}/heartbeats", post(heartbeat::batch))
        .route("/v1/spaces/{space}/leave", post(leave::leave))
        .route("/v1/spaces/{space}/members/{id}", get(members::one))
        .route("/v1/spaces/{space}/status", post(members::status))
        .route("/v1/spaces/{space}/online", get(online::online))
        .route("/v1/spaces/{space}/count", get(online::count))
        .route("/v1/spaces/{space}/online-among", post(online::among))
        .route(
            "/v1/spaces/{space}/friends/{user}/online",
            get(friends::online),
        )
        .route(
            "/v1/spaces/{space}/config",
            get(config::get_config).put(config::put_config),
        )
        .route("/v1/spaces/{space}/history", get(history::history))
        .route(
            "/v1/friends/{user}",
            get(friends::get_friends).put(friends::set),
        )
        .route("/v1/friends/{user}/add", post(friends::add))
        .route("/v1/friends/{user}/remove", post(friends::remove))
        .route("/v1/users/{id}", get(users::one).delete(users::erase))
        // The static segment wins over `{id}`: the user called `status`
        // is served here too.
        .route(
            "/v1/users/status",
            post(users::status)
                .get(users::one_named_status)
                .delete(users::erase_named_status),
        )
        .route("/v1/tokens", post(tokens::mint))
        .route("/v1/webhooks", get(webhooks::list))
}

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
