//! Issue 13, "An OpenAPI document that tells the truth": `/openapi.json`
//! states the constraints the server enforces, the problems each operation
//! answers, and the schema of every event of both streams; and the server
//! accepts what the document calls valid (`2.0` is the integer `2`).
//!
//! These pin the constraints so they cannot silently disappear;
//! `scripts/fuzz-api.sh` checks them against the server at large.

mod support;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use herenow_core::limits;
use herenow_server::Config;
use serde_json::{Value, json};
use support::T0;
use support::http::Api;
use support::sse::Events;
use tower::ServiceExt;

async fn document() -> Value {
    let doc = Api::memory(Config::default())
        .get("/openapi.json")
        .await
        .ok();
    assert_eq!(doc["openapi"], "3.2.0");
    doc
}

/// The schema of parameter `name` of `method path`.
fn param<'a>(doc: &'a Value, path: &str, method: &str, name: &str) -> &'a Value {
    let params = doc["paths"][path][method]["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("{method} {path} has no parameters"));
    let p = params
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"));
    &p["schema"]
}

fn prop<'a>(doc: &'a Value, schema: &str, field: &str) -> &'a Value {
    let p = &doc["components"]["schemas"][schema]["properties"][field];
    assert!(p.is_object(), "{schema}.{field} is missing");
    p
}

fn assert_id(schema: &Value) {
    assert_eq!(schema["minLength"], 1, "{schema}");
    assert_eq!(schema["maxLength"], limits::MAX_ID_BYTES, "{schema}");
    assert!(
        schema["pattern"]
            .as_str()
            .unwrap()
            .contains(r"\u0000-\u001f")
    );
}

fn assert_space(schema: &Value) {
    assert_eq!(schema["minLength"], 1, "{schema}");
    assert_eq!(schema["maxLength"], limits::MAX_SPACE_BYTES, "{schema}");
    assert_eq!(schema["pattern"], "^[A-Za-z0-9._:@-]+$");
    assert_eq!(
        schema["not"]["enum"],
        serde_json::json!([".", ".."]),
        "{schema}"
    );
}

#[tokio::test]
async fn issue_13_paths_and_queries_state_their_constraints() {
    let doc = document().await;
    assert_space(param(&doc, "/v1/spaces/{space}/online", "get", "space"));
    assert_space(param(&doc, "/v1/spaces", "get", "after"));
    assert_id(param(&doc, "/v1/spaces/{space}/members/{id}", "get", "id"));
    assert_id(param(&doc, "/v1/friends/{user}", "get", "user"));
    assert_id(param(&doc, "/v1/users/{id}", "delete", "id"));

    let online = "/v1/spaces/{space}/online";
    assert_eq!(
        param(&doc, online, "get", "kind")["enum"],
        json!(["users", "guests", "all"])
    );
    assert_eq!(
        param(&doc, online, "get", "order")["enum"],
        json!(["recent", "id"])
    );
    let limit = param(&doc, online, "get", "limit");
    assert_eq!(
        (&limit["minimum"], &limit["maximum"]),
        (&json!(1), &json!(1000))
    );
    assert_eq!(param(&doc, online, "get", "cursor")["maxLength"], 512);
    assert_eq!(
        param(&doc, "/v1/spaces/{space}/members/{id}", "get", "kind")["enum"],
        json!(["user", "guest"])
    );
    for (path, name) in [
        ("/v1/spaces/{space}/count", "window"),
        ("/v1/spaces/{space}/history", "range"),
    ] {
        let pattern = param(&doc, path, "get", name)["pattern"].as_str().unwrap();
        // Whole units up to 24h: `86400000ms`, `86400s`, `1440m`, `24h`.
        for most in ["|86400000)ms", "|86400)s", "|1440)m", "2[0-4])h"] {
            assert!(pattern.contains(most), "{path} {name}: {pattern}");
        }
    }
    // Issue 13, "Seed 000 in place": every page says its order.
    let answer = &doc["components"]["schemas"]["OnlineAnswer"];
    assert!(
        answer["required"]
            .as_array()
            .unwrap()
            .contains(&json!("order")),
        "{answer}"
    );
    let order = prop(&doc, "OnlineAnswer", "order");
    let order = match order["$ref"].as_str() {
        Some(r) => &doc["components"]["schemas"][r.rsplit('/').next().unwrap()],
        None => order,
    };
    assert_eq!(order["enum"], json!(["recent", "id"]), "{order}");
    // The user called `status` is reachable, and documented, like any.
    for method in ["get", "delete"] {
        assert!(doc["paths"]["/v1/users/status"][method]["operationId"].is_string());
    }
}

#[tokio::test]
async fn issue_13_bodies_state_their_constraints() {
    let doc = document().await;
    assert_id(prop(&doc, "MemberRef", "id"));
    assert_id(prop(&doc, "HeartbeatBody", "id"));
    assert_id(prop(&doc, "TokenRequest", "user"));
    assert_id(&prop(&doc, "UsersBody", "ids")["items"]);
    assert_id(&prop(&doc, "FriendsBody", "friends")["items"]);
    for (schema, field) in [
        ("MembersBody", "members"),
        ("HeartbeatsBody", "heartbeats"),
        ("AmongBody", "members"),
        ("FriendsBody", "friends"),
        ("UsersBody", "ids"),
    ] {
        let p = prop(&doc, schema, field);
        assert_eq!(p["minItems"], 1, "{schema}.{field}");
        assert_eq!(p["maxItems"], limits::MAX_BATCH, "{schema}.{field}");
    }
    // Replacing a friend set with nothing clears it.
    let put = &doc["paths"]["/v1/friends/{user}"]["put"]["requestBody"]["content"]["application/json"]
        ["schema"];
    assert_eq!(put["properties"]["friends"]["minItems"], 0, "{put}");
    let ttl = prop(&doc, "TokenRequest", "ttl_s");
    assert_eq!(
        (&ttl["minimum"], &ttl["maximum"]),
        (&json!(1), &json!(86_400))
    );
    assert_eq!(
        prop(&doc, "AmongBody", "limit")["maximum"],
        limits::MAX_PAGE
    );
    assert!(prop(&doc, "TokenRequest", "spaces")["anyOf"].is_array());
    assert!(doc["components"]["schemas"]["WatchRequest"]["anyOf"].is_array());
    for field in ["online_ms", "away_ms", "window_ms", "retention_ms"] {
        let p = prop(&doc, "SpaceConfigDto", field);
        assert_eq!(p["minimum"], 1, "{field}");
        assert_eq!(p["maximum"], limits::MAX_RETENTION_MS, "{field}");
    }
    // Each body has an example, valid by its own schema's bounds.
    let example = &doc["components"]["schemas"]["HeartbeatBody"]["examples"][0];
    assert_eq!(example["id"], "alice", "{example}");
    // serde's deny_unknown_fields, stated.
    for schema in [
        "MemberRef",
        "HeartbeatBody",
        "HeartbeatsBody",
        "MembersBody",
        "AmongBody",
        "FriendsBody",
        "UsersBody",
        "TokenRequest",
        "WatchRequest",
        "SpaceConfigDto",
    ] {
        assert_eq!(
            doc["components"]["schemas"][schema]["additionalProperties"], false,
            "{schema}"
        );
    }
}

#[tokio::test]
async fn issue_13_every_operation_documents_its_problems() {
    let doc = document().await;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let mut expected = vec!["400", "401", "403", "503"];
            if path != "/v1/tokens" {
                expected.push("501");
            }
            if op["requestBody"].is_object() {
                expected.extend(["413", "415"]);
            }
            for status in expected {
                let answer = &op["responses"][status]["content"]["application/problem+json"];
                assert!(
                    answer.is_object(),
                    "{method} {path} lacks a {status} problem"
                );
            }
        }
    }
}

#[tokio::test]
async fn issue_13_streams_describe_each_event() {
    let doc = document().await;
    let schemas = &doc["components"]["schemas"];
    for (path, method, names) in [
        (
            "/v1/spaces/{space}/events",
            "get",
            vec![
                "snapshot",
                "lagged",
                "join",
                "away",
                "back",
                "leave",
                "update",
                "connect",
                "disconnect",
            ],
        ),
        ("/v1/watch", "post", vec!["watching", "status", "unwatched"]),
    ] {
        let media = &doc["paths"][path][method]["responses"]["200"]["content"]["text/event-stream"];
        assert!(
            media["schema"].is_null(),
            "{path}: one schema for every event"
        );
        let item = &media["itemSchema"];
        assert_eq!(item["properties"]["event"]["enum"], json!(names), "{path}");
        let branches = item["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), names.len(), "{path}");
        for branch in branches {
            let data = &branch["properties"]["data"];
            assert_eq!(data["contentMediaType"], "application/json");
            let target = data["contentSchema"]["$ref"].as_str().unwrap();
            let name = target.rsplit('/').next().unwrap();
            assert!(schemas[name].is_object(), "{path}: {target} is not defined");
        }
    }
}

/// A real stream's events have the documented fields, and only those.
#[tokio::test]
async fn issue_13_a_member_event_has_the_documented_shape() {
    let doc = document().await;
    let event = &doc["components"]["schemas"]["SpaceEvent"];
    let h = Api::memory(Config::default());
    let subscribe = Request::builder()
        .method(Method::GET)
        .uri("/v1/spaces/lobby/events")
        .body(Body::empty())
        .unwrap();
    let mut events = Events::new(h.app.clone().oneshot(subscribe).await.unwrap());
    assert_eq!(events.next().await.unwrap().0, "snapshot");
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "ann", "meta": {"n": 1}}),
    )
    .await
    .ok();
    h.post(
        "/v1/spaces/lobby/leave",
        json!({"members": [{"id": "ann"}]}),
    )
    .await
    .ok();
    for expected in ["join", "leave"] {
        let (name, data) = events.next().await.unwrap();
        assert_eq!(name, expected);
        let fields = data.as_object().unwrap();
        for key in fields.keys() {
            assert!(
                event["properties"][key].is_object(),
                "{name} has undocumented {key}"
            );
        }
        for key in event["required"].as_array().unwrap() {
            assert!(
                fields.contains_key(key.as_str().unwrap()),
                "{name} lacks {key}"
            );
        }
    }
}

/// JSON Schema's `integer` is any number without a fraction: `2.0` too.
#[tokio::test]
async fn issue_13_whole_numbers_written_with_a_fraction_are_integers() {
    let h = Api::memory(Config::default());
    let at = json!(T0 as f64);
    assert!(at.is_f64());
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "a", "at_ms": at}),
    )
    .await
    .ok();
    h.post(
        "/v1/spaces/lobby/online-among",
        json!({"members": [{"id": "a"}], "limit": 5.0}),
    )
    .await
    .ok();
    let config = h
        .put(
            "/v1/spaces/lobby/config",
            json!({"online_ms": 60000.0, "away_ms": 300000, "window_ms": 600000.0,
                   "retention_ms": 900000.0, "remember_ms": 0.0}),
        )
        .await
        .ok();
    assert_eq!(config["retention_ms"], 900_000);
    let token = h
        .post(
            "/v1/tokens",
            json!({"user": "a", "spaces": ["lobby"], "ttl_s": 60.0}),
        )
        .await;
    assert_eq!(token.status, StatusCode::CREATED);
    // A fraction is still not an integer.
    h.post(
        "/v1/spaces/lobby/heartbeat",
        json!({"id": "a", "at_ms": 1.5}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-json");
    h.post(
        "/v1/spaces/lobby/online-among",
        json!({"members": [{"id": "a"}], "limit": -1.5}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "bad-json");
}

/// Issue 35, "Lighter to carry": the document states authentication as
/// security schemes (a bearer key, or `X-API-Key`), never as a header
/// parameter; each operation names the scope it needs as its role; and
/// on a server without keys each also lists `{}`, since no key is needed
/// there.
#[tokio::test]
async fn issue_35_security_states_what_each_operation_needs() {
    let keyed = Api::memory(Config {
        api_keys: vec!["reader-secret-1:read".parse().unwrap()],
        ..Config::default()
    })
    .get("/openapi.json")
    .await
    .ok();
    let open = document().await;
    for doc in [&keyed, &open] {
        let schemes = &doc["components"]["securitySchemes"];
        assert_eq!(schemes["bearer"]["type"], "http", "{schemes}");
        assert_eq!(schemes["bearer"]["scheme"], "bearer", "{schemes}");
        assert_eq!(schemes["x_api_key"]["type"], "apiKey", "{schemes}");
        assert_eq!(schemes["x_api_key"]["in"], "header", "{schemes}");
        assert_eq!(schemes["x_api_key"]["name"], "X-API-Key", "{schemes}");
    }
    let security_of = |doc: &Value, path: &str, method: &str| -> (Value, String) {
        let security = &doc["paths"][path][method]["security"];
        let ways = security.as_array().unwrap();
        let keyed: Vec<&Value> = ways.iter().filter(|w| w != &&json!({})).collect();
        let role = keyed[0]["bearer"][0].as_str().unwrap().to_owned();
        assert_eq!(
            keyed,
            [
                &json!({ "bearer": [role] }),
                &json!({ "x_api_key": [role] })
            ],
            "{method} {path}"
        );
        (security.clone(), role)
    };
    let mut operations = 0;
    for (path, item) in keyed["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            operations += 1;
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap().to_ascii_lowercase();
                assert!(
                    name != "authorization" && name != "x-api-key",
                    "{method} {path}"
                );
            }
            let (security, role) = security_of(&keyed, path, method);
            assert!(!security.as_array().unwrap().contains(&json!({})));
            let (security, open_role) = security_of(&open, path, method);
            assert_eq!(security[0], json!({}), "{method} {path}");
            assert_eq!(role, open_role, "{method} {path}");
        }
    }
    assert!(operations > 20, "{operations}");
    for (path, method, want) in [
        ("/v1/spaces/{space}/status", "post", "read"),
        ("/v1/spaces/{space}/online-among", "post", "read"),
        ("/v1/users/status", "post", "read"),
        ("/v1/users/status", "get", "read"),
        ("/v1/watch", "post", "read"),
        ("/v1/spaces/{space}/events", "get", "read"),
        ("/v1/spaces/{space}/heartbeat", "post", "write"),
        ("/v1/friends/{user}", "put", "write"),
        ("/v1/users/{id}", "delete", "write"),
        ("/v1/users/status", "delete", "write"),
        ("/v1/webhooks", "get", "write"),
        ("/v1/tokens", "post", "write"),
    ] {
        assert_eq!(security_of(&keyed, path, method).1, want, "{method} {path}");
    }
}
