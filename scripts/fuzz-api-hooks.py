"""Schemathesis hooks for herenow's API fuzzing (scripts/fuzz-api.sh).

/openapi.json states every constraint the server enforces that JSON Schema
can state (crates/herenow-server/src/openapi/rules.rs). A few it cannot:
they depend on the clock, on what is stored, on two fields at once, or on
byte lengths of UTF-8. The server refuses those with `400` and a code of
their own, so a request valid by the schema may still be refused.

`positive_data_acceptance_herenow` is schemathesis's own
`positive_data_acceptance` (a schema-valid request must not be refused),
except that a `400` is accepted when, and only when, its problem code is one
of those rules and the request really broke it. The scripts run it in place
of the built-in check (`--exclude-checks positive_data_acceptance`); any
other refusal of valid data still fails the run.
"""

import ipaddress
import json
import socket
from urllib.parse import urlsplit

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

MAX_ID_BYTES = 256
MAX_META_BYTES = 1024

# Codes of rules JSON Schema cannot state, refused whatever the request:
#   bad-time          at_ms more than 60 s ahead of the server's clock
#   bad-window        a window longer than the space's retention (its config)
#   bad-config        thresholds out of order (online <= away <= retention, window <= retention)
#   bad-cursor        a cursor the store did not issue for this query
#   too-many-friends  a friend set past 5,000 after adding to what is stored
#   too-many-watched  users plus a followed friend set past 5,000
# and, checked against the request itself: bad-member-id (an id over 256
# bytes but not characters), bad-metadata (over 1 KiB as compact JSON),
# bad-webhook (one URL twice among a space's endpoints), webhook-not-allowed
# (an endpoint whose host is, or resolves to, an address spaces' endpoints
# may not reach: loopback, link-local, private, shared, unique-local,
# multicast, unspecified or broadcast).
UNSTATABLE = {
    "bad-time",
    "bad-window",
    "bad-config",
    "bad-cursor",
    "too-many-friends",
    "too-many-watched",
}


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _id_too_long_in_bytes(case):
    """An id within 256 characters but over 256 bytes of UTF-8."""
    values = [case.body, case.path_parameters or {}, case.query or {}]
    return any(
        len(s) <= MAX_ID_BYTES < len(s.encode("utf-8", "surrogatepass"))
        for v in values
        for s in _strings(v)
    )


def _meta_too_large(case):
    """Metadata whose compact JSON text is over 1 KiB."""
    body = case.body if isinstance(case.body, dict) else {}
    beats = body.get("heartbeats") if isinstance(body.get("heartbeats"), list) else [body]
    for beat in beats:
        meta = beat.get("meta") if isinstance(beat, dict) else None
        if isinstance(meta, dict):
            text = json.dumps(meta, separators=(",", ":"), ensure_ascii=False)
            if len(text.encode("utf-8", "surrogatepass")) > MAX_META_BYTES:
                return True
    return False


def _webhook_url_twice(case):
    """A space's webhook endpoints naming one URL twice (JSON Schema's
    uniqueItems compares whole items, not one field of them)."""
    body = case.body if isinstance(case.body, dict) else {}
    hooks = body.get("webhooks")
    if not isinstance(hooks, list):
        return False
    urls = [h.get("url") for h in hooks if isinstance(h, dict)]
    return len(urls) != len(set(urls))


_SHARED = ipaddress.ip_network("100.64.0.0/10")
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_UNSPECIFIED_V4 = ipaddress.ip_network("0.0.0.0/8")


def _inward(ip):
    """The server's rule (webhooks/allow.rs): an address spaces' endpoints
    may not reach unless the operator allows it."""
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return (
            ip.is_loopback
            or ip.is_link_local
            or ip in ipaddress.ip_network("10.0.0.0/8")
            or ip in ipaddress.ip_network("172.16.0.0/12")
            or ip in ipaddress.ip_network("192.168.0.0/16")
            or ip in _SHARED
            or ip.is_multicast
            or ip in _UNSPECIFIED_V4
            or ip == ipaddress.ip_address("255.255.255.255")
        )
    return (
        ip.is_loopback
        or ip.is_unspecified
        or ip.is_link_local
        or ip in _UNIQUE_LOCAL
        or ip.is_multicast
    )


def _webhook_reaches_inward(case):
    """Some endpoint's host is, or resolves to, an inward address."""
    body = case.body if isinstance(case.body, dict) else {}
    hooks = body.get("webhooks")
    if not isinstance(hooks, list):
        return False
    for hook in hooks:
        url = hook.get("url") if isinstance(hook, dict) else None
        if not isinstance(url, str):
            continue
        try:
            host = urlsplit(url).hostname
        except ValueError:
            continue
        if not host:
            continue
        if host == "localhost" or host.endswith(".localhost"):
            return True
        try:
            if _inward(ipaddress.ip_address(host)):
                return True
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None)
        except (OSError, UnicodeError):
            continue
        if any(_inward(ipaddress.ip_address(i[4][0].split("%")[0])) for i in infos):
            return True
    return False


def _breaks_an_unstatable_rule(response, case):
    if response.status_code != 400:
        return False
    try:
        code = json.loads(response.content).get("code")
    except (ValueError, AttributeError):
        return False
    if code in UNSTATABLE:
        return True
    if code == "bad-member-id":
        return _id_too_long_in_bytes(case)
    if code == "bad-metadata":
        return _meta_too_large(case)
    if code == "bad-webhook":
        return _webhook_url_twice(case)
    if code == "webhook-not-allowed":
        return _webhook_reaches_inward(case)
    return False


@schemathesis.check
def positive_data_acceptance_herenow(ctx, response, case):
    """A schema-valid request is accepted, unless it broke a rule JSON Schema cannot state."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if _breaks_an_unstatable_rule(response, case):
            return None
        raise
