//! `POST /v1/spaces/{space}/heartbeat` and `.../heartbeats`: the hot path.
//!
//! Kept lean: ids borrow from the request body and are checked straight
//! into inline core ids, metadata is checked once, and the single form
//! passes a one-element slice to the store without a `Vec`.

use std::borrow::Cow;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use herenow_core::{Heartbeat, HeartbeatReport, MemberId, MemberKey, Metadata, SpaceName};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::auth::{Access, forbidden};
use crate::extract::{JsonBody, SpacePath};
use crate::problem::{ApiError, BadInput, Problem};
use crate::protocol::dto::MemberKindDto;
use crate::state::AppState;

/// One heartbeat: "this member was active".
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody<'a> {
    /// 1–256 bytes of UTF-8 without control characters.
    #[serde(borrow)]
    #[schema(value_type = String)]
    pub id: Cow<'a, str>,
    /// `user` (default) or `guest`.
    #[serde(default)]
    pub kind: MemberKindDto,
    /// A JSON object of at most 1 KiB; absent keeps what the member had.
    #[serde(borrow, default)]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<&'a RawValue>,
    /// When, in ms since the UNIX epoch; absent means now. Needs a write
    /// key; at most 60 s in the future.
    #[serde(default, deserialize_with = "crate::protocol::whole_numbers::opt_u64")]
    pub at_ms: Option<u64>,
}

impl HeartbeatBody<'_> {
    fn check(&self, access: Access) -> Result<Heartbeat, ApiError> {
        if self.at_ms.is_some() && !access.can_write() {
            return Err(forbidden("an explicit at_ms needs a write key"));
        }
        Ok(Heartbeat {
            member: MemberKey {
                kind: self.kind.into(),
                id: MemberId::new(&self.id)?,
            },
            at_ms: self.at_ms,
            meta: self
                .meta
                .map(|m| Metadata::from_json(m.get()))
                .transpose()?,
        })
    }
}

/// A batch of heartbeats.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatsBody<'a> {
    /// 1 to 10,000 heartbeats.
    #[serde(borrow, deserialize_with = "crate::protocol::bounded::objects")]
    pub heartbeats: Vec<HeartbeatBody<'a>>,
}

/// What a heartbeat call did.
#[derive(Debug, Serialize, ToSchema)]
pub struct HeartbeatAnswer {
    /// Heartbeats that moved a member's last-seen time (those sent minus
    /// the `stale` ones).
    pub accepted: u64,
    /// Of those, members that became present.
    pub joined: u64,
    /// Heartbeats ignored: older than what the member had, or already past
    /// the retention.
    pub stale: u64,
}

/// Written by hand rather than through `Json`: every heartbeat call
/// answers with it, and three numbers need no serializer (serde's
/// writer did a copy per token into a growing buffer). The bytes are
/// serde's, field for field (the test below holds them equal).
impl IntoResponse for HeartbeatAnswer {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(80);
        let mut numbers = itoa::Buffer::new();
        body.extend_from_slice(b"{\"accepted\":");
        body.extend_from_slice(numbers.format(self.accepted).as_bytes());
        body.extend_from_slice(b",\"joined\":");
        body.extend_from_slice(numbers.format(self.joined).as_bytes());
        body.extend_from_slice(b",\"stale\":");
        body.extend_from_slice(numbers.format(self.stale).as_bytes());
        body.push(b'}');
        // Straight into a response: `Vec::into_response` would go through
        // `Cow`, and set a content type only to have it replaced.
        let mut response = Response::new(Body::from(body));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

impl From<HeartbeatReport> for HeartbeatAnswer {
    fn from(r: HeartbeatReport) -> Self {
        Self {
            accepted: r.accepted,
            joined: r.joined,
            stale: r.stale,
        }
    }
}

/// Records one heartbeat.
#[utoipa::path(
    post,
    path = "/v1/spaces/{space}/heartbeat",
    operation_id = "heartbeat",
    tag = "heartbeats",
    params(SpacePath),
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "Recorded", body = HeartbeatAnswer),
        BadInput,
        (status = 403, description = "at_ms without a write key", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn one(
    State(state): State<AppState>,
    access: Access,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<HeartbeatAnswer, ApiError> {
    let beat = body.parse::<HeartbeatBody<'_>>()?.check(access)?;
    record(&state, &space, std::slice::from_ref(&beat)).await
}

/// Records a batch of heartbeats; the answer sums them.
#[utoipa::path(
    post,
    path = "/v1/spaces/{space}/heartbeats",
    operation_id = "heartbeats",
    tag = "heartbeats",
    params(SpacePath),
    request_body = HeartbeatsBody,
    responses(
        (status = 200, description = "Recorded", body = HeartbeatAnswer),
        BadInput,
        (status = 413, description = "Body over 4 MiB", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn batch(
    State(state): State<AppState>,
    access: Access,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<HeartbeatAnswer, ApiError> {
    let parsed: HeartbeatsBody<'_> = body.parse()?;
    herenow_core::store::check_batch(parsed.heartbeats.len())?;
    let beats = parsed
        .heartbeats
        .iter()
        .map(|b| b.check(access))
        .collect::<Result<Vec<_>, _>>()?;
    record(&state, &space, &beats).await
}

/// Counts `beats`, then records them in `space`.
async fn record(
    state: &AppState,
    space: &SpaceName,
    beats: &[Heartbeat],
) -> Result<HeartbeatAnswer, ApiError> {
    state.metrics().heartbeats(beats.len() as u64);
    Ok(state.store().heartbeat(space, beats).await?.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_serdes_json() {
        for (accepted, joined, stale) in [
            (0, 0, 0),
            (1, 1, 0),
            (10_000, 9_999, 3),
            (u64::MAX, 7, u64::MAX),
        ] {
            let answer = HeartbeatAnswer {
                accepted,
                joined,
                stale,
            };
            let expected = serde_json::to_vec(&answer).unwrap();
            let response = answer.into_response();
            assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
            let body =
                futures::executor::block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
                    .unwrap();
            assert_eq!(body, expected);
        }
    }
}
