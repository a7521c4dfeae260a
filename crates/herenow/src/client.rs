//! A small HTTP client for the v1 API (docs/API.md): builds URLs with every
//! path segment percent-encoded, sends the API key, and turns every failure
//! into one line a person can act on: the server cannot be reached, or the
//! server's problem `detail` and `code`.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use reqwest::{Method, StatusCode, Url};
use serde::{Deserialize, Serialize};

use crate::cli::ClientOpts;

/// How long one request may take before the client gives up. A batch of
/// 10,000 heartbeats is well under a second on a healthy server; this is a
/// bound for a server that hangs, not a tuning knob.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connecting may take: an address that swallows packets should
/// not keep a script waiting for the whole request timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to one herenow server.
pub struct Api {
    http: reqwest::Client,
    base: Url,
    key: Option<String>,
}

/// RFC 9457 problem details, as the server sends for every error.
#[derive(Debug, Deserialize)]
struct Problem {
    title: Option<String>,
    detail: Option<String>,
    code: Option<String>,
}

impl Api {
    /// A client for the server named by `opts`.
    pub fn new(opts: &ClientOpts) -> Result<Self> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("herenow/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("cannot set up the HTTP client")?;
        Ok(Self {
            http,
            base: opts.server.clone(),
            key: opts.api_key.clone(),
        })
    }

    /// The URL of `segments` under the server's base URL, each segment
    /// percent-encoded (so a space or id with `/` or `%` stays one segment).
    pub fn url(&self, segments: &[&str]) -> Url {
        endpoint(&self.base, segments)
    }

    /// `GET url`; the answer's body.
    pub async fn get(&self, url: Url) -> Result<String> {
        self.send(Method::GET, url, None::<&()>).await
    }

    /// `method url`, with `body` as JSON if there is one; the answer's body.
    pub async fn send<B: Serialize>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
    ) -> Result<String> {
        let mut req = self.http.request(method, url);
        if let Some(key) = &self.key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = resp.text().await.map_err(|e| self.unreachable(&e))?;
        if status.is_success() {
            return Ok(text);
        }
        Err(anyhow!(problem_line(
            status,
            &text,
            retry_after.as_deref(),
            self.key.is_some()
        )))
    }

    fn unreachable(&self, e: &reqwest::Error) -> anyhow::Error {
        let server = self.base.as_str().trim_end_matches('/');
        if e.is_timeout() {
            return anyhow!(
                "the server at {server} did not answer within {}s",
                REQUEST_TIMEOUT.as_secs()
            );
        }
        // reqwest's own message ("error sending request for url …") repeats
        // the URL; the innermost cause ("Connection refused") is the news.
        let mut cause: &dyn std::error::Error = e;
        while let Some(inner) = cause.source() {
            cause = inner;
        }
        anyhow!("cannot reach the server at {server}: {cause}")
    }
}

/// `base` with `segments` appended, each percent-encoded.
pub fn endpoint(base: &Url, segments: &[&str]) -> Url {
    let mut url = base.clone();
    {
        // An http URL with a host always has path segments; `server_url`
        // in cli.rs checked both.
        let mut path = url
            .path_segments_mut()
            .expect("an http URL can have path segments");
        path.pop_if_empty();
        path.extend(segments);
    }
    url
}

/// One line for an error answer: the problem's `detail` and `code`, or the
/// HTTP status and the start of the body when the answer is not a problem
/// (a proxy's error page, say).
pub fn problem_line(
    status: StatusCode,
    body: &str,
    retry_after: Option<&str>,
    sent_key: bool,
) -> String {
    let mut line = match serde_json::from_str::<Problem>(body) {
        Ok(p) if p.detail.is_some() || p.title.is_some() => {
            let what = p.detail.or(p.title).unwrap_or_default();
            match p.code {
                Some(code) => format!("{what} ({code}, HTTP {})", status.as_u16()),
                None => format!("{what} (HTTP {})", status.as_u16()),
            }
        }
        _ => {
            let snippet: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
            let snippet: String = snippet.chars().take(200).collect();
            if snippet.is_empty() {
                format!("the server answered HTTP {status}")
            } else {
                format!("the server answered HTTP {status}: {snippet}")
            }
        }
    };
    if status == StatusCode::UNAUTHORIZED && !sent_key {
        line.push_str("; pass --api-key KEY or set HERENOW_API_KEY");
    }
    if let Some(secs) = retry_after {
        line.push_str(&format!("; retry after {secs}s"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_encode_each_segment() {
        let base: Url = "http://127.0.0.1:7700".parse().unwrap();
        assert_eq!(
            endpoint(&base, &["v1", "spaces", "lobby", "members", "a/b c%"]).as_str(),
            "http://127.0.0.1:7700/v1/spaces/lobby/members/a%2Fb%20c%25"
        );
        let prefixed: Url = "http://example.com/herenow/".parse().unwrap();
        assert_eq!(
            endpoint(&prefixed, &["v1", "friends", "alice"]).as_str(),
            "http://example.com/herenow/v1/friends/alice"
        );
    }

    #[test]
    fn problems_become_one_line() {
        let body = r#"{"type":"https://herenow.dev/problems/bad-member-id","title":"Bad member id",
            "status":400,"detail":"member id is 300 bytes; the limit is 256 bytes","code":"bad-member-id"}"#;
        assert_eq!(
            problem_line(StatusCode::BAD_REQUEST, body, None, false),
            "member id is 300 bytes; the limit is 256 bytes (bad-member-id, HTTP 400)"
        );
        let unauthorized = r#"{"title":"Unauthorized","status":401,"code":"unauthorized"}"#;
        assert_eq!(
            problem_line(StatusCode::UNAUTHORIZED, unauthorized, None, false),
            "Unauthorized (unauthorized, HTTP 401); pass --api-key KEY or set HERENOW_API_KEY"
        );
        assert_eq!(
            problem_line(
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"detail":"store down"}"#,
                Some("2"),
                true
            ),
            "store down (HTTP 503); retry after 2s"
        );
        assert_eq!(
            problem_line(
                StatusCode::BAD_GATEWAY,
                "<html>\n<b>Bad</b>  gateway\n</html>",
                None,
                true
            ),
            "the server answered HTTP 502 Bad Gateway: <html> <b>Bad</b> gateway </html>"
        );
        assert_eq!(
            problem_line(StatusCode::NOT_FOUND, "", None, true),
            "the server answered HTTP 404 Not Found"
        );
    }
}
