//! The live who's-online page at `/` and its assets, embedded in the binary.
//!
//! (Being built: see the page helper's brief.)

use axum::Router;

/// Routes for `/` and the page's assets. Stateless.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
}
