//! Which attempts are sampled (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), decided as
//! the OpenTelemetry SDKs decide for a new span: by default an attempt follows its enqueuer's
//! decision (the `traceparent`'s sampled flag) and an attempt outside any trace is sampled.
//! The decision is the flag of the context the task is handed, so the task's own spans and the
//! jobs it enqueues follow it too.

use super::settings::env;

/// How the root of a trace (or any span, without a parent rule) is decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Rule {
    On,
    Off,
    /// Sampled when the trace id falls within this fraction (0 to 1) of all trace ids, so
    /// every attempt of one trace is decided alike.
    Ratio(f64),
}

/// `OTEL_TRACES_SAMPLER`: a rule for every attempt, or the parent's decision when the job
/// continues a trace and the rule otherwise (`parentbased_*`, the default).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Sampler {
    Always(Rule),
    ParentBased(Rule),
}

impl Default for Sampler {
    fn default() -> Sampler {
        Sampler::ParentBased(Rule::On)
    }
}

impl Rule {
    fn decide(self, trace_id: &str) -> bool {
        match self {
            Rule::On => true,
            Rule::Off => false,
            // (2^56 - 1 rounds up to 2^56 as a float)
            Rule::Ratio(ratio) if ratio >= 1.0 => true,
            Rule::Ratio(ratio) => {
                // the specification's rule on the trace id's last 56 bits (the part W3C's
                // random flag makes random): sampled when at or above the threshold
                // (1 - ratio) * 2^56, so services sampling at one ratio keep the same traces
                let low = trace_id
                    .get(18..32)
                    .and_then(|h| u64::from_str_radix(h, 16).ok())
                    .unwrap_or(0);
                let threshold = ((1.0 - ratio.max(0.0)) * (1u64 << 56) as f64) as u64;
                low >= threshold
            }
        }
    }
}

impl Sampler {
    /// Whether an attempt of trace `trace_id` is sampled; `parent` is the enqueuer's decision,
    /// `None` for a job outside any trace.
    pub(crate) fn decide(self, parent: Option<bool>, trace_id: &str) -> bool {
        match (self, parent) {
            (Sampler::ParentBased(_), Some(sampled)) => sampled,
            (Sampler::ParentBased(rule), None) | (Sampler::Always(rule), _) => {
                rule.decide(trace_id)
            }
        }
    }

    /// The sampler the environment names; one it does not name correctly is warned about
    /// and the default (`parentbased_always_on`) used.
    pub(crate) fn from_env(warnings: &mut Vec<String>) -> Sampler {
        let Some(name) = env("OTEL_TRACES_SAMPLER") else {
            return Sampler::default();
        };
        let ratio = |warnings: &mut Vec<String>| {
            let arg = env("OTEL_TRACES_SAMPLER_ARG");
            match arg.as_deref().map(str::parse::<f64>) {
                None => Rule::Ratio(1.0),
                Some(Ok(r)) if (0.0..=1.0).contains(&r) => Rule::Ratio(r),
                Some(_) => {
                    warnings.push(format!(
                        "OTEL_TRACES_SAMPLER_ARG={:?} is not a ratio from 0 to 1: 1 is used",
                        arg.unwrap_or_default()
                    ));
                    Rule::Ratio(1.0)
                }
            }
        };
        // enumerated values are read whatever their case, as the specification asks
        match name.to_ascii_lowercase().as_str() {
            "always_on" => Sampler::Always(Rule::On),
            "always_off" => Sampler::Always(Rule::Off),
            "traceidratio" => Sampler::Always(ratio(warnings)),
            "parentbased_always_on" => Sampler::ParentBased(Rule::On),
            "parentbased_always_off" => Sampler::ParentBased(Rule::Off),
            "parentbased_traceidratio" => Sampler::ParentBased(ratio(warnings)),
            _ => {
                warnings.push(format!(
                    "OTEL_TRACES_SAMPLER={name:?} is not a sampler remuda knows (always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio): parentbased_always_on is used"
                ));
                Sampler::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parent_decides_under_parentbased_and_a_ratio_splits_trace_ids_alike_each_time() {
        let low = "4bf92f3577b34da6a30000000000000f";
        let high = "4bf92f3577b34da6a3fffffffffffff0";
        let half = Sampler::ParentBased(Rule::Ratio(0.5));
        assert!(!half.decide(Some(false), high), "the parent's no");
        assert!(half.decide(Some(true), low), "the parent's yes");
        assert!(half.decide(None, high));
        assert!(!half.decide(None, low));
        let always = Sampler::Always(Rule::Ratio(0.5));
        assert!(!always.decide(Some(true), low), "the rule over the parent");
        // the specification's threshold: a tenth keeps the ids from 0.9 × 2^56 (0xe66666…) up
        let tenth = Sampler::Always(Rule::Ratio(0.1));
        assert!(tenth.decide(None, "4bf92f3577b34da6a3e7000000000000"));
        assert!(!tenth.decide(None, "4bf92f3577b34da6a3e6000000000000"));
        assert!(Sampler::Always(Rule::On).decide(Some(false), high));
        assert!(!Sampler::Always(Rule::Off).decide(Some(true), low));
        assert!(!Sampler::Always(Rule::Ratio(0.0)).decide(None, low));
        assert!(Sampler::Always(Rule::Ratio(1.0)).decide(None, high));
    }
}
