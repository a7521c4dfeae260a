//! `GET /v1/spaces/{space}/history`: the online count over time.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::extract::{ApiQuery, SpacePath, parse_duration};
use crate::history::{INTERVAL, SAMPLES};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput};
use crate::state::AppState;

/// The longest range: everything a ring holds.
const MAX_RANGE: Duration = Duration::from_secs(INTERVAL.as_secs() * SAMPLES as u64);

/// The query of `GET history`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// How far back, as a humantime duration: default `1h`, at most `24h`.
    pub range: Option<String>,
}

/// One sample of the online count.
#[derive(Debug, Serialize, ToSchema)]
pub struct SampleDto {
    /// When, ms since the UNIX epoch.
    pub at_ms: u64,
    /// Users online within the space's window.
    pub users: u32,
    /// Guests online within the space's window.
    pub guests: u32,
}

/// A space's count history, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryAnswer {
    /// Time between samples.
    pub interval_ms: u64,
    /// The samples, oldest first.
    pub samples: Vec<SampleDto>,
}

/// The space's online count, sampled every 10 s, over `range`.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/history",
    operation_id = "history",
    tag = "spaces",
    params(SpacePath, HistoryQuery),
    responses(
        (status = 200, description = "The samples", body = HistoryAnswer),
        BadInput,
    ),
)]
pub async fn history(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> Result<Json<HistoryAnswer>, ApiError> {
    let range = match q.range.as_deref() {
        None => Duration::from_secs(3600),
        Some(r) => parse_duration("range", r)?,
    };
    if range.is_zero() || range > MAX_RANGE {
        return Err(ApiError::bad_request(
            "bad-range",
            format!(
                "range of {} is out of range; it must be between 1ms and 24h",
                humantime::format_duration(range)
            ),
        ));
    }
    state.metrics().query(Query::History);
    let since = state
        .store()
        .now_ms()
        .saturating_sub(range.as_millis() as u64);
    let samples = state
        .history()
        .since(&space, since)
        .into_iter()
        .map(|s| SampleDto {
            at_ms: s.at_ms,
            users: s.users,
            guests: s.guests,
        })
        .collect();
    Ok(Json(HistoryAnswer {
        interval_ms: INTERVAL.as_millis() as u64,
        samples,
    }))
}
