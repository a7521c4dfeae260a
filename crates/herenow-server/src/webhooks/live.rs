//! The webhook settings a running server may change (a reload of its
//! settings, [`Webhooks::reconfigure`]): the operator's endpoints
//! (`--webhook`), the secret that signs for those without one
//! (`--webhook-secret`) and the Pusher apps' endpoints
//! (`--pusher-webhook`). The others (timeouts, retries, queues, the
//! outbox's bounds, where spaces' endpoints may send) take a restart.
//!
//! The claim loop looks for new settings before each claim: an endpoint
//! that stays the same keeps its lane, its queue and its numbers; a new
//! one gets a lane; a lane of an endpoint no longer configured is no
//! longer given events, delivers those it holds (they happened while it
//! was configured) and ends. So nothing claimed is lost or left
//! unacknowledged, and events that happen after the reload go where the
//! new settings say.

use std::sync::Arc;

use super::deliver::LaneKit;
use super::endpoint::{PusherTarget, WebhookConfig};
use super::sign::Secret;
use super::state::EndpointState;
use super::{Configured, Route, Shared, StartError, Webhooks};
use crate::metrics::Metrics;

/// The settings of [`Shared::live`], swapped whole.
pub(super) struct Live {
    /// `--webhook-secret`.
    pub(super) default_secret: Option<Secret>,
    /// The Pusher apps' endpoints.
    pub(super) pusher: Vec<PusherTarget>,
    /// The operator's endpoints, then the Pusher apps'.
    pub(super) endpoints: Vec<Configured>,
    /// Each endpoint's numbers, in the same order.
    pub(super) states: Vec<Arc<EndpointState>>,
}

impl Live {
    /// The live part of `config`; an endpoint equal to one of `old`'s
    /// keeps its numbers (and so, in the claim loop, its lane).
    pub(super) fn new(config: &WebhookConfig, old: Option<&Live>, metrics: &Metrics) -> Self {
        let endpoints: Vec<Configured> = config
            .endpoints
            .iter()
            .map(|e| Configured {
                endpoint: e.clone(),
                format: None,
            })
            .chain(config.pusher.iter().enumerate().map(|(i, t)| Configured {
                endpoint: t.endpoint(i),
                format: Some(t.format),
            }))
            .collect();
        let states = endpoints
            .iter()
            .map(|c| {
                let kept = old.and_then(|old| {
                    old.endpoints
                        .iter()
                        .zip(&old.states)
                        .find(|(o, _)| {
                            o.format.is_some() == c.format.is_some() && o.endpoint == c.endpoint
                        })
                        .map(|(_, s)| s.clone())
                });
                kept.unwrap_or_else(|| {
                    Arc::new(EndpointState::new(
                        &c.endpoint,
                        config.queue_limit,
                        metrics.webhook(&c.endpoint.name),
                    ))
                })
            })
            .collect();
        Self {
            default_secret: config.default_secret.clone(),
            pusher: config.pusher.clone(),
            endpoints,
            states,
        }
    }
}

/// The routes of `live`: `old`'s for the endpoints that stayed, a new lane
/// for each other. The routes left in `old` are dropped here: their lanes
/// deliver what they hold and end.
pub(super) fn routes(
    shared: &Shared,
    live: &Live,
    mut old: Vec<Route>,
    kit: &LaneKit,
) -> Vec<Route> {
    live.endpoints
        .iter()
        .zip(&live.states)
        .map(|(configured, state)| {
            if let Some(i) = old.iter().position(|r| Arc::ptr_eq(&r.lane.state, state)) {
                return old.swap_remove(i);
            }
            let endpoint = &configured.endpoint;
            Route {
                filter: endpoint.filter.clone(),
                format: configured.format,
                lane: kit.spawn(
                    endpoint.clone(),
                    state.clone(),
                    shared.config.queue_limit,
                    false,
                ),
            }
        })
        .collect()
}

/// What a reload changed of the webhook endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WebhooksChange {
    /// Endpoints (the operator's and the Pusher apps') configured now
    /// that were not, a changed one (URL, filter, secret, name) counted
    /// as added and removed.
    pub added: usize,
    /// Endpoints no longer configured.
    pub removed: usize,
    /// The endpoints configured now.
    pub endpoints: usize,
    /// Whether `--webhook-secret` changed.
    pub default_secret: bool,
    /// Settings that differ but take a restart: their flags' names.
    pub needs_restart: Vec<&'static str>,
}

impl WebhooksChange {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.added == 0 && self.removed == 0 && !self.default_secret
    }
}

impl Webhooks {
    /// Delivers as `config` says from now on, for what can change while
    /// running (see the module documentation); what differs otherwise is
    /// told, not applied. Refused, changing nothing, for a configuration
    /// that does not check, or when endpoints come where there were none
    /// and the store's outbox cannot be opened.
    pub async fn reconfigure(&self, config: &WebhookConfig) -> Result<WebhooksChange, StartError> {
        let shared = &self.0;
        config.check()?;
        let mut change = WebhooksChange {
            needs_restart: needs_restart(&shared.config, config),
            ..WebhooksChange::default()
        };
        let old = shared.live.load_full();
        let live = Live::new(config, Some(&old), &shared.metrics);
        change.endpoints = live.endpoints.len();
        let kept = live
            .states
            .iter()
            .filter(|s| old.states.iter().any(|o| Arc::ptr_eq(o, s)))
            .count();
        change.added = live.states.len() - kept;
        change.removed = old.states.len() - kept;
        change.default_secret = old.default_secret != live.default_secret;
        if change.is_empty() {
            return Ok(change);
        }
        if old.endpoints.is_empty() && !live.endpoints.is_empty() {
            // As at start: the store keeps every event from now on.
            shared
                .outbox()?
                .outbox_open(shared.config.outbox_options(false))
                .await?;
        }
        shared.live.store(Arc::new(live));
        shared.changed.send_modify(|n| *n += 1);
        Ok(change)
    }
}

/// The flags of settings in which `new` differs from `running` that only
/// a restart applies.
fn needs_restart(running: &WebhookConfig, new: &WebhookConfig) -> Vec<&'static str> {
    differing_flags([
        (running.timeout == new.timeout, "webhook_timeout"),
        (running.max_age == new.max_age, "webhook_max_age"),
        (running.queue_limit == new.queue_limit, "webhook_queue"),
        (running.reclaim_idle == new.reclaim_idle, "webhook_reclaim"),
        (running.outbox_max == new.outbox_max, "webhook_outbox"),
        (
            running.space_allow == new.space_allow,
            "space_webhook_allow",
        ),
    ])
}

/// The flags of the settings that differ, in order: of `(same, flag)`
/// pairs, each `flag` whose `same` is false. A reload names with them
/// what only a restart applies (the server's own settings use it too).
pub(crate) fn differing_flags<const N: usize>(
    settings: [(bool, &'static str); N],
) -> Vec<&'static str> {
    settings
        .into_iter()
        .filter(|(same, _)| !same)
        .map(|(_, flag)| flag)
        .collect()
}
