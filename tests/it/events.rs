//! `GET /api/v1/jobs/{id}/events`: a job's progress as Server-Sent Events, against the real
//! daemon.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use test_support::{Daemon, poll};

/// The events of one stream until it ends: (name, data).
async fn events_of(daemon: &Daemon, id: &str, query: &str) -> Vec<(String, Value)> {
    let response = daemon
        .client()
        .get(daemon.url(&format!("/api/v1/jobs/{id}/events{query}")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut stream = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    let mut events = Vec::new();
    while let Some(event) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("an event within 30 s")
    {
        let event = event.unwrap();
        events.push((event.event, serde_json::from_str(&event.data).unwrap()));
    }
    events
}

async fn diagnostic(daemon: &Daemon, body: Value) -> String {
    let (status, accepted) = daemon.post_json("/api/v1/diagnostics/jobs", &body).await;
    assert_eq!(status, 202, "{accepted}");
    accepted["jobId"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn the_stream_delivers_progress_and_ends_with_the_final_state() {
    let daemon = Daemon::fresh("").await;
    let id = diagnostic(&daemon, json!({"durationSeconds": 3})).await;
    let events = events_of(&daemon, &id, "?interval=200ms").await;
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"state"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert!(
        names.iter().filter(|n| **n == "progress").count() >= 2,
        "{names:?}"
    );
    // Progress advances through the stream, and the last event is the final record.
    let elapsed: Vec<u64> = events
        .iter()
        .filter_map(|(_, d)| d["progress"]["secondsElapsed"].as_u64())
        .collect();
    assert!(elapsed.windows(2).all(|w| w[0] <= w[1]), "{elapsed:?}");
    assert!(elapsed.len() >= 3, "{elapsed:?}");
    let (_, last) = events.last().unwrap();
    assert_eq!(last["state"], "SUCCEEDED", "{last}");
    assert_eq!(last["progress"]["secondsElapsed"], 3, "{last}");
    assert_eq!(last["id"], id.as_str());
    // The same as the job's status says.
    let (_, job) = daemon.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(job["state"], last["state"]);
    assert_eq!(job["progress"], last["progress"]);
    // Every event names its job, as its status does: a page or a follower on the stream alone
    // can say which job it shows.
    let name = job["name"].as_str().unwrap();
    assert_eq!(name, "diagnostic: wait 3s", "{job}");
    for (event, data) in &events {
        assert_eq!(data["name"], name, "{event}: {data}");
    }

    // A failing job ends FAILED with its error; a job that has ended streams just its end.
    let failing = diagnostic(&daemon, json!({"durationSeconds": 1, "failWith": "boom"})).await;
    let events = events_of(&daemon, &failing, "").await;
    let (name, last) = events.last().unwrap();
    assert_eq!(name, "end");
    assert_eq!(last["state"], "FAILED");
    assert!(last["error"].as_str().unwrap().contains("boom"), "{last}");
    let again = events_of(&daemon, &failing, "").await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0].0, "end");

    // Bad input gets the API's errors.
    let (status, body) = daemon.get("/api/v1/jobs/nope/events").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = daemon
        .get(&format!("/api/v1/jobs/{id}/events?interval=5ms"))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("interval"),
        "{body}"
    );
}

fn gauge(metrics: &str, name: &str) -> i64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} is not on /metrics:\n{metrics}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn clients_that_go_away_leave_no_stream_behind_and_streams_are_bounded() {
    let home = test_support::Home::new();
    let config = home.write_config_edited(
        "",
        &[(
            "  diagnostics: true\n",
            "  diagnostics: true\n  max_event_streams: 3\n",
        )],
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let id = diagnostic(&daemon, json!({"durationSeconds": 120})).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let response = daemon
            .client()
            .get(daemon.url(&format!("/api/v1/jobs/{id}/events?interval=100ms")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        open.push(response);
    }
    // Read a little of each, so that each stream is running.
    for response in &mut open {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(String::from_utf8_lossy(&chunk).contains("event: state"));
    }
    assert_eq!(
        gauge(&daemon.get_text("/metrics").await, "drover_event_streams"),
        3
    );
    // One more is refused, with the bound named.
    let (status, body) = daemon.get(&format!("/api/v1/jobs/{id}/events")).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("server.max_event_streams"),
        "{body}"
    );
    // The clients go away without a word: their streams end with their connections.
    drop(open);
    let closed = poll(Duration::from_secs(10), async || {
        let n = gauge(&daemon.get_text("/metrics").await, "drover_event_streams");
        if n == 0 { Ok(()) } else { Err(n) }
    })
    .await;
    assert!(closed.is_ok(), "streams still open: {closed:?}");
    // And the slots are free again.
    let response = daemon
        .client()
        .get(daemon.url(&format!("/api/v1/jobs/{id}/events")))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    drop(response);
    let (status, _) = daemon
        .post_json(&format!("/api/v1/jobs/{id}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202);
}

/// Issue 42, finding 11: one client could hold all 64 streams. Each caller (a proven
/// identity) now holds at most `max_event_streams_per_caller`: at the share its next stream
/// gets 503 naming the key and the caller, while another caller still opens its own; a
/// stream closed gives its caller's slot back.
#[tokio::test]
async fn one_caller_holds_at_most_its_share_of_the_streams() {
    use sha2::Digest;
    let sha = |t: &str| -> String {
        sha2::Sha256::digest(t.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let home = test_support::Home::new();
    let config = home.write_config_edited(
        &format!(
            "auth:\n  tokens:\n    - {{id: a, sha256: {}, roles: [reader, operator]}}\n    - {{id: b, sha256: {}, roles: [reader]}}\n",
            sha("token-a"),
            sha("token-b")
        ),
        &[(
            "  diagnostics: true\n",
            "  diagnostics: true\n  max_event_streams: 8\n  max_event_streams_per_caller: 2\n",
        )],
    );
    let daemon = Daemon::start_with(&home, &config).await;
    let (status, accepted) = {
        let response = daemon
            .client()
            .post(daemon.url("/api/v1/diagnostics/jobs"))
            .bearer_auth("token-a")
            .json(&json!({"durationSeconds": 120}))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["jobId"].as_str().unwrap().to_string();
    let open = async |token: &str| {
        daemon
            .client()
            .get(daemon.url(&format!("/api/v1/jobs/{id}/events?interval=100ms")))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    };
    let mut held = Vec::new();
    for _ in 0..2 {
        let response = open("token-a").await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    // At the share: refused, naming the caller and the key.
    let refused = open("token-a").await;
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        body["message"],
        "token:a holds 2 progress streams already (server.max_event_streams_per_caller); close one or retry later"
    );
    // Another caller is not refused for a's streams.
    for _ in 0..2 {
        let response = open("token-b").await;
        assert_eq!(response.status(), 200);
        held.push(response);
    }
    assert_eq!(open("token-b").await.status(), 503);
    // One of a's streams closes: a may open one again.
    held.remove(0);
    let again = poll(Duration::from_secs(10), async || {
        let response = open("token-a").await;
        if response.status() == 200 {
            Ok(response)
        } else {
            Err(response.status())
        }
    })
    .await;
    assert!(again.is_ok(), "{:?}", again.err());
    drop(held);
    let response = daemon
        .client()
        .post(daemon.url(&format!("/api/v1/jobs/{id}/cancel")))
        .bearer_auth("token-a")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
}
