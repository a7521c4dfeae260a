//! HTTP for tests: requests through the router without a socket (axum's
//! `oneshot`), answers read to the end, and raw HTTP/1.1 on a real socket
//! for what only a socket shows.

use std::net::SocketAddr;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use axum::response::Response;
use herenow_core::ManualClock;
use herenow_server::{App, AppState, Config, app};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tower::ServiceExt;

use super::{PATIENCE, T0, memory_state, memory_store};

/// An answer, read to the end.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// Reads `response` to the end (not for an event stream: it does not
    /// end).
    pub async fn read(response: Response) -> Answer {
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }

    /// The body as JSON; panics, showing it, when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {:?} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    /// Asserts `200` and returns the JSON body.
    #[track_caller]
    pub fn ok(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        self.json()
    }

    /// Asserts a problem answer with this status and code, in full: the
    /// media type, and `type`, `title` and `detail` filled in.
    #[track_caller]
    pub fn problem(&self, status: StatusCode, code: &str) {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            "application/problem+json"
        );
        let p = self.json();
        assert_eq!(p["code"], code, "problem: {p}");
        assert_eq!(p["status"], status.as_u16());
        assert!(p["type"].as_str().unwrap().ends_with(code));
        assert!(!p["title"].as_str().unwrap().is_empty());
        assert!(!p["detail"].as_str().unwrap().is_empty());
    }

    /// Asserts `503` with this code and a `Retry-After`.
    #[track_caller]
    pub fn unavailable(&self, code: &str) {
        assert_eq!(
            self.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.json()["code"], code);
        assert!(
            self.headers.contains_key(header::RETRY_AFTER),
            "503 without Retry-After"
        );
    }
}

/// A request, with a JSON body and a bearer key when given.
pub fn request(
    method: Method,
    uri: &str,
    body: Option<&Value>,
    key: Option<&str>,
) -> Request<Body> {
    let mut b = Request::builder().method(method).uri(uri);
    if let Some(k) = key {
        b = b.header(header::AUTHORIZATION, format!("Bearer {k}"));
    }
    match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(serde_json::to_vec(v).unwrap()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

/// Sends `request` through the router and reads the answer.
pub async fn call(app: &App, request: Request<Body>) -> Answer {
    Answer::read(app.clone().oneshot(request).await.unwrap()).await
}

/// `GET uri`, without a key.
pub async fn get(app: &App, uri: &str) -> Answer {
    call(app, request(Method::GET, uri, None, None)).await
}

/// `POST uri` with a JSON body, without a key.
pub async fn post_json(app: &App, uri: &str, body: &Value) -> Answer {
    call(app, request(Method::POST, uri, Some(body), None)).await
}

/// The router over a state, with the clock the state's store reads.
pub struct Api {
    pub app: App,
    pub state: AppState,
    pub clock: ManualClock,
}

impl Api {
    /// The router over `state`.
    pub fn over(state: AppState, clock: ManualClock) -> Api {
        Api {
            app: app(state.clone()),
            state,
            clock,
        }
    }

    /// The router over a fresh memory store whose clock starts at [`T0`].
    pub fn memory(config: Config) -> Api {
        let clock = ManualClock::new(T0);
        let state = memory_state(memory_store(&clock), &config);
        Api::over(state, clock)
    }

    /// Sends `request` and reads the answer.
    pub async fn call(&self, request: Request<Body>) -> Answer {
        call(&self.app, request).await
    }

    /// `GET uri`.
    pub async fn get(&self, uri: &str) -> Answer {
        get(&self.app, uri).await
    }

    /// `POST uri` with a JSON body.
    pub async fn post(&self, uri: &str, body: Value) -> Answer {
        post_json(&self.app, uri, &body).await
    }

    /// `PUT uri` with a JSON body.
    pub async fn put(&self, uri: &str, body: Value) -> Answer {
        self.call(request(Method::PUT, uri, Some(&body), None))
            .await
    }

    /// `POST uri` with these bytes and this content type, as sent.
    pub async fn raw(&self, uri: &str, content_type: Option<&str>, body: Vec<u8>) -> Answer {
        let mut b = Request::builder().method(Method::POST).uri(uri);
        if let Some(ct) = content_type {
            b = b.header(header::CONTENT_TYPE, ct);
        }
        self.call(b.body(Body::from(body)).unwrap()).await
    }

    /// One heartbeat of user `id` in `space`, which must succeed.
    pub async fn beat(&self, space: &str, id: &str) {
        self.post(
            &format!("/v1/spaces/{space}/heartbeat"),
            json!({ "id": id }),
        )
        .await
        .ok();
    }
}

/// Sends one raw HTTP/1.1 request on a fresh connection and reads the
/// answer to the end (the request should ask to close).
pub async fn raw_http(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .expect("server did not answer")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// `GET path` as raw HTTP/1.1, closing after the answer.
pub async fn raw_get(addr: SocketAddr, path: &str) -> String {
    raw_http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
    .await
}
