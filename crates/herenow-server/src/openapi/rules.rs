//! The constraints the server enforces, written into the document.
//!
//! utoipa derives types from the Rust types, but most of what the server
//! refuses is not in a type: ids are 1 to 256 bytes without control
//! characters, batches hold 1 to 10,000 items, a page 1 to 1,000, a token
//! lives 1 s to 24 h. Each is stated here once, on the generated JSON,
//! from the same constants the checks use ([`herenow_core::limits`]), so a
//! client generated from `/openapi.json` (or a schema-driven fuzzer) sends
//! only what the server accepts, and what it sends otherwise is refused.
//!
//! What JSON Schema cannot state is left to each field's description and
//! answered `400` with its own code: byte lengths of non-ASCII ids and of
//! metadata, a heartbeat time against the clock (`bad-time`), a window
//! against the space's retention (`bad-window`), thresholds against each
//! other (`bad-config`), cursors the store did not issue (`bad-cursor`),
//! and sizes that depend on what is stored (`too-many-friends`,
//! `too-many-watched`).
//!
//! Every lookup panics when a schema or parameter it names is missing: a
//! renamed field fails the tests that build the document rather than
//! silently losing its constraint.

use herenow_core::limits;
use serde_json::{Map, Value, json};

use crate::extract::MAX_CURSOR_BYTES;
use crate::token::{MAX_TOKEN_SPACES, MAX_TTL_S};

/// A member id: no control character (Unicode category Cc), at most 256
/// characters. The server counts bytes of UTF-8, which JSON Schema cannot:
/// an id of non-ASCII characters reaches 256 bytes sooner.
pub const ID_PATTERN: &str = r"^[^\u0000-\u001f\u007f-\u009f]+$";
/// A space name: ASCII only, so its length in characters is its length in
/// bytes.
pub const SPACE_PATTERN: &str = r"^[A-Za-z0-9._:@-]+$";
/// A duration in a query string: a positive integer and a unit, at most
/// 24 hours (the longest retention, and the longest history range):
/// `1ms` to `86400000ms`, `86400s`, `1440m` or `24h`. The server reads any
/// humantime duration (`1h 30m` too), but a bare number is refused: `600`
/// could be seconds or milliseconds.
pub const DURATION_PATTERN: &str = concat!(
    "^(?:",
    "(?:[1-9][0-9]{0,6}|[1-7][0-9]{7}|8[0-5][0-9]{6}|86[0-3][0-9]{5}|86400000)ms",
    "|(?:[1-9][0-9]{0,3}|[1-7][0-9]{4}|8[0-5][0-9]{3}|86[0-3][0-9]{2}|86400)s",
    "|(?:[1-9][0-9]{0,2}|1[0-3][0-9]{2}|14[0-3][0-9]|1440)m",
    "|(?:[1-9]|1[0-9]|2[0-4])h",
    ")$"
);

/// A member or user id.
pub fn id_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": limits::MAX_ID_BYTES,
        "pattern": ID_PATTERN,
        "description": format!(
            "1 to {} bytes of UTF-8 without control characters",
            limits::MAX_ID_BYTES
        ),
    })
}

/// A space name.
pub fn space_schema() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": limits::MAX_SPACE_BYTES,
        "pattern": SPACE_PATTERN,
        // URLs fold these away, so no path could name such a space.
        "not": { "enum": [".", ".."] },
        "description": format!(
            "1 to {} ASCII letters, digits and - _ . : @, other than `.` and `..`",
            limits::MAX_SPACE_BYTES
        ),
    })
}

/// A duration in a query string.
fn duration_schema(what: &str) -> Value {
    json!({
        "type": "string",
        "pattern": DURATION_PATTERN,
        "description": format!("{what}: an integer and a unit, at most 24h, e.g. `10m`, `90s`, `1500ms`, `1h`"),
    })
}

/// An array of `items`, `min` to `max` long.
fn array(items: Value, min: usize, max: usize) -> Value {
    json!({ "type": "array", "items": items, "minItems": min, "maxItems": max })
}

/// Writes every constraint into `doc`, the serialized document.
pub fn apply(doc: &mut Value) {
    request_bodies(doc);
    shadowed_user(doc);
    policy(doc);
    answers(doc);
    parameters(doc);
    examples(doc);
}

/// An example of each body and parameter, as docs/API.md shows them: a
/// reader sees what a request looks like, and a fuzzer's first requests
/// are these. Each body refuses fields it does not know
/// (`additionalProperties`, as serde's `deny_unknown_fields`).
fn examples(doc: &mut Value) {
    for (name, example) in [
        ("MemberRef", json!({ "id": "alice", "kind": "user" })),
        (
            "HeartbeatBody",
            json!({ "id": "alice", "kind": "user", "meta": { "name": "Alice" } }),
        ),
        (
            "HeartbeatsBody",
            json!({ "heartbeats": [{ "id": "a" }, { "id": "b", "kind": "guest" }] }),
        ),
        ("MembersBody", json!({ "members": [{ "id": "alice" }] })),
        (
            "AmongBody",
            json!({ "members": [{ "id": "alice" }, { "id": "bob" }], "window": "10m", "limit": 10 }),
        ),
        ("FriendsBody", json!({ "friends": ["bob", "carol"] })),
        ("UsersBody", json!({ "ids": ["ann", "bob"] })),
        (
            "TokenRequest",
            json!({ "user": "alice", "spaces": ["room:1"], "ttl_s": 3600 }),
        ),
        (
            "WatchRequest",
            json!({ "users": ["bob"], "space": "lobby" }),
        ),
        (
            "SpaceConfigDto",
            json!({
                "online_ms": 60_000, "away_ms": 300_000, "window_ms": 600_000,
                "retention_ms": 900_000, "remember_ms": 2_592_000_000u64, "remember_guests": false,
                "grace_ms": 5_000,
            }),
        ),
    ] {
        let schema = schema(doc, name);
        schema.insert("additionalProperties".into(), Value::Bool(false));
        schema.insert("examples".into(), json!([example]));
    }
}

/// The shapes clients send.
fn request_bodies(doc: &mut Value) {
    let batch = limits::MAX_BATCH;
    for (schema, field) in [
        ("MemberRef", "id"),
        ("HeartbeatBody", "id"),
        ("TokenRequest", "user"),
    ] {
        merge(property(doc, schema, field), id_schema());
    }
    merge(
        property(doc, "HeartbeatBody", "at_ms"),
        json!({ "minimum": 0, "maximum": u64::MAX }),
    );
    merge(
        property(doc, "HeartbeatBody", "meta"),
        json!({ "description": format!(
            "A JSON object of at most {} bytes (compact); absent keeps what the member had",
            limits::MAX_META_BYTES
        ) }),
    );
    for (schema, field, items) in [
        (
            "MembersBody",
            "members",
            json!({ "$ref": "#/components/schemas/MemberRef" }),
        ),
        (
            "AmongBody",
            "members",
            json!({ "$ref": "#/components/schemas/MemberRef" }),
        ),
        (
            "HeartbeatsBody",
            "heartbeats",
            json!({ "$ref": "#/components/schemas/HeartbeatBody" }),
        ),
        ("FriendsBody", "friends", id_schema()),
        ("UsersBody", "ids", id_schema()),
    ] {
        merge(property(doc, schema, field), array(items, 1, batch));
    }
    merge(
        property(doc, "AmongBody", "limit"),
        json!({ "minimum": 1, "maximum": limits::MAX_PAGE }),
    );
    *property(doc, "AmongBody", "window") = json!({
        "type": ["string", "null"],
        "pattern": DURATION_PATTERN,
        "description": "Within how long: an integer and a unit (`10m`), at most the space's retention; default: the space's window",
    });
    merge(
        property(doc, "TokenRequest", "ttl_s"),
        json!({ "minimum": 1, "maximum": MAX_TTL_S }),
    );
    // Either the one wildcard, or names; `*` among names is refused.
    *property(doc, "TokenRequest", "spaces") = json!({
        "description": format!(
            "1 to {MAX_TOKEN_SPACES} space names the socket may join and subscribe to, or `[\"*\"]` for every space"
        ),
        "anyOf": [
            { "type": "array", "items": { "const": "*" }, "minItems": 1, "maxItems": 1 },
            array(space_schema(), 1, MAX_TOKEN_SPACES),
        ],
    });
    let mut users = array(id_schema(), 0, crate::watch::limits::MAX_WATCHED);
    users["description"] = json!(format!(
        "User ids to watch (at most {} watched in all, friends followed included)",
        crate::watch::limits::MAX_WATCHED
    ));
    *property(doc, "WatchRequest", "users") = users;
    let mut friends_of = id_schema();
    friends_of["type"] = json!(["string", "null"]);
    *property(doc, "WatchRequest", "friends_of") = friends_of;
    let mut space = space_schema();
    space["type"] = json!(["string", "null"]);
    *property(doc, "WatchRequest", "space") = space;
    // Something to watch: users, or a friend set to follow.
    schema(doc, "WatchRequest").insert(
        "anyOf".into(),
        json!([
            { "required": ["users"], "properties": { "users": { "minItems": 1 } } },
            { "required": ["friends_of"], "properties": { "friends_of": { "type": "string" } } },
        ]),
    );
    let put = &mut doc["paths"]["/v1/friends/{user}"]["put"]["requestBody"]["content"]["application/json"]
        ["schema"];
    assert!(put.is_object(), "PUT /v1/friends/{{user}} has no JSON body");
    *put = json!({
        "type": "object",
        "description": "The whole friend set; an empty list clears it.",
        "required": ["friends"],
        "properties": { "friends": array(id_schema(), 0, batch) },
        "additionalProperties": false,
    });
}

/// `GET` and `DELETE /v1/users/status` are the user called `status`: the
/// batch route's concrete path wins over `/v1/users/{id}` (in the router
/// as in OpenAPI's matching), so the document lists them there too.
fn shadowed_user(doc: &mut Value) {
    let by_id = doc["paths"]["/v1/users/{id}"].clone();
    let shadowed = crate::api::users::SHADOWED_ID;
    let batch = doc["paths"]["/v1/users/status"]
        .as_object_mut()
        .expect("the document has /v1/users/status");
    for method in ["get", "delete"] {
        let mut op = by_id[method].clone();
        let op_obj = op
            .as_object_mut()
            .unwrap_or_else(|| panic!("/v1/users/{{id}} has no {method}"));
        op_obj.remove("parameters");
        let id = op_obj["operationId"].as_str().unwrap_or_default();
        op_obj["operationId"] = json!(format!("{id}_{shadowed}"));
        op_obj["summary"] = json!(format!(
            "`{}` of the user called `{shadowed}`, as `/v1/users/{{id}}` does for any other id",
            method.to_uppercase()
        ));
        batch.insert(method.into(), op);
    }
}

/// A space's policy: each threshold alone. How they compare
/// (`online ≤ away ≤ retention`, `window ≤ retention`) is `bad-config`.
fn policy(doc: &mut Value) {
    let day = limits::MAX_RETENTION_MS;
    for (field, minimum, maximum) in [
        ("online_ms", 1, day),
        ("away_ms", 1, day),
        ("window_ms", 1, day),
        ("retention_ms", 1, day),
        ("remember_ms", 0, limits::MAX_REMEMBER_MS),
        ("grace_ms", 0, limits::MAX_GRACE_MS),
    ] {
        merge(
            property(doc, "SpaceConfigDto", field),
            json!({ "minimum": minimum, "maximum": maximum }),
        );
    }
    space_webhooks(doc);
}

/// A space's webhook endpoints: what `webhooks/endpoint.rs` and `sign.rs`
/// accept, as far as a pattern can say it (the same URL twice in one list
/// is the one rule left to the `400`).
fn space_webhooks(doc: &mut Value) {
    // http(s), a host of letters, digits, dots and inner hyphens, a port,
    // a path and a query of URL-safe characters; no fragment. IPv6 hosts
    // and other characters a URL may escape are accepted too, unlisted.
    // The last label starts with a letter: one of digits would be read as
    // an IPv4 number. Dotted IPv4 addresses are their own branch.
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let last = "[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let url = format!(
        "^https?://(?:(?:{label}\\.)*{last}|(?:{octet}\\.){{3}}{octet})(?::[1-9][0-9]{{0,3}})?(?:/[A-Za-z0-9._~%!$&'()*+,;=:@/-]*)?(?:\\?[A-Za-z0-9._~%!$&'()*+,;=:@/?-]*)?$"
    );
    // `whsec_` and canonical base64 of 24 to 64 bytes: whole quanta, or a
    // last one padded with `==` (one byte) or `=` (two), whose final
    // character leaves no stray bits.
    let b64 = "[A-Za-z0-9+/]";
    let secret = format!(
        "^whsec_(?:(?:{b64}{{4}}){{8,21}}(?:{b64}[AQgw]==)?|(?:{b64}{{4}}){{8,20}}{b64}{{2}}[AEIMQUYcgkosw048]=)$"
    );
    for (field, rule) in [
        ("url", json!({ "pattern": url })),
        ("secret", json!({ "pattern": secret })),
        ("events", json!({ "uniqueItems": true })),
    ] {
        merge(property(doc, "SpaceWebhookDto", field), rule);
    }
}

/// What the server answers: ids and names it sends are ones it accepts.
fn answers(doc: &mut Value) {
    for (schema, field) in [
        ("MemberDto", "id"),
        ("SeenAnywhereDto", "id"),
        ("FriendList", "user"),
        ("WatchedUser", "id"),
    ] {
        let mut id = id_schema();
        id.as_object_mut().map(|o| o.remove("description"));
        merge(property(doc, schema, field), id);
    }
    for (schema, field) in [("SnapshotData", "space"), ("SpaceDto", "space")] {
        let mut space = space_schema();
        space.as_object_mut().map(|o| o.remove("description"));
        merge(property(doc, schema, field), space);
    }
}

/// Query and path parameters, by name (and by operation where one name
/// means two things).
fn parameters(doc: &mut Value) {
    let paths = doc["paths"]
        .as_object_mut()
        .expect("the document has paths");
    let mut seen = Vec::new();
    for item in paths.values_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for op in item.values_mut() {
            let id = op["operationId"].as_str().unwrap_or_default().to_owned();
            let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) else {
                continue;
            };
            for param in params {
                let name = param["name"].as_str().unwrap_or_default().to_owned();
                let Some(schema) = parameter_schema(&id, &name) else {
                    continue;
                };
                param["schema"] = schema;
                seen.push(name);
            }
        }
    }
    for name in [
        "space", "id", "user", "window", "kind", "order", "cursor", "range", "after",
    ] {
        assert!(seen.iter().any(|s| s == name), "no parameter {name} found");
    }
}

/// The schema of parameter `name` of operation `op`, if it is constrained.
fn parameter_schema(op: &str, name: &str) -> Option<Value> {
    Some(match (op, name) {
        (_, "space" | "after") => with_example(space_schema(), json!("lobby")),
        (_, "id" | "user") => with_example(id_schema(), json!("alice")),
        (_, "window") => with_example(
            duration_schema(
                "Within how long, at most the space's retention; default: the space's window",
            ),
            json!("10m"),
        ),
        (_, "range") => with_example(
            duration_schema("How far back, at most 24h; default 1h"),
            json!("1h"),
        ),
        ("online", "kind") => json!({ "type": "string", "enum": ["users", "guests", "all"] }),
        (_, "kind") => json!({ "type": "string", "enum": ["user", "guest"] }),
        (_, "order") => json!({ "type": "string", "enum": ["recent", "id"] }),
        (_, "cursor") => json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_CURSOR_BYTES,
            "description": "A `next_cursor` from the previous page of the same query",
        }),
        (_, "limit") => json!({ "type": "integer", "minimum": 1, "maximum": limits::MAX_PAGE }),
        _ => return None,
    })
}

/// `schema` with one example.
fn with_example(mut schema: Value, example: Value) -> Value {
    schema["examples"] = json!([example]);
    schema
}

/// The object schema `name` of the components.
fn schema<'a>(doc: &'a mut Value, name: &str) -> &'a mut Map<String, Value> {
    doc["components"]["schemas"][name]
        .as_object_mut()
        .unwrap_or_else(|| panic!("no schema {name} in the document"))
}

/// Property `field` of component `name`.
fn property<'a>(doc: &'a mut Value, name: &str, field: &str) -> &'a mut Value {
    let props = schema(doc, name)
        .get_mut("properties")
        .unwrap_or_else(|| panic!("schema {name} has no properties"));
    let prop = &mut props[field];
    assert!(prop.is_object(), "schema {name} has no property {field}");
    prop
}

/// Adds (or replaces) the keys of `patch` in `target`; a `type` already
/// there is kept (it says whether `null` is allowed).
fn merge(target: &mut Value, patch: Value) {
    let (Some(target), Value::Object(patch)) = (target.as_object_mut(), patch) else {
        panic!("merge needs two objects");
    };
    for (k, v) in patch {
        if k == "type" && target.contains_key("type") {
            continue;
        }
        target.insert(k, v);
    }
}
