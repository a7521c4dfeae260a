//! The request and answer shapes several endpoints share: a member named
//! in a body, a list of them, and a list of presences. Kept apart from
//! the router so the endpoints depend on them, not on `api` itself.

use std::borrow::Cow;

use herenow_core::{InvalidInput, MemberId, MemberKey, MemberStatus};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::problem::ApiError;
use crate::protocol::dto::{MemberDto, MemberKindDto};

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
    pub kind: MemberKindDto,
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
    #[serde(borrow, deserialize_with = "crate::protocol::bounded::objects")]
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
