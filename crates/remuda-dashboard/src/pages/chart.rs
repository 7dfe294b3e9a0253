//! A queue's last hour as a small bar chart drawn on the server: one bar per minute, its
//! height the attempts that finished (completed below, failed for good above in red,
//! retried on top), each bar titled with its minute and counts.

use remuda::MinuteActivity;
use std::fmt::Write;

/// Width of one minute's bar and the gap after it, in pixels.
const BAR: usize = 5;
const GAP: usize = 1;
/// Height of the tallest bar.
const HEIGHT: f64 = 48.0;

/// The chart of `minutes` (oldest first).
pub fn minutes(minutes: &[MinuteActivity]) -> String {
    let most = minutes
        .iter()
        .map(|m| m.completed + m.failed + m.retried)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let width = minutes.len() * (BAR + GAP);
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {width} {HEIGHT}\" preserveAspectRatio=\"none\" role=\"img\" aria-label=\"attempts per minute\">"
    );
    for (i, m) in minutes.iter().enumerate() {
        let x = i * (BAR + GAP);
        let _ = write!(
            svg,
            "<g><title>{} UTC: {} completed, {} failed, {} retried</title>",
            m.minute.format("%H:%M"),
            m.completed,
            m.failed,
            m.retried
        );
        let mut top = HEIGHT;
        for (count, class) in [(m.completed, "ok"), (m.failed, "bad"), (m.retried, "retry")] {
            if count == 0 {
                continue;
            }
            let h = (count as f64 / most * HEIGHT).max(1.0);
            top -= h;
            let _ = write!(
                svg,
                "<rect class=\"{class}\" x=\"{x}\" y=\"{top:.2}\" width=\"{BAR}\" height=\"{h:.2}\"/>"
            );
        }
        // an empty minute still answers to the pointer
        if top == HEIGHT {
            let _ = write!(
                svg,
                "<rect class=\"none\" x=\"{x}\" y=\"{:.2}\" width=\"{BAR}\" height=\"1\"/>",
                HEIGHT - 1.0
            );
        }
        svg += "</g>";
    }
    svg += "</svg>";
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_scaled_to_the_busiest_minute_and_stacked_by_outcome() {
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let svg = minutes(&[
            MinuteActivity {
                minute: at,
                completed: 30,
                failed: 10,
                retried: 0,
            },
            MinuteActivity {
                minute: at + chrono::Duration::minutes(1),
                ..MinuteActivity::default()
            },
        ]);
        assert!(
            svg.contains("class=\"ok\" x=\"0\" y=\"12.00\" width=\"5\" height=\"36.00\""),
            "{svg}"
        );
        assert!(
            svg.contains("class=\"bad\" x=\"0\" y=\"0.00\" width=\"5\" height=\"12.00\""),
            "{svg}"
        );
        assert!(svg.contains("class=\"none\" x=\"6\""), "{svg}");
        assert!(
            svg.contains("<title>08:00 UTC: 30 completed, 10 failed, 0 retried</title>"),
            "{svg}"
        );
    }
}
