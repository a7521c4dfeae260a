//! The check every request to the HTTP API passes before a handler runs
//! ([`Signed`]), and the answer of one that fails it or any later check
//! ([`Refusal`]).
//!
//! A refusal is plain text with its status, as Pusher answers: the npm
//! `pusher` puts the body in its `RequestError`'s `body`, PyPI `pusher`
//! in the message of its `PusherBadRequest` / `PusherBadAuth` /
//! `PusherBadStatus`, so the sentence is what a developer reads. Each
//! names what was wrong (which parameter, which bound, what was expected)
//! and is marked [`Explained`], so the problem layer around the router
//! keeps it rather than answer with a generic problem.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Query, RawPathParams, Request};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::problem::Explained;
use crate::pusher::PusherState;
use crate::pusher::{Pusher, PusherApp, sign};

/// How far `auth_timestamp` may be from the server's clock, in seconds.
pub(crate) const MAX_SKEW_S: u64 = 600;
/// Largest request body, in bytes.
pub(crate) const MAX_BODY: usize = 256 * 1024;

/// An answer that is not a success: a status and a plain-text reason.
pub(crate) struct Refusal(pub(crate) StatusCode, pub(crate) String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = (self.0, self.1).into_response();
        response.extensions_mut().insert(Explained);
        response
    }
}

/// A `400` saying what was wrong with the request.
pub(crate) fn bad(message: impl Into<String>) -> Refusal {
    Refusal(StatusCode::BAD_REQUEST, message.into())
}

/// A `401` saying which part of the signature failed.
fn unauthorized(message: impl Into<String>) -> Refusal {
    Refusal(StatusCode::UNAUTHORIZED, message.into())
}

/// `s` quoted for a message, cut after its first 64 characters: enough to
/// recognise a value the client sent, never the whole of a long one.
pub(crate) fn quoted(s: &str) -> String {
    const SHOWN: usize = 64;
    match s.char_indices().nth(SHOWN) {
        None => format!("{s:?}"),
        Some((end, _)) => format!("{:?}… ({} bytes)", &s[..end], s.len()),
    }
}

/// The query's parameters, decoded as a form's are (`%XX`, `+` for a
/// space), keys lowercased; a key given twice is refused.
fn params(uri: &Uri) -> Result<BTreeMap<String, String>, Refusal> {
    let Query(pairs) =
        Query::<Vec<(String, String)>>::try_from_uri(uri).map_err(|e| bad(e.body_text()))?;
    let mut out = BTreeMap::new();
    for (k, v) in pairs {
        let key = k.to_ascii_lowercase();
        if out.insert(key.clone(), v).is_some() {
            return Err(bad(format!(
                "the query parameter {} is given twice",
                quoted(&key)
            )));
        }
    }
    Ok(out)
}

/// Checks the request's signature; the app it is for, and its other
/// parameters. Each failure names the part that failed, in the order
/// they are checked.
fn verify(
    pusher: &Pusher,
    app_id: &str,
    method: &Method,
    uri: &Uri,
    body: &[u8],
) -> Result<(Arc<PusherApp>, BTreeMap<String, String>), Refusal> {
    let app = pusher.by_id(app_id).ok_or_else(|| {
        Refusal(
            StatusCode::NOT_FOUND,
            format!("unknown app: no app has the id {}", quoted(app_id)),
        )
    })?;
    let mut params = params(uri)?;
    let signature = params
        .remove("auth_signature")
        .ok_or_else(|| unauthorized("auth_signature is missing"))?;
    match params.get("auth_key") {
        None => return Err(unauthorized("auth_key is missing")),
        Some(key) if *key != app.key => {
            return Err(unauthorized(format!(
                "unknown auth_key {}: not the key of app {}",
                quoted(key),
                quoted(&app.id)
            )));
        }
        Some(_) => {}
    }
    match params.get("auth_version").map(String::as_str) {
        Some("1.0") => {}
        None => return Err(unauthorized("auth_version is missing; it must be 1.0")),
        Some(other) => {
            return Err(unauthorized(format!(
                "auth_version {} is not 1.0",
                quoted(other)
            )));
        }
    }
    let timestamp = match params.get("auth_timestamp") {
        None => return Err(unauthorized("auth_timestamp is missing")),
        Some(t) => t.parse::<u64>().map_err(|_| {
            unauthorized(format!(
                "auth_timestamp {} is not a whole number of seconds",
                quoted(t)
            ))
        })?,
    };
    let now = crate::token::now_s();
    if now.abs_diff(timestamp) > MAX_SKEW_S {
        return Err(unauthorized(format!(
            "auth_timestamp {timestamp} is {} s from the server's time ({now}); \
             it may be {MAX_SKEW_S} s away at most (is the signing machine's clock right?)",
            now.abs_diff(timestamp)
        )));
    }
    if !body.is_empty() || params.contains_key("body_md5") {
        let expected = sign::md5_hex(body);
        match params.get("body_md5") {
            None => {
                return Err(unauthorized(
                    "body_md5 is missing: a request with a body signs the body's MD5",
                ));
            }
            Some(given) if !sign::same(given, &expected) => {
                return Err(unauthorized(format!(
                    "body_md5 {} does not match the body: its {} bytes have the MD5 {expected}",
                    quoted(given),
                    body.len()
                )));
            }
            Some(_) => {}
        }
    }
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let message = format!("{}\n{}\n{}", method.as_str(), uri.path(), query.join("&"));
    if !sign::same(&signature, &sign::hmac_hex(&app.secret, &message)) {
        // What was signed is the client's own request, so saying it gives
        // nothing away, and shows a wrong secret apart from a request
        // changed on its way (a path rewritten by a proxy, say).
        return Err(unauthorized(format!(
            "invalid signature: auth_signature is not the HMAC-SHA256, with app {}'s secret, \
             of {message:?}",
            quoted(&app.id)
        )));
    }
    Ok((app, params))
}

/// Reads the body, up to [`MAX_BODY`].
async fn read_body(body: axum::body::Body) -> Result<Bytes, Refusal> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|e| {
        if crate::extract::is_too_large(&e) {
            Refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {} KiB", MAX_BODY / 1024),
            )
        } else {
            bad(format!("the request body could not be read: {e}"))
        }
    })
}

/// A request to the HTTP API whose signature checked out: the app it is
/// for, its path and query parameters and its body. Every handler takes
/// it, so none runs on a request the app did not sign.
pub(crate) struct Signed {
    pub(crate) pusher: Arc<Pusher>,
    pub(crate) app: Arc<PusherApp>,
    pub(crate) params: BTreeMap<String, String>,
    pub(crate) body: Bytes,
    /// The path's parameters (`channel`, `user_id`), percent-decoded.
    path: Vec<(String, String)>,
}

impl Signed {
    /// The path parameter `name` of the route, percent-decoded.
    pub(crate) fn path_param(&self, name: &str) -> Result<&str, Refusal> {
        self.path
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| {
                Refusal(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the route has no {name} parameter"),
                )
            })
    }
}

impl FromRequest<PusherState> for Signed {
    type Rejection = Refusal;

    async fn from_request(req: Request, state: &PusherState) -> Result<Self, Refusal> {
        let pusher = state.pusher().clone();
        let (mut parts, body) = req.into_parts();
        let path: Vec<(String, String)> = RawPathParams::from_request_parts(&mut parts, state)
            .await
            .map_err(|e| {
                bad(format!(
                    "the path is not UTF-8 once percent-decoded: {}",
                    e.body_text()
                ))
            })?
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let app_id = path
            .iter()
            .find_map(|(k, v)| (k == "app_id").then(|| v.clone()))
            .ok_or_else(|| bad("the path has no app id"))?;
        let body = read_body(body).await?;
        let (app, params) = verify(&pusher, &app_id, &parts.method, &parts.uri, &body)?;
        Ok(Self {
            pusher,
            app,
            params,
            body,
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_query_components() {
        let uri: Uri = "/?a=a%2Cb+c&b=100%&C=%zz&&d".parse().unwrap();
        let expected = [("a", "a,b c"), ("b", "100%"), ("c", "%zz"), ("d", "")];
        let expected = BTreeMap::from(expected.map(|(k, v)| (k.to_owned(), v.to_owned())));
        assert!(params(&uri).is_ok_and(|p| p == expected));
    }

    #[test]
    fn quotes_are_cut() {
        assert_eq!(quoted("a\"b"), r#""a\"b""#);
        let long = "é".repeat(100);
        let shown = quoted(&long);
        assert!(shown.ends_with("… (200 bytes)"), "{shown}");
        assert_eq!(shown.matches('é').count(), 64);
    }
}
