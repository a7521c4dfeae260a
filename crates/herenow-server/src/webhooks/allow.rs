//! Where spaces' webhook endpoints may send: not into the server's own
//! network unless the operator allowed it.
//!
//! Whoever holds a write key sets a space's endpoints, which could
//! otherwise make the server send requests to its own loopback, its
//! cloud's metadata address (169.254.169.254) or its private network, and
//! read back through `GET /v1/webhooks` whether something listens there.
//! So an endpoint a space names may not reach an address of a [`Refused`]
//! class (IPv4-mapped forms included) unless [`SpaceWebhookAllow`]
//! (`--space-webhook-allow HOST|CIDR,...`) names its host or network.
//!
//! It is checked when set ([`SpaceWebhookAllow::check_url`]; a refusal is
//! a `400` naming the rule), and at connect time on every address a name
//! resolves to ([`GuardedResolver`]), so a name that resolves inward later
//! is refused too; an address written in the URL is checked again when
//! its lane starts. The operator's own `--webhook` endpoints go through
//! another client and are not restricted.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// How long the check made when endpoints are set waits for DNS.
const SET_TIME_LOOKUP: Duration = Duration::from_secs(2);

/// A class of addresses a space's endpoint may not reach by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `169.254.0.0/16` (the metadata address among them), `fe80::/10`.
    LinkLocal,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `100.64.0.0/10`, carrier-grade NAT's shared space.
    Shared,
    /// `fc00::/7`.
    UniqueLocal,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `255.255.255.255`.
    Broadcast,
}

impl Refused {
    /// The rule's name, as refusals say it.
    pub fn rule(self) -> &'static str {
        match self {
            Refused::Loopback => "loopback",
            Refused::LinkLocal => "link-local",
            Refused::Private => "private",
            Refused::Shared => "shared (CGNAT)",
            Refused::UniqueLocal => "unique-local",
            Refused::Multicast => "multicast",
            Refused::Unspecified => "unspecified",
            Refused::Broadcast => "broadcast",
        }
    }

    /// The class `ip` belongs to, if it is one a space's endpoint may not
    /// reach by default. An IPv4-mapped IPv6 address is judged as the
    /// IPv4 address it carries.
    pub fn of(ip: IpAddr) -> Option<Refused> {
        match ip {
            IpAddr::V4(v4) => Self::of_v4(v4),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self::of_v4(v4),
                None => Self::of_v6(v6),
            },
        }
    }

    fn of_v4(ip: Ipv4Addr) -> Option<Refused> {
        let [a, b, ..] = ip.octets();
        first_of([
            (ip.is_loopback(), Refused::Loopback),
            (ip.is_link_local(), Refused::LinkLocal),
            (ip.is_private(), Refused::Private),
            (a == 100 && (b & 0xc0) == 64, Refused::Shared),
            (ip.is_multicast(), Refused::Multicast),
            (a == 0, Refused::Unspecified),
            (ip.is_broadcast(), Refused::Broadcast),
        ])
    }

    fn of_v6(ip: Ipv6Addr) -> Option<Refused> {
        let first = ip.segments()[0];
        first_of([
            (ip.is_loopback(), Refused::Loopback),
            (ip.is_unspecified(), Refused::Unspecified),
            (first & 0xffc0 == 0xfe80, Refused::LinkLocal),
            (first & 0xfe00 == 0xfc00, Refused::UniqueLocal),
            (ip.is_multicast(), Refused::Multicast),
        ])
    }
}

/// The class of the first rule that holds.
fn first_of<const N: usize>(rules: [(bool, Refused); N]) -> Option<Refused> {
    rules
        .into_iter()
        .find_map(|(holds, class)| holds.then_some(class))
}

/// An address network: an address and how many leading bits count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// One entry of the allow-list: a host name, or an address or network.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Host(String),
    Net(Net),
}

/// `--space-webhook-allow`: the hosts and networks spaces' endpoints may
/// reach although their addresses are of a refused class (`Refused`). Empty (the
/// default): none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceWebhookAllow {
    entries: Vec<Entry>,
}

/// A bad `--space-webhook-allow` entry.
#[derive(Debug, thiserror::Error)]
#[error(
    "bad --space-webhook-allow entry {0:?}: expected a host name, an address or a network \
     (10.0.0.0/8, fd00::/8)"
)]
pub struct AllowError(String);

impl FromStr for SpaceWebhookAllow {
    type Err = AllowError;

    /// Entries separated by commas: host names (matched exactly, case
    /// aside), addresses, networks as `ADDRESS/PREFIX`.
    fn from_str(list: &str) -> Result<Self, AllowError> {
        let entries = list.split(',').map(str::trim).filter(|e| !e.is_empty());
        Ok(Self {
            entries: entries.map(parse_entry).collect::<Result<_, _>>()?,
        })
    }
}

fn parse_entry(entry: &str) -> Result<Entry, AllowError> {
    let bad = || AllowError(entry.to_owned());
    let unbracketed = entry.trim_start_matches('[').trim_end_matches(']');
    if let Some((addr, prefix)) = entry.split_once('/') {
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if prefix > max {
            return Err(bad());
        }
        return Ok(Entry::Net(Net { addr, prefix }));
    }
    if let Ok(addr) = unbracketed.parse::<IpAddr>() {
        let prefix = if addr.is_ipv4() { 32 } else { 128 };
        return Ok(Entry::Net(Net { addr, prefix }));
    }
    let host = entry.trim_end_matches('.').to_ascii_lowercase();
    let valid = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !valid {
        return Err(bad());
    }
    Ok(Entry::Host(host))
}

/// Why a space's endpoint may not be used: its host, the address it
/// reaches and the rule that refuses it.
#[derive(Debug)]
pub struct NotAllowed {
    /// The URL's host.
    pub host: String,
    /// The address refused.
    pub addr: IpAddr,
    /// Its class.
    pub rule: Refused,
}

impl SpaceWebhookAllow {
    /// Whether no entry is given.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds the entries of `other`.
    pub fn extend(&mut self, other: SpaceWebhookAllow) {
        self.entries.extend(other.entries);
    }

    /// Whether the host name `host` is allowed whatever it resolves to.
    pub fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.');
        self.entries
            .iter()
            .any(|e| matches!(e, Entry::Host(h) if h.eq_ignore_ascii_case(host)))
    }

    /// Checks one address `host` reached: fine when public, or in an
    /// allowed network.
    pub fn check_addr(&self, host: &str, addr: IpAddr) -> Result<(), NotAllowed> {
        let Some(rule) = Refused::of(addr) else {
            return Ok(());
        };
        let allowed = self
            .entries
            .iter()
            .any(|e| matches!(e, Entry::Net(n) if n.contains(addr)));
        if allowed {
            return Ok(());
        }
        Err(NotAllowed {
            host: host.to_owned(),
            addr,
            rule,
        })
    }

    /// Checks what can be checked without resolving: an allowed host
    /// name, an address written in the URL. `None` when the host is a
    /// name (the client's resolver checks those).
    pub fn check_static(&self, url: &Url) -> Option<Result<(), NotAllowed>> {
        let host = url.host_str().unwrap_or_default();
        if self.allows_host(host) {
            return Some(Ok(()));
        }
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        literal
            .parse::<IpAddr>()
            .ok()
            .map(|ip| self.check_addr(host, ip))
    }

    /// Checks a URL set over the API: its host, and every address its
    /// name resolves to now. A name that does not resolve now passes (it
    /// is checked again at every connection).
    pub async fn check_url(&self, url: &Url) -> Result<(), NotAllowed> {
        if let Some(verdict) = self.check_static(url) {
            return verdict;
        }
        let host = url.host_str().unwrap_or_default();
        let addrs = match tokio::time::timeout(SET_TIME_LOOKUP, resolve(host)).await {
            Ok(Ok(addrs)) => addrs,
            _ => Vec::new(),
        };
        for addr in addrs {
            self.check_addr(host, addr.ip())?;
        }
        Ok(())
    }
}

impl std::fmt::Display for NotAllowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        if host.parse::<IpAddr>().is_ok() {
            write!(f, "{host} is a {} address", self.rule.rule())?;
        } else {
            write!(
                f,
                "{host} resolves to {}, a {} address",
                self.addr,
                self.rule.rule()
            )?;
        }
        f.write_str(
            "; spaces' webhook endpoints may not reach loopback, link-local, private, shared, \
             unique-local, multicast, unspecified or broadcast addresses unless the operator \
             allows them (--space-webhook-allow)",
        )
    }
}

impl std::error::Error for NotAllowed {}

/// Checks the endpoints a `PUT /v1/spaces/{space}/config` names against
/// `allow`: the first that may not be used is refused with a `400`
/// `webhook-not-allowed` naming it, its address and the rule.
pub(crate) async fn check_hooks(
    allow: &SpaceWebhookAllow,
    hooks: &[herenow_core::outbox::SpaceHook],
) -> Result<(), crate::problem::ApiError> {
    for (i, hook) in hooks.iter().enumerate() {
        // Parsed when the hooks were made; a URL that does not parse
        // cannot get here.
        let Ok(url) = Url::parse(&hook.url) else {
            continue;
        };
        if let Err(e) = allow.check_url(&url).await {
            return Err(crate::problem::ApiError::bad_request(
                "webhook-not-allowed",
                format!("webhooks[{i}].url: {e}"),
            ));
        }
    }
    Ok(())
}

/// The addresses `host` resolves to: the system's answer, or loopback's
/// for [`is_localhost`] names.
async fn resolve(host: &str) -> std::io::Result<Vec<SocketAddr>> {
    if is_localhost(host) {
        return Ok(vec![
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        ]);
    }
    Ok(tokio::net::lookup_host((host, 0)).await?.collect())
}

/// `localhost` and its subdomains, loopback by definition (RFC 6761).
fn is_localhost(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host.len().checked_sub(".localhost".len()).is_some_and(|i| {
            host.is_char_boundary(i) && host[i..].eq_ignore_ascii_case(".localhost")
        })
}

/// The DNS resolver of the client that delivers to spaces' endpoints:
/// resolves as the system does, then refuses the whole name when any
/// address it gives is of a [`Refused`] class and not allowed.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    allow: Arc<SpaceWebhookAllow>,
}

impl GuardedResolver {
    /// A resolver applying `allow`.
    pub fn new(allow: SpaceWebhookAllow) -> Self {
        Self {
            allow: Arc::new(allow),
        }
    }

    /// Resolves `host` and checks every address.
    pub async fn lookup(
        allow: &SpaceWebhookAllow,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let addrs = resolve(host).await?;
        if !allow.allows_host(host) {
            for a in &addrs {
                allow.check_addr(host, a.ip())?;
            }
        }
        Ok(addrs)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let addrs = Self::lookup(&allow, name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(ip: &str) -> Option<Refused> {
        Refused::of(ip.parse().unwrap())
    }

    #[test]
    fn every_class_is_refused_and_public_addresses_are_not() {
        let cases = [
            ("127.0.0.1", Refused::Loopback),
            ("127.255.0.9", Refused::Loopback),
            ("::1", Refused::Loopback),
            ("169.254.169.254", Refused::LinkLocal),
            ("fe80::1", Refused::LinkLocal),
            ("febf::1", Refused::LinkLocal),
            ("10.1.2.3", Refused::Private),
            ("172.16.0.1", Refused::Private),
            ("172.31.255.255", Refused::Private),
            ("192.168.1.1", Refused::Private),
            ("100.64.0.1", Refused::Shared),
            ("100.127.255.255", Refused::Shared),
            ("fc00::1", Refused::UniqueLocal),
            ("fd12:3456::1", Refused::UniqueLocal),
            ("224.0.0.1", Refused::Multicast),
            ("239.255.255.250", Refused::Multicast),
            ("ff02::1", Refused::Multicast),
            ("0.0.0.0", Refused::Unspecified),
            ("0.1.2.3", Refused::Unspecified),
            ("::", Refused::Unspecified),
            ("255.255.255.255", Refused::Broadcast),
            ("::ffff:127.0.0.1", Refused::Loopback),
            ("::ffff:169.254.169.254", Refused::LinkLocal),
            ("::ffff:10.0.0.1", Refused::Private),
            ("::ffff:100.64.0.1", Refused::Shared),
        ];
        for (ip, want) in cases {
            assert_eq!(class(ip), Some(want), "{ip}");
        }
        for ip in [
            "8.8.8.8",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(ip), None, "{ip}");
        }
    }

    #[test]
    fn the_allow_list_takes_hosts_addresses_and_networks() {
        let allow: SpaceWebhookAllow = "hooks.internal, 10.0.0.0/8,192.168.1.5,fd00::/8,[::1]"
            .parse()
            .unwrap();
        assert!(allow.allows_host("HOOKS.internal"));
        assert!(allow.check_addr("h", "10.9.9.9".parse().unwrap()).is_ok());
        assert!(
            allow
                .check_addr("h", "::ffff:10.9.9.9".parse().unwrap())
                .is_ok()
        );
        assert!(
            allow
                .check_addr("h", "192.168.1.5".parse().unwrap())
                .is_ok()
        );
        assert!(
            allow
                .check_addr("h", "192.168.1.6".parse().unwrap())
                .is_err()
        );
        assert!(allow.check_addr("h", "fd00::7".parse().unwrap()).is_ok());
        assert!(allow.check_addr("h", "::1".parse().unwrap()).is_ok());
        assert!(allow.check_addr("h", "127.0.0.1".parse().unwrap()).is_err());
        for bad in ["10.0.0.0/33", "fd00::/129", "a b", "x/8", "http://h/"] {
            assert!(bad.parse::<SpaceWebhookAllow>().is_err(), "{bad}");
        }
        let all: SpaceWebhookAllow = "0.0.0.0/0".parse().unwrap();
        assert!(
            all.check_addr("h", "169.254.169.254".parse().unwrap())
                .is_ok()
        );
    }

    #[tokio::test]
    async fn urls_are_checked_by_address_and_by_name() {
        let none = SpaceWebhookAllow::default();
        let url = |u: &str| Url::parse(u).unwrap();
        let err = none
            .check_url(&url("http://169.254.169.254/latest/meta-data/"))
            .await
            .unwrap_err();
        assert_eq!(err.rule, Refused::LinkLocal);
        assert!(err.to_string().contains("link-local"), "{err}");
        let err = none.check_url(&url("http://[fe80::1]/")).await.unwrap_err();
        assert_eq!(err.rule, Refused::LinkLocal);
        let err = none
            .check_url(&url("http://localhost:6379/"))
            .await
            .unwrap_err();
        assert_eq!(err.rule, Refused::Loopback);
        let err = none
            .check_url(&url("http://a.LOCALHOST./"))
            .await
            .unwrap_err();
        assert_eq!(err.rule, Refused::Loopback);
        assert!(none.check_url(&url("https://93.184.215.14/")).await.is_ok());
        let allow: SpaceWebhookAllow = "127.0.0.0/8,localhost".parse().unwrap();
        assert!(allow.check_url(&url("http://127.0.0.1:9/")).await.is_ok());
        assert!(allow.check_url(&url("http://localhost:9/")).await.is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_that_resolve_inward() {
        let none = SpaceWebhookAllow::default();
        let err = GuardedResolver::lookup(&none, "localhost")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let allow: SpaceWebhookAllow = "::1,127.0.0.1".parse().unwrap();
        let found = GuardedResolver::lookup(&allow, "localhost").await.unwrap();
        assert!(found.iter().all(|a| a.ip().is_loopback()), "{found:?}");
        let by_name: SpaceWebhookAllow = "localhost".parse().unwrap();
        assert!(GuardedResolver::lookup(&by_name, "localhost").await.is_ok());
        // Through the trait, as reqwest calls it.
        let resolver = GuardedResolver::new(none);
        let name: Name = "localhost".parse().unwrap();
        assert!(resolver.resolve(name).await.is_err());
    }
}
