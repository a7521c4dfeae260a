//! API keys: who may call `/v1`, and what they may do.
//!
//! A key comes as `Authorization: Bearer KEY` or `X-API-Key: KEY`; its
//! scope is looked up in constant time by [`crate::api_keys::ApiKeys`]. With no
//! keys configured (loopback only, checked by [`crate::Config::check`])
//! everything is allowed.
//!
//! The scope a route needs is not decided here: it is declared with the
//! route, by the group it is registered in (`api::routes`, `sse::routes`),
//! which also writes it into the OpenAPI document. What this file knows is
//! the scope of a method a path does not serve (answered `405`, but only
//! after the key check, as every request on `/v1` is): reads for `GET`,
//! writes for everything else.

use axum::extract::Request;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::routing::MethodFilter;

use crate::config::Scope;
use crate::problem::ApiError;
use crate::state::AppState;

/// What the caller of a request may do, as found by the auth middleware
/// and left in the request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// No keys are configured: anything goes.
    Open,
    /// A key with this scope.
    Key(Scope),
}

impl Access {
    /// Whether this caller may write (and so backdate heartbeats).
    pub(crate) fn can_write(self) -> bool {
        matches!(self, Access::Open | Access::Key(Scope::Write))
    }
}

/// The scope one registered route needs: `scope` for the methods it
/// serves, and for any other method on its path (the `405` of axum's
/// method router, which passes the same middleware) the scope of that
/// method by itself ([`Needs::unserved`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Needs {
    scope: Scope,
    served: MethodFilter,
}

impl Needs {
    /// `scope` for the methods in `served` (`GET` serves `HEAD` too).
    pub(crate) fn new(scope: Scope, served: MethodFilter) -> Self {
        let served = if serves(served, MethodFilter::GET) {
            served.or(MethodFilter::HEAD)
        } else {
            served
        };
        Self { scope, served }
    }

    /// The scope a request with `method` needs on this route.
    pub(crate) fn scope_for(&self, method: &Method) -> Scope {
        match MethodFilter::try_from(method.clone()) {
            Ok(filter) if serves(self.served, filter) => self.scope,
            _ => Self::unserved(method),
        }
    }

    /// The scope of a method the path does not serve: reads for `GET` and
    /// `HEAD`, writes for everything else.
    fn unserved(method: &Method) -> Scope {
        if method == Method::GET || method == Method::HEAD {
            Scope::Read
        } else {
            Scope::Write
        }
    }
}

/// Whether `served` holds every method of `method`.
fn serves(served: MethodFilter, method: MethodFilter) -> bool {
    served.or(method) == served
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

/// Checks a request on `/v1` for a key fitting what its route `needs`,
/// and leaves the caller's [`Access`] in its extensions for handlers that
/// check finer rules; else the refusal (`401`, `403`) to answer with. Synchronous, so the
/// per-route middleware (`crate::layers`) calls it without a future of
/// its own.
pub(crate) fn authorize(
    state: &AppState,
    needs: Needs,
    request: &mut Request,
) -> Result<(), ApiError> {
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
        if scope < needs.scope_for(request.method()) {
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
pub(crate) fn forbidden(detail: &'static str) -> ApiError {
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

    /// What a method a route does not serve needs (the `405` behind the
    /// key check): reads for `GET`, writes otherwise; the methods it
    /// serves need the route's own scope. Which route needs what is
    /// pinned by `tests/api_refusals.rs` (`every_route_needs_its_scope`)
    /// and by the document's security (`tests/openapi.rs`).
    #[test]
    fn scopes_by_method() {
        let read_post = Needs::new(Scope::Read, MethodFilter::POST);
        assert_eq!(read_post.scope_for(&Method::POST), Scope::Read);
        assert_eq!(read_post.scope_for(&Method::GET), Scope::Read);
        assert_eq!(read_post.scope_for(&Method::DELETE), Scope::Write);
        let write_get = Needs::new(Scope::Write, MethodFilter::GET);
        assert_eq!(write_get.scope_for(&Method::GET), Scope::Write);
        assert_eq!(write_get.scope_for(&Method::HEAD), Scope::Write);
        assert_eq!(write_get.scope_for(&Method::PUT), Scope::Write);
        let read_get = Needs::new(Scope::Read, MethodFilter::GET);
        assert_eq!(read_get.scope_for(&Method::HEAD), Scope::Read);
        assert_eq!(read_get.scope_for(&Method::POST), Scope::Write);
        assert_eq!(read_get.scope_for(&Method::PATCH), Scope::Write);
    }
}
