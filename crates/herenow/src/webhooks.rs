//! `herenow webhooks`: prints `GET /v1/webhooks`, or sends a signed
//! sample to a URL (`test`) without any server.

use std::time::Duration;

use anyhow::{Result, anyhow};
use herenow_server::{WebhookAttempt as Attempt, WebhookSecret as Secret};

use crate::cli::{ClientOpts, WebhooksArgs, WebhooksCommand};
use crate::client::Api;
use crate::output::{emit, now_ms, print};

/// Runs `herenow webhooks`.
pub async fn run(args: WebhooksArgs) -> Result<()> {
    match args.command {
        Some(WebhooksCommand::Test {
            url,
            secret,
            timeout,
        }) => test(&url, &secret, timeout).await,
        None => list(&args.client).await,
    }
}

async fn test(url: &str, secret: &str, timeout: Duration) -> Result<()> {
    let secret: Secret = secret.parse()?;
    let (attempt, id) = herenow_server::send_test_webhook(url, secret, timeout, now_ms()).await?;
    match attempt {
        Attempt::Delivered => emit(&format!("delivered {id} to {url}\n")),
        Attempt::Retry { why, .. } => Err(anyhow!(
            "{url}: {why} (herenow would retry this); message {id}"
        )),
        Attempt::Reject { why } => Err(anyhow!(
            "{url}: {why} (herenow would drop the events); message {id}"
        )),
    }
}

async fn list(client: &ClientOpts) -> Result<()> {
    let api = Api::new(client)?;
    let body = api.get(api.url(&["v1", "webhooks"])).await?;
    print(client.json, &body, |view| render(&view))
}

/// What `GET /v1/webhooks` answers, as this client reads it (the server's
/// `WebhooksView` only serializes); what it does not know it leaves.
#[derive(Debug, serde::Deserialize)]
struct WebhooksViewIn {
    enabled: bool,
    endpoints: Vec<serde_json::Value>,
    outbox: Option<serde_json::Value>,
}

fn render(view: &WebhooksViewIn) -> String {
    if !view.enabled {
        return "no webhooks configured (herenow serve --webhook URL,secret=whsec_…)\n".to_owned();
    }
    let mut out = String::new();
    for e in &view.endpoints {
        let n = |k: &str| e[k].as_u64().unwrap_or(0);
        let d = |k: &str| e["dropped"][k].as_u64().unwrap_or(0);
        out.push_str(&format!(
            "{}  {}  {}\n  queue {}/{}  delivered {}  retried {}  failed {}  dropped {} (overflow {}, rejected {}, expired {})\n",
            e["name"].as_str().unwrap_or("?"),
            e["state"].as_str().unwrap_or("?"),
            e["url"].as_str().unwrap_or("?"),
            e["queue"]["depth"].as_u64().unwrap_or(0),
            e["queue"]["limit"].as_u64().unwrap_or(0),
            n("delivered"),
            n("retried"),
            n("failed"),
            d("overflow") + d("rejected") + d("expired"),
            d("overflow"),
            d("rejected"),
            d("expired"),
        ));
        if let Some(err) = e["last_error"]["error"].as_str() {
            out.push_str(&format!(
                "  last error: {err} (at {} ms)\n",
                e["last_error"]["at_ms"].as_u64().unwrap_or(0)
            ));
        }
    }
    if let Some(o) = &view.outbox {
        out.push_str(&format!(
            "outbox: {} waiting, {} claimed, {} trimmed\n",
            o["depth"].as_u64().unwrap_or(0),
            o["pending"].as_u64().unwrap_or(0),
            o["trimmed"].as_u64().unwrap_or(0),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, ClientCommand, Command};
    use clap::Parser;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn the_webhooks_command_lists_or_tests() {
        let cli = Cli::try_parse_from(["herenow", "webhooks", "--json"]).unwrap();
        let Command::Client(ClientCommand::Webhooks(w)) = cli.command else {
            panic!("not webhooks");
        };
        assert!(w.command.is_none() && w.client.json);
        let cli = Cli::try_parse_from([
            "herenow",
            "webhooks",
            "test",
            "http://h/x",
            "--secret",
            SECRET,
        ])
        .unwrap();
        let Command::Client(ClientCommand::Webhooks(w)) = cli.command else {
            panic!("not webhooks");
        };
        assert!(matches!(w.command, Some(WebhooksCommand::Test { .. })));
    }
}
