//! Per-app limits of the Pusher apps (`--pusher-app-limits
//! APP_ID:LIMIT=N[,LIMIT=N]…`; the table of limits, defaults and refusals
//! is docs/PUSHER.md's "Per-app limits").
//!
//! Each limit is checked when the action it bounds happens, against the
//! app's limits of that moment, so a reload changes them for what comes
//! next and leaves what was admitted alone.

use super::{PusherApp, PusherConfig, PusherConfigError};

/// One limit an app sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    MaxConnections,
    ClientEventsPerSecond,
    MaxPresenceMembers,
    MaxEventBytes,
    MaxClientEventBytes,
}

impl Limit {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            "max_connections" => Self::MaxConnections,
            "client_events_per_second" => Self::ClientEventsPerSecond,
            "max_presence_members" => Self::MaxPresenceMembers,
            "max_event_bytes" => Self::MaxEventBytes,
            "max_client_event_bytes" => Self::MaxClientEventBytes,
            _ => return None,
        })
    }
}

/// One `--pusher-app-limits`: the limits one app sets, the others left at
/// their defaults. Their ranges are checked with the app's
/// ([`PusherConfig::check`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PusherAppLimits {
    /// The app's id.
    pub app_id: String,
    limits: Vec<(Limit, u64)>,
}

impl std::str::FromStr for PusherAppLimits {
    type Err = PusherConfigError;

    /// `APP_ID:LIMIT=N[,LIMIT=N]…`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: String| PusherConfigError::BadLimits(why);
        let (app_id, list) = s
            .trim()
            .split_once(':')
            .ok_or_else(|| bad("no `APP_ID:` before the limits".into()))?;
        if app_id.is_empty() {
            return Err(bad("the app id is empty".into()));
        }
        let mut limits = Vec::new();
        for part in list.split(',').map(str::trim) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| bad(format!("`{part}` is not LIMIT=N")))?;
            let limit =
                Limit::of(name.trim()).ok_or_else(|| bad(format!("unknown limit `{name}`")))?;
            if limits.iter().any(|(l, _)| *l == limit) {
                return Err(bad(format!("`{name}` is given twice")));
            }
            let value: u64 = value
                .trim()
                .parse()
                .map_err(|_| bad(format!("`{name}` takes a whole number, not `{value}`")))?;
            limits.push((limit, value));
        }
        Ok(Self {
            app_id: app_id.to_owned(),
            limits,
        })
    }
}

impl PusherAppLimits {
    /// Sets these limits on `app` (a value past a limit's type saturates:
    /// [`PusherConfig::check`] refuses it as out of range).
    pub fn apply_to(&self, app: &mut PusherApp) {
        let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        for &(limit, value) in &self.limits {
            match limit {
                Limit::MaxConnections => app.max_connections = Some(size(value)),
                Limit::ClientEventsPerSecond => {
                    app.client_events_per_second = u32::try_from(value).unwrap_or(u32::MAX);
                }
                Limit::MaxPresenceMembers => app.max_presence_members = size(value),
                Limit::MaxEventBytes => app.max_event_bytes = size(value),
                Limit::MaxClientEventBytes => app.max_client_event_bytes = size(value),
            }
        }
    }
}

impl PusherConfig {
    /// The apps with `limits` set on them: each names a configured app,
    /// at most once.
    pub fn with_limits(mut self, limits: &[PusherAppLimits]) -> Result<Self, PusherConfigError> {
        for (i, l) in limits.iter().enumerate() {
            if limits[..i].iter().any(|other| other.app_id == l.app_id) {
                return Err(PusherConfigError::LimitsTwice(l.app_id.clone()));
            }
            let app = self
                .apps
                .iter_mut()
                .find(|a| a.id == l.app_id)
                .ok_or_else(|| PusherConfigError::LimitsUnknownApp(l.app_id.clone()))?;
            l.apply_to(app);
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> PusherConfig {
        PusherConfig {
            apps: vec![
                "1:key-a:secret-aaaa".parse().unwrap(),
                "2:key-b:secret-bbbb".parse().unwrap(),
            ],
            ..PusherConfig::default()
        }
    }

    #[test]
    fn limits_apply_to_their_app_alone() {
        let limits: PusherAppLimits = "2: max_connections=5, client_events_per_second=3,\
             max_presence_members=50,max_event_bytes=2048,max_client_event_bytes=512"
            .parse()
            .unwrap();
        let c = config().with_limits(&[limits]).unwrap();
        assert_eq!(c.check(), Ok(()));
        let (a, b) = (&c.apps[0], &c.apps[1]);
        assert_eq!(a.max_connections, None);
        assert_eq!(a.client_events_per_second, 10);
        assert_eq!(a.max_event_bytes, 10 * 1024);
        assert_eq!(b.max_connections, Some(5));
        assert_eq!(b.client_events_per_second, 3);
        assert_eq!(b.max_presence_members, 50);
        assert_eq!(b.max_event_bytes, 2048);
        assert_eq!(b.max_client_event_bytes, 512);
    }

    #[test]
    fn bad_limits_are_refused_naming_the_problem() {
        for bad in [
            "max_connections=5",
            ":max_connections=5",
            "1:",
            "1:max_connections",
            "1:connections=5",
            "1:max_connections=five",
            "1:max_connections=-1",
            "1:max_connections=1,max_connections=2",
        ] {
            super::super::refused::<PusherAppLimits>(bad, "--pusher-app-limits");
            let err = bad.parse::<PusherAppLimits>().unwrap_err();
            assert!(matches!(err, PusherConfigError::BadLimits(_)), "{err:?}");
        }
        let limits = |s: &str| vec![s.parse::<PusherAppLimits>().unwrap()];
        assert_eq!(
            config().with_limits(&limits("9:max_connections=1")),
            Err(PusherConfigError::LimitsUnknownApp("9".into()))
        );
        let twice = [limits("1:max_connections=1"), limits("1:max_event_bytes=9")].concat();
        assert_eq!(
            config().with_limits(&twice),
            Err(PusherConfigError::LimitsTwice("1".into()))
        );
        let out_of_range = |s: &str| config().with_limits(&limits(s)).unwrap().check();
        assert_eq!(
            out_of_range("1:max_connections=0"),
            Err(PusherConfigError::ZeroConnections("1".into()))
        );
        assert_eq!(
            out_of_range("1:client_events_per_second=0"),
            Err(PusherConfigError::ZeroRate)
        );
        assert!(matches!(
            out_of_range("1:max_presence_members=0"),
            Err(PusherConfigError::MemberCap(0))
        ));
        assert!(matches!(
            out_of_range("1:max_event_bytes=1000000"),
            Err(PusherConfigError::ByteCap {
                limit: "max_event_bytes",
                ..
            })
        ));
        assert!(matches!(
            out_of_range("1:max_client_event_bytes=0"),
            Err(PusherConfigError::ByteCap {
                limit: "max_client_event_bytes",
                ..
            })
        ));
    }
}
