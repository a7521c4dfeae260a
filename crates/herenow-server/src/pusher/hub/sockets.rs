//! [`Sockets`]: every Pusher socket of this server, with the app it
//! speaks to, the user it signed in as, and its [`Ender`], so a relayed
//! `terminate_connections` or a lagging relay feed can close sockets the
//! request did not come through.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// How another task asks a socket's session to close: the first reason
/// given wins, and the session is woken.
#[derive(Default)]
pub(crate) struct Ender {
    why: Mutex<Option<(u16, &'static str)>>,
    notify: Notify,
}

impl Ender {
    /// Asks the session to close with `code` and `reason`.
    pub(crate) fn end(&self, code: u16, reason: &'static str) {
        self.why.lock().get_or_insert((code, reason));
        self.notify.notify_one();
    }

    /// Waits until [`end`](Self::end) was called; its code and reason.
    pub(crate) async fn ended(&self) -> (u16, &'static str) {
        loop {
            if let Some(why) = *self.why.lock() {
                return why;
            }
            self.notify.notified().await;
        }
    }
}

/// One socket as the server sees it.
struct Handle {
    app: Arc<str>,
    user: Option<Box<str>>,
    ender: Arc<Ender>,
}

/// The server's sockets, by number.
#[derive(Default)]
pub(crate) struct Sockets {
    map: Mutex<HashMap<u64, Handle>>,
}

impl Sockets {
    /// Socket `number` of `app` is open.
    pub(crate) fn open(&self, number: u64, app: &Arc<str>, ender: Arc<Ender>) {
        self.map.lock().insert(
            number,
            Handle {
                app: app.clone(),
                user: None,
                ender,
            },
        );
    }

    /// Socket `number` signed in as `user`.
    pub(crate) fn sign_in(&self, number: u64, user: &str) {
        if let Some(h) = self.map.lock().get_mut(&number) {
            h.user = Some(user.into());
        }
    }

    /// Socket `number` is gone.
    pub(crate) fn close(&self, number: u64) {
        self.map.lock().remove(&number);
    }

    /// Closes every socket of `app` signed in as `user`; how many.
    pub(crate) fn end_user(&self, app: &str, user: &str, code: u16, reason: &'static str) -> usize {
        self.end_where(
            |h| &*h.app == app && h.user.as_deref() == Some(user),
            code,
            reason,
        )
    }

    /// Closes every socket of `app`; how many.
    pub(crate) fn end_app(&self, app: &str, code: u16, reason: &'static str) -> usize {
        self.end_where(|h| &*h.app == app, code, reason)
    }

    /// Closes every socket.
    pub(crate) fn end_all(&self, code: u16, reason: &'static str) {
        self.end_where(|_| true, code, reason);
    }

    fn end_where(&self, which: impl Fn(&Handle) -> bool, code: u16, reason: &'static str) -> usize {
        let map = self.map.lock();
        let ended = map.values().filter(|h| which(h));
        ended.inspect(|h| h.ender.end(code, reason)).count()
    }

    /// How many sockets are open.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sockets 1, 2 and 3 of the apps named, and their enders.
    fn three(apps: [&str; 3]) -> (Sockets, Vec<Arc<Ender>>) {
        let s = Sockets::default();
        let enders: Vec<Arc<Ender>> = (0..3).map(|_| Arc::new(Ender::default())).collect();
        for (n, (app, ender)) in (1..).zip(apps.into_iter().zip(&enders)) {
            s.open(n, &Arc::from(app), ender.clone());
        }
        (s, enders)
    }

    #[tokio::test]
    async fn users_are_ended_by_app_and_id() {
        let (s, enders) = three(["1", "1", "2"]);
        for n in [1, 2, 3] {
            s.sign_in(n, "ann");
        }
        s.sign_in(2, "bob");
        assert_eq!(s.end_user("1", "ann", 4009, "bye"), 1);
        assert_eq!(enders[0].ended().await, (4009, "bye"));
        // The first reason wins.
        enders[0].end(4100, "later");
        assert_eq!(enders[0].ended().await, (4009, "bye"));
        s.close(1);
        assert_eq!(s.len(), 2);
        s.end_all(4100, "lag");
        assert_eq!(enders[1].ended().await, (4100, "lag"));
        assert_eq!(enders[2].ended().await, (4100, "lag"));
    }

    #[tokio::test]
    async fn an_apps_sockets_are_ended_together() {
        let (s, enders) = three(["1", "2", "1"]);
        assert_eq!(s.end_app("1", 4001, "gone"), 2);
        assert_eq!(enders[0].ended().await, (4001, "gone"));
        assert_eq!(enders[2].ended().await, (4001, "gone"));
        assert!(enders[1].why.lock().is_none());
        assert_eq!(s.end_app("9", 4001, "gone"), 0);
    }
}
