//! Server-Sent Events read off a response body, one event at a time.

use std::time::Duration;

use axum::body::Body;
use axum::http::{StatusCode, header};
use http_body_util::BodyExt;
use serde_json::Value;

/// A guard against a broken stream hanging the test; never reached when
/// the server behaves.
const PATIENCE: Duration = Duration::from_secs(10);

/// Reads SSE frames off a response body, one event at a time.
pub struct Events {
    body: Body,
    buffer: String,
}

impl Events {
    pub fn new(response: axum::response::Response) -> Self {
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        Self {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next event's name and data; `None` when the stream ended.
    pub async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = None;
                let mut data = None;
                for line in block.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = Some(n.to_owned());
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(serde_json::from_str(d).unwrap());
                    }
                }
                match (name, data) {
                    (Some(n), Some(d)) => return Some((n, d)),
                    // A keep-alive comment: read on.
                    _ => continue,
                }
            }
            let frame = tokio::time::timeout(PATIENCE, self.body.frame())
                .await
                .expect("the stream neither sent nor ended");
            match frame {
                None => return None,
                Some(f) => {
                    let f = f.unwrap();
                    if let Some(bytes) = f.data_ref() {
                        self.buffer.push_str(std::str::from_utf8(bytes).unwrap());
                    }
                }
            }
        }
    }
}
