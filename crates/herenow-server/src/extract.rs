//! Extractors whose rejections are problems, not axum's plain text.
//!
//! - [`JsonBody`]: a checked `application/json` body, parsed by the handler
//!   into a type that borrows from it (ids are not copied into `String`s on
//!   the hot path);
//! - [`ApiQuery`]: a query string, unknown parameters refused;
//! - [`SpacePath`], [`SpaceMemberPath`], [`UserPath`], [`IdPath`],
//!   [`SpaceUserPath`]: path segments, validated into core ids; each is
//!   also the `IntoParams` a handler's `params(...)` names them with.
//!
//! Ids arrive as plain strings and are checked with the core constructors,
//! so a bad id answers with the core's precise code (`bad-member-id`), not a
//! generic JSON error.

use std::time::Duration;

use axum::body::{Bytes, HttpBody as _};
use axum::extract::{FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use herenow_core::{InvalidInput, MemberId, MemberKind, Millis, SpaceName};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::{IntoParams, PartialSchema};

use crate::problem::ApiError;
use crate::protocol::objects_only::Object;

/// A request body that is declared JSON and fits the body limit; parse it
/// with [`JsonBody::parse`].
pub struct JsonBody(Bytes);

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence
            .rsplit_once('+')
            .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, Self::Rejection> {
        let json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(is_json);
        if !json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "not-json",
                "the request body must be JSON, sent with Content-Type: application/json",
            ));
        }
        // The body is bounded by `RequestBodyLimit` around the router
        // (`crate::layers::App`): read as it is, with no limit of axum's
        // on top. A body of one frame (nearly every request) is that
        // frame's bytes, uncopied; a longer one is copied frame by frame
        // into one buffer sized by its `Content-Length` (which the limit
        // has checked), rather than kept as frames and joined at the end
        // (a 4 MiB body then grew the peak memory by 16–20 MB, now 12 MB:
        // `scripts/bench-body-memory.sh`).
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .map_or(0, |n| n.min(crate::MAX_BODY_BYTES));
        let mut body = req.into_body();
        let first = match next_data(&mut body).await? {
            None => return Ok(Self(Bytes::new())),
            Some(first) if body.is_end_stream() => return Ok(Self(first)),
            Some(first) => first,
        };
        let mut all = Vec::with_capacity(declared.max(2 * first.len()));
        all.extend_from_slice(&first);
        drop(first);
        while let Some(data) = next_data(&mut body).await? {
            all.extend_from_slice(&data);
        }
        Ok(Self(Bytes::from(all)))
    }
}

/// The next data frame of a request body (trailers skipped), or `None` at
/// its end; a read past the length bound is a 413.
async fn next_data(body: &mut axum::body::Body) -> Result<Option<Bytes>, ApiError> {
    loop {
        match body.frame().await {
            None => return Ok(None),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data));
                }
            }
            Some(Err(e)) if is_too_large(&e) => {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body-too-large",
                    crate::BODY_TOO_LARGE,
                ));
            }
            Some(Err(e)) => {
                return Err(ApiError::bad_request(
                    "bad-body",
                    format!("the request body could not be read: {e}"),
                ));
            }
        }
    }
}

/// Whether reading a body failed on its length bound (a body streamed
/// without a `Content-Length`, past `RequestBodyLimit`'s bound, or past a
/// route's own, as the Pusher HTTP API's).
pub(crate) fn is_too_large(e: &axum::Error) -> bool {
    std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |c| {
        c.source()
    })
    .any(|c| c.is::<http_body_util::LengthLimitError>())
}

impl JsonBody {
    /// Parses the body; the result may borrow from it.
    ///
    /// The whole body is checked as UTF-8 once, then parsed as text:
    /// serde's byte parser checks every string on its own, one short check
    /// per id, where one pass over the whole body is a single fast scan.
    pub fn parse<'a, T: Deserialize<'a>>(&'a self) -> Result<T, ApiError> {
        let text = std::str::from_utf8(&self.0).map_err(|e| {
            ApiError::bad_request(
                "bad-json",
                format!(
                    "the body is not UTF-8: invalid bytes at offset {}",
                    e.valid_up_to()
                ),
            )
        })?;
        serde_json::from_str::<Object<T>>(text)
            .map(|body| body.0)
            .map_err(|e| json_error(e, &where_in::<Object<T>>(text.as_bytes())))
    }
}

/// Where in the body a parse of `T` fails, as `online_ms` or
/// `heartbeats[3].id` (empty at the top level): the body parsed again with
/// its path tracked, only once the fast parse has failed, so a good
/// request pays nothing for it.
pub(crate) fn where_in<'a, T: Deserialize<'a>>(body: &'a [u8]) -> String {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize::<_, T>(&mut de)
        .err()
        .map(|e| e.path().to_string())
        .filter(|path| path != ".")
        .unwrap_or_default()
}

/// Classifies a serde error: an unknown field gets its own code, because it
/// is the usual symptom of a typo or a client built for another version,
/// and a list refused for its length while it was read keeps the code the
/// batch check gives ([`crate::protocol::bounded`]). The detail starts
/// with the field's path when there is one (`online_ms: invalid value…`).
fn json_error(e: serde_json::Error, path: &str) -> ApiError {
    let detail = e.to_string();
    let at = |detail: &str| {
        if path.is_empty() {
            detail.to_owned()
        } else {
            format!("{path}: {detail}")
        }
    };
    if let Some(detail) = detail.strip_prefix(crate::protocol::bounded::TOO_LARGE) {
        return ApiError::bad_request("batch-too-large", at(detail));
    }
    let code = if e.is_data() && detail.starts_with("unknown field") {
        "unknown-field"
    } else {
        "bad-json"
    };
    ApiError::bad_request(code, at(&detail))
}

/// A query string parsed into `T` (which should deny unknown fields).
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Query(q) = Query::<T>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                let detail = e.body_text();
                let code = if detail.contains("unknown field") {
                    "unknown-parameter"
                } else {
                    "bad-query"
                };
                ApiError::bad_request(code, detail)
            })?;
        Ok(Self(q))
    }
}

/// Finds the named path parameters, in order, and hands them to `f`.
/// Axum has already percent-decoded them.
async fn path_param<S: Send + Sync, T, const N: usize>(
    parts: &mut Parts,
    state: &S,
    names: [&str; N],
    f: impl FnOnce([&str; N]) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let params = RawPathParams::from_request_parts(parts, state)
        .await
        .map_err(|e| ApiError::bad_request("bad-path", e.body_text()))?;
    let mut found = [""; N];
    for (value, name) in found.iter_mut().zip(names) {
        *value = params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("route has no {name} parameter"),
                )
            })?;
    }
    f(found)
}

/// Declares path extractors: each a tuple of core ids, one per segment
/// `{$segment}`, checked by its type's `new`, and the `IntoParams` that
/// documents the segments (see the module doc).
macro_rules! path_extractors {
    ($(
        $(#[$doc:meta])*
        $extractor:ident($($segment:ident: $id:ident = $description:literal),+);
    )+) => {$(
        $(#[$doc])*
        pub struct $extractor($(pub $id),+);

        impl<S: Send + Sync> FromRequestParts<S> for $extractor {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
                path_param(parts, state, [$(stringify!($segment)),+], |[$($segment),+]| {
                    Ok(Self($($id::new($segment)?),+))
                })
                .await
            }
        }

        impl IntoParams for $extractor {
            fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
                vec![$(segment(stringify!($segment), $description)),+]
            }
        }
    )+};
}

/// A path segment as the document states it: a required string.
fn segment(name: &str, description: &str) -> Parameter {
    ParameterBuilder::from(Parameter::new(name))
        .parameter_in(ParameterIn::Path)
        .description(Some(description))
        .schema(Some(String::schema()))
        .build()
}

path_extractors! {
    /// `{space}` from the path.
    SpacePath(space: SpaceName = "Space name");
    /// `{space}` and `{id}` from the path.
    SpaceMemberPath(space: SpaceName = "Space name", id: MemberId = "Member id");
    /// `{user}` from the path.
    UserPath(user: MemberId = "User id");
    /// `{id}` from the path, a user id (`/v1/users/{id}`).
    IdPath(id: MemberId = "User id");
    /// `{space}` and `{user}` from the path.
    SpaceUserPath(space: SpaceName = "Space name", user: MemberId = "User id");
}

/// Parses a humantime duration that carries a unit (`10m`, `90s`,
/// `1500ms`). A bare number is refused: `600` could mean seconds or
/// milliseconds, and guessing wrong is silent.
pub fn parse_duration(what: &str, s: &str) -> Result<Duration, ApiError> {
    let s = s.trim();
    if s.is_empty() || s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_request(
            "bad-duration",
            format!("{what} {s:?} needs a unit, such as 10m, 90s or 1500ms"),
        ));
    }
    humantime::parse_duration(s).map_err(|e| {
        ApiError::bad_request(
            "bad-duration",
            format!("{what} {s:?} is not a duration ({e}); use e.g. 10m, 90s or 1500ms"),
        )
    })
}

/// A query window in milliseconds, if one was given.
pub fn window_ms(window: Option<&str>) -> Result<Option<Millis>, ApiError> {
    window
        .map(|w| {
            let d = parse_duration("window", w)?;
            // Saturate: an absurd window is refused by the store's range
            // check, with the space's retention in the message.
            Ok(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        })
        .transpose()
}

/// A page size from a query string: default `default`, 1 to `max`.
pub fn page_limit(limit: Option<&str>, default: usize, max: usize) -> Result<usize, ApiError> {
    let Some(s) = limit else {
        return Ok(default);
    };
    let n: i64 = s.trim().parse().map_err(|_| {
        ApiError::bad_request(
            "bad-limit",
            format!("limit {s:?} is not an integer between 1 and {max}"),
        )
    })?;
    check_limit(n, max)
}

/// Checks a page size given as a number.
pub fn check_limit(n: i64, max: usize) -> Result<usize, ApiError> {
    if n < 1 || n as u64 > max as u64 {
        return Err(InvalidInput::LimitOutOfRange { got: n, max }.into());
    }
    Ok(n as usize)
}

/// Parses `user` / `guest`.
pub fn member_kind(kind: Option<&str>) -> Result<MemberKind, ApiError> {
    match kind {
        None | Some("user") => Ok(MemberKind::User),
        Some("guest") => Ok(MemberKind::Guest),
        Some(other) => Err(ApiError::bad_request(
            "bad-kind",
            format!("kind {other:?} is not one of user, guest"),
        )),
    }
}

/// Checks a friend list's size, then each id.
pub fn user_ids(ids: &[std::borrow::Cow<'_, str>]) -> Result<Vec<MemberId>, ApiError> {
    herenow_core::store::check_batch(ids.len())?;
    ids.iter()
        .map(|id| MemberId::new(id).map_err(ApiError::from))
        .collect()
}

/// Largest cursor accepted; a store's cursors are far shorter.
pub const MAX_CURSOR_BYTES: usize = 512;

/// Refuses a cursor no store could have issued before it reaches one.
pub fn check_cursor(cursor: Option<String>) -> Result<Option<String>, ApiError> {
    match cursor {
        Some(c) if c.is_empty() || c.len() > MAX_CURSOR_BYTES => {
            Err(InvalidInput::BadCursor.into())
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_units() {
        assert_eq!(
            parse_duration("w", "10m").unwrap(),
            Duration::from_secs(600)
        );
        assert_eq!(
            parse_duration("w", "1500ms").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration("w", "600").unwrap_err().code(),
            "bad-duration"
        );
        assert_eq!(parse_duration("w", "").unwrap_err().code(), "bad-duration");
        assert_eq!(
            parse_duration("w", "ten").unwrap_err().code(),
            "bad-duration"
        );
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/jsonx"));
    }

    #[test]
    fn limits() {
        assert_eq!(page_limit(None, 100, 1000).unwrap(), 100);
        for bad in ["0", "-3", "1001", "x"] {
            let e = page_limit(Some(bad), 100, 1000).unwrap_err();
            assert_eq!(e.code(), "bad-limit", "{bad}");
        }
        assert_eq!(page_limit(Some("1000"), 100, 1000).unwrap(), 1000);
    }
}
