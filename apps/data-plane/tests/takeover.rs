//! A run whose server dies hard (SIGKILL) is taken over by another server
//! process on the same database (docs/runs.md, "Takeover"): readers there
//! keep reading, get a `resumed` event, and the run ends `done`; the
//! conversation goes on exactly as it stood, no finished call runs again,
//! and an approval that was waiting can still be answered.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use data_plane_agent::testing::{
    FakeModel, Piece, Reply, ScriptedCall, chunk, text_reply, tool_calls_reply,
};
use data_plane_store::Scope;
use data_plane_store::identity::Permission;
use data_plane_store::testing::TestDatabase;
use futures::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

/// One event as read: id, type, body.
type Seen = (i64, String, Value);

struct Replica {
    process: common::KillOnDrop,
    base: String,
}

/// A server process over `test`'s database, chatting with `model`, whose
/// runs are taken over two seconds after it stops renewing them.
async fn replica(test: &TestDatabase, data_dir: &std::path::Path, model: &FakeModel) -> Replica {
    let addr = data_plane_testkit::unused_addr();
    let process = common::KillOnDrop(
        common::server_process(test, data_dir, addr)
            .env("DATA_PLANE_JWT_SECRET", common::JWT_SECRET)
            .env("OPENAI_BASE_URL", model.base_url())
            .env("DATA_PLANE_MODEL", "test-model")
            .env("DATA_PLANE_RUN_LEASE_SECS", "2")
            .spawn()
            .unwrap(),
    );
    let base = format!("http://{addr}");
    common::wait_ready(&base).await;
    Replica { process, base }
}

struct Reader {
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = Seen> + Send>>,
}

impl Reader {
    async fn open(base: &str, token: &str, run_id: &str, after: i64) -> Reader {
        let r = reqwest::Client::new()
            .get(format!("{base}/v1/runs/{run_id}/events"))
            .bearer_auth(token)
            .header("last-event-id", after.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let stream = eventsource_stream::EventStream::new(r.bytes_stream()).map(|e| {
            let e = e.unwrap();
            let data: Value = serde_json::from_str(&e.data).unwrap();
            (e.id.parse::<i64>().unwrap(), e.event, data)
        });
        Reader {
            stream: Box::pin(stream),
        }
    }

    /// Events up to and including the first that `stop` accepts.
    async fn until(&mut self, stop: impl Fn(&Seen) -> bool) -> Vec<Seen> {
        let mut seen = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(30), self.stream.next())
                .await
                .expect("an event within 30 s")
                .unwrap_or_else(|| panic!("the stream ended early: {seen:?}"));
            let found = stop(&event);
            seen.push(event);
            if found {
                return seen;
            }
        }
    }

    async fn rest(&mut self) -> Vec<Seen> {
        self.until(|(_, kind, _)| kind == "done" || kind == "error")
            .await
    }
}

fn kinds(events: &[Seen]) -> Vec<&str> {
    events.iter().map(|(_, k, _)| k.as_str()).collect()
}

fn text(events: &[Seen]) -> String {
    events
        .iter()
        .filter(|(_, k, _)| k == "text_delta")
        .map(|(_, _, d)| d["text"].as_str().unwrap())
        .collect()
}

fn assert_increasing(events: &[Seen]) {
    for pair in events.windows(2) {
        assert!(pair[0].0 < pair[1].0, "ids go back: {events:?}");
    }
}

async fn start_chat(base: &str, token: &str, space: Uuid, question: &str) -> String {
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat"))
        .bearer_auth(token)
        .json(&json!({"messages": [{"role": "user", "content": question}], "spaceId": space}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let run_id = r.headers()["x-run-id"].to_str().unwrap().to_string();
    // The response is read by nobody from here: the grace period (30 s)
    // keeps the run going, and the reader on the other replica watches it.
    tokio::spawn(async move {
        let mut body = r.bytes_stream();
        while let Some(Ok(_)) = body.next().await {}
    });
    run_id
}

/// `GET /v1/runs/{id}`: the run's status and the approvals it waits for.
async fn run_state(base: &str, token: &str, run_id: &str) -> Value {
    let r = reqwest::Client::new()
        .get(format!("{base}/v1/runs/{run_id}"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    common::json(r).await.1
}

fn kill(replica: &mut Replica) {
    replica.process.0.kill().unwrap(); // SIGKILL
    replica.process.0.wait().unwrap();
}

/// The audit's rows for `call_id`, once its writer (which batches) had
/// time to write them.
async fn audit_rows(test: &TestDatabase, call_id: &str) -> i64 {
    let count = || async {
        let mut tx = test.db.begin(Scope::System).await.unwrap();
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM tool_calls WHERE call_id = $1")
            .bind(call_id)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        n
    };
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while count().await == 0 && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    count().await
}

fn document_info(doc: Uuid) -> Reply {
    let args: &'static str = Box::leak(format!(r#"{{"document_id":"{doc}"}}"#).into_boxed_str());
    let fragments: &'static [&'static str] = Box::leak(vec![args].into_boxed_slice());
    tool_calls_reply(&[ScriptedCall {
        id: "call_info",
        name: "document_info",
        fragments,
    }])
}

#[tokio::test]
async fn a_run_cut_off_mid_answer_by_sigkill_is_finished_by_another_replica() {
    let test = TestDatabase::create().await;
    let (alice, token) = common::person(&test, "alice@example.com", Permission::User).await;
    let (space, doc) = common::space_with_guide(&test.db, "alpha", &[alice]).await;
    let model = FakeModel::start().await;
    // Step 1 calls a tool; step 2 is cut off after a few words.
    model.push(document_info(doc));
    model.push(Reply::Stream(vec![
        Piece::Chunk(chunk(
            json!({"role": "assistant", "content": "Half an "}),
            None,
        )),
        Piece::Hang,
    ]));
    // The replica that takes over asks step 2 again.
    model.push(text_reply(&["The guide ", "is about VACUUM."]));
    // Each replica keeps its own keyword index.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut first = replica(&test, dir_a.path(), &model).await;
    let second = replica(&test, dir_b.path(), &model).await;

    let run_id = start_chat(&first.base, &token, space, "What is the guide?").await;
    let mut reader = Reader::open(&second.base, &token, &run_id, 0).await;
    let before = reader.until(|(_, kind, _)| kind == "text_delta").await;
    let result_id = before
        .iter()
        .find(|(_, k, _)| k == "tool_result")
        .map(|(id, _, _)| *id)
        .expect("the call's result before step 2");
    // The audit writer flushes every 50 ms: a call that returned longer ago
    // than that is in the audit (docs/runs.md, "Takeover", says what a
    // replica that dies sooner loses).
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill(&mut first);

    let after = reader.rest().await;
    let all: Vec<Seen> = before
        .iter()
        .cloned()
        .chain(after.iter().cloned())
        .collect();
    assert_increasing(&all);
    let resumed = after
        .iter()
        .find(|(_, k, _)| k == "resumed")
        .unwrap_or_else(|| panic!("no resumed event: {:?}", kinds(&after)));
    assert_eq!(resumed.2["step"], 2, "{}", resumed.2);
    assert_eq!(
        resumed.2["after"], result_id,
        "what step 2 sent is dropped: {}",
        resumed.2
    );
    assert_eq!(resumed.2["rerun"], json!([]));
    assert_eq!(resumed.2["interrupted"], json!([]));
    let (_, last_kind, last) = after.last().unwrap();
    assert_eq!(last_kind, "done", "{last}");
    assert_eq!(last["reason"], "stop", "{last}");
    assert_eq!(text(&after), "The guide is about VACUUM.");

    // The model was asked step 2 again with the conversation exactly as it
    // stood: the call and its recorded result, nothing run twice.
    assert!(model.wait_requests(3, Duration::from_secs(5)).await);
    let requests = model.requests();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert_eq!(requests[2]["messages"], requests[1]["messages"]);
    assert_eq!(audit_rows(&test, "call_info").await, 1);

    // A reader that comes later gets the run as if it had never stopped:
    // the cut words are not replayed; the `resumed` event still is.
    let mut late = Reader::open(&second.base, &token, &run_id, 0).await;
    let replay = late.rest().await;
    assert_increasing(&replay);
    assert_eq!(text(&replay), "The guide is about VACUUM.");
    assert_eq!(
        kinds(&replay),
        [
            "run",
            "tool_call",
            "tool_call",
            "tool_result",
            "resumed",
            "text_delta",
            "text_delta",
            "done"
        ]
    );
    let r = run_state(&second.base, &token, &run_id).await;
    assert_eq!(r["status"], "done", "{r}");
}

#[tokio::test]
async fn an_approval_waiting_when_its_replica_died_is_answered_on_the_one_that_took_over() {
    let test = TestDatabase::create().await;
    let (alice, token) = common::person(&test, "bob@example.com", Permission::User).await;
    let (space, doc) = common::space_with_guide(&test.db, "beta", &[alice]).await;
    let model = FakeModel::start().await;
    model.push(document_info(doc));
    model.push(text_reply(&["Approved ", "and done."]));
    // Each replica keeps its own keyword index.
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut first = replica(&test, dir_a.path(), &model).await;
    let second = replica(&test, dir_b.path(), &model).await;
    let (_, admin) = common::person(&test, "root@example.com", Permission::Admin).await;
    let r = reqwest::Client::new()
        .put(format!("{}/v1/admin/settings", first.base))
        .bearer_auth(&admin)
        .json(&json!({"approvals": {"tools": ["document_info"]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());

    let run_id = start_chat(&first.base, &token, space, "Info, please").await;
    let mut reader = Reader::open(&second.base, &token, &run_id, 0).await;
    let before = reader
        .until(|(_, kind, _)| kind == "approval_request")
        .await;
    kill(&mut first);
    let resumed = reader.until(|(_, kind, _)| kind == "resumed").await;
    let (_, _, data) = resumed.last().unwrap();
    assert_eq!(data["step"], 2, "{data}");
    assert_eq!(
        data["rerun"],
        json!(["call_info"]),
        "the call never reached its tool: it runs once answered"
    );
    // Still waiting, and answered on the replica that runs it now.
    let pending = run_state(&second.base, &token, &run_id).await;
    assert_eq!(pending["status"], "running", "{pending}");
    assert_eq!(pending["pending_approvals"][0]["call_id"], "call_info");
    let r = reqwest::Client::new()
        .post(format!(
            "{}/v1/runs/{run_id}/approvals/call_info",
            second.base
        ))
        .bearer_auth(&token)
        .json(&json!({"approved": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let after = reader.rest().await;
    let all: Vec<Seen> = before
        .into_iter()
        .chain(resumed.clone())
        .chain(after.clone())
        .collect();
    assert_increasing(&all);
    let kinds_all = kinds(&all);
    assert_eq!(
        kinds_all
            .iter()
            .filter(|k| **k == "approval_request")
            .count(),
        1,
        "asked once: {kinds_all:?}"
    );
    let answered = all
        .iter()
        .find(|(_, k, _)| k == "approval_result")
        .unwrap_or_else(|| panic!("{kinds_all:?}"));
    assert_eq!(answered.2["approved"], true);
    let result = all
        .iter()
        .find(|(_, k, _)| k == "tool_result")
        .unwrap_or_else(|| panic!("{kinds_all:?}"));
    assert_eq!(result.2["result"]["success"], true, "{}", result.2);
    assert_eq!(kinds(&after).last(), Some(&"done"));
    assert_eq!(text(&after), "Approved and done.");
    assert_eq!(audit_rows(&test, "call_info").await, 1);
}
