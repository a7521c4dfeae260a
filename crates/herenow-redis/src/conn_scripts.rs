//! The Lua scripts of live connections (see [`herenow_core::conn`]): attach,
//! detach, the listing of a member's connections, and the sweep that closes
//! connections which stopped pinging before it runs [`TICK`]'s body.
//!
//! They follow the memory engine (`Space::attach`, `detach`, `drop_conn`,
//! `conn_gone` and the top of `Space::tick`) step for step, atomically per
//! call, on the space's `conns`, `cinfo` and `mconn` (the crate's key
//! table). In a `cinfo` record the member id holds no control characters,
//! so the first newline ends it; flag `2` lingers in its member's grace
//! (see [`LINGER`]). In `mconn` connection ids hold no spaces, and at most
//! [`limits::MAX_CONNS_PER_MEMBER`](herenow_core::limits::MAX_CONNS_PER_MEMBER)
//! entries make "the member's other visible connections" and the listing
//! read one short field.
//!
//! Every script but [`CONNECTIONS`] takes the same keys (as does
//! [`TICK`]): `zu zg meta state config lease conns cinfo mconn ru rg
//! unidx` (attach and detach never touch the lease). When a member's last
//! visible connection goes, the member is remembered (see
//! [`crate::scripts`]): at the time of the close (a detach, or turning
//! invisible) or at its last heartbeat (a connection that expired), never
//! before its last heartbeat.
//!
//! Events caused by a connection carry its id as a ninth element of the
//! event tuple (see [`scripts`](crate::scripts)) and the connection's
//! metadata in place of the member's.
//!
//! [`TICK`]: crate::scripts::TICK

use std::sync::LazyLock;

use redis::Script;

use crate::scripts::{PRELUDE, TICK_BODY, bare};

/// A connection script: [`PRELUDE`], the connection helpers
/// (`lua/conn_prelude.lua`), then `body`.
fn conn_script(body: &str) -> Script {
    let helpers = include_str!("lua/conn_prelude.lua");
    Script::new(&format!("{PRELUDE}\n\n{helpers}\n\n{body}"))
}

/// Opens, pings or changes a connection. KEYS: see the module docs. ARGV:
/// now, the six defaults, publish command, channel, kind, id,
/// connection id, metadata (`''`: none), invisible (`0`/`1`), expiry (ms),
/// most connections per member. Returns `{status, opened, joined, left,
/// new_user, outbox, resumed, revived}` (`outbox`: see
/// [`crate::outbox_scripts`]; `resumed`: 1 when the connection took the
/// place of a lingering one of its member, as the memory engine's
/// `Space::attach` does; `revived`: 1 when the connection itself was
/// lingering, pinged again by a server found dead while it was only slow);
/// status 0 is done, -1 the id belongs to another member, -2 the member
/// has too many connections (nothing changed in either case); `new_user`
/// is 1 when a user neither stored nor remembered was stored (added to
/// `unidx`, as by a heartbeat: the caller indexes it).
///
/// A visible attach is the member's heartbeat "now": `join` if the member
/// was not present, `back` if it was away, else `connect` if this
/// connection just became visible, else `update` if this connection's
/// metadata changed (compared with what the connection had, not with the
/// member's). The member takes the connection's metadata when the
/// connection opens or changes it, and keeps its own when the connection
/// has none. Turning the last visible connection invisible is a `leave`.
pub static ATTACH: LazyLock<Script> = LazyLock::new(|| conn_script(include_str!("lua/attach.lua")));

/// Closes a connection of a member. KEYS: see the module docs. ARGV: now,
/// the six defaults, publish command, channel, kind, id, connection id.
/// Returns `{found, left, outbox}`; an id that is unknown or another member's is
/// not found.
pub static DETACH: LazyLock<Script> = LazyLock::new(|| conn_script(include_str!("lua/detach.lua")));

/// A connection ended without a goodbye (see [`herenow_core::conn`]): a
/// visible one lingers (flag `2`) until now + the space's grace, its
/// member seen now if it was online (no event), and the sweep
/// closes it then (a `leave` with reason `explicit`, the member seen last
/// when it began to linger) unless the member's next visible attach takes
/// its place ([`ATTACH`]); an invisible one, or any with a grace of 0, is
/// detached (`explicit`). Lingering again changes nothing. KEYS: see the module
/// docs. ARGV: now, the six defaults, publish command, channel, kind, id,
/// connection id, the default grace (ms), optionally when the connection
/// ended (a dead server's last beat; default now): the grace and the last
/// seen count from then. Returns `{found, left, outbox}` as [`DETACH`]
/// does.
pub static LINGER: LazyLock<Script> = LazyLock::new(|| conn_script(include_str!("lua/linger.lua")));

/// Erases a user from one shard of a space
/// ([`UserIndex::erase_user`](herenow_core::UserIndex::erase_user)):
/// its presence (a `leave` with reason `explicit` if it was present), its
/// metadata, its live connections (closed without further events: the
/// leave says it), its remembered time and its place in `unidx`. KEYS: see
/// the module docs. ARGV: now, the six defaults, publish command, channel,
/// user id. Returns `{present, remembered, connections, outbox}`: `remembered` is
/// 1 only for a time still within the horizon (one past it was already
/// forgotten, only not yet swept). Running it again does nothing.
///
/// Claims of the user's connection ids in other shards (spaces of several
/// shards) are not touched: they hold the owner's id and expire by
/// themselves shortly after the connection's TTL.
pub static ERASE: LazyLock<Script> = LazyLock::new(|| conn_script(include_str!("lua/erase.lua")));

/// Members' connections. KEYS: conns cinfo mconn. ARGV: `u:ID` / `g:ID`
/// per member. Returns one array per member, flat `conn, expiry, invisible
/// (0/1), meta` groups (meta `''` for none), in no particular order.
pub static CONNECTIONS: LazyLock<Script> =
    LazyLock::new(|| bare(include_str!("lua/connections.lua")));

/// Claims connection id `CONN` for a member in a space split over
/// several shards (see [`crate::key_names`]): the claim key lives in the shard
/// the id hashes to, the member's connections in the member's shard.
/// KEYS: the claim key. ARGV: owner (`u:ID` / `g:ID`), time to live (ms).
/// Returns 1 if the member holds the id now (claimed or renewed), 0 if
/// another member does.
pub static CLAIM: LazyLock<Script> = LazyLock::new(|| bare(include_str!("lua/claim.lua")));

/// Gives up a claim made by [`CLAIM`] if the member holds it. KEYS: the
/// claim key. ARGV: owner. Returns 1 if it did.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| bare(include_str!("lua/release.lua")));

/// One bounded step of background work on a space, connections first:
/// close the connections whose expiry has passed (as the memory engine
/// does at the top of its tick: `disconnect`, or a `leave` with reason
/// `timeout` for a member's last visible one), then run [`TICK`]'s body.
/// KEYS: see the module docs. ARGV: those of [`TICK`], then the most
/// connections this call may close.
///
/// Only the holder of the space's sweep lease works (the same check as
/// [`TICK`]'s). Returns [`TICK`]'s reply with `left` also counting the
/// connections still stored (so a space that holds only connections,
/// invisible ones say, is not dropped from the registry while they live)
/// and the connections it closed fifth, `more` set when either budget ran
/// out: `{expired, transitions, more, left, connections_expired,
/// forgotten, remembered, due, unindexed, trimmed, outbox}`. When another store
/// holds the lease: `{0, 0, 0, -1, 0, stored, remembered, due}`, `stored`
/// counting what `left` counts (so a space split over shards swept by
/// several stores can still be found empty, and its remembered times
/// scheduled).
///
/// [`TICK`]: crate::scripts::TICK
pub static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    // The tick's body runs as a function: it returns from its last line.
    let tick = format!("\n{TICK_BODY}");
    conn_script(&include_str!("lua/sweep.lua").replace("-- tick.lua", &tick))
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The sweep embeds the tick body: it must stay a chunk that can be
    /// wrapped in a function (it returns from its last line).
    #[test]
    fn sweep_wraps_the_tick_body() {
        assert!(TICK_BODY.trim_end().ends_with('}'));
        assert!(TICK_BODY.contains("\nreturn {ex, tr, more,"));
        // The sweep's text holds the marker the tick body replaces, once.
        assert_eq!(
            include_str!("lua/sweep.lua").matches("-- tick.lua").count(),
            1
        );
        // Building the scripts computes their hashes: no panic, distinct.
        let shas = [
            ATTACH.get_hash(),
            DETACH.get_hash(),
            ERASE.get_hash(),
            CONNECTIONS.get_hash(),
            SWEEP.get_hash(),
        ];
        for (i, a) in shas.iter().enumerate() {
            for b in &shas[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
