//! How a command ended: the exit status is decided here and nowhere else.

use std::fmt;

/// Why a command did not succeed.
#[derive(Debug)]
pub enum Failure {
    /// The command line asks for something that cannot be done: exit status 2.
    Usage(String),
    /// The command failed while it ran: exit status 1.
    Failed(String),
}

impl Failure {
    /// The process's exit status.
    pub fn status(&self) -> u8 {
        match self {
            Failure::Usage(_) => 2,
            Failure::Failed(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(e) | Failure::Failed(e) => f.write_str(e),
        }
    }
}
