//! The time policy of a space: status thresholds, the default window and the
//! retention, and the function that turns a last-seen time into a status.

use serde::{Deserialize, Serialize};

use crate::error::InvalidInput;
use crate::limits;
use crate::time::Millis;

/// Derived from the age of a member's last heartbeat (seed 004's dots).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Seen less than `online_ms` ago: green.
    Online,
    /// Seen less than `away_ms` ago: yellow.
    Away,
    /// Seen longer ago, never seen, or left: grey.
    Offline,
}

/// A space's time policy. All durations are in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpaceConfig {
    /// A member is `online` while its last heartbeat is younger than this.
    pub online_ms: Millis,
    /// ... and `away` while younger than this; `offline` after.
    pub away_ms: Millis,
    /// "Who's online" means "seen within the window" unless a query says
    /// otherwise.
    pub window_ms: Millis,
    /// A member is forgotten this long after its last heartbeat.
    pub retention_ms: Millis,
    /// How long a user's last-seen time is remembered after presence ends
    /// (by leave or at the retention): `status` answers it as
    /// `offline, last_seen_ms` until `last_seen + remember_ms`. `0` turns
    /// remembering off. At most [`limits::MAX_REMEMBER_MS`].
    pub remember_ms: Millis,
    /// Whether guests are remembered too (they churn by the million, so
    /// not by default).
    pub remember_guests: bool,
    /// The grace ([`crate::conn`]): how long a member stays present after
    /// its last live connection ended without a goodbye. `0` turns it off
    /// (the member leaves when its last connection ends). At most
    /// [`limits::MAX_GRACE_MS`].
    #[serde(default = "default_grace_ms")]
    pub grace_ms: Millis,
}

/// The grace of a member whose last connection ended without a goodbye,
/// unless configured: 5 s, a page load and a reconnect.
pub const DEFAULT_GRACE_MS: Millis = 5_000;

fn default_grace_ms() -> Millis {
    DEFAULT_GRACE_MS
}

/// How long last-seen times are remembered unless configured: 30 days.
pub const DEFAULT_REMEMBER_MS: Millis = 30 * 24 * 60 * 60 * 1000;

impl Default for SpaceConfig {
    fn default() -> Self {
        Self {
            online_ms: 60_000,
            away_ms: 5 * 60_000,
            window_ms: 10 * 60_000,
            retention_ms: 15 * 60_000,
            remember_ms: DEFAULT_REMEMBER_MS,
            remember_guests: false,
            grace_ms: DEFAULT_GRACE_MS,
        }
    }
}

impl SpaceConfig {
    /// Checks the thresholds are ordered and in range:
    /// `0 < online ≤ away ≤ retention ≤ 24 h` and `0 < window ≤ retention`.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        let bad = |why: &'static str| Err(InvalidInput::BadConfig { why });
        if self.online_ms == 0 || self.window_ms == 0 {
            return bad("online_ms and window_ms must be positive");
        }
        if self.online_ms > self.away_ms {
            return bad("online_ms must not exceed away_ms");
        }
        if self.away_ms > self.retention_ms {
            return bad("away_ms must not exceed retention_ms");
        }
        if self.window_ms > self.retention_ms {
            return bad("window_ms must not exceed retention_ms");
        }
        if self.retention_ms > limits::MAX_RETENTION_MS {
            return bad("retention_ms must not exceed 24 hours");
        }
        if self.remember_ms > limits::MAX_REMEMBER_MS {
            return bad("remember_ms must not exceed 1,096 days (three years)");
        }
        if self.grace_ms > limits::MAX_GRACE_MS {
            return bad("grace_ms must not exceed 5 minutes");
        }
        Ok(())
    }

    /// Whether a member of `kind` is remembered after its presence ends.
    pub fn remembers(&self, kind: crate::id::MemberKind) -> bool {
        self.remember_ms > 0 && (kind == crate::id::MemberKind::User || self.remember_guests)
    }

    /// Whether a time remembered as `last_seen` is still within the
    /// horizon at `now`.
    pub fn still_remembered(&self, last_seen: Millis, now: Millis) -> bool {
        now < last_seen.saturating_add(self.remember_ms)
    }

    /// The status of a member last seen at `last_seen` (None: never seen).
    pub fn status(&self, last_seen: Option<Millis>, now: Millis) -> Status {
        match last_seen {
            None => Status::Offline,
            Some(t) => {
                let age = now.saturating_sub(t);
                if age < self.online_ms {
                    Status::Online
                } else if age < self.away_ms {
                    Status::Away
                } else {
                    Status::Offline
                }
            }
        }
    }

    /// The window a query asks for (the space's own, `window_ms`, when it
    /// asks none), checked: positive and within retention (older members
    /// are not stored, so a longer window would lie).
    pub fn check_window(&self, asked: Option<Millis>) -> Result<Millis, InvalidInput> {
        let window_ms = asked.unwrap_or(self.window_ms);
        if window_ms == 0 || window_ms > self.retention_ms {
            return Err(InvalidInput::WindowOutOfRange {
                window_ms,
                max_ms: self.retention_ms,
            });
        }
        Ok(window_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_boundaries() {
        let c = SpaceConfig::default();
        let now = 1_000_000;
        assert_eq!(c.status(None, now), Status::Offline);
        assert_eq!(c.status(Some(now), now), Status::Online);
        assert_eq!(c.status(Some(now - 59_999), now), Status::Online);
        assert_eq!(c.status(Some(now - 60_000), now), Status::Away);
        assert_eq!(c.status(Some(now - 299_999), now), Status::Away);
        assert_eq!(c.status(Some(now - 300_000), now), Status::Offline);
        // A heartbeat from the (slightly) future is online, not a panic.
        assert_eq!(c.status(Some(now + 5), now), Status::Online);
    }

    #[test]
    fn config_validation() {
        assert!(SpaceConfig::default().validate().is_ok());
        let d = SpaceConfig::default();
        let online_after_away = SpaceConfig {
            online_ms: d.away_ms + 1,
            ..d
        };
        assert!(online_after_away.validate().is_err());
        let window_past_retention = SpaceConfig {
            window_ms: d.retention_ms + 1,
            ..d
        };
        assert!(window_past_retention.validate().is_err());
        let too_long = SpaceConfig {
            retention_ms: limits::MAX_RETENTION_MS + 1,
            ..d
        };
        assert!(too_long.validate().is_err());
    }
}
