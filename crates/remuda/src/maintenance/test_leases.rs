//! For the duties' tests: two workers, the first cut off past its lease while the second was
//! elected, so one test can try a stale leader and the current one.

use super::leader::{elect, Lease};
use crate::Database;
use std::time::Duration;

/// Registers workers `a` and `b`; returns `a`'s stale lease and `b`'s current one.
pub(super) async fn stale_and_current(db: &Database) -> (Lease, Lease) {
    let conn = db.conn().await.expect("conn");
    conn.batch_execute(
        "INSERT INTO remuda.workers (id, name, host, pid, queues, kinds, concurrency, rescue_after_ms)
         VALUES ('a', 'a', 'h', 1, '{default}', '{x}', 1, 3600000),
                ('b', 'b', 'h', 2, '{default}', '{x}', 1, 3600000)",
    )
    .await
    .expect("workers");
    let lease = Duration::from_secs(60);
    let stale = elect(db, "a", lease)
        .await
        .expect("elect")
        .expect("a leads");
    conn.batch_execute("UPDATE remuda.leader SET expires_at = now() - interval '1 second'")
        .await
        .expect("a is cut off");
    let current = elect(db, "b", lease)
        .await
        .expect("elect")
        .expect("b leads");
    assert!(current.term > stale.term);
    (stale, current)
}
