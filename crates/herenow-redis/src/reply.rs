//! From redis-rs to herenow's errors and values: the timeout every call runs
//! under, how a Redis failure is classified, and how script replies are
//! read. One module so that every store (herenow's layout and the seeds')
//! classifies failures the same way: a retryable [`Error::Unavailable`]
//! for anything that may pass, an [`Error::Internal`] for a reply or a
//! command herenow got wrong.

use std::future::Future;
use std::time::{Duration, Instant};

use redis::{RedisError, RedisResult, Value};

use herenow_core::{Error, InvalidInput, Metadata, Millis, Result, SpaceConfig};

use crate::observe::{CallOutcome, Observer};

/// Runs one Redis call under `timeout`, mapping its failure with
/// [`map_err`]; a call past the timeout is [`Error::Unavailable`], so no
/// caller ever waits longer than it was promised.
///
/// The call is told to `observer` as `what`, with how long it took and how
/// it ended.
pub(crate) async fn timed<T>(
    observer: &Observer,
    timeout: Duration,
    what: &'static str,
    f: impl Future<Output = RedisResult<T>>,
) -> Result<T> {
    let Some(observer) = observer.get() else {
        return bounded(timeout, what, f).await;
    };
    let start = Instant::now();
    let r = bounded(timeout, what, f).await;
    let outcome = match &r {
        Ok(_) => CallOutcome::Ok,
        Err(Error::Unavailable { .. }) => CallOutcome::Unavailable,
        Err(_) => CallOutcome::Error,
    };
    observer.call(what, start.elapsed(), outcome);
    r
}

/// [`timed`] without the observer.
async fn bounded<T>(
    timeout: Duration,
    what: &'static str,
    f: impl Future<Output = RedisResult<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(map_err(what, e)),
        Err(_) => Err(Error::Unavailable {
            reason: format!("redis did not answer {what} within {timeout:?}"),
            source: None,
        }),
    }
}

/// Trouble reaching Redis, timeouts, a cluster that is down or failing over,
/// and bytes from the connection that do not parse (a reply cut short by a
/// dying server: redis-rs reconnects on them): retryable. A reply of a type
/// the caller did not expect, a script error, a cross-slot command or a key
/// of the wrong type (a key template naming a key the seed's code does not
/// use that way): a bug, which retrying would not fix.
pub(crate) fn map_err(what: &'static str, e: RedisError) -> Error {
    use redis::ErrorKind as K;
    use redis::ServerErrorKind as S;
    let bug = match e.kind() {
        K::UnexpectedReturnType => true,
        K::Server(S::CrossSlot) => true,
        K::Server(S::ResponseError) => e.detail().is_some_and(|d| d.contains("script")),
        _ => e.code() == Some("WRONGTYPE"),
    };
    if bug {
        Error::Internal(format!("redis {what}: {e}"))
    } else {
        Error::Unavailable {
            reason: format!("redis {what} failed: {e}"),
            source: Some(Box::new(e)),
        }
    }
}

/// A reply not shaped as the script or command promises.
pub(crate) fn bad_reply(what: &str) -> Error {
    Error::Internal(format!("unexpected reply from redis: {what}"))
}

/// An array reply (a set under RESP3 too); nil reads as empty, as Lua's
/// empty table does.
pub(crate) fn array(v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(a) | Value::Set(a) => Ok(a),
        Value::Nil => Ok(Vec::new()),
        other => Err(bad_reply(&format!("{other:?} where an array was expected"))),
    }
}

/// The bytes of a string reply, bulk or simple; `None` for any other.
pub(crate) fn bytes_of(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// A number, whichever way Lua or RESP3 sent it (scores come back as text
/// or doubles).
pub(crate) fn int(v: Option<&Value>) -> Result<i64> {
    match v {
        Some(Value::Int(i)) => Ok(*i),
        Some(Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad_reply("a number")),
        Some(Value::SimpleString(s)) => s.parse().map_err(|_| bad_reply("a number")),
        Some(Value::Double(d)) => Ok(*d as i64),
        _ => Err(bad_reply("a number")),
    }
}

/// Text, or `None` for nil and Lua's `false` (what `HGET` of a missing
/// field becomes inside a script).
pub(crate) fn opt_string(v: Option<Value>) -> Result<Option<String>> {
    match v {
        None | Some(Value::Nil) | Some(Value::Boolean(false)) => Ok(None),
        Some(Value::BulkString(b)) => String::from_utf8(b)
            .map(Some)
            .map_err(|_| bad_reply("text")),
        Some(Value::SimpleString(s)) => Ok(Some(s)),
        Some(other) => Err(bad_reply(&format!("{other:?} where text was expected"))),
    }
}

/// Stored metadata. It was checked on the way in; text that no longer
/// parses (written by something else) is dropped rather than failing the
/// read.
pub(crate) fn meta_of(v: Option<Value>) -> Result<Option<Metadata>> {
    Ok(opt_string(v)?.and_then(|m| Metadata::from_json(&m).ok()))
}

/// The first four values of a read script's reply: the space's
/// thresholds, over `base` (whose remembering a listing does not need).
pub(crate) fn thresholds_of(v: &[Value], base: SpaceConfig) -> Result<SpaceConfig> {
    Ok(SpaceConfig {
        online_ms: int(v.first())? as Millis,
        away_ms: int(v.get(1))? as Millis,
        window_ms: int(v.get(2))? as Millis,
        retention_ms: int(v.get(3))? as Millis,
        ..base
    })
}

/// The first six values of a read script's reply: the space's whole
/// policy, the thresholds then `remember_ms` and `remember_guests` (0/1).
pub(crate) fn config_of(v: &[Value]) -> Result<SpaceConfig> {
    Ok(SpaceConfig {
        remember_ms: int(v.get(4))? as Millis,
        remember_guests: int(v.get(5))? != 0,
        ..thresholds_of(v, SpaceConfig::default())?
    })
}

/// `{-1, retention}`: the window asked for is out of range.
pub(crate) fn window_error(v: &[Value], asked: Option<Millis>) -> Result<Option<Error>> {
    if int(v.first())? == -1 {
        return Ok(Some(
            InvalidInput::WindowOutOfRange {
                window_ms: asked.unwrap_or(0),
                max_ms: int(v.get(1))? as Millis,
            }
            .into(),
        ));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_does_not_parse_is_retryable_a_wrong_type_is_a_bug() {
        let cut = RedisError::from((redis::ErrorKind::Parse, "unexpected end of reply"));
        assert_eq!(
            map_err("call", cut).kind(),
            herenow_core::ErrorKind::Unavailable
        );
        let wrong = RedisError::from((redis::ErrorKind::UnexpectedReturnType, "not an int"));
        assert_eq!(
            map_err("call", wrong).kind(),
            herenow_core::ErrorKind::Internal
        );
    }
}
