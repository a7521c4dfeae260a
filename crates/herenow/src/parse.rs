//! The value parsers of the command line: everything a user can get
//! wrong in one flag's value (a duration without a unit, metadata that is
//! not a JSON object, a server URL that is not http, a shard count out of
//! range) is refused here, by clap, with a message naming the bound.
//! [`crate::cli`] declares the flags and names these as their parsers.

use std::time::Duration;

#[cfg(feature = "redis")]
pub(crate) use herenow_redis::SeedLayout;
use reqwest::Url;

/// Parses `--ttl` of `herenow token`: whole seconds, 1s to 24h.
pub fn token_ttl(s: &str) -> Result<Duration, String> {
    let d = positive_duration(s)?;
    if d.subsec_nanos() != 0 || d.as_secs() == 0 {
        return Err("a token lives whole seconds, at least 1s".to_owned());
    }
    if d > Duration::from_secs(24 * 3600) {
        return Err("a token lives at most 24h".to_owned());
    }
    Ok(d)
}

/// Parses `--remember`: a humantime duration or `0` (off), at most three
/// years.
pub fn remember_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    let d = positive_duration(s)?;
    if d.as_millis() > u128::from(herenow_core::limits::MAX_REMEMBER_MS) {
        return Err("remembering is limited to 1096d (three years)".to_owned());
    }
    Ok(d)
}

/// Parses `--grace`: a duration of at most five minutes, or zero (`0`,
/// `0s`: no grace).
pub fn grace_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" || humantime::parse_duration(s.trim()).is_ok_and(|d| d.is_zero()) {
        return Ok(Duration::ZERO);
    }
    let d = positive_duration(s)?;
    if d.as_millis() > u128::from(herenow_core::limits::MAX_GRACE_MS) {
        return Err("the grace is limited to 5m".to_owned());
    }
    Ok(d)
}

/// Parses `--ping-interval`, `--pong-wait` and `--drain`: a duration
/// longer than zero and at most ten minutes.
pub fn socket_timer(s: &str) -> Result<Duration, String> {
    let d = positive_duration(s)?;
    if d > herenow_server::MAX_SOCKET_TIMER {
        return Err("the duration must be at most 10m".to_owned());
    }
    Ok(d)
}

/// Parses a humantime duration (`90s`, `10m`, `1h30m`, `1500ms`) that is
/// longer than zero. A bare number is refused, as the API refuses it: is
/// `10` seconds or minutes?
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("expected a duration like 90s, 10m, 1h or 1500ms ({e})"))?;
    if d.is_zero() {
        return Err("the duration must be longer than zero".to_owned());
    }
    // Whole milliseconds are what the server speaks; a shorter duration would
    // round to zero.
    if d.as_millis() == 0 {
        return Err("the duration must be at least 1ms".to_owned());
    }
    Ok(d)
}

/// Parses `--meta`: a JSON object (the API's metadata is an object, so an
/// array or a string is refused here rather than by the server).
pub fn json_object(s: &str) -> Result<serde_json::Value, String> {
    let v: serde_json::Value =
        serde_json::from_str(s).map_err(|e| format!("not valid JSON: {e}"))?;
    if !v.is_object() {
        return Err("metadata must be a JSON object, like {\"name\":\"Alice\"}".to_owned());
    }
    Ok(v)
}

/// Parses `--server`: an http(s) URL with a host.
pub fn server_url(s: &str) -> Result<Url, String> {
    let url = Url::parse(s).map_err(|e| format!("not a URL ({e}); try http://127.0.0.1:7700"))?;
    if url.scheme() == "https" {
        // The client is built without TLS to keep the binary small; put it
        // next to the server or behind a local proxy.
        return Err("this client speaks plain http only; use http://HOST:PORT".to_owned());
    }
    if url.scheme() != "http" || url.host().is_none() {
        return Err("the server URL must look like http://HOST:PORT".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("the server URL must not have a query or fragment".to_owned());
    }
    Ok(url)
}

/// `--redis-space-shards`: space → shard count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceShards(pub std::collections::HashMap<herenow_core::SpaceName, u16>);

/// Parses `--redis-space-shards SPACE=N,…`.
pub(crate) fn space_shards(s: &str) -> Result<SpaceShards, String> {
    let mut map = std::collections::HashMap::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (space, n) = item
            .rsplit_once('=')
            .ok_or_else(|| format!("{item:?}: expected SPACE=N, like lobby=16"))?;
        let space = herenow_core::SpaceName::new(space).map_err(|e| format!("{item:?}: {e}"))?;
        let n: u16 = n
            .parse()
            .ok()
            .filter(|n| (1..=1024).contains(n))
            .ok_or_else(|| format!("{item:?}: the shard count must be 1 to 1024"))?;
        map.insert(space, n);
    }
    if map.is_empty() {
        return Err("expected SPACE=N,…, like lobby=16".to_owned());
    }
    Ok(SpaceShards(map))
}

/// `--redis-layout`: herenow's own (`None`) or a seed's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedisLayoutArg(pub Option<SeedLayout>);

/// Stands in for the seeds' layouts in a build without Redis support: it
/// has no values, so `--redis-layout` takes only `herenow` and the code
/// that would use a seed layout cannot be reached.
#[cfg(not(feature = "redis"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeedLayout {}

#[cfg(not(feature = "redis"))]
impl std::fmt::Display for SeedLayout {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

/// Parses `--redis-layout`.
pub(crate) fn redis_layout(s: &str) -> Result<RedisLayoutArg, String> {
    if s == "herenow" {
        return Ok(RedisLayoutArg(None));
    }
    seed_layout_named(s).map(|l| RedisLayoutArg(Some(l)))
}

#[cfg(feature = "redis")]
pub(crate) fn seed_layout_named(s: &str) -> Result<SeedLayout, String> {
    s.parse().map_err(|_| {
        "redis layout must be one of herenow, sorted-set, minute-buckets, rotation".to_owned()
    })
}

#[cfg(not(feature = "redis"))]
pub(crate) fn seed_layout_named(_: &str) -> Result<SeedLayout, String> {
    Err("this build of herenow has no Redis support: the only layout is herenow".to_owned())
}
