//! The middleware of the routes: one per route, so a route is wrapped
//! once, with the scope its declaration gives it ([`crate::auth::Needs`]).
//!
//! Why not one `from_fn` per concern: on each request axum clones a
//! route's service with every service it wraps, one allocation per level,
//! and boxes a future per level; that was most of the router's own cost of
//! a heartbeat. So a route's concerns run in one middleware, and the
//! layers every request passes wrap the router once, from outside
//! ([`crate::app`]).
//!
//! - [`V1Layer`]: the JSON API: latency, then the API key, then the request
//!   timeout; a tower service whose [`V1Future`] is a plain state machine
//!   around the route's own future (`from_fn` boxes both);
//! - [`keyed`]: the event streams: latency, then the API key (no timeout:
//!   streams end on disconnect or shutdown);
//! - the other routes need no key and record their latency alone
//!   ([`crate::metrics::track_latency`]).
//!
//! [`App`] is what every request passes, around the router: problems,
//! panics, the body's bound. It is served as it is, not as the fallback
//! of an outer `Router`, which would clone and box the whole stack on
//! every request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pin_project_lite::pin_project;
use tokio::time::Timeout;
use tower::{Layer, Service};
use tower_http::catch_panic::{CatchPanic, CatchPanicLayer, DefaultResponseForPanic};
use tower_http::limit::{RequestBodyLimit, RequestBodyLimitLayer};

use crate::auth::{self, Needs};
use crate::metrics::Latency;
use crate::problem::{ApiError, ProblemLayer, Problemize};
use crate::state::AppState;

/// The whole HTTP application ([`crate::app`]): the router inside the
/// layers every request passes, outermost first: error answers made
/// outside the handlers become problems, a panicking handler becomes a
/// `500` problem, and bodies over the bound are refused with `413`.
#[derive(Clone)]
pub struct App(Stack);

/// [`App`]'s layers around the router, outermost first.
type Stack = Problemize<CatchPanic<RequestBodyLimit<Router>, DefaultResponseForPanic>>;

impl App {
    /// `routes` inside the layers, with bodies bounded to `max_body`
    /// bytes.
    pub(crate) fn new(routes: Router, max_body: usize) -> Self {
        let limited = RequestBodyLimitLayer::new(max_body).layer(routes);
        App(ProblemLayer.layer(CatchPanicLayer::new().layer(limited)))
    }
}

impl Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = <Stack as Service<Request>>::Future;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, request: Request) -> Self::Future {
        self.0.call(request)
    }
}

/// Middleware of a `/v1` route: times the request, refuses it without a
/// key fitting what the route [`Needs`], and answers `503` when it
/// outlives the configured request timeout, so a stuck store call cannot
/// pin a connection.
#[derive(Clone)]
pub(crate) struct V1Layer {
    state: AppState,
    needs: Needs,
}

impl V1Layer {
    /// The middleware of a route that `needs` a scope, over `state`'s
    /// keys, timeout and metrics.
    pub(crate) fn new(state: AppState, needs: Needs) -> Self {
        Self { state, needs }
    }
}

impl<S> Layer<S> for V1Layer {
    type Service = V1<S>;

    fn layer(&self, inner: S) -> V1<S> {
        V1 {
            state: self.state.clone(),
            needs: self.needs,
            inner,
        }
    }
}

/// A `/v1` route wrapped by [`V1Layer`].
#[derive(Clone)]
pub(crate) struct V1<S> {
    state: AppState,
    needs: Needs,
    inner: S,
}

impl<S> Service<Request> for V1<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = V1Future<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        // Started before the key check: refusals are timed too.
        let timer = Latency::start(&request);
        let step = match auth::authorize(&self.state, self.needs, &mut request) {
            Err(refused) => Step::Refused {
                response: Some(refused.into_response()),
            },
            Ok(()) => Step::Running {
                route: tokio::time::timeout(self.state.request_timeout(), self.inner.call(request)),
            },
        };
        V1Future {
            step,
            finish: Some((timer, self.state.clone())),
        }
    }
}

pin_project! {
    /// The response of a `/v1` route: the route's own future under the
    /// request timeout, or the refusal of the key check; the latency is
    /// recorded when it completes.
    pub(crate) struct V1Future<F> {
        #[pin]
        step: Step<F>,
        finish: Option<(Latency, AppState)>,
    }
}

pin_project! {
    #[project = StepProj]
    enum Step<F> {
        Refused { response: Option<Response> },
        Running { #[pin] route: Timeout<F> },
    }
}

impl<F> Future for V1Future<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = match this.step.project() {
            StepProj::Refused { response } => response
                .take()
                .expect("a /v1 response future polled after it completed"),
            StepProj::Running { route } => match ready!(route.poll(cx)) {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_elapsed) => ApiError::unavailable(
                    "timeout",
                    "the request took longer than the server's request timeout",
                    1,
                )
                .into_response(),
            },
        };
        if let Some((timer, state)) = this.finish.take() {
            timer.finish(state.metrics());
        }
        Poll::Ready(Ok(response))
    }
}

/// Middleware of an event stream's route: times the request and refuses
/// it without a key fitting what the route [`Needs`].
pub(crate) async fn keyed(
    State((state, needs)): State<(AppState, Needs)>,
    mut request: Request,
    next: Next,
) -> Response {
    let timer = Latency::start(&request);
    let response = match auth::authorize(&state, needs, &mut request) {
        Err(refused) => refused.into_response(),
        Ok(()) => next.run(request).await,
    };
    timer.finish(state.metrics());
    response
}
