//! The command line: options, and the commands they run.

pub mod backup;
pub mod options;
pub mod serve;
pub mod token;
