//! `herenow serve`'s webhook flags, the
//! `herenow_server::WebhookConfig` they describe ([`config`]),
//! and the subcommands of `herenow webhooks`.
//! A leaf: [`crate::cli`] flattens [`WebhookArgs`] into `serve`.

use std::time::Duration;

use clap::{Args, Subcommand};
use herenow_server::ConfigError;
use herenow_server::{
    SpaceWebhookAllow, WebhookConfig, WebhookEndpoint as Endpoint, WebhookSecret as Secret,
};

use crate::parse::positive_duration;

/// `herenow serve`'s webhook flags.
#[derive(Debug, Args)]
pub struct WebhookArgs {
    /// Send events to this endpoint:
    /// `URL[,events=join,leave,away,back,update,occupied,vacated][,spaces=GLOB][,secret=whsec_…][,name=NAME]`.
    /// Repeat for more (separated by spaces in the environment variable).
    /// Signed as Standard Webhooks say; without `secret=` the
    /// --webhook-secret signs.
    #[arg(
        long = "webhook",
        value_name = "URL[,OPTION=…]",
        env = "HERENOW_WEBHOOK",
        value_delimiter = ' ',
        hide_env_values = true
    )]
    pub webhooks: Vec<String>,

    /// The secret of every --webhook that names none: `whsec_` and the
    /// base64 of 24 to 64 random bytes.
    #[arg(
        long,
        env = "HERENOW_WEBHOOK_SECRET",
        value_name = "whsec_…",
        hide_env_values = true
    )]
    pub webhook_secret: Option<String>,

    /// How long one webhook request may take before it is retried.
    #[arg(long, env = "HERENOW_WEBHOOK_TIMEOUT", default_value = "10s", value_parser = positive_duration)]
    pub webhook_timeout: Duration,

    /// How long after it happened an event is still delivered: a failing
    /// batch is retried until its oldest event is this old, then dropped
    /// and counted. On Redis, also how long the other servers keep
    /// capturing after the last server with webhooks stopped.
    #[arg(long, env = "HERENOW_WEBHOOK_MAX_AGE", default_value = "24h", value_parser = positive_duration)]
    pub webhook_max_age: Duration,

    /// Events waiting per endpoint; past it, events are dropped for that
    /// endpoint and counted.
    #[arg(long, env = "HERENOW_WEBHOOK_QUEUE", default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub webhook_queue: u32,

    /// How long a server's claimed, unacknowledged events stay its own
    /// before another server takes them over (a server that died).
    #[arg(long, env = "HERENOW_WEBHOOK_RECLAIM", default_value = "60s", value_parser = positive_duration)]
    pub webhook_reclaim: Duration,

    /// Events the store keeps for webhooks at most (on Redis, per space);
    /// older ones are trimmed and counted.
    #[arg(long, env = "HERENOW_WEBHOOK_OUTBOX", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub webhook_outbox: u64,

    /// Hosts and networks that endpoints set over the API (a space's
    /// `webhooks`) may reach although they are loopback, link-local,
    /// private, CGNAT, unique-local, multicast, unspecified or broadcast
    /// addresses: host names (matched exactly), addresses, networks
    /// (`10.0.0.0/8`, `fd00::/8`). Repeat, or separate with commas. By
    /// default none: those endpoints reach public addresses only. The
    /// --webhook endpoints are never restricted.
    #[arg(
        long = "space-webhook-allow",
        value_name = "HOST|CIDR,...",
        env = "HERENOW_SPACE_WEBHOOK_ALLOW",
        value_delimiter = ','
    )]
    pub space_webhook_allow: Vec<SpaceWebhookAllow>,
}

/// The webhook configuration the flags describe. Fails for a bad
/// endpoint or secret (never echoing the secret) or settings that do not
/// fit together.
pub fn config(args: &WebhookArgs) -> Result<WebhookConfig, ConfigError> {
    let secret = args
        .webhook_secret
        .as_deref()
        .map(str::parse::<Secret>)
        .transpose()
        .map_err(|e| ConfigError::Webhook(herenow_server::WebhookError::Secret(e)))?;
    let endpoints = args
        .webhooks
        .iter()
        .filter(|s| !s.trim().is_empty())
        .enumerate()
        .map(|(i, spec)| Endpoint::parse(spec, i, secret.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut space_allow = SpaceWebhookAllow::default();
    for one in &args.space_webhook_allow {
        space_allow.extend(one.clone());
    }
    let config = WebhookConfig {
        endpoints,
        timeout: args.webhook_timeout,
        max_age: args.webhook_max_age,
        queue_limit: args.webhook_queue as usize,
        reclaim_idle: args.webhook_reclaim,
        outbox_max: args.webhook_outbox,
        default_secret: secret,
        space_allow,
        ..WebhookConfig::default()
    };
    config.check()?;
    Ok(config)
}

/// `herenow webhooks …`.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Send one signed sample event (a `join` in space `herenow.test`) to
    /// URL and say how it answered; no server involved.
    Test {
        /// The receiver's URL.
        url: String,
        /// The secret the receiver verifies with.
        #[arg(long, env = "HERENOW_WEBHOOK_SECRET", hide_env_values = true)]
        secret: String,
        /// How long to wait for the answer.
        #[arg(long, default_value = "10s", value_parser = positive_duration)]
        timeout: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn serve(args: &[&str]) -> Result<WebhookConfig, ConfigError> {
        let argv = ["herenow", "serve"].into_iter().chain(args.iter().copied());
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Serve(s) => config(&s.webhooks),
            _ => panic!("not serve"),
        }
    }
    #[test]
    fn webhook_flags_become_endpoints() {
        let c = serve(&[
            "--webhook",
            "https://a.example/h,events=join,leave",
            "--webhook",
            &format!("http://127.0.0.1:9/h,name=local,secret={SECRET}"),
            "--webhook-secret",
            SECRET,
            "--webhook-timeout",
            "3s",
            "--webhook-queue",
            "50",
        ])
        .unwrap();
        assert_eq!(c.endpoints.len(), 2);
        assert_eq!(c.endpoints[0].name, "0:a.example");
        assert_eq!(c.endpoints[1].name, "local");
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.queue_limit, 50);
        assert!(serve(&[]).unwrap().endpoints.is_empty());
    }

    #[test]
    fn bad_webhooks_are_configuration_errors_without_echo() {
        for bad in [
            &["--webhook", "https://a.example/h"][..],
            &["--webhook", "https://a.example/h,secret=whsec_aHVudGVyMg=="],
            &["--webhook", "nowhere,secret=x"],
            &[
                "--webhook",
                "https://a/h,events=arrive",
                "--webhook-secret",
                SECRET,
            ],
            &["--webhook-secret", "hunter2"],
            &[
                "--webhook",
                "https://a/h",
                "--webhook-secret",
                SECRET,
                "--webhook-reclaim",
                "5s",
            ],
        ] {
            let err = serve(bad).unwrap_err();
            assert!(matches!(err, ConfigError::Webhook(_)), "{bad:?}: {err:?}");
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }
}
