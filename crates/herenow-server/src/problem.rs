//! RFC 9457 problem responses: the one place where errors become HTTP.
//!
//! Every error a handler, an extractor or a middleware returns is an
//! [`ApiError`]; its [`IntoResponse`] writes `application/problem+json` with
//! a stable `code`. The status of a store error is decided here, from
//! [`ErrorKind`], and nowhere else. The one exception: answers marked
//! `Explained`, in another protocol's own format, which [`ProblemLayer`]
//! leaves as they are.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::BoxError;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herenow_core::{ErrorKind, InvalidInput};
use pin_project_lite::pin_project;
use serde::Serialize;
use tower::{Layer, Service};
use utoipa::openapi::{self, Content, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoResponses, ToSchema};

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Where problem types are documented; `type` is this plus the code.
const TYPE_BASE: &str = "https://herenow.dev/problems/";

/// An error answer: a status, a stable code and a sentence for people.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    detail: Cow<'static, str>,
    retry_after_s: Option<u32>,
}

impl ApiError {
    /// An error with this status, code and detail.
    pub fn new(
        status: StatusCode,
        code: &'static str,
        detail: impl Into<Cow<'static, str>>,
    ) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            retry_after_s: None,
        }
    }

    /// A `400` naming what was wrong with the input.
    pub fn bad_request(code: &'static str, detail: impl Into<Cow<'static, str>>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, detail)
    }

    /// A `503` the client may retry after `seconds`.
    pub fn unavailable(
        code: &'static str,
        detail: impl Into<Cow<'static, str>>,
        seconds: u32,
    ) -> Self {
        Self {
            retry_after_s: Some(seconds),
            ..Self::new(StatusCode::SERVICE_UNAVAILABLE, code, detail)
        }
    }

    /// The same status and code with a more precise detail: which item
    /// of a batch, say, or the bound it broke.
    pub fn with_detail(self, detail: impl Into<Cow<'static, str>>) -> Self {
        Self {
            detail: detail.into(),
            ..self
        }
    }

    /// An invalid input's error, its detail naming where the input stood
    /// (`users[3]: …`, a field of a body).
    pub fn invalid_at(at: impl std::fmt::Display, e: InvalidInput) -> Self {
        let detail = format!("{at}: {e}");
        Self::from(e).with_detail(detail)
    }

    /// The HTTP status it answers with.
    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable, machine-readable code.
    #[cfg(test)]
    pub fn code(&self) -> &'static str {
        self.code
    }
}

/// The status for each class of store error.
fn status_of(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
        // The client's question is fine; this store cannot answer it.
        ErrorKind::Unsupported => StatusCode::NOT_IMPLEMENTED,
        ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<herenow_core::Error> for ApiError {
    fn from(e: herenow_core::Error) -> Self {
        let kind = e.kind();
        if kind == ErrorKind::Internal {
            tracing::error!(error = %e, "internal store error");
        }
        Self {
            status: status_of(kind),
            code: e.code(),
            detail: e.to_string().into(),
            retry_after_s: e.is_retryable().then_some(1),
        }
    }
}

impl From<InvalidInput> for ApiError {
    fn from(e: InvalidInput) -> Self {
        herenow_core::Error::from(e).into()
    }
}

/// The body of every error answer (RFC 9457, with a `code` extension).
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem type: the base plus `code`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status, repeated in the body as RFC 9457 asks.
    pub status: u16,
    /// What went wrong with this request, for people.
    pub detail: String,
    /// A stable, machine-readable code, e.g. `bad-member-id`.
    pub code: String,
}

/// An answer with a [`Problem`] body, as the API document states it.
pub(crate) fn answer(description: &str) -> RefOr<openapi::Response> {
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                PROBLEM_JSON,
                Content::new(Some(Ref::from_schema_name("Problem"))),
            )
            .build(),
    )
}

/// The `400` most operations name among their `responses`: bad input,
/// the problem's `code` saying which. (`crate::openapi` adds the answers
/// every operation may give, a `400` among them, to those that name none.)
pub(crate) struct BadInput;

impl IntoResponses for BadInput {
    fn responses() -> BTreeMap<String, RefOr<openapi::Response>> {
        BTreeMap::from([("400".to_owned(), answer("Bad input"))])
    }
}

/// "bad-member-id" → "Bad member id": titles follow codes, so they can
/// never disagree.
fn title_of(code: &str) -> String {
    let title = code.replace('-', " ");
    let mut chars = title.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_ascii_uppercase().to_string() + chars.as_str()
    })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = Problem {
            type_: format!("{TYPE_BASE}{}", self.code),
            title: title_of(self.code),
            status: self.status.as_u16(),
            detail: self.detail.into_owned(),
            code: self.code.to_owned(),
        };
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(s) = self.retry_after_s {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// Marks an error answer whose body already explains it in the format of
/// the protocol it answers (the Pusher HTTP API's plain text, which
/// Pusher's server libraries show as they get it): [`ProblemLayer`] passes
/// it through rather than replace its explanation with a generic one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Explained;

/// Turns error answers made outside this crate's handlers (axum's `405`,
/// tower-http's `413`, a timeout) into problems, so every error a client
/// of herenow's API sees has the same shape. Answers that already are
/// problems, answers marked `Explained`, and successes pass through
/// untouched.
///
/// A tower layer rather than a `from_fn` middleware: every request passes
/// it, and `from_fn` boxes its future and the rest of the stack per
/// request (`crate::layers` says why that counts).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProblemLayer;

impl<S> Layer<S> for ProblemLayer {
    type Service = Problemize<S>;

    fn layer(&self, inner: S) -> Problemize<S> {
        Problemize(inner)
    }
}

/// A service whose error answers [`ProblemLayer`] turns into problems.
#[derive(Clone, Debug)]
pub struct Problemize<S>(S);

impl<S, B> Service<Request> for Problemize<S>
where
    S: Service<Request, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = ProblemFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        ProblemFuture {
            inner: self.0.call(request),
        }
    }
}

pin_project! {
    /// The answer of a [`Problemize`]d service.
    pub struct ProblemFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F, B, E> Future for ProblemFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let answered = ready!(self.project().inner.poll(cx));
        Poll::Ready(answered.map(|response| problemize(response.map(Body::new))))
    }
}

fn problemize(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    if is_problem || response.extensions().get::<Explained>().is_some() {
        return response;
    }
    let (code, detail): (&'static str, &'static str) = match status {
        StatusCode::NOT_FOUND => ("not-found", "no such route"),
        StatusCode::METHOD_NOT_ALLOWED => {
            ("method-not-allowed", "this route does not take that method")
        }
        StatusCode::PAYLOAD_TOO_LARGE => ("body-too-large", crate::BODY_TOO_LARGE),
        StatusCode::REQUEST_TIMEOUT => ("timeout", "the request took too long"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            ("not-json", "the request body must be application/json")
        }
        s if s.is_client_error() => ("bad-request", "the request was refused"),
        _ => ("internal", "the server failed to answer"),
    };
    let mut problem = ApiError::new(status, code, detail).into_response();
    // Keep headers such as `Allow` on a 405.
    for (name, value) in response.headers() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            problem.headers_mut().insert(name.clone(), value.clone());
        }
    }
    problem
}

/// The `404` for routes that do not exist.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not-found", "no such route")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_follow_codes() {
        assert_eq!(title_of("bad-member-id"), "Bad member id");
        assert_eq!(title_of("x"), "X");
    }

    #[test]
    fn store_errors_map_by_kind() {
        let e: ApiError = InvalidInput::EmptyId.into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.code(), "bad-member-id");
        let e: ApiError = herenow_core::Error::Unavailable {
            reason: "down".into(),
            source: None,
        }
        .into();
        assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
