//! API keys: who may call `/v1`, and what they may do.
//!
//! A key comes as `Authorization: Bearer KEY` or `X-API-Key: KEY`; its
//! scope is looked up in constant time by [`crate::keys::Keys`]. With no
//! keys configured (loopback only, checked by [`crate::Config::check`])
//! everything is allowed.
//!
//! The scope a route needs is decided in one place, [`required_scope`]:
//! reads are `GET`s and the three read-only `POST`s; everything else
//! writes (`DELETE /v1/users/{id}` included).

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderMap, Method, StatusCode, header};

use crate::config::Scope;
use crate::problem::ApiError;
use crate::state::AppState;

/// What the caller of a request may do, as found by the auth middleware
/// and left in the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// No keys are configured: anything goes.
    Open,
    /// A key with this scope.
    Key(Scope),
}

impl Access {
    /// Whether this caller may write (and so backdate heartbeats).
    pub fn can_write(self) -> bool {
        matches!(self, Access::Open | Access::Key(Scope::Write))
    }
}

/// The key presented with a request, if any.
fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    let prefix = b"bearer ";
    let bearer = headers.get(header::AUTHORIZATION).and_then(|v| {
        let v = v.as_bytes();
        (v.len() > prefix.len() && v[..prefix.len()].eq_ignore_ascii_case(prefix))
            .then(|| v[prefix.len()..].trim_ascii())
    });
    // Another scheme in Authorization (a proxy's Basic, say) does not hide
    // an X-API-Key.
    bearer.or_else(|| headers.get("x-api-key").map(|v| v.as_bytes().trim_ascii()))
}

/// The scope a route needs: read for `GET`s and the read-only `POST`s
/// (`status`, `online-among`, `/v1/users/status`, the `/v1/watch`
/// stream), write for everything else, and for `GET /v1/webhooks` (where
/// events go is the operator's business, not a dashboard's).
pub fn required_scope(method: &Method, route: Option<&str>) -> Scope {
    if route == Some("/v1/webhooks") {
        return Scope::Write;
    }
    if method == Method::GET || method == Method::HEAD {
        return Scope::Read;
    }
    match route {
        Some(
            "/v1/spaces/{space}/status"
            | "/v1/spaces/{space}/online-among"
            | "/v1/users/status"
            | "/v1/watch",
        ) if method == Method::POST => Scope::Read,
        _ => Scope::Write,
    }
}

/// Checks a request on `/v1` for a fitting key, and leaves the caller's
/// [`Access`] in its extensions for handlers that check finer rules; else
/// the refusal (`401`, `403`) to answer with. Synchronous, so the
/// per-route middleware (`crate::layers`) calls it without a future of
/// its own.
pub fn authorize(state: &AppState, request: &mut Request) -> Result<(), ApiError> {
    let keys = state.keys();
    let access = if keys.is_open() {
        Access::Open
    } else {
        let Some(presented) = presented_key(request.headers()) else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing-api-key",
                "this server needs an API key: send Authorization: Bearer KEY or X-API-Key: KEY",
            ));
        };
        let Some(scope) = keys.scope_of(presented) else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unknown-api-key",
                "the API key is not one this server knows",
            ));
        };
        let needed = required_scope(
            request.method(),
            request
                .extensions()
                .get::<MatchedPath>()
                .map(MatchedPath::as_str),
        );
        if scope < needed {
            return Err(forbidden(
                "this route needs a write key; the key given may only read",
            ));
        }
        Access::Key(scope)
    };
    request.extensions_mut().insert(access);
    Ok(())
}

/// The `403` for a key whose scope is too small.
pub fn forbidden(detail: &'static str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "insufficient-scope", detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_bearer_or_x_api_key() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_key(&h), None);
        h.insert("x-api-key", "k1".parse().unwrap());
        assert_eq!(presented_key(&h), Some(&b"k1"[..]));
        h.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(presented_key(&h), Some(&b"k1"[..]));
        h.insert(header::AUTHORIZATION, "bearer  k2 ".parse().unwrap());
        assert_eq!(presented_key(&h), Some(&b"k2"[..]));
    }

    #[test]
    fn scopes_by_route() {
        assert_eq!(required_scope(&Method::GET, None), Scope::Read);
        assert_eq!(
            required_scope(&Method::POST, Some("/v1/spaces/{space}/status")),
            Scope::Read
        );
        assert_eq!(
            required_scope(&Method::POST, Some("/v1/spaces/{space}/heartbeat")),
            Scope::Write
        );
        assert_eq!(
            required_scope(&Method::PUT, Some("/v1/friends/{user}")),
            Scope::Write
        );
        assert_eq!(
            required_scope(&Method::POST, Some("/v1/users/status")),
            Scope::Read
        );
        assert_eq!(
            required_scope(&Method::GET, Some("/v1/users/{id}")),
            Scope::Read
        );
        assert_eq!(
            required_scope(&Method::GET, Some("/v1/webhooks")),
            Scope::Write
        );
        for route in ["/v1/users/{id}", "/v1/users/status"] {
            assert_eq!(
                required_scope(&Method::DELETE, Some(route)),
                Scope::Write,
                "{route}"
            );
        }
    }
}
