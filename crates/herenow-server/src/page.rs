//! The live who's-online page at `/` and its assets, embedded in the binary.
//!
//! Plain HTML, CSS and JavaScript from `crates/herenow-server/assets`, with
//! no build step and nothing loaded from elsewhere, so the page works on a
//! machine with no network. The script talks to the public API only (and
//! `/v1/ws` through `/client.js`, the browser client of docs/PROTOCOL.md),
//! so the page needs nothing from the server that any other client could
//! not have.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const CLIENT_JS: &str = include_str!("../assets/client.js");
const FRIENDS_JS: &str = include_str!("../assets/friends.js");
const STYLE_CSS: &str = include_str!("../assets/style.css");
const FAVICON_SVG: &str = include_str!("../assets/favicon.svg");

/// Everything the page loads comes from this server; nothing inline, no
/// `eval`. Member ids and metadata are user input shown on the page, so the
/// policy is a second line of defence behind the script's use of
/// `textContent`.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The HTML is revalidated on every load, so a new binary's page shows at
/// once; the assets may be reused for a minute. The files carry no version
/// in their names, so a long cache would pair a new page with old assets.
const HTML_CACHE: &str = "no-cache";
const ASSET_CACHE: &str = "public, max-age=60";

const JS: &str = "text/javascript; charset=utf-8";

/// Routes for `/` and the page's assets. Stateless, so it merges into a
/// router of any state.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(index))
        .route("/index.html", get(index))
        .route("/app.js", asset_route(APP_JS, JS))
        .route("/client.js", asset_route(CLIENT_JS, JS))
        .route("/friends.js", asset_route(FRIENDS_JS, JS))
        .route(
            "/style.css",
            asset_route(STYLE_CSS, "text/css; charset=utf-8"),
        )
        .route("/favicon.svg", asset_route(FAVICON_SVG, "image/svg+xml"))
}

async fn index() -> Response {
    let mut res = asset(INDEX_HTML, "text/html; charset=utf-8", HTML_CACHE);
    let headers = res.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// `GET` of an asset the page loads.
fn asset_route<S: Clone + Send + Sync + 'static>(
    body: &'static str,
    content_type: &'static str,
) -> MethodRouter<S> {
    get(move || async move { asset(body, content_type, ASSET_CACHE) })
}

fn asset(body: &'static str, content_type: &'static str, cache: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, cache),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    async fn get_page(path: &str) -> Response {
        router::<()>()
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap()
    }

    fn header(res: &Response, name: header::HeaderName) -> &str {
        res.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    #[tokio::test]
    async fn serves_each_asset_with_its_type_and_cache_policy() {
        for (path, ty, cache) in [
            ("/", "text/html; charset=utf-8", HTML_CACHE),
            ("/index.html", "text/html; charset=utf-8", HTML_CACHE),
            ("/app.js", "text/javascript; charset=utf-8", ASSET_CACHE),
            ("/client.js", "text/javascript; charset=utf-8", ASSET_CACHE),
            ("/friends.js", "text/javascript; charset=utf-8", ASSET_CACHE),
            ("/style.css", "text/css; charset=utf-8", ASSET_CACHE),
            ("/favicon.svg", "image/svg+xml", ASSET_CACHE),
        ] {
            let res = get_page(path).await;
            assert_eq!(res.status(), StatusCode::OK, "{path}");
            assert_eq!(header(&res, header::CONTENT_TYPE), ty, "{path}");
            assert_eq!(header(&res, header::CACHE_CONTROL), cache, "{path}");
            assert_eq!(header(&res, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
            let body = res.into_body().collect().await.unwrap().to_bytes();
            assert!(!body.is_empty(), "{path}");
        }
    }

    #[tokio::test]
    async fn the_page_loads_only_its_own_assets() {
        let res = get_page("/").await;
        assert!(header(&res, header::CONTENT_SECURITY_POLICY).contains("script-src 'self'"));
        let body = res.into_body().collect().await.unwrap().to_bytes();
        let html = std::str::from_utf8(&body).unwrap();
        for asset in [
            "/app.js",
            "/client.js",
            "/friends.js",
            "/style.css",
            "/favicon.svg",
        ] {
            assert!(html.contains(asset), "index.html links {asset}");
        }
        // No CDN: nothing is fetched from another origin.
        assert!(!html.contains("http://") && !html.contains("https://"));
        for script in [APP_JS, FRIENDS_JS, CLIENT_JS] {
            assert!(!script.contains("innerHTML"), "ids are user input");
        }
    }

    #[tokio::test]
    async fn other_paths_are_not_the_pages() {
        assert_eq!(get_page("/nope.js").await.status(), StatusCode::NOT_FOUND);
    }
}
