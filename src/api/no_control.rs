//! A build without the `test-control` feature (the device build, `scripts/build-static ARCH
//! --small`): stands in for `control/`, with the names its hooks use. There is no
//! test control here: its options are refused (`config::control`), so no `Control` is
//! ever made, and none of these types has a value. An `Option` of one is always `None`,
//! and a hook on one is code that cannot run, which the compiler leaves out: `/_control/`
//! is 404 like any unknown path, no fault takes a request, nothing is journaled.

use crate::api::caller::{Context, Seen};
use crate::api::error::ApiError;
use crate::api::routes::request::Incoming;

/// `--journal-size` and `--journal-bytes` as `ServeConfig` holds them: no journal in this
/// build.
pub const DEFAULT_JOURNAL_SIZE: usize = 0;
pub const DEFAULT_JOURNAL_BYTES: usize = 0;

/// Test control: none in this build.
pub enum Control {}

impl Control {
    pub fn arrived<'h>(
        &self,
        _: &str,
        _: &str,
        _: impl IntoIterator<Item = (&'h str, &'h str)>,
        _: usize,
    ) -> Option<journal::Ticket> {
        match *self {}
    }
}

/// The router's hooks: no `/_control/` route, no fault.
pub mod routes {
    use super::*;
    use crate::api::auth::TokenHash;
    use crate::api::routes::request::Answer;
    use crate::store::Db;

    pub fn handle(
        control: &Control,
        _: &Db,
        _: Option<&TokenHash>,
        _: &mut dyn Incoming,
        _: &str,
        _: &str,
    ) -> Option<Result<Answer, ApiError>> {
        match *control {}
    }

    pub fn faulted(_: &Context, _: &dyn Incoming, _: bool, _: &mut Seen) -> Result<(), ApiError> {
        Ok(())
    }
}

pub mod faults {
    /// A fault that took a request: none in this build.
    pub enum Taken {}

    impl Taken {
        pub fn id(&self) -> &str {
            match *self {}
        }
        pub fn shapes(&self) -> bool {
            match *self {}
        }
        pub fn cut_after(&self) -> Option<u64> {
            match *self {}
        }
    }
}

pub mod journal {
    /// A request's journal entry: none in this build.
    pub enum Ticket {}

    impl Ticket {
        pub fn body(&mut self, _: &[u8]) {
            match *self {}
        }
        pub fn answered(self, _: Option<u16>, _: Option<&str>, _: Option<&str>) {
            match self {}
        }
    }

    /// A journal listing that waits: none in this build.
    pub enum Query {}
}
