//! [`CliError`]: what went wrong, said so that the user knows what to fix, and the
//! exit status scripts can act on ([`Status`]).

use std::fmt;
use std::process::ExitCode;

use baton_kafka::connection::ConnectionError;
use baton_kafka::{AdminError, ClientError, ConsumerError, GroupError};
use baton_protocol::ErrorCode;

/// The documented exit statuses (`baton --help` lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The operation failed: records not delivered, a broker refused, violations.
    Failure = 1,
    /// Bad arguments.
    Usage = 2,
    /// An unknown topic, partition or group.
    NotFound = 3,
    /// The cluster could not be reached or refused to authenticate.
    Unreachable = 4,
}

/// An error of a command: a message, an optional hint on what to do, a status.
#[derive(Debug)]
pub struct CliError {
    /// The exit status.
    pub status: Status,
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    pub hint: Option<String>,
}

impl CliError {
    /// An error with `status` and `message`.
    pub fn new(status: Status, message: impl Into<String>) -> CliError {
        CliError {
            status,
            message: message.into(),
            hint: None,
        }
    }

    /// A usage error.
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError::new(Status::Usage, message)
    }

    /// A failed operation.
    pub fn failure(message: impl Into<String>) -> CliError {
        CliError::new(Status::Failure, message)
    }

    /// A missing topic, partition or group.
    pub fn not_found(message: impl Into<String>) -> CliError {
        CliError::new(Status::NotFound, message)
    }

    /// Adds what to do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = Some(hint.into());
        self
    }

    /// The process exit code.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.status as u8)
    }

    /// A topic that does not exist.
    pub fn unknown_topic(topic: &str) -> CliError {
        CliError::not_found(format!("topic {topic:?} does not exist"))
            .hint("`baton topics list` shows the topics; `baton topics create` makes one")
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error: {}", self.message)?;
        if let Some(h) = &self.hint {
            write!(f, "\nhint: {h}")?;
        }
        Ok(())
    }
}

/// The status of a cluster-layer error.
fn client_status(e: &ClientError) -> Status {
    match e {
        ClientError::NoBrokerAvailable { .. } => Status::Unreachable,
        ClientError::Connection(c) => match c {
            ConnectionError::UnsupportedApi { .. }
            | ConnectionError::NoCommonVersion { .. }
            | ConnectionError::SecurityConfig(_) => Status::Failure,
            _ => Status::Unreachable,
        },
        ClientError::UnknownTopic { .. } | ClientError::UnknownPartition { .. } => Status::NotFound,
        ClientError::Broker { code, .. } if is_not_found(*code) => Status::NotFound,
        _ => Status::Failure,
    }
}

fn is_not_found(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::UnknownTopicOrPartition | ErrorCode::UnknownTopicId | ErrorCode::GroupIdNotFound
    )
}

fn client_hint(e: &ClientError) -> Option<&'static str> {
    match e {
        ClientError::NoBrokerAvailable { .. } => Some(
            "check -b/--bootstrap (or BATON_BOOTSTRAP), that the brokers run, and the \
             --security-protocol they expect",
        ),
        ClientError::Connection(
            ConnectionError::UnsupportedApi { .. } | ConnectionError::NoCommonVersion { .. },
        ) => Some("the broker does not implement this operation (or this version of it)"),
        ClientError::Connection(ConnectionError::Authentication { .. }) => {
            Some("check --sasl-mechanism, the user name and the password")
        }
        _ => None,
    }
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> CliError {
        let status = client_status(&e);
        let hint = client_hint(&e);
        let mut err = CliError::new(status, e.to_string());
        err.hint = hint.map(str::to_owned);
        err
    }
}

impl From<AdminError> for CliError {
    fn from(e: AdminError) -> CliError {
        match e {
            AdminError::Client(c) => c.into(),
            AdminError::Topics(ref topics) if topics.iter().all(|t| is_not_found(t.code)) => {
                CliError::not_found(e.to_string())
            }
            AdminError::Configs(ref cs) if cs.iter().all(|c| is_not_found(c.code)) => {
                CliError::not_found(e.to_string())
            }
            other => CliError::failure(other.to_string()),
        }
    }
}

impl From<ConsumerError> for CliError {
    fn from(e: ConsumerError) -> CliError {
        match e {
            ConsumerError::Client(c) => c.into(),
            other => CliError::failure(other.to_string()),
        }
    }
}

impl From<GroupError> for CliError {
    fn from(e: GroupError) -> CliError {
        match e {
            GroupError::Client(c) => c.into(),
            GroupError::Consumer(c) => c.into(),
            other => CliError::failure(other.to_string()),
        }
    }
}

/// A failed write to stdout or a read of the input.
impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> CliError {
        CliError::failure(format!("I/O error: {e}"))
    }
}
