//! The apps served changed while running (a reload of the server's
//! settings): [`Pusher::plan_apps`], then [`Pusher::set_apps`].
//!
//! The new list serves the next socket, request and signature at once; a
//! removed app's sockets are closed with `4001`; an app that stays keeps
//! its sockets, which look their app up again before each use of its
//! settings ([`Pusher::apps_version`]).
//!
//! An app keeps the space prefix it was served with (its presence
//! channels are the spaces of that name) until a restart, and a new app
//! is never given a prefix another holds.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Pusher;
use crate::pusher::config::{PusherApp, PusherConfig};

/// The close of a removed app's sockets: Pusher's "application does not
/// exist", after which clients do not reconnect.
const REMOVED: (u16, &str) = (4001, "Application does not exist: removed from this server");

/// What a reload changes of the Pusher apps served.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppsChange {
    /// The ids of the apps served from now on that were not.
    pub added: Vec<String>,
    /// The ids of the apps no longer served.
    pub removed: Vec<String>,
    /// The apps that stay with other settings: each id and what changed
    /// (`key`, `secret`, `limits`, `webhooks`).
    pub changed: Vec<(String, Vec<&'static str>)>,
    /// The removed apps' sockets closed on this server.
    pub closed: usize,
    /// Apps the new list would serve under another space prefix (their
    /// presence channels' spaces): kept under their own until a restart.
    pub kept_prefix: Vec<String>,
}

impl AppsChange {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

impl Pusher {
    /// The apps `config` would serve from now on (see the module
    /// documentation), their prefixes settled, and what that changes;
    /// nothing is applied before [`set_apps`](Self::set_apps).
    pub(crate) fn plan_apps(&self, config: &PusherConfig) -> (Vec<PusherApp>, AppsChange) {
        let old = self.apps.load_full();
        let mut change = AppsChange::default();
        let mut new = config.served_apps();
        for app in &mut new {
            match old.iter().find(|o| o.id == app.id) {
                Some(was) => {
                    if was.space_prefix != app.space_prefix {
                        change.kept_prefix.push(app.id.clone());
                        app.space_prefix.clone_from(&was.space_prefix);
                    }
                    let what = differences(was, app);
                    if !what.is_empty() {
                        change.changed.push((app.id.clone(), what));
                    }
                }
                None => change.added.push(app.id.clone()),
            }
        }
        // The first app's spaces have no prefix: a new app put first while
        // a kept one holds that place gets one of its own.
        let kept_first = new
            .iter()
            .any(|a| a.space_prefix.is_empty() && change.kept_prefix.contains(&a.id));
        for app in &mut new {
            if kept_first && app.space_prefix.is_empty() && change.added.contains(&app.id) {
                app.space_prefix = format!("{}:", app.id);
            }
        }
        change.removed = old
            .iter()
            .filter(|o| !new.iter().any(|a| a.id == o.id))
            .map(|o| o.id.clone())
            .collect();
        (new, change)
    }

    /// Serves `apps` (as [`plan_apps`](Self::plan_apps) made them) from
    /// now on and closes the sockets of the apps `change` removed, counted
    /// into it.
    pub(crate) fn set_apps(&self, apps: &[PusherApp], change: &mut AppsChange) {
        self.apps
            .store(Arc::new(apps.iter().cloned().map(Arc::new).collect()));
        self.apps_version.fetch_add(1, Ordering::AcqRel);
        // After the swap: a socket opening meanwhile either is found here
        // or finds its app gone when it looks (`socket`'s run).
        for id in &change.removed {
            change.closed += self.sockets.end_app(id, REMOVED.0, REMOVED.1);
        }
    }
}

/// What differs between an app as it was and as it is.
fn differences(was: &PusherApp, is: &PusherApp) -> Vec<&'static str> {
    let limits = |a: &PusherApp| {
        (
            a.max_connections,
            a.client_events_per_second,
            a.max_presence_members,
            a.max_event_bytes,
            a.max_client_event_bytes,
        )
    };
    [
        ("key", was.key != is.key),
        ("secret", was.secret != is.secret),
        ("limits", limits(was) != limits(is)),
        ("webhooks", was.webhooks != is.webhooks),
    ]
    .into_iter()
    .filter_map(|(what, differs)| differs.then_some(what))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(apps: &[&str]) -> PusherConfig {
        PusherConfig {
            apps: apps.iter().map(|a| a.parse().unwrap()).collect(),
            ..PusherConfig::default()
        }
    }

    fn prefixes(apps: &[PusherApp]) -> Vec<(String, String)> {
        apps.iter()
            .map(|a| (a.id.clone(), a.space_prefix.clone()))
            .collect()
    }

    #[test]
    fn apps_are_added_removed_and_changed_keeping_their_prefixes() {
        let pusher = Pusher::new(&config(&["1:k1:secret-one", "2:k2:secret-two"])).unwrap();
        let v0 = pusher.apps_version();
        // 1 removed, 2's secret rotated, 3 added first.
        let mut next = config(&["3:k3:secret-three", "2:k2:secret-2bis"]);
        next.apps[1].max_connections = Some(9);
        let (apps, mut change) = pusher.plan_apps(&next);
        // Planned, not applied.
        assert!(pusher.by_key("k1").is_some());
        pusher.set_apps(&apps, &mut change);
        assert_eq!(change.closed, 0);
        assert_eq!(change.added, ["3"]);
        assert_eq!(change.removed, ["1"]);
        assert_eq!(change.changed, [("2".to_owned(), vec!["secret", "limits"])]);
        // 2 is second still, under its prefix; 3 comes first, and gets
        // the empty prefix nobody holds now.
        assert!(change.kept_prefix.is_empty());
        assert_eq!(
            prefixes(&apps),
            [("3".into(), String::new()), ("2".into(), "2:".into())]
        );
        assert!(pusher.apps_version() > v0);
        assert!(pusher.by_key("k1").is_none());
        assert_eq!(pusher.by_id("2").unwrap().secret, "secret-2bis");
        assert_eq!(pusher.by_id("2").unwrap().max_connections, Some(9));
        assert!(pusher.by_key("k3").is_some());
    }

    #[test]
    fn a_new_app_never_takes_a_kept_apps_prefix() {
        let pusher = Pusher::new(&config(&["1:k1:secret-one", "2:k2:secret-two"])).unwrap();
        // 1 stays (second now), 4 comes first.
        let (apps, mut change) =
            pusher.plan_apps(&config(&["4:k4:secret-four", "1:k1:secret-one"]));
        pusher.set_apps(&apps, &mut change);
        assert_eq!(change.kept_prefix, ["1"]);
        assert_eq!(change.changed, []);
        assert_eq!(
            prefixes(&apps),
            [("4".into(), "4:".into()), ("1".into(), String::new())]
        );
        // The same list again changes nothing.
        let (_, again) = pusher.plan_apps(&config(&["4:k4:secret-four", "1:k1:secret-one"]));
        assert!(again.is_empty(), "{again:?}");
    }
}
