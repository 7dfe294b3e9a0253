//! Judging one recorded path: its changes one by one against a state machine over state
//! names, and its end against the row as it is now.

/// What is wrong with one recorded change after the path so far (`at`: where the last one
/// ended, `None` before the first), judged by a state machine over state names: a gap, or
/// a change the machine does not allow.
pub(super) fn step<S: std::str::FromStr>(
    at: Option<&Option<String>>,
    from: &Option<String>,
    to: &Option<String>,
    may_become: fn(Option<S>, Option<S>) -> bool,
) -> Option<String> {
    // the first change may start mid-life (the mode was switched on after the insert)
    if let Some(last) = at {
        if last != from {
            return Some(format!(
                "the path breaks: it was {}, the next change starts from {} (a change was not recorded)",
                name(last),
                name(from)
            ));
        }
    }
    // a state this build cannot name is no state of its machine
    let parse = |s: &Option<String>| s.as_deref().map(|n| n.parse::<S>().ok());
    let legal = match (parse(from), parse(to)) {
        (Some(None), _) | (_, Some(None)) => false,
        (from, to) => may_become(from.flatten(), to.flatten()),
    };
    (!legal).then(|| {
        format!(
            "{} → {} is not a path of the state machine",
            name(from),
            name(to)
        )
    })
}

/// How a recorded path ends against the row as it is now.
pub(super) enum Ending {
    /// The row is not where its history ends.
    Gap(String),
    /// The row is gone without a recorded deletion.
    Lost(String),
}

pub(super) fn ending(now: Option<&String>, last: Option<&String>) -> Option<Ending> {
    match (now, last) {
        (Some(state), Some(recorded)) if state != recorded => Some(Ending::Gap(format!(
            "the row is {state}, its history ends {recorded} (a change was not recorded)"
        ))),
        (Some(state), None) => Some(Ending::Gap(format!(
            "the row is {state}, its history ends with its deletion"
        ))),
        (None, Some(recorded)) => Some(Ending::Lost(format!(
            "the row is gone without a recorded deletion; its history ends {recorded}"
        ))),
        _ => None,
    }
}

pub(super) fn name(state: &Option<String>) -> &str {
    state.as_deref().unwrap_or("(none)")
}
