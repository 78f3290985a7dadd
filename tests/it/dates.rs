//! Date-time parameters take the spellings that client generators send, on every operation of
//! both documents: the parameters are read from the documents, so a new one is tried too.

use serde_json::Value;

use crate::common::TestApp;

/// The parameter objects of a path's `GET`, its own and the path's, `$ref`s followed.
fn query_params<'a>(doc: &'a Value, item: &'a Value) -> Vec<&'a Value> {
    let resolve = |p: &'a Value| match p["$ref"].as_str() {
        Some(r) => doc.pointer(r.trim_start_matches('#')).unwrap(),
        None => p,
    };
    let listed = |v: &'a Value| v.as_array().into_iter().flatten().map(resolve).collect::<Vec<_>>();
    let mut params = listed(&item["parameters"]);
    params.extend(listed(&item["get"]["parameters"]));
    params.into_iter().filter(|p| p["in"] == "query").collect()
}

/// Every query parameter of a `GET` of both documents that takes an RFC 3339 date-time (it
/// answers a strict one without a problem of its own) takes it with an offset without its colon
/// (`+0000`, `-0530`, as openapi-generator's Python client sends it), with fraction digits, and
/// with its `+` left unencoded (a query reads it as a space), and the answer is the strict one's.
#[tokio::test]
async fn every_date_time_parameter_takes_the_spellings_generators_send() {
    let app = TestApp::spawn_with(|c| c.rate_limit_per_minute = 1_000_000).await;
    let gym = app.gym("Dates").await;
    let key = gym.live_key.as_str();
    let any_id = uuid::Uuid::now_v7().to_string();
    let spellings = [
        ("+0000", "2026-03-01T10:00:00%2B0000"),
        ("-0530", "2026-03-01T04:30:00-0530"),
        ("fraction digits and +0000", "2026-03-01T10:00:00.000000%2B0000"),
        ("an unencoded +", "2026-03-01T10:00:00+00:00"),
    ];
    let mut tried = Vec::new();
    for (file, base) in [("openapi.yaml", "/api/v1"), ("openapi-devices.yaml", "/api/v1/devices")] {
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        let oracle = if file == "openapi.yaml" { crate::common::oracle() } else { crate::common::devices_oracle() };
        for (path, item) in doc["paths"].as_object().unwrap() {
            if item.get("get").is_none() {
                continue;
            }
            let path =
                path.split('/').map(|s| if s.starts_with('{') { any_id.as_str() } else { s }).collect::<Vec<_>>();
            let path = path.join("/");
            for p in query_params(&doc, item) {
                let name = p["name"].as_str().unwrap();
                // `wait=0`: a long poll answers at once.
                let ask = |value: &str| format!("{path}?wait=0&{name}={value}");
                let strict =
                    app.send((base, oracle), "GET", &ask("2026-03-01T10:00:00%2B00:00"), Some(key), None, &[]).await;
                if !strict.body["errors"][name].is_null() {
                    continue;
                }
                tried.push(format!("{base}{path} {name}"));
                for (spelled, value) in spellings {
                    let r = app.send((base, oracle), "GET", &ask(value), Some(key), None, &[]).await;
                    assert!(r.body["errors"][name].is_null(), "{path} {name} with {spelled}: {}", r.body);
                    assert_eq!(r.status, strict.status, "{path} {name} with {spelled}: {}", r.body);
                }
            }
        }
    }
    for expected in ["/api/v1/attendance from", "/api/v1/attendance to", "/api/v1/members updated_since"] {
        assert!(tried.iter().any(|t| t == expected), "{expected} was not tried: {tried:#?}");
    }
}
