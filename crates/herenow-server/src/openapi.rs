//! `/openapi.json`, generated from the handlers' annotations, and the
//! Swagger UI at `/docs` (its assets vendored into the binary: nothing is
//! fetched at build or run time).
//!
//! The document is OpenAPI 3.2: [`rules`] writes in the constraints the
//! server enforces (lengths, patterns, ranges, enums), `events` the
//! schema of every event of the two streams.

mod events;
pub mod rules;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::get;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Content, OpenApiVersion, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::state::AppState;
use crate::{api, problem, protocol, sse};

/// The OpenAPI document of the JSON API, the event stream and the token
/// endpoint, built from the handlers' `#[utoipa::path]` annotations and
/// served at `/openapi.json`.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "herenow",
        description = "Who is here right now, and when was everyone else last seen. See docs/API.md."
    ),
    paths(
        api::heartbeat::one,
        api::heartbeat::batch,
        api::leave::leave,
        api::members::one,
        api::members::status,
        api::online::online,
        api::online::count,
        api::online::among,
        api::friends::set,
        api::friends::add,
        api::friends::remove,
        api::friends::get_friends,
        api::friends::online,
        api::config::get_config,
        api::config::put_config,
        api::spaces::list,
        api::history::history,
        api::users::one,
        api::users::status,
        api::users::erase,
        api::tokens::mint,
        api::webhooks::list,
        sse::events,
        sse::watch::watch,
    ),
    components(schemas(problem::Problem, protocol::watch::UnwatchedData)),
    modifiers(&Security, &CommonAnswers),
    tags(
        (name = "heartbeats", description = "Heartbeats and leaves"),
        (name = "status", description = "Status and last seen"),
        (name = "online", description = "Who's online, counts"),
        (name = "friends", description = "Friend sets and online friends"),
        (name = "users", description = "A user over every space: last seen anywhere, erasure"),
        (name = "spaces", description = "Spaces, their policy and history"),
        (name = "events", description = "Server-Sent Events"),
        (name = "tokens", description = "Tokens for the WebSocket protocol (/v1/ws, docs/PROTOCOL.md)"),
        (name = "webhooks", description = "Webhook endpoints and their delivery (write key)"),
    )
)]
pub struct ApiDoc;

/// Declares the two ways to present a key.
struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "x_api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
    }
}

/// What every operation may answer besides its own responses, declared
/// once here rather than on each handler: a client generated from the
/// document then knows every answer it can get.
struct CommonAnswers;

impl CommonAnswers {
    const ANSWERS: [(&'static str, &'static str, bool); 6] = [
        ("400", "Bad input: the problem's `code` names it", false),
        ("401", "Missing or unknown API key", false),
        ("403", "The API key's scope does not allow this", false),
        ("413", "Request body larger than 4 MiB", true),
        ("415", "Request body is not `application/json`", true),
        (
            "503",
            "Store unavailable, timed out or shutting down; see `Retry-After`",
            false,
        ),
    ];

    fn add_answers(op: &mut Operation, has_body: bool) {
        for (status, description, body_only) in Self::ANSWERS {
            if body_only && !has_body {
                continue;
            }
            op.responses
                .responses
                .entry(status.to_owned())
                .or_insert_with(|| {
                    RefOr::T(
                        ResponseBuilder::new()
                            .description(description)
                            .content(
                                "application/problem+json",
                                Content::new(Some(Ref::from_schema_name("Problem"))),
                            )
                            .build(),
                    )
                });
        }
    }
}

impl Modify for CommonAnswers {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for (op, has_body) in [
                (&mut item.get, false),
                (&mut item.delete, false),
                (&mut item.put, true),
                (&mut item.post, true),
            ] {
                if let Some(op) = op {
                    Self::add_answers(op, has_body);
                }
            }
        }
    }
}

/// The document served at `/openapi.json`: the generated one, as OpenAPI
/// 3.2, with the server's constraints and the streams' events written in.
pub fn document() -> serde_json::Value {
    let mut openapi = ApiDoc::openapi();
    openapi.openapi = OpenApiVersion::Version32;
    let mut doc = serde_json::to_value(&openapi).expect("the OpenAPI document serializes");
    rules::apply(&mut doc);
    events::apply(&mut doc);
    doc
}

/// `/openapi.json` and `/docs`.
pub fn router() -> Router<AppState> {
    let doc = Bytes::from(serde_json::to_vec(&document()).expect("the document serializes"));
    Router::new()
        .route(
            "/openapi.json",
            get(move || {
                let doc = doc.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], doc) }
            }),
        )
        .merge(SwaggerUi::new("/docs").config(Config::from("/openapi.json")))
}
