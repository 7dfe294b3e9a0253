//! Verification mode and its checker. With the mode on ([`set_history`]), every state change
//! of every job is recorded in `remuda.history` by a trigger on the job table, the one place
//! every statement writes; off (the default), the trigger is not there and the job path pays
//! nothing. [`check`] holds that history and the tables against the state machine
//! ([`JobState::may_become`], its one definition) and reports what must never happen:
//!
//! - `illegal_transitions`: a change that is not a path of the state machine, or a recorded
//!   path with a gap (the state a change starts from is not where the last one ended, or the
//!   row is not where its history ends): a transition written around the one place;
//! - `accepted_twice`: one claim (attempt and fencing token) ended twice: an outcome
//!   accepted after another for the same run;
//! - `lost`: a job whose row is gone without a recorded deletion;
//! - `stuck`: a running job whose worker is gone, or silent past its `rescue_after` plus the
//!   slack given.

mod history;

pub use history::{check, set_history, Finding, Report};
