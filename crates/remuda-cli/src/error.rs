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
    /// `WRONG_STATE` (2), `QUEUE_FULL` (2), `INVALID_SPEC` (2), `DRIFT` (2),
    /// `WAIT_TIMEOUT` (3), `DATABASE` (4).
    pub fn code(&self) -> &'static str {
        match self {
            CliError::Usage(_) => "BAD_INPUT",
            CliError::Remuda(e) => match e {
                remuda::Error::WaitTimeout { .. } | remuda::Error::WorkflowWaitTimeout { .. } => {
                    "WAIT_TIMEOUT"
                }
                remuda::Error::NotFound(_)
                | remuda::Error::ScheduleNotFound(_)
                | remuda::Error::WorkflowNotFound(_)
                | remuda::Error::NotificationNotFound(_) => "NOT_FOUND",
                remuda::Error::WrongState { .. }
                | remuda::Error::WorkflowWrongState { .. }
                | remuda::Error::NotificationWrongState { .. } => "WRONG_STATE",
                remuda::Error::WorkflowDrift { .. } => "DRIFT",
                remuda::Error::InvalidWorkflow(_) => "INVALID_SPEC",
                remuda::Error::QueueFull(_) => "QUEUE_FULL",
                remuda::Error::UniqueConflict(_) => "UNIQUE_CONFLICT",
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
                remuda::Error::WaitTimeout { .. } | remuda::Error::WorkflowWaitTimeout { .. } => 3,
                remuda::Error::WorkflowFailed { .. } => 1,
                remuda::Error::InvalidWorkflow(_)
                | remuda::Error::WorkflowNotFound(_)
                | remuda::Error::WorkflowWrongState { .. }
                | remuda::Error::WorkflowDrift { .. }
                | remuda::Error::InvalidInput(_)
                | remuda::Error::NotFound(_)
                | remuda::Error::ScheduleNotFound(_)
                | remuda::Error::NotificationNotFound(_)
                | remuda::Error::NotificationWrongState { .. }
                | remuda::Error::WrongState { .. }
                | remuda::Error::QueueFull(_)
                | remuda::Error::UniqueConflict(_)
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
