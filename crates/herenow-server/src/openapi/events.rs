//! The event streams, described as OpenAPI 3.2 describes
//! `text/event-stream`: an `itemSchema` for one event (its `event` name and
//! its `data`), where `data` is JSON text whose `contentSchema` depends on
//! the event's name. A client (or a fuzzer) can then check every event of
//! a stream, not just the first.

use serde_json::{Value, json};

use super::rules::{id_schema, space_schema};

/// The member events of `GET /v1/spaces/{space}/events`.
#[rustfmt::skip]
const MEMBER_EVENTS: [&str; 7] = [
    "join", "away", "back", "leave", "update", "connect", "disconnect",
];

/// Adds the event schemas and points each stream's answer at them.
pub fn apply(doc: &mut Value) {
    let schemas = doc["components"]["schemas"]
        .as_object_mut()
        .expect("the document has schemas");
    schemas.insert("SpaceEvent".into(), space_event());
    schemas.insert(
        "LaggedData".into(),
        json!({
            "type": "object",
            "description": "A reader fell behind: how many events it missed. A `snapshot` with `resync: true` follows.",
            "required": ["missed"],
            "properties": { "missed": { "type": "integer", "minimum": 0 } },
            "additionalProperties": false,
        }),
    );
    let mut space = vec![("snapshot", "SnapshotData"), ("lagged", "LaggedData")];
    space.extend(MEMBER_EVENTS.map(|e| (e, "SpaceEvent")));
    stream(doc, "/v1/spaces/{space}/events", "get", &space);
    stream(
        doc,
        "/v1/watch",
        "post",
        &[
            ("watching", "WatchingPage"),
            ("status", "WatchedUser"),
            ("unwatched", "UnwatchedData"),
        ],
    );
}

/// Replaces the `text/event-stream` schema of an operation's `200` with an
/// `itemSchema`: one branch per event name, each naming its data's schema.
fn stream(doc: &mut Value, path: &str, method: &str, events: &[(&str, &str)]) {
    let content = &mut doc["paths"][path][method]["responses"]["200"]["content"];
    let media = content["text/event-stream"]
        .as_object_mut()
        .unwrap_or_else(|| panic!("{method} {path} answers no text/event-stream"));
    media.remove("schema");
    let branches: Vec<Value> = events
        .iter()
        .map(|(name, schema)| {
            json!({
                "properties": {
                    "event": { "const": name },
                    "data": {
                        "type": "string",
                        "contentMediaType": "application/json",
                        "contentSchema": { "$ref": format!("#/components/schemas/{schema}") },
                    },
                },
            })
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(name, _)| *name).collect();
    media.insert(
        "itemSchema".into(),
        json!({
            "type": "object",
            "description": "One event: its name, and its data as JSON text of the schema its name gives.",
            "required": ["event", "data"],
            "properties": {
                "event": { "type": "string", "enum": names },
                "data": { "type": "string" },
                "id": { "type": "string" },
                "retry": { "type": "integer", "minimum": 0 },
            },
            "oneOf": branches,
        }),
    );
}

/// A member event: `join`, `away`, `back`, `leave`, `update`, `connect`,
/// `disconnect`.
fn space_event() -> Value {
    let mut space = space_schema();
    space.as_object_mut().map(|o| o.remove("description"));
    let mut id = id_schema();
    id.as_object_mut().map(|o| o.remove("description"));
    json!({
        "type": "object",
        "description": "What happened to a member of the space (docs/API.md, \"Events\").",
        "required": ["space", "type", "id", "kind", "status", "last_seen_ms"],
        "properties": {
            "space": space,
            "type": { "type": "string", "enum": MEMBER_EVENTS },
            "id": id,
            "kind": { "$ref": "#/components/schemas/Kind" },
            "status": { "$ref": "#/components/schemas/Presence" },
            "last_seen_ms": { "type": ["integer", "null"], "minimum": 0 },
            "meta": { "type": "object", "description": "The member's metadata after the event" },
            "reason": {
                "type": "string",
                "enum": ["explicit", "timeout", "expired"],
                "description": "Why the member left; only on `leave`",
            },
            "conn": { "type": "string", "description": "The connection that caused the event, if one did" },
        },
        "additionalProperties": false,
    })
}
