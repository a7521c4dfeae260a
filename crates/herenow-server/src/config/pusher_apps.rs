//! The Pusher apps this server speaks for: `--pusher-app ID:KEY:SECRET`.

use std::fmt;

/// The default cap on the members of one presence channel (Pusher's own
/// is 100).
pub const DEFAULT_MAX_PRESENCE_MEMBERS: usize = 10_000;

/// The largest cap on a presence channel's members: a subscriber's
/// `subscription_succeeded` carries the whole roster in one message, read
/// from one store snapshot, which holds at most this many.
pub const MAX_PRESENCE_MEMBERS: usize = herenow_core::limits::MAX_SNAPSHOT;

/// The default rate of client events one socket may send (Pusher's).
pub const DEFAULT_CLIENT_EVENTS_PER_SECOND: u32 = 10;

/// One Pusher app: its id (in the HTTP API's paths), its key (public, in
/// the WebSocket URL and every signature) and its secret (signs).
#[derive(Clone, PartialEq, Eq)]
pub struct PusherApp {
    /// The app id, as in `/apps/{app_id}/events`.
    pub id: String,
    /// The public key, as in `/app/{key}` and `key:signature`.
    pub key: String,
    /// The secret that signs channel authorizations and API requests.
    pub secret: String,
    /// Most members (distinct users) in one presence channel; a
    /// subscription past it is refused, never trimmed.
    pub max_presence_members: usize,
    /// Client events one socket may send per second (the burst is the
    /// same number); one more is refused with `4301`.
    pub client_events_per_second: u32,
}

impl fmt::Debug for PusherApp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret.
        f.debug_struct("PusherApp")
            .field("id", &self.id)
            .field("key", &self.key)
            .field("secret", &"***")
            .field("max_presence_members", &self.max_presence_members)
            .field("client_events_per_second", &self.client_events_per_second)
            .finish()
    }
}

/// Whether `s` may be an app id or key: 1 to 64 ASCII letters, digits,
/// `-` and `_`, so it fits a URL path without escaping.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl std::str::FromStr for PusherApp {
    type Err = PusherConfigError;

    /// `ID:KEY:SECRET`, with the default limits.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut parts = s.splitn(3, ':');
        let (Some(id), Some(key), Some(secret)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PusherConfigError::Format);
        };
        if !is_name(id) || !is_name(key) {
            return Err(PusherConfigError::BadName);
        }
        if secret.len() < 8 || secret.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(PusherConfigError::WeakSecret);
        }
        Ok(PusherApp {
            id: id.to_owned(),
            key: key.to_owned(),
            secret: secret.to_owned(),
            max_presence_members: DEFAULT_MAX_PRESENCE_MEMBERS,
            client_events_per_second: DEFAULT_CLIENT_EVENTS_PER_SECOND,
        })
    }
}

/// The Pusher protocol's configuration: no apps, nothing of it served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PusherConfig {
    /// The apps, each with its own key, secret and limits.
    pub apps: Vec<PusherApp>,
}

impl PusherConfig {
    /// Whether anything of the Pusher protocol is served.
    pub fn is_enabled(&self) -> bool {
        !self.apps.is_empty()
    }

    /// Refuses duplicate ids or keys and limits out of range.
    pub fn check(&self) -> Result<(), PusherConfigError> {
        for (i, app) in self.apps.iter().enumerate() {
            if self.apps[..i]
                .iter()
                .any(|other| other.id == app.id || other.key == app.key)
            {
                return Err(PusherConfigError::Duplicate(app.id.clone()));
            }
            if !(1..=MAX_PRESENCE_MEMBERS).contains(&app.max_presence_members) {
                return Err(PusherConfigError::MemberCap(app.max_presence_members));
            }
            if app.client_events_per_second == 0 {
                return Err(PusherConfigError::ZeroRate);
            }
        }
        Ok(())
    }
}

/// A `--pusher-app` that cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PusherConfigError {
    /// Not `ID:KEY:SECRET`.
    #[error("--pusher-app must look like ID:KEY:SECRET")]
    Format,
    /// An id or key with characters a URL path would need escaped.
    #[error("--pusher-app: the app id and key are 1 to 64 letters, digits, - or _")]
    BadName,
    /// A secret shorter than 8 characters or with spaces.
    #[error(
        "--pusher-app: the secret must be at least 8 characters without spaces or control characters"
    )]
    WeakSecret,
    /// Two apps with the same id or key.
    #[error("--pusher-app: two apps share the id or key of app {0:?}")]
    Duplicate(String),
    /// A member cap out of range.
    #[error("a presence channel's member cap must be 1 to {MAX_PRESENCE_MEMBERS}; got {0}")]
    MemberCap(usize),
    /// A client-event rate of zero.
    #[error("the client-event rate must be at least 1 a second")]
    ZeroRate,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_parse_and_refuse() {
        let app: PusherApp = "42:app-key:s3cr3t-value".parse().unwrap();
        assert_eq!(
            (app.id.as_str(), app.key.as_str(), app.secret.as_str()),
            ("42", "app-key", "s3cr3t-value")
        );
        assert!(!format!("{app:?}").contains("s3cr3t"));
        // A secret may hold colons.
        assert_eq!(
            "1:k:a:b:c:d:e:f".parse::<PusherApp>().unwrap().secret,
            "a:b:c:d:e:f"
        );
        assert_eq!(
            "42:key".parse::<PusherApp>(),
            Err(PusherConfigError::Format)
        );
        assert_eq!(
            "4 2:key:secret-value".parse::<PusherApp>(),
            Err(PusherConfigError::BadName)
        );
        assert_eq!(
            "42::secret-value".parse::<PusherApp>(),
            Err(PusherConfigError::BadName)
        );
        assert_eq!(
            "42:key:short".parse::<PusherApp>(),
            Err(PusherConfigError::WeakSecret)
        );
    }

    #[test]
    fn duplicates_and_limits_are_refused() {
        let a: PusherApp = "1:key-a:secret-aaaa".parse().unwrap();
        let mut config = PusherConfig {
            apps: vec![a.clone(), "2:key-a:secret-bbbb".parse().unwrap()],
        };
        assert_eq!(
            config.check(),
            Err(PusherConfigError::Duplicate("2".into()))
        );
        config.apps = vec![PusherApp {
            max_presence_members: MAX_PRESENCE_MEMBERS + 1,
            ..a.clone()
        }];
        assert!(matches!(
            config.check(),
            Err(PusherConfigError::MemberCap(_))
        ));
        config.apps = vec![PusherApp {
            client_events_per_second: 0,
            ..a.clone()
        }];
        assert_eq!(config.check(), Err(PusherConfigError::ZeroRate));
        config.apps = vec![a];
        assert_eq!(config.check(), Ok(()));
        assert!(config.is_enabled());
        assert!(!PusherConfig::default().is_enabled());
    }
}
