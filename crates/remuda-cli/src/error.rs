//! The CLI's errors and the exit code each maps to.

/// Something that stops a command, with the exit code scripts see.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad flags, bad files, bad JSON: exit 2.
    #[error("{0}")]
    Usage(String),
    /// From the library: exit code by kind.
    #[error("{0}")]
    Remuda(#[from] remuda::Error),
}

impl CliError {
    /// The error's kind for `--json` callers: `BAD_INPUT` (exit 2), `NOT_FOUND` (2),
    /// `WRONG_STATE` (2), `QUEUE_FULL` (2), `WAIT_TIMEOUT` (3), `DATABASE` (4).
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Usage(_) => "BAD_INPUT",
            CliError::Remuda(e) => match e {
                remuda::Error::WaitTimeout { .. } => "WAIT_TIMEOUT",
                remuda::Error::NotFound(_) | remuda::Error::ScheduleNotFound(_) => "NOT_FOUND",
                remuda::Error::WrongState { .. } => "WRONG_STATE",
                remuda::Error::QueueFull(_) => "QUEUE_FULL",
                _ if self.exit_code() == 2 => "BAD_INPUT",
                _ => "DATABASE",
            },
        }
    }

    /// 2 for bad input, 3 for a wait timeout, 4 when the database cannot be used.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => 2,
            CliError::Remuda(e) => match e {
                remuda::Error::WaitTimeout { .. } => 3,
                remuda::Error::InvalidInput(_)
                | remuda::Error::NotFound(_)
                | remuda::Error::ScheduleNotFound(_)
                | remuda::Error::WrongState { .. }
                | remuda::Error::QueueFull(_)
                | remuda::Error::Json(_) => 2,
                e if e.is_bad_data() => 2,
                // unreachable, wrong schema, or anything else the database refused
                _ => 4,
            },
        }
    }
}

/// Shorthand.
pub type CliResult<T> = Result<T, CliError>;
