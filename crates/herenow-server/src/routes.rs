//! Every route of the server, each declared once: here.
//!
//! A route of the document is its handler's `#[utoipa::path]` (method,
//! path, parameters, answers) registered with `routes!` under the scope of
//! API key it needs, so its path, its key check and its entry in
//! `/openapi.json` (security included) come from that one line and cannot
//! disagree. Routes outside the document (the user called `status`, the
//! WebSocket, health, the page, the document itself) are declared here
//! too, with their scope, or as open.

use axum::Router;
use axum::middleware;
use axum::routing::{MethodFilter, MethodRouter, delete, get};
use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouter};
use utoipa_axum::routes;

use crate::api::{
    friends, heartbeat, history, leave, members, online, space_config, spaces, tokens, users,
    webhooks,
};
use crate::auth::Needs;
use crate::config::Scope;
use crate::layers::{V1Layer, keyed};
use crate::openapi::{self, ApiDoc};
use crate::state::AppState;
use crate::{metrics, ops, page, pusher, sse, watch, ws};

/// Every route over `state`: the JSON API and the event streams behind
/// their keys, the rest open; `/openapi.json` serves the document the
/// keyed routes make.
pub(crate) fn router(state: &AppState) -> Router<AppState> {
    let (keyed, doc) = documented(state).split_for_parts();
    let doc = openapi::document(doc, state.keys().is_open());
    // The WebSocket's credential is its token, not an API key (see
    // `crate::token`); the Pusher protocol checks its apps' own signatures.
    // Probes, the page and the document need none (`/metrics` is keyed).
    let open = Router::new()
        .merge(ws::router())
        .merge(pusher::router(state.pusher_state()))
        .merge(ops::router())
        .merge(openapi::router(doc))
        .merge(page::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            metrics::track_latency,
        ));
    keyed.merge(open)
}

/// The routes of the document, each with the scope it needs: a read key
/// may query (the `GET`s and the read-only `POST`s), a write key may also
/// change presence, friends and policy, mint tokens, erase users, and see
/// where webhooks go (the operator's business, not a dashboard's).
fn documented(state: &AppState) -> OpenApiRouter<AppState> {
    declared(&Guard::Api(state.clone()), &Guard::Stream(state.clone()))
}

/// The keyed routes without their middleware, for the example that times
/// what the middleware costs (`examples/http_stack.rs`).
pub(crate) fn unguarded() -> Router<AppState> {
    declared(&Guard::Bare, &Guard::Bare).split_for_parts().0
}

/// The routes of the document, their `/v1` ones wrapped by `api` and the
/// streams by `stream`.
fn declared(api: &Guard, stream: &Guard) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(api.write(routes!(heartbeat::one)))
        .routes(api.write(routes!(heartbeat::batch)))
        .routes(api.write(routes!(leave::leave)))
        .routes(api.read(routes!(members::one)))
        .routes(api.read(routes!(members::status)))
        .routes(api.read(routes!(online::online)))
        .routes(api.read(routes!(online::count)))
        .routes(api.read(routes!(online::among)))
        .routes(api.write(routes!(friends::set)))
        .routes(api.write(routes!(friends::add)))
        .routes(api.write(routes!(friends::remove)))
        .routes(api.read(routes!(friends::get_friends)))
        .routes(api.read(routes!(friends::online)))
        .routes(api.read(routes!(space_config::get_config)))
        .routes(api.write(routes!(space_config::put_config)))
        .routes(api.read(routes!(spaces::list)))
        .routes(api.read(routes!(history::history)))
        .routes(api.read(routes!(users::one)))
        .routes(api.read(routes!(users::status)))
        .routes(api.write(routes!(users::erase)))
        // The static segment wins over `{id}`: the user called `status` is
        // served here too, outside the document (its path is the batch's).
        .route(
            "/v1/users/status",
            api.hidden(Scope::Read, MethodFilter::GET, get(users::one_named_status)),
        )
        .route(
            "/v1/users/status",
            api.hidden(
                Scope::Write,
                MethodFilter::DELETE,
                delete(users::erase_named_status),
            ),
        )
        .routes(api.write(routes!(tokens::mint)))
        .routes(api.write(routes!(webhooks::list)))
        // The scraper's: what a server does says much about its users (who
        // is busy when), so it takes a read key where the API takes keys.
        .route(
            "/metrics",
            api.hidden(Scope::Read, MethodFilter::GET, get(ops::metrics)),
        )
        .routes(stream.read(routes!(sse::events)))
        .routes(stream.read(routes!(watch::stream::watch)))
}

/// How a keyed route is wrapped: the JSON API's middleware (key, then the
/// request timeout), the streams' (key only), or, to measure them, not at
/// all.
enum Guard {
    Api(AppState),
    Stream(AppState),
    Bare,
}

impl Guard {
    /// `route`, open to read keys.
    fn read(&self, route: UtoipaMethodRouter<AppState>) -> UtoipaMethodRouter<AppState> {
        self.scoped(Scope::Read, route)
    }

    /// `route`, for write keys only.
    fn write(&self, route: UtoipaMethodRouter<AppState>) -> UtoipaMethodRouter<AppState> {
        self.scoped(Scope::Write, route)
    }

    /// `route` behind a key of `scope`, its operations saying so.
    fn scoped(
        &self,
        scope: Scope,
        (schemas, mut paths, route): UtoipaMethodRouter<AppState>,
    ) -> UtoipaMethodRouter<AppState> {
        let mut served = None::<MethodFilter>;
        for item in paths.paths.values_mut() {
            for (method, op) in operations(item) {
                served = Some(served.map_or(method, |s| s.or(method)));
                op.security = Some(openapi::security(scope));
            }
        }
        let served = served.expect("a documented route has an operation");
        (schemas, paths, self.hidden(scope, served, route))
    }

    /// `route`, serving `served` behind a key of `scope`, wrapped (its
    /// `405` included) in this guard's middleware; alone, a route outside
    /// the document.
    fn hidden(
        &self,
        scope: Scope,
        served: MethodFilter,
        route: MethodRouter<AppState>,
    ) -> MethodRouter<AppState> {
        let needs = Needs::new(scope, served);
        match self {
            Guard::Api(state) => route.layer(V1Layer::new(state.clone(), needs)),
            Guard::Stream(state) => route.layer(middleware::from_fn_with_state(
                (state.clone(), needs),
                keyed,
            )),
            Guard::Bare => route,
        }
    }
}

/// The operations of `item` with the method filter of each.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (MethodFilter, &mut Operation)> {
    [
        (MethodFilter::GET, &mut item.get),
        (MethodFilter::PUT, &mut item.put),
        (MethodFilter::POST, &mut item.post),
        (MethodFilter::DELETE, &mut item.delete),
        (MethodFilter::OPTIONS, &mut item.options),
        (MethodFilter::HEAD, &mut item.head),
        (MethodFilter::PATCH, &mut item.patch),
        (MethodFilter::TRACE, &mut item.trace),
    ]
    .into_iter()
    .filter_map(|(method, op)| op.as_mut().map(|op| (method, op)))
}
