//! What an operator chooses for a [`SeedLayoutStore`](super::SeedLayoutStore):
//! the layout ([`SeedLayout`], `--redis-layout`), its key templates
//! ([`KeyTemplate`], `--redis-key`) and the tuning ([`LayoutOptions`]).
//! Values only: what each layout does with them is in its own file.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use herenow_core::{Error, InvalidInput, Result, SpaceName};

use crate::observe::Observer;

/// Which of the seeds' key layouts a
/// [`SeedLayoutStore`](super::SeedLayoutStore) reads and writes
/// (`--redis-layout`). Parses from `sorted-set`, `minute-buckets`,
/// `rotation`. herenow's own layout is not one of them: it is
/// [`RedisStore`](crate::RedisStore)'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeedLayout {
    /// Seeds 001 and 004: one sorted set, score = whole UNIX seconds.
    SortedSet,
    /// Seed 002: a set per minute of the hour, with `EXPIRE`.
    MinuteBuckets,
    /// Seed 000: a "current" and an "old" set, rotated periodically.
    Rotation,
}

impl SeedLayout {
    /// The name used on the command line and in errors.
    pub fn as_str(self) -> &'static str {
        match self {
            SeedLayout::SortedSet => "sorted-set",
            SeedLayout::MinuteBuckets => "minute-buckets",
            SeedLayout::Rotation => "rotation",
        }
    }

    /// The placeholder that tells apart the keys of one space, if the
    /// layout has several keys per space.
    fn part_placeholder(self) -> Option<&'static str> {
        match self {
            SeedLayout::MinuteBuckets => Some(MINUTE),
            SeedLayout::Rotation => Some(GENERATION),
            SeedLayout::SortedSet => None,
        }
    }
}

impl fmt::Display for SeedLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SeedLayout {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "sorted-set" => Ok(SeedLayout::SortedSet),
            "minute-buckets" => Ok(SeedLayout::MinuteBuckets),
            "rotation" => Ok(SeedLayout::Rotation),
            _ => Err(bad_config(
                "a seed's redis layout is one of sorted-set, minute-buckets, rotation",
            )),
        }
    }
}

const SPACE: &str = "{space}";
const MINUTE: &str = "{minute}";
const GENERATION: &str = "{generation}";

/// A checked key template (`--redis-key`): see the module documentation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyTemplate {
    text: String,
    per_space: bool,
    part: Option<&'static str>,
}

impl KeyTemplate {
    /// Checks `text` for `layout`: `{minute}` is required by
    /// `minute-buckets` and allowed nowhere else, `{generation}` likewise
    /// for `rotation`; `{space}` is optional everywhere.
    pub fn parse(text: &str, layout: SeedLayout) -> Result<Self> {
        if text.is_empty() {
            return Err(bad_config("the redis key template is empty"));
        }
        if text.chars().any(|c| c.is_control() || c == ' ') {
            return Err(bad_config(
                "the redis key template contains a space or a control character",
            ));
        }
        let part = layout.part_placeholder();
        match layout {
            SeedLayout::SortedSet => {}
            SeedLayout::MinuteBuckets if !text.contains(MINUTE) => {
                return Err(bad_config(
                    "a minute-buckets key template needs {minute} (e.g. active.users:{minute})",
                ));
            }
            SeedLayout::Rotation if !text.contains(GENERATION) => {
                return Err(bad_config(
                    "a rotation key template needs {generation} (e.g. wo_user_{generation})",
                ));
            }
            SeedLayout::MinuteBuckets | SeedLayout::Rotation => {}
        }
        for other in [MINUTE, GENERATION] {
            if Some(other) != part && text.contains(other) {
                return Err(bad_config(
                    "the redis key template has a placeholder its layout does not use",
                ));
            }
        }
        Ok(Self {
            text: text.to_owned(),
            per_space: text.contains(SPACE),
            part,
        })
    }

    /// The template as given, placeholders and all, as
    /// [`SeedLayoutStore::templates`](super::SeedLayoutStore::templates)
    /// reports it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether each space has keys of its own.
    pub fn per_space(&self) -> bool {
        self.per_space
    }

    /// The key of `space` with the layout's part (`current`, `07`, …); the
    /// part is ignored by the sorted-set layout, which has one key.
    pub fn render(&self, space: &SpaceName, part: &str) -> String {
        let mut key = self.text.replace(SPACE, space.as_str());
        if let Some(p) = self.part {
            key = key.replace(p, part);
        }
        key
    }
}

/// Tuning of a [`SeedLayoutStore`](super::SeedLayoutStore).
#[derive(Clone, Debug)]
pub struct LayoutOptions {
    /// Longest wait for any one command, connecting included; a call that
    /// takes longer fails with [`Error::Unavailable`].
    pub timeout: Duration,
    /// `rotation`: how often "current" becomes "old" (the layout's window
    /// is twice this). Seed 000 uses five minutes.
    pub rotate_every: Duration,
    /// `rotation`: whether this store's `tick` rotates. Switch it off when
    /// the seed's own cron job keeps rotating the same keys (two rotators
    /// would age members out twice as fast).
    pub rotate: bool,
    /// `sorted-set`: most members one expiry command removes
    /// (`ZRANGEBYSCORE … LIMIT 0 N` then `ZREM`, in one short script).
    pub expire_batch: usize,
    /// `sorted-set`: most expiry batches per key per `tick`.
    pub tick_batches: usize,
    /// Most members a listing reads from Redis before it sorts them (set
    /// layouts, and the sorted set listed by id). A larger union is
    /// `Unsupported` rather than a slow, memory-hungry or truncated answer.
    pub max_scan: usize,
    /// `minute-buckets`: minutes to add to UTC to get the minute the seed's
    /// code puts in key names. Seed 002 uses the host's local time
    /// (`time.localtime`), whose minute equals UTC's in every zone whose
    /// offset is a whole number of hours; in India (+5:30) this is 330.
    pub utc_offset_minutes: i32,
    /// Most spaces remembered for background work (sorted-set expiry,
    /// rotation) when the template has `{space}`. Spaces this store has
    /// not touched since it started are not swept by it.
    pub max_known_spaces: usize,
    /// Told of every call to Redis; none by default (see
    /// [`RedisOptions::observer`](crate::RedisOptions::observer)).
    pub observer: Observer,
}

impl Default for LayoutOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(2),
            rotate_every: Duration::from_secs(5 * 60),
            rotate: true,
            expire_batch: 1_000,
            tick_batches: 16,
            max_scan: 100_000,
            utc_offset_minutes: 0,
            max_known_spaces: 100_000,
            observer: Observer::none(),
        }
    }
}

/// The refusal of a bad layout, template or option.
pub(super) fn bad_config(why: &'static str) -> Error {
    Error::Invalid(InvalidInput::BadConfig { why })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_parse() {
        for l in [
            SeedLayout::SortedSet,
            SeedLayout::MinuteBuckets,
            SeedLayout::Rotation,
        ] {
            assert_eq!(l.as_str().parse::<SeedLayout>().unwrap(), l);
        }
        assert!("zset".parse::<SeedLayout>().is_err());
        // herenow's own layout is RedisStore's, not a seed's.
        assert!("herenow".parse::<SeedLayout>().is_err());
    }

    #[test]
    fn templates_render_and_check() {
        let room = SpaceName::new("room:1").unwrap();
        let t = KeyTemplate::parse("presence:{space}", SeedLayout::SortedSet).unwrap();
        assert_eq!(t.render(&room, ""), "presence:room:1");
        assert!(t.per_space());
        let t = KeyTemplate::parse("wo_user_{generation}", SeedLayout::Rotation).unwrap();
        assert_eq!(t.render(&room, "old"), "wo_user_old");
        assert!(!t.per_space());
        let t = KeyTemplate::parse("p:{{space}}:{minute}", SeedLayout::MinuteBuckets).unwrap();
        assert_eq!(t.render(&room, "07"), "p:{room:1}:07");
        assert!(KeyTemplate::parse("wo_user", SeedLayout::Rotation).is_err());
        assert!(KeyTemplate::parse("a:{minute}", SeedLayout::SortedSet).is_err());
        assert!(KeyTemplate::parse("a:{minute}:{generation}", SeedLayout::Rotation).is_err());
        assert!(KeyTemplate::parse("", SeedLayout::SortedSet).is_err());
    }
}
