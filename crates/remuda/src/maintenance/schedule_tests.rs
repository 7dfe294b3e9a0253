//! The schedule firer against a real PostgreSQL: exactly one job per fire time whoever
//! fires, nothing from a stale leader, and catch-up after a gap as each policy says.

use super::firer;
use super::leader::{elect, Lease};
use crate::schedule::{CatchUp, Pattern, Schedule};
use crate::testing::TestDatabase;
use crate::Database;
use std::time::Duration;

async fn leader(db: &Database, id: &str) -> Lease {
    db.conn()
        .await
        .expect("conn")
        .execute(
            "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms)
             VALUES ($1, $1, 'h', 1, '{default}', '{x}', 1, 3600000)",
            &[&id],
        )
        .await
        .expect("register");
    elect(db, id, Duration::from_secs(60))
        .await
        .expect("elect")
        .expect("leads")
}

type Time = chrono::DateTime<chrono::Utc>;

/// Puts the schedule's next fire time `minutes` minutes back (whole minutes, so an
/// interval of a minute lines up with it); returns it.
async fn fall_behind(db: &Database, name: &str, minutes: i32) -> Time {
    db.conn()
        .await
        .expect("conn")
        .query_one(
            "UPDATE remuda.schedules
             SET next_run_at = date_trunc('minute', now()) - make_interval(mins => $2)
             WHERE name = $1
             RETURNING next_run_at",
            &[&name, &minutes],
        )
        .await
        .expect("fall behind")
        .get(0)
}

/// The minutes from `from` to `to`, both counted.
fn minutes(from: Time, to: Time) -> i64 {
    (to - from).num_minutes() + 1
}

/// The fire times of a schedule's jobs (first, last) and its next fire time.
async fn fired_window(db: &Database, name: &str) -> (Time, Time, Time) {
    let row = db
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT (SELECT min(fire_at) FROM remuda.jobs WHERE schedule = $1),
                    (SELECT max(fire_at) FROM remuda.jobs WHERE schedule = $1),
                    (SELECT next_run_at FROM remuda.schedules WHERE name = $1)",
            &[&name],
        )
        .await
        .expect("window");
    (row.get(0), row.get(1), row.get(2))
}

/// (jobs of the schedule, distinct fire times among them, schedule's skipped count).
async fn counts(db: &Database, name: &str) -> (i64, i64, i64) {
    let row = db
        .conn()
        .await
        .expect("conn")
        .query_one(
            "SELECT (SELECT count(*) FROM remuda.jobs WHERE schedule = $1),
                    (SELECT count(DISTINCT fire_at) FROM remuda.jobs WHERE schedule = $1),
                    (SELECT skipped FROM remuda.schedules WHERE name = $1)",
            &[&name],
        )
        .await
        .expect("counts");
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firers_racing_with_one_lease_make_one_job_per_fire_time() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let lease = leader(&db, "a").await;
    let every = Pattern::every("1m").expect("pattern");
    client
        .set_schedule(&Schedule::new("tick", "x", every).catch_up(CatchUp::All))
        .await
        .expect("declare");
    let behind = fall_behind(&db, "tick", 10).await;
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let (db, lease) = (db.clone(), lease.clone());
            tokio::spawn(async move { firer::fire(&db, &lease).await.expect("fire").0 })
        })
        .collect();
    let mut inserted = 0;
    for racer in racers {
        inserted += racer.await.expect("racer").jobs;
    }
    let (jobs, times, skipped) = counts(&db, "tick").await;
    let (first, last, next) = fired_window(&db, "tick").await;
    assert_eq!(first, behind, "from the first missed time");
    assert_eq!(
        next - last,
        chrono::TimeDelta::minutes(1),
        "to the latest due"
    );
    let due = minutes(first, last);
    assert!(due >= 11, "ten minutes behind: {due}");
    assert_eq!((jobs, times, skipped), (due, due, 0), "each time once");
    assert_eq!(inserted, due, "the racers' own counts agree");
    let info = client
        .schedule("tick")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(info.runs, due);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_leader_fires_nothing() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let stale = leader(&db, "a").await;
    let every = Pattern::every("1m").expect("pattern");
    client
        .set_schedule(&Schedule::new("tick", "x", every))
        .await
        .expect("declare");
    let behind = fall_behind(&db, "tick", 3).await;
    db.conn()
        .await
        .expect("conn")
        .batch_execute("UPDATE remuda.leader SET expires_at = now() - interval '1 second'")
        .await
        .expect("a is cut off past its lease");
    let current = leader(&db, "b").await;
    assert!(current.term > stale.term);
    let (fired, _) = firer::fire(&db, &stale).await.expect("stale fire");
    assert_eq!(fired.jobs, 0);
    assert_eq!(
        counts(&db, "tick").await,
        (0, 0, 0),
        "the stale leader wrote nothing"
    );
    firer::fire(&db, &current).await.expect("fire");
    let (_, last, _) = fired_window(&db, "tick").await;
    assert_eq!(
        counts(&db, "tick").await,
        (1, 1, minutes(behind, last) - 1),
        "the latest, the others skipped"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_ten_minute_gap_each_catch_up_policy_fires_as_it_says() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let lease = leader(&db, "a").await;
    let every = Pattern::every("1m").expect("pattern");
    let mut behind = Vec::new();
    for (name, catch_up) in [("skip", CatchUp::Skip), ("all", CatchUp::All)] {
        let schedule = Schedule::new(name, "x", every.clone()).catch_up(catch_up);
        client.set_schedule(&schedule).await.expect("declare");
        behind.push(fall_behind(&db, name, 10).await);
    }
    // `none` with every time missed by more than a minute: an hourly time five minutes ago,
    // an hour behind
    let conn = db.conn().await.expect("conn");
    let five_ago: chrono::DateTime<chrono::Utc> = conn
        .query_one(
            "SELECT date_trunc('minute', now() - interval '5 minutes')",
            &[],
        )
        .await
        .expect("clock")
        .get(0);
    let minute = chrono::Timelike::minute(&five_ago);
    let hourly: Pattern = format!("hourly :{minute:02}").parse().expect("pattern");
    client
        .set_schedule(&Schedule::new("none", "x", hourly).catch_up(CatchUp::None))
        .await
        .expect("declare");
    conn.execute(
        "UPDATE remuda.schedules SET next_run_at = $1::timestamptz - interval '1 hour' WHERE name = 'none'",
        &[&five_ago],
    )
    .await
    .expect("an hour behind");

    firer::fire(&db, &lease).await.expect("fire");
    let (first, last, _) = fired_window(&db, "skip").await;
    assert_eq!(first, last);
    let due = minutes(behind[0], last);
    assert!(due >= 11);
    assert_eq!(
        counts(&db, "skip").await,
        (1, 1, due - 1),
        "skip: the latest only"
    );
    let (first, last, _) = fired_window(&db, "all").await;
    assert_eq!(first, behind[1]);
    let due = minutes(first, last);
    assert_eq!(
        counts(&db, "all").await,
        (due, due, 0),
        "all: every missed time"
    );
    assert_eq!(
        counts(&db, "none").await,
        (0, 0, 2),
        "none: nothing missed fires"
    );
    let skip = client
        .schedule("skip")
        .await
        .expect("read")
        .expect("exists");
    assert!(skip
        .last_skip_reason
        .is_some_and(|r| r.contains("catch_up = skip")));
    let none = client
        .schedule("none")
        .await
        .expect("read")
        .expect("exists");
    assert!(none.next_run_at > five_ago, "it goes on from its next time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_the_firer_cannot_read_is_left_alone_and_holds_no_other_back() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let lease = leader(&db, "a").await;
    let every = Pattern::every("1m").expect("pattern");
    for name in ["broken", "fine"] {
        client
            .set_schedule(&Schedule::new(name, "x", every.clone()))
            .await
            .expect("declare");
    }
    let broken_next = fall_behind(&db, "broken", 2).await;
    fall_behind(&db, "fine", 1).await;
    db.conn()
        .await
        .expect("conn")
        .execute(
            "UPDATE remuda.schedules SET pattern = 'every fortnight' WHERE name = 'broken'",
            &[],
        )
        .await
        .expect("break it");
    firer::fire(&db, &lease).await.expect("fire");
    assert_eq!(
        counts(&db, "fine").await.0,
        1,
        "the readable schedule fired"
    );
    assert_eq!(counts(&db, "broken").await.0, 0);
    let broken = client
        .schedule("broken")
        .await
        .expect("read")
        .expect("exists");
    assert_eq!(broken.next_run_at, broken_next, "its row is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_schedule_that_runs_keeps_its_due_times() {
    let test = TestDatabase::new().await.expect("test database");
    let db = test.database().expect("pool");
    let client = test.client().await.expect("client");
    let every = Pattern::every("1m").expect("pattern");
    client
        .set_schedule(&Schedule::new("tick", "x", every))
        .await
        .expect("declare");
    let behind = fall_behind(&db, "tick", 5).await;
    assert_eq!(
        client.resume_schedule("tick").await.expect("resume"),
        behind
    );
    client.pause_schedule("tick").await.expect("pause");
    let next = client.resume_schedule("tick").await.expect("resume");
    assert!(
        next > behind,
        "a paused schedule resumes from its next time after now"
    );
}
