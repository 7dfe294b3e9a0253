//! The library's error type: each variant says what went wrong and, where the user can act,
//! what to do about it.

use std::time::Duration;

/// Everything that can go wrong in remuda's client, worker and set-up code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be reached.
    #[error("cannot connect to PostgreSQL ({target}): {reason}")]
    Unreachable {
        /// Where we tried to connect (password removed).
        target: String,
        /// The driver's explanation.
        reason: String,
    },
    /// The `remuda` schema does not exist yet.
    #[error(
        "the database has no remuda schema: run `remuda migrate` (or `remuda::migrate::run`) first"
    )]
    SchemaMissing,
    /// The schema is older than this binary expects.
    #[error("the remuda schema is at version {found} but this build needs {expected}: run `remuda migrate`")]
    SchemaTooOld {
        /// Version in the database.
        found: i32,
        /// Version this build knows.
        expected: i32,
    },
    /// The schema was migrated by a newer remuda.
    #[error("the remuda schema is at version {found}, newer than this build knows ({expected}): upgrade remuda")]
    SchemaTooNew {
        /// Version in the database.
        found: i32,
        /// Version this build knows.
        expected: i32,
    },
    /// The schema's functions are not this build's (a function file changed and `remuda
    /// migrate` has not run since).
    #[error("the remuda schema's functions are older than this build ({}): run `remuda migrate`", files.join(", "))]
    FunctionsOutdated {
        /// The function files (`workflow/wf_decide`) that differ.
        files: Vec<String>,
    },
    /// A query failed: the server's own words (severity, message, SQLSTATE, detail, hint,
    /// where) when it answered, the connection's otherwise.
    #[error("database error: {}", describe_db_error(.0))]
    Db(tokio_postgres::Error),
    /// An enqueue would take a queue over its `max_depth`: nothing was enqueued.
    #[error("{0}")]
    QueueFull(String),
    /// A retry would make a second job hold a unique key another job holds now: nothing was
    /// changed.
    #[error("{0}")]
    UniqueConflict(String),
    /// No connection could be taken from the pool.
    #[error("database pool: {0}")]
    Pool(String),
    /// Input that remuda refuses (nothing was written).
    #[error("{0}")]
    InvalidInput(String),
    /// A value that could not be turned into or from JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// No job has this id.
    #[error("no job with id {0}")]
    NotFound(i64),
    /// No notification has this id.
    #[error("no notification with id {0}: `remuda notifications` lists them")]
    NotificationNotFound(i64),
    /// Only a dead notification can be retried.
    #[error("notification {id} is {state}: only a dead notification can be retried")]
    NotificationWrongState {
        /// The notification.
        id: i64,
        /// Its state.
        state: String,
    },
    /// No schedule has this name.
    #[error("no schedule named {0:?}: `remuda schedules` lists them")]
    ScheduleNotFound(String),
    /// The job is in a state where the action makes no sense.
    #[error("job {id} is {state}: cannot {action} it")]
    WrongState {
        /// The job.
        id: i64,
        /// Its current state.
        state: String,
        /// What was asked.
        action: &'static str,
    },
    /// `wait` gave up before the job finished.
    #[error("job {id} did not finish within {}", crate::duration::format(*.after))]
    WaitTimeout {
        /// The job.
        id: i64,
        /// How long we waited.
        after: Duration,
    },
    /// A workflow definition with problems, every one listed (nothing was written).
    #[error("invalid workflow definition:\n  {}", .0.join("\n  "))]
    InvalidWorkflow(Vec<String>),
    /// No workflow run has this id.
    #[error("no workflow run with id {0}: `remuda workflow list` lists them")]
    WorkflowNotFound(i64),
    /// A start with an idempotency key whose run has another definition.
    #[error("workflow run {id} was started with idempotency key {key:?} and another definition: use a new key to start the changed definition")]
    WorkflowDrift {
        /// The key.
        key: String,
        /// The run that holds it.
        id: i64,
    },
    /// The run is in a state where the action makes no sense.
    #[error("workflow run {id} is {state}: cannot {action} it")]
    WorkflowWrongState {
        /// The run.
        id: i64,
        /// Its state.
        state: String,
        /// What was asked.
        action: &'static str,
    },
    /// Waiting for a run gave up before it ended.
    #[error("workflow run {id} did not finish within {}", crate::duration::format(*.after))]
    WorkflowWaitTimeout {
        /// The run.
        id: i64,
        /// How long we waited.
        after: Duration,
    },
    /// The run ended without completing.
    #[error("workflow run {id} {state}: {error}")]
    WorkflowFailed {
        /// The run.
        id: i64,
        /// Its final state.
        state: String,
        /// Its first error, as JSON.
        error: String,
    },
    /// A worker had to stop because one of its parts failed.
    #[error("{0}")]
    WorkerFailed(String),
    /// Setting up a local PostgreSQL failed.
    #[error("{0}")]
    Setup(String),
    /// A transaction whose commit answer was lost is not known yet to have committed or not
    /// (the server is still ending it, or cannot be asked): ask again later.
    #[error("{0}")]
    CommitInDoubt(String),
}

impl Error {
    /// True when the error is about the connection or the server's state rather than about
    /// what was sent: a retry later may succeed (connection lost, server shutting down or
    /// overloaded, serialization conflict).
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } | Error::Pool(_) | Error::CommitInDoubt(_) => true,
            Error::Db(e) => match e.code() {
                // no SQLSTATE: the connection failed (transient) or the request could not even
                // be encoded (it never will be)
                None => {
                    e.is_closed()
                        || std::error::Error::source(e)
                            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
                }
                // 08P01: the server refused the message itself (too large): not worth repeating
                Some(code) => {
                    code.code() != "08P01"
                        && ["08", "40", "53", "57", "58"]
                            .iter()
                            .any(|class| code.code().starts_with(class))
                }
            },
            _ => false,
        }
    }

    /// True when a statement may have been carried out although its caller cannot know
    /// what it did: the connection failed while it was in flight, or its answer could not be
    /// read. Only two failures are certain to have left nothing behind: an error the server
    /// answered with (it has a SQLSTATE: the statement was rolled back), and a connection
    /// never obtained (the statement was never sent).
    pub fn outcome_unknown(&self) -> bool {
        match self {
            Error::Db(e) => e.code().is_none(),
            Error::Unreachable { .. } | Error::Pool(_) => false,
            _ => true,
        }
    }

    /// True when the database refused what was sent as data, so sending it again can never
    /// succeed: SQLSTATE classes 22 (data exception), 23 (integrity constraint violation) and
    /// 54 (program limit exceeded), 08P01 (a message too large for the protocol), or a request
    /// that could not even be encoded. Only these condemn an outcome; anything else (a
    /// permission or a feature missing during a rolling deploy, a table being altered) is the
    /// server's state, not the outcome's fault, and is retried.
    pub fn is_refused_data(&self) -> bool {
        match self {
            Error::Db(e) => match e.code() {
                Some(code) => {
                    let code = code.code();
                    code == "08P01" || ["22", "23", "54"].iter().any(|c| code.starts_with(c))
                }
                None => !self.is_transient(),
            },
            Error::Json(_) => true,
            _ => false,
        }
    }

    /// True when the database cannot be used at all (unreachable, or a schema of the wrong
    /// version): the CLI exits 4 for these.
    pub fn is_database_unusable(&self) -> bool {
        matches!(
            self,
            Error::Unreachable { .. }
                | Error::SchemaMissing
                | Error::SchemaTooOld { .. }
                | Error::SchemaTooNew { .. }
                | Error::FunctionsOutdated { .. }
                | Error::Pool(_)
                | Error::Setup(_)
        ) || matches!(self, Error::Db(e) if e.is_closed() || e.code().is_none())
    }

    /// True when what was sent was refused as data (PostgreSQL error classes 22 "data
    /// exception" and 23 "integrity constraint violation"): bad input, exit code 2.
    pub fn is_bad_data(&self) -> bool {
        matches!(self, Error::Db(e) if e.code().is_some_and(|c| c.code().starts_with("22") || c.code().starts_with("23")))
    }

    /// True when a statement gave up on its `statement_timeout` (57014) or `lock_timeout`
    /// (55P03): worth trying again, smaller or later.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Db(e) if e.code().is_some_and(|c| c.code() == "57014" || c.code() == "55P03"))
    }
}

impl Error {
    /// A failed connection to `target`, with the server's own words (SQLSTATE, message,
    /// detail, hint) or the network's, and the advice that fits the cause.
    pub fn unreachable(target: impl Into<String>, e: &tokio_postgres::Error) -> Error {
        Error::Unreachable {
            target: target.into(),
            reason: connect_reason(e),
        }
    }
}

/// An error and its causes, as one line: `outer: cause: root cause`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut chain = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        chain.push_str(&format!(": {s}"));
        source = s.source();
    }
    chain
}

/// A database error as a user should read it: the server's message with its SQLSTATE and
/// whatever detail, hint and position it gave, or the driver's message and its causes.
pub(crate) fn describe_db_error(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut words = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        for (what, value) in [
            ("detail", db.detail()),
            ("hint", db.hint()),
            ("where", db.where_()),
            ("table", db.table()),
            ("constraint", db.constraint()),
        ] {
            if let Some(value) = value {
                words.push_str(&format!("; {what}: {value}"));
            }
        }
        return words;
    }
    error_chain(e)
}

/// Why a connection failed, and what to do about it.
fn connect_reason(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut words = format!("{} (SQLSTATE {})", db.message(), db.code().code());
        if let Some(detail) = db.detail() {
            words.push_str(&format!("; detail: {detail}"));
        }
        if let Some(hint) = db.hint() {
            words.push_str(&format!("; hint: {hint}"));
        }
        let advice = match db.code().code() {
            "28000" if db.message().contains("no encryption") => {
                "the server accepts this connection only over TLS: set sslmode=require in the URL (or verify-full with sslrootcert)"
            }
            "3D000" => "the database does not exist: create it (createdb) or fix the name in the URL",
            "28P01" | "28000" => "authentication failed: check the user and password in the URL, and the server's pg_hba.conf",
            "53300" => "the server has no free connection slots: close idle clients or raise max_connections",
            "57P03" => "the server is starting up or shutting down: try again in a moment",
            _ => "check the URL and the server's log",
        };
        return format!("{words}. {advice}");
    }
    let mut chain = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut io_kind = None;
    while let Some(s) = source {
        chain.push_str(&format!(": {s}"));
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
        }
        source = s.source();
    }
    let advice = match io_kind {
        Some(std::io::ErrorKind::ConnectionRefused) => {
            "connection refused: no server listens there; check that PostgreSQL is running and the host and port, or set DATABASE_URL"
        }
        Some(std::io::ErrorKind::TimedOut) => {
            "timed out: check the host, the network and any firewall in between"
        }
        Some(std::io::ErrorKind::NotFound) => {
            "no server socket there: check that PostgreSQL is running and the host (socket directory) and port"
        }
        _ if chain.contains("certificate") || chain.contains("UnknownIssuer") => {
            "the server's TLS certificate was not accepted: with sslmode=verify-ca or verify-full, sslrootcert must name the CA that signed it, and with verify-full the certificate must name the host in the URL"
        }
        _ if chain.contains("TLS") || chain.contains("tls") || chain.contains("SSL") => {
            "the server and client disagree on TLS: check sslmode in the URL (the server may not have TLS on)"
        }
        _ => "check that the server is running, or set DATABASE_URL",
    };
    format!("{chain}. {advice}")
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            // raised by the insert trigger (admission control, migration 0004)
            Some(db) if db.code().code() == "RQ001" => Error::QueueFull(match db.hint() {
                Some(hint) => format!("{}; {hint}", db.message()),
                None => db.message().to_string(),
            }),
            _ => Error::Db(e),
        }
    }
}

/// Shorthand for results with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
