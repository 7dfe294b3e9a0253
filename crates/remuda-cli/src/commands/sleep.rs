//! `remuda sleep DURATION`: a durable sleep of a command task's job. The worker serves the
//! job's steps on the socket named in `REMUDA_STEP_SOCKET` (`remuda::step::socket`); this
//! takes the attempt's next sleep there (recorded at its first run) and exits [`SLEEPING`]
//! while time is left, which the task passes on; the worker then snoozes the job for what is
//! left ([`remuda::step::Steps::sleeping`]).

use crate::args::SleepArgs;
use crate::error::{CliError, CliResult};
use remuda::step::socket::{StepClient, ENV};

/// Exit code of a sleep with time left: the task exits with it, and the worker gives the
/// job back to run again when the sleep ends (without spending an attempt).
pub const SLEEPING: u8 = 85;
/// Exit code when the sleep could not be looked up (EX_UNAVAILABLE), as `remuda step`'s.
const UNAVAILABLE: u8 = 69;

pub async fn run(args: SleepArgs) -> CliResult<u8> {
    let path = std::env::var_os(ENV).ok_or_else(|| {
        CliError::Usage(format!(
            "remuda sleep runs inside a job of a command task: {ENV} is not set (the worker sets it for each job it runs)"
        ))
    })?;
    let until = match (args.until, args.duration) {
        (Some(until), _) => until,
        (None, Some(duration)) => chrono::Duration::from_std(duration)
            .ok()
            .and_then(|d| chrono::Utc::now().checked_add_signed(d))
            .ok_or_else(|| CliError::Usage("the sleep is too long".into()))?,
        (None, None) => return Err(CliError::Usage("give a duration or --until".into())),
    };
    let mut client = match StepClient::connect(std::path::Path::new(&path)).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("remuda sleep: {e}");
            return Ok(UNAVAILABLE);
        }
    };
    match client.sleep(until).await {
        Ok(None) => Ok(0),
        Ok(Some(left)) => {
            eprintln!(
                "remuda sleep: {} left: the job runs again then (exit {SLEEPING}: pass it on, as `remuda sleep … || exit $?`)",
                remuda::duration::format(left)
            );
            Ok(SLEEPING)
        }
        Err(e) => {
            eprintln!("remuda sleep: {e}");
            Ok(match e {
                remuda::step::socket::StepClientError::Refused { code, .. }
                    if code == remuda::step::STEP_LIMIT =>
                {
                    super::step::NEVER_RECORDED
                }
                _ => UNAVAILABLE,
            })
        }
    }
}
