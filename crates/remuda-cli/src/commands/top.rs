//! `remuda top`: a live view of the queues (counts, lag, and since the previous minute
//! throughput, failures and wait and run p95), the workers and the leader, redrawn every
//! `--interval` until `q` (or Ctrl-C). On a terminal it reads keys one at a time (raw input,
//! restored on exit); from a pipe, a line with `q`. `--once` prints one frame and exits.

use crate::args::{DbArgs, TopArgs};
use crate::connect;
use crate::error::CliResult;
use crate::table::{Align, Table};
use chrono::Timelike;
use remuda::{Client, JobState};
use std::fmt::Write;

pub async fn run(db: &DbArgs, args: TopArgs) -> CliResult<u8> {
    let client = connect::client(db).await?;
    if args.once {
        crate::out!("{}", frame(&client).await?);
        return Ok(0);
    }
    let _raw = RawInput::enter();
    let (tx, mut quit) = tokio::sync::mpsc::channel::<()>(1);
    std::thread::spawn(move || read_keys(tx));
    loop {
        let text = frame(&client).await?;
        // home, clear, the frame (lines ended for a terminal in raw mode)
        crate::out_part!("\x1b[H\x1b[2J{}", text.replace('\n', "\r\n"));
        tokio::select! {
            _ = quit.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(args.interval) => {}
        }
    }
    crate::out!("");
    Ok(0)
}

/// Sends on `tx` when `q` (or end of input, or Ctrl-C in raw mode) is read.
fn read_keys(tx: tokio::sync::mpsc::Sender<()>) {
    use std::io::Read;
    let mut stdin = std::io::stdin();
    let mut byte = [0u8; 1];
    loop {
        match stdin.read(&mut byte) {
            Ok(0) | Err(_) => break,
            Ok(_) if matches!(byte[0], b'q' | b'Q' | 3) => break,
            Ok(_) => {}
        }
    }
    let _ = tx.blocking_send(());
}

/// One screen: queues, throughput since the start of the previous minute (from what the
/// workers report with their heartbeats), workers, leader.
async fn frame(client: &Client) -> CliResult<String> {
    let (queues, recent, workers, maintenance) = tokio::try_join!(
        client.queue_stats_capped(Some(remuda::COUNT_CAP)),
        client.activity(2),
        client.workers(),
        client.maintenance_status()
    )?;
    let now = chrono::Utc::now();
    // the previous minute and the current one so far
    let seconds = 60.0 + f64::from(now.second());
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |ms| format!("{ms:.0}ms"));
    let mut out = String::new();
    let alive = workers.iter().filter(|w| w.alive).count();
    let leader = maintenance
        .leader
        .filter(|l| l.current)
        .map_or_else(|| "none".to_string(), |l| l.worker);
    let _ = writeln!(
        out,
        "remuda top — {} — {alive} worker(s) alive, leader {leader} — q to quit",
        now.format("%H:%M:%S")
    );
    let mut table = Table::new(&[
        ("QUEUE", Align::Left),
        ("STATUS", Align::Left),
        ("AVAILABLE", Align::Right),
        ("SCHEDULED", Align::Right),
        ("RUNNING", Align::Right),
        ("UNROUTABLE", Align::Right),
        ("LAG", Align::Right),
        ("JOBS/S", Align::Right),
        ("FAILED", Align::Right),
        ("FAIL%", Align::Right),
        ("WAIT P95", Align::Right),
        ("RUN P95", Align::Right),
    ]);
    for q in &queues {
        let r = recent.iter().find(|r| r.queue == q.queue);
        // from when the oldest available job became runnable (see QueueStats)
        let lag = q.oldest_available.map_or_else(
            || "-".to_string(),
            |t| {
                format!(
                    "{:.1}s",
                    (now - t).num_milliseconds().max(0) as f64 / 1000.0
                )
            },
        );
        table.row(vec![
            q.queue.clone(),
            if q.settings.paused {
                "paused"
            } else {
                "active"
            }
            .into(),
            q.count(JobState::Available).to_string(),
            q.count(JobState::Scheduled).to_string(),
            q.count(JobState::Running).to_string(),
            q.unroutable.to_string(),
            lag,
            format!(
                "{:.1}",
                r.map_or(0.0, |r| (r.completed + r.failed) as f64 / seconds)
            ),
            r.map_or(0, |r| r.failed).to_string(),
            format!("{:.1}%", r.map_or(0.0, |r| r.failure_rate * 100.0)),
            ms(r.and_then(|r| r.wait_p95_ms)),
            ms(r.and_then(|r| r.run_p95_ms)),
        ]);
    }
    out.push('\n');
    for line in table.lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(
        out,
        "\n{:<24} {:<16} {:>7} {:>11} {:>10} {:>8} {:>6} {:>8}",
        "WORKER", "HOST", "PID", "RUNNING", "COMPLETED", "FAILED", "CPU", "MEMORY"
    );
    for w in workers.iter().filter(|w| w.alive) {
        let _ = writeln!(
            out,
            "{:<24} {:<16} {:>7} {:>11} {:>10} {:>8} {:>6} {:>8}",
            w.name,
            w.host,
            w.pid,
            format!("{}/{}", w.running, w.concurrency),
            w.completed,
            w.failed,
            w.cpu_percent
                .map_or_else(|| "-".into(), |p| format!("{p:.0}%")),
            w.rss_bytes
                .map_or_else(|| "-".into(), |b| format!("{}M", b >> 20)),
        );
    }
    Ok(out)
}

/// The terminal in raw input mode (keys one at a time, not echoed) while it lives; nothing
/// when standard input is not a terminal.
struct RawInput(Option<nix::sys::termios::Termios>);

impl RawInput {
    fn enter() -> RawInput {
        use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg};
        let stdin = std::io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else {
            return RawInput(None);
        };
        let mut raw = saved.clone();
        raw.local_flags
            .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ISIG);
        if tcsetattr(&stdin, SetArg::TCSANOW, &raw).is_err() {
            return RawInput(None);
        }
        RawInput(Some(saved))
    }
}

impl Drop for RawInput {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                saved,
            );
        }
    }
}
