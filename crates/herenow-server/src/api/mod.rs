//! The JSON API under `/v1`, one file per resource (see `docs/API.md`).
//!
//! Handlers parse with the problem-rejecting extractors of `extract`,
//! call the store, and answer with DTOs. Core types carry no OpenAPI
//! schemas, so the wire shapes are defined here (those only the API uses)
//! or in [`crate::protocol::dto`] (those the event stream, the WebSocket
//! and the tokens share, re-exported here); most DTOs hold core values
//! (ids, metadata) so building an answer moves them, never copies.

pub mod config;
pub mod friends;
pub mod heartbeat;
pub mod history;
pub mod leave;
pub mod members;
pub mod online;
pub mod spaces;
pub mod tokens;

use std::borrow::Cow;

use axum::Router;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::routing::{get, post};
use herenow_core::{InvalidInput, MemberId, MemberKey, MemberStatus};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Access;
use crate::config::Scope;
use crate::problem::ApiError;
use crate::state::AppState;

pub use crate::protocol::dto::{Kind, MemberDto, Presence};

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
        .route("/v1/tokens", post(tokens::mint))
}

/// A member named in a request body: `{"id": "alice", "kind": "user"}`.
/// The id borrows from the body unless it has JSON escapes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MemberRef<'a> {
    /// 1–256 bytes of UTF-8 without control characters.
    #[serde(borrow)]
    #[schema(value_type = String)]
    pub id: Cow<'a, str>,
    /// `user` (default) or `guest`.
    #[serde(default)]
    pub kind: Kind,
}

impl MemberRef<'_> {
    /// Checks the id.
    pub fn key(&self) -> Result<MemberKey, InvalidInput> {
        Ok(MemberKey {
            kind: self.kind.into(),
            id: MemberId::new(&self.id)?,
        })
    }
}

/// A list of members: the body of `leave`, `status` and the answer of
/// every member listing.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MembersBody<'a> {
    /// 1 to 10,000 members.
    #[serde(borrow)]
    pub members: Vec<MemberRef<'a>>,
}

impl MembersBody<'_> {
    /// Checks the batch size, then every id.
    pub fn keys(&self) -> Result<Vec<MemberKey>, ApiError> {
        herenow_core::store::check_batch(self.members.len())?;
        self.members
            .iter()
            .map(|m| m.key().map_err(ApiError::from))
            .collect()
    }
}

/// Members, in an order the endpoint documents.
#[derive(Debug, Serialize, ToSchema)]
pub struct MembersAnswer {
    /// Each member's presence, in the endpoint's order.
    pub members: Vec<MemberDto>,
}

impl MembersAnswer {
    /// Converts store answers.
    pub fn from_statuses(members: Vec<MemberStatus>) -> Self {
        Self {
            members: members.into_iter().map(MemberDto::from).collect(),
        }
    }
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
