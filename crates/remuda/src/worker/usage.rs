//! The worker's own processor and memory use, reported with each heartbeat: processor time
//! from `getrusage`, resident memory from `/proc/self/statm` (absent where there is none).

use std::time::{Duration, Instant};

/// Processor use between two readings.
pub(crate) struct CpuMeter {
    last: Option<(Instant, Duration)>,
}

impl CpuMeter {
    /// A meter whose first reading says nothing (there is no interval yet).
    pub(crate) fn new() -> CpuMeter {
        CpuMeter {
            last: cpu_time().map(|t| (Instant::now(), t)),
        }
    }

    /// Percent of one core used since the previous reading.
    pub(crate) fn percent(&mut self) -> Option<f32> {
        let now = (Instant::now(), cpu_time()?);
        let previous = self.last.replace(now)?;
        let wall = now.0.duration_since(previous.0).as_secs_f64();
        if wall <= 0.0 {
            return None;
        }
        let used = now.1.saturating_sub(previous.1).as_secs_f64();
        Some((used / wall * 100.0) as f32)
    }
}

/// User and system processor time of this process so far.
fn cpu_time() -> Option<Duration> {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(u64::try_from(t.tv_sec()).ok()?)
            .checked_add(Duration::from_micros(u64::try_from(t.tv_usec()).ok()?))
    };
    time(usage.user_time())?.checked_add(time(usage.system_time())?)
}

/// This process's resident memory in bytes.
pub(crate) fn resident_bytes() -> Option<i64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: i64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok()??;
    pages.checked_mul(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_uses_some_processor_and_memory() {
        let mut meter = CpuMeter::new();
        let until = Instant::now() + Duration::from_millis(50);
        let mut spin = 0u64;
        while Instant::now() < until {
            spin = spin.wrapping_add(1);
        }
        assert!(spin > 0);
        let percent = meter.percent().expect("a reading");
        assert!(percent > 10.0 && percent < 400.0, "{percent}");
        assert!(resident_bytes().expect("statm") > 1 << 20);
    }
}
