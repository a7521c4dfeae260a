//! `/openapi.json`, generated from the handlers' annotations, and the
//! Swagger UI at `/docs` (its assets vendored into the binary: nothing is
//! fetched at build or run time).
//!
//! The document is OpenAPI 3.2: [`rules`] writes in the constraints the
//! server enforces (lengths, patterns, ranges, enums), `events` the
//! schema of every event of the two streams.

mod events;
pub(crate) mod rules;

use axum::Router;
use axum::body::Bytes;
use axum::http::header;
use axum::routing::get;
use utoipa::OpenApi;
use utoipa::openapi::OpenApiVersion;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa_swagger_ui::{Config, SwaggerUi};

use crate::config::Scope;
use crate::state::AppState;
use crate::{problem, watch};

/// What the document says besides its operations: its title, the schemas
/// no operation names, the tags. The operations come from the routes as
/// they are registered (`crate::routes`), each with the scope it needs,
/// and [`document`] finishes it for serving at `/openapi.json`.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "herenow",
        description = "Who is here right now, and when was everyone else last seen. See docs/API.md."
    ),
    components(schemas(problem::Problem, watch::shapes::UnwatchedData)),
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
pub(crate) struct ApiDoc;

/// The security scheme of `Authorization: Bearer KEY`.
const BEARER: &str = "bearer";
/// The security scheme of `X-API-Key: KEY`.
const X_API_KEY: &str = "x_api_key";

/// The security of an operation that needs a key of `scope`: either
/// header, naming the scope as its role (OpenAPI 3.1 lets any scheme name
/// roles). A write key may do all a read key may.
pub(crate) fn security(scope: Scope) -> Vec<SecurityRequirement> {
    let role = match scope {
        Scope::Read => "read",
        Scope::Write => "write",
    };
    vec![
        SecurityRequirement::new(BEARER, [role]),
        SecurityRequirement::new(X_API_KEY, [role]),
    ]
}

/// Declares the two ways to present a key, and on a server without keys
/// (`open`) that none is needed: each operation then also lists the empty
/// requirement, so a client or a fuzzer sees the key as optional, as it
/// is (one sent there is not checked).
fn declare_security(openapi: &mut utoipa::openapi::OpenApi, open: bool) {
    let components = openapi.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API key (`--api-key KEY:read` or `KEY:write`) as `Authorization: Bearer KEY`",
                ))
                .build(),
        ),
    );
    components.add_security_scheme(
        X_API_KEY,
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-API-Key",
            "An API key (`--api-key KEY:read` or `KEY:write`) as `X-API-Key: KEY`",
        ))),
    );
    if !open {
        return;
    }
    for item in openapi.paths.paths.values_mut() {
        for op in [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ]
        .into_iter()
        .flatten()
        {
            op.security
                .get_or_insert_with(Vec::new)
                .insert(0, SecurityRequirement::default());
        }
    }
}

/// What every operation may answer besides its own responses, declared
/// once here rather than on each handler: a client generated from the
/// document then knows every answer it can get. The last field: only
/// operations with a body. The `501`: a store that cannot answer the
/// question (a Redis seed layout whose keys do not hold it: metadata,
/// guests, friends, policy, events, last-seen times, depending on the
/// layout) answers `unsupported` from any operation that reaches it;
/// minting a token reaches no store ([`TOKENS`]).
const COMMON_ANSWERS: [(&str, &str, bool); 7] = [
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
    (
        "501",
        "The store cannot answer this (`unsupported`): a Redis seed layout whose keys do not hold it",
        false,
    ),
];

/// The one path whose operations reach no store, so never answer `501`.
const TOKENS: &str = "/v1/tokens";

fn add_common_answers(openapi: &mut utoipa::openapi::OpenApi) {
    for (path, item) in openapi.paths.paths.iter_mut() {
        for (op, has_body) in [
            (&mut item.get, false),
            (&mut item.delete, false),
            (&mut item.put, true),
            (&mut item.post, true),
        ] {
            let Some(op) = op else { continue };
            for (status, description, body_only) in COMMON_ANSWERS {
                let reaches_store = status != "501" || path != TOKENS;
                if (has_body || !body_only) && reaches_store {
                    op.responses
                        .responses
                        .entry(status.to_owned())
                        .or_insert_with(|| problem::answer(description));
                }
            }
        }
    }
}

/// The document served at `/openapi.json`: `openapi`, the one the routes
/// made, as OpenAPI 3.2, with the answers every operation may give, the
/// security schemes (optional on an `open` server, one without keys), the
/// server's constraints and the streams' events written in.
pub(crate) fn document(mut openapi: utoipa::openapi::OpenApi, open: bool) -> serde_json::Value {
    declare_security(&mut openapi, open);
    add_common_answers(&mut openapi);
    openapi.openapi = OpenApiVersion::Version32;
    let mut doc = serde_json::to_value(&openapi).expect("the OpenAPI document serializes");
    rules::apply(&mut doc);
    events::apply(&mut doc);
    doc
}

/// `/openapi.json`, serving `doc`, and `/docs`.
pub(crate) fn router(doc: serde_json::Value) -> Router<AppState> {
    let doc = Bytes::from(serde_json::to_vec(&doc).expect("the document serializes"));
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
