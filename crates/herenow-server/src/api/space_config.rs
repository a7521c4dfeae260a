//! `GET` / `PUT /v1/spaces/{space}/config`: a space's time policy and the
//! webhook endpoints it names.

use axum::Json;
use axum::extract::State;
use herenow_core::outbox::{OutboxKind, SpaceHook};
use herenow_core::{Capability, ErrorKind, SpaceConfig, SpaceName, limits};

use crate::auth::Access;
use crate::extract::{JsonBody, SpacePath};
use crate::metrics::Query;
use crate::problem::{ApiError, BadInput, Problem};
use crate::protocol::dto::{SpaceWebhookDto, WebhookEvent};
use crate::state::AppState;
use crate::webhooks::endpoint::parse_url;
use crate::webhooks::{Endpoint, Secret, allow};

pub use crate::protocol::dto::SpaceConfigDto;

/// The space's time policy (the defaults for a space never configured),
/// and, to callers that may write, the webhook endpoints it names.
#[utoipa::path(
    get,
    path = "/v1/spaces/{space}/config",
    operation_id = "space_config",
    tag = "spaces",
    params(SpacePath),
    responses(
        (status = 200, description = "The policy", body = SpaceConfigDto),
        BadInput,
    ),
)]
pub async fn get_config(
    State(state): State<AppState>,
    access: Access,
    SpacePath(space): SpacePath,
) -> Result<Json<SpaceConfigDto>, ApiError> {
    state.metrics().query(Query::Config);
    let mut answer: SpaceConfigDto = state.store().config(&space).await?.into();
    if access.can_write() {
        answer.webhooks = hooks_view(&state, &space).await?;
    }
    Ok(Json(answer))
}

/// Sets the space's time policy; the four thresholds are required, the
/// remembering fields and the webhook endpoints keep their value when
/// absent.
#[utoipa::path(
    put,
    path = "/v1/spaces/{space}/config",
    operation_id = "set_space_config",
    tag = "spaces",
    params(SpacePath),
    request_body = SpaceConfigDto,
    responses(
        (status = 200, description = "The new policy", body = SpaceConfigDto),
        BadInput,
        (status = 501, description = "The store keeps no webhook endpoints (a seed's layout)", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn put_config(
    State(state): State<AppState>,
    SpacePath(space): SpacePath,
    body: JsonBody,
) -> Result<Json<SpaceConfigDto>, ApiError> {
    let dto = body.parse::<SpaceConfigDto>()?;
    // Everything checked before anything is written: a bad endpoint
    // leaves the policy as it was, and a bad policy the endpoints.
    let hooks = dto
        .webhooks
        .as_deref()
        .map(|list| space_hooks(list, state.webhooks().default_secret().as_ref()))
        .transpose()?;
    if let Some(hooks) = &hooks {
        allow::check_hooks(state.webhooks().space_allow(), hooks).await?;
    }
    let current = state.store().config(&space).await?;
    let config: SpaceConfig = dto.onto(current);
    config.validate()?;
    // This route needs a write-scoped key: the caller sees the endpoints,
    // those this call sets, else the stored ones, read before anything is
    // written, so that endpoints the store cannot read fail the call
    // before it changes the policy rather than after.
    let endpoints = match &hooks {
        Some(hooks) => Some(view(hooks)),
        None => hooks_view(&state, &space).await?,
    };
    if let Some(hooks) = &hooks {
        let store = state.store();
        let endpoints = store
            .space_webhooks()
            .ok_or_else(|| store.lacks(Capability::SpaceWebhooks))?;
        endpoints.set_space_hooks(&space, hooks).await?;
        state.webhooks().space_hooks_changed();
    }
    state.store().set_config(&space, config).await?;
    let mut answer: SpaceConfigDto = config.into();
    answer.webhooks = endpoints;
    Ok(Json(answer))
}

/// The endpoints `space` names, without their secrets; `None` on a store
/// that keeps none (a seed's layout).
async fn hooks_view(
    state: &AppState,
    space: &SpaceName,
) -> Result<Option<Vec<SpaceWebhookDto>>, ApiError> {
    let Some(endpoints) = state.store().space_webhooks() else {
        return Ok(None);
    };
    match endpoints.space_hooks(space).await {
        Ok(hooks) => Ok(Some(view(&hooks))),
        Err(e) if e.kind() == ErrorKind::Unsupported => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Endpoints as an answer shows them: without their secrets.
fn view(hooks: &[SpaceHook]) -> Vec<SpaceWebhookDto> {
    hooks
        .iter()
        .map(|h| SpaceWebhookDto {
            url: h.url.clone(),
            events: Some(
                h.kinds
                    .iter()
                    .filter_map(|k| WebhookEvent::of(*k))
                    .collect(),
            ),
            secret: None,
            name: Endpoint::of_space_hook(h).ok().map(|e| e.name),
        })
        .collect()
}

/// The endpoints a `PUT` names, checked as the server will use them: a
/// URL it can send to, a Standard Webhooks secret (or the server's
/// `--webhook-secret`), kinds each once.
fn space_hooks(
    list: &[SpaceWebhookDto],
    default_secret: Option<&Secret>,
) -> Result<Vec<SpaceHook>, ApiError> {
    let bad = |detail: String| ApiError::bad_request("bad-webhook", detail);
    if list.len() > limits::MAX_SPACE_HOOKS {
        return Err(bad(format!(
            "{} webhook endpoints; a space names at most {}",
            list.len(),
            limits::MAX_SPACE_HOOKS
        )));
    }
    let mut hooks = Vec::with_capacity(list.len());
    for (i, w) in list.iter().enumerate() {
        if w.url.len() > limits::MAX_HOOK_URL_BYTES {
            return Err(bad(format!(
                "webhooks[{i}].url is {} bytes; the limit is {}",
                w.url.len(),
                limits::MAX_HOOK_URL_BYTES
            )));
        }
        parse_url(&w.url).map_err(|e| bad(format!("webhooks[{i}].url: {e}")))?;
        let secret = match &w.secret {
            Some(s) => {
                s.parse::<Secret>()
                    .map_err(|e| bad(format!("webhooks[{i}].secret: {e}")))?;
                s.clone()
            }
            None => default_secret.map(Secret::to_written).ok_or_else(|| {
                bad(format!(
                    "webhooks[{i}] has no secret and the server has no --webhook-secret"
                ))
            })?,
        };
        let kinds: Vec<OutboxKind> = match &w.events {
            None => OutboxKind::ALL.to_vec(),
            Some(events) => events.iter().map(|e| OutboxKind::from(*e)).collect(),
        };
        hooks.push(SpaceHook {
            url: w.url.clone(),
            kinds,
            secret,
        });
    }
    SpaceHook::check_all(&hooks).map_err(|e| bad(format!("webhooks: {e}")))?;
    Ok(hooks)
}
