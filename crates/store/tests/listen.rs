//! The one LISTEN utility against the real PostgreSQL: it says "missed"
//! first, then hands on notifications; when its connection's backend is
//! killed it reconnects by itself, says "missed" again, and hears what is
//! sent after; a caller racing it against a short timer still reconnects.

// Test helpers report failure by panicking, like the tests that call them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use data_plane_store::listen::{Heard, Subscription};
use data_plane_store::testing::TestDatabase;

const CHANNEL: &str = "data_plane_listen_test";

async fn notify(test: &TestDatabase, payload: &str) {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(test.db.pool())
        .await
        .unwrap();
}

/// Terminates the subscription's backend (found by the name it gives
/// itself); how many were terminated.
async fn kill_listener(test: &TestDatabase) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (
             SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE application_name = $1 AND datname = current_database()) AS killed",
    )
    .bind(format!("data-plane listen {CHANNEL}"))
    .fetch_one(test.db.pool())
    .await
    .unwrap()
}

async fn next(subscription: &mut Subscription) -> Heard {
    tokio::time::timeout(Duration::from_secs(15), subscription.next())
        .await
        .expect("the subscription heard something within 15 s")
}

#[tokio::test]
async fn a_subscription_says_missed_after_every_connection_and_survives_its_backend_killed() {
    let test = TestDatabase::create().await;
    let mut subscription = Subscription::new(&test.db, CHANNEL);
    assert!(!subscription.is_connected());
    assert_eq!(next(&mut subscription).await, Heard::Missed);
    assert!(subscription.is_connected());
    notify(&test, "one").await;
    notify(&test, "two").await;
    assert_eq!(next(&mut subscription).await, Heard::Notified("one".into()));
    assert_eq!(next(&mut subscription).await, Heard::Notified("two".into()));

    // The backend killed: the subscription reconnects by itself and says
    // first that notifications may have been missed.
    assert_eq!(kill_listener(&test).await, 1);
    assert_eq!(next(&mut subscription).await, Heard::Missed);
    notify(&test, "three").await;
    assert_eq!(
        next(&mut subscription).await,
        Heard::Notified("three".into())
    );

    // Killed again while the caller races it against a timer shorter than
    // any reconnection: dropping the call neither loses the reconnection
    // nor a notification.
    assert_eq!(kill_listener(&test).await, 1);
    let mut heard = Vec::new();
    let started = std::time::Instant::now();
    while heard.len() < 2 && started.elapsed() < Duration::from_secs(15) {
        tokio::select! {
            h = subscription.next() => {
                if h == Heard::Missed {
                    notify(&test, "four").await;
                }
                heard.push(h);
            }
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
    assert_eq!(heard, [Heard::Missed, Heard::Notified("four".into())]);
}
