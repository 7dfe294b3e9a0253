//! The worker config of a verification run: command tasks that append `job attempt` to the
//! execution log as they start (so every execution is counted, even one whose worker dies
//! before its outcome is written), and queues with a key limit and a rate limit.

use std::path::Path;

/// How long a silent worker's jobs wait for their rescue; a frozen worker sleeps past it.
pub const RESCUE_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// The config file's text, for an execution log at `log`.
pub fn config(log: &Path) -> String {
    let log = log.to_string_lossy().replace('\'', "'\\''");
    let record = format!("cat >/dev/null; echo $REMUDA_JOB_ID $REMUDA_JOB_ATTEMPT >> '{log}'");
    let task = |name: &str, script: &str, attempts: u32| {
        format!(
            "[tasks.{name}]\ncommand = [\"sh\", \"-c\", {script:?}]\nmax_attempts = {attempts}\n\
             backoff = {{ kind = \"fixed\", delay = \"100ms\" }}\n\n"
        )
    };
    let mut text = format!(
        "[worker]\nconcurrency = 8\nqueues = [\"default\", \"limited\", \"rated\"]\n\
         poll_interval = \"200ms\"\nheartbeat_interval = \"500ms\"\nrescue_after = \"{}s\"\n\
         maintenance_interval = \"250ms\"\npromote_interval = \"100ms\"\nshutdown_timeout = \"5s\"\n\
         crash_loop_limit = 1000\n\n",
        RESCUE_AFTER.as_secs()
    );
    text += &task("record", &record, 20);
    text += &task("slow", &format!("{record}; sleep 0.5"), 20);
    text += &task(
        "flaky",
        &format!("{record}; [ $REMUDA_JOB_ATTEMPT -ge 2 ] || exit 3"),
        20,
    );
    text += &task("fail", &format!("{record}; exit 4"), 1);
    text += &task(
        "items",
        &format!("{record}; echo '{{\"items\": [0, 1, 2]}}'"),
        20,
    );
    text
}
