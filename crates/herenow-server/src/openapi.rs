//! `/openapi.json`, generated from the handlers' annotations, and the
//! Swagger UI at `/docs` (its assets vendored into the binary: nothing is
//! fetched at build or run time).

use axum::Router;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::SwaggerUi;

use crate::state::AppState;
use crate::{api, problem, sse};

/// The API description.
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
        sse::events,
    ),
    components(schemas(problem::Problem)),
    modifiers(&Security),
    tags(
        (name = "heartbeats", description = "Heartbeats and leaves"),
        (name = "status", description = "Status and last seen"),
        (name = "online", description = "Who's online, counts"),
        (name = "friends", description = "Friend sets and online friends"),
        (name = "spaces", description = "Spaces, their policy and history"),
        (name = "events", description = "Server-Sent Events"),
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

/// `/openapi.json` and `/docs`.
pub fn router() -> Router<AppState> {
    SwaggerUi::new("/docs")
        .url("/openapi.json", ApiDoc::openapi())
        .into()
}
