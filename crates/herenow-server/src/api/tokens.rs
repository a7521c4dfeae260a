//! `POST /v1/tokens`: mint a WebSocket token (docs/PROTOCOL.md).
//!
//! A backend with a write key asks for a token naming one member and the
//! spaces it may join and watch, and hands it to the browser; the browser
//! presents it to `/v1/ws`. With no keys configured (loopback only) anyone
//! on the machine may mint, as anyone may write.

use std::borrow::Cow;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use herenow_core::{MemberId, MemberKey};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::extract::JsonBody;
use crate::problem::{ApiError, Problem};
use crate::protocol::dto::{MemberKindDto, WatchGrant};
use crate::state::AppState;
use crate::token::{self, Spaces, SpacesError};

/// What to put in a token.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest<'a> {
    /// The member id the socket will be: 1–256 bytes of UTF-8 without
    /// control characters.
    #[serde(borrow)]
    #[schema(value_type = String)]
    pub user: Cow<'a, str>,
    /// `user` (default) or `guest`.
    #[serde(default)]
    pub kind: MemberKindDto,
    /// 1 to 32 space names the socket may join and subscribe to, or
    /// `["*"]` for every space. (Read up to 10,000, then refused as a
    /// batch too large; 33 to 10,000 are refused by the check after.)
    #[serde(deserialize_with = "crate::protocol::bounded::batch")]
    #[schema(value_type = Vec<String>)]
    pub spaces: Vec<Cow<'a, str>>,
    /// Lifetime in seconds, 1 to 86,400 (default 3,600).
    #[serde(default, deserialize_with = "crate::protocol::whole_numbers::opt_u64")]
    pub ttl_s: Option<u64>,
    /// Whom the socket may watch: `friends` (default: its user's friends
    /// only), `any` user, or `none`.
    #[serde(default)]
    pub watch: WatchGrant,
}

/// A minted token.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenAnswer {
    /// The JWT, for `GET /v1/ws?token=…` or the `hello` message.
    pub token: String,
    /// When it stops being accepted, in ms since the UNIX epoch.
    pub expires_at_ms: u64,
}

/// Mints a WebSocket token for a member and some spaces.
#[utoipa::path(
    post,
    path = "/v1/tokens",
    operation_id = "mint_token",
    tag = "tokens",
    request_body = TokenRequest,
    responses(
        (status = 201, description = "Minted", body = TokenAnswer),
        (status = 400, description = "Bad member id (`bad-member-id`), spaces (`bad-spaces`, `bad-space-name`) or lifetime (`bad-ttl`)", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "A read key: minting needs a write key", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn mint(
    State(state): State<AppState>,
    body: JsonBody,
) -> Result<(StatusCode, Json<TokenAnswer>), ApiError> {
    let req: TokenRequest<'_> = body.parse()?;
    let member = MemberKey {
        kind: req.kind.into(),
        id: MemberId::new(&req.user)?,
    };
    let spaces = Spaces::parse(&req.spaces).map_err(|e| match e {
        SpacesError::Name(invalid) => ApiError::from(invalid),
        other => ApiError::bad_request("bad-spaces", other.to_string()),
    })?;
    let ttl_s = req.ttl_s.unwrap_or(token::DEFAULT_TTL_S);
    if !(1..=token::MAX_TTL_S).contains(&ttl_s) {
        return Err(ApiError::bad_request(
            "bad-ttl",
            format!(
                "ttl_s must be between 1 and {} seconds; got {ttl_s}",
                token::MAX_TTL_S
            ),
        ));
    }
    let issued_at_s = token::now_s();
    let token = state
        .tokens()
        .mint_watching(&member, &spaces, req.watch, issued_at_s, ttl_s)
        .map_err(|e| ApiError::from(herenow_core::Error::Internal(e.to_string())))?;
    Ok((
        StatusCode::CREATED,
        Json(TokenAnswer {
            token,
            expires_at_ms: (issued_at_s + ttl_s) * 1000,
        }),
    ))
}
