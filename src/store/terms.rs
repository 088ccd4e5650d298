//! What a server's start asks of its database file (`Store::open`), checked in the
//! transaction that migrates it, so that a start refused for any of them writes nothing
//! (docs/testing.md, "A file of its own"; docs/operating.md, "The database file"):
//!
//! - with test control, the file is this server's alone (no other server of this process,
//!   no other process has it open), and is marked as written by test control (a row that
//!   backups, snapshots and compaction keep);
//! - without it, a marked file is refused unless the operator accepts it
//!   (`--allow-test-file`): tokens minted under a known `--test-seed` would work there;
//! - the control token is no principal's: refused when the file stores it as a token;
//! - `--seed`, loaded whole in the same transaction, or nothing of it.

use crate::store::admin::Seed;
use crate::store::seam::StoreError;

/// See the module's comment. The default: a server without test control, no seed.
#[derive(Default)]
pub struct Terms {
    /// Test control is on: the file must be this server's alone, and is marked.
    pub test_control: bool,
    /// The control token's SHA-256: a file that stores it as a token is refused.
    pub control_token: Option<[u8; 32]>,
    /// Serve a file marked by test control without test control (`--allow-test-file`).
    pub allow_test_file: bool,
    /// How the start names those two settings in a refusal.
    pub named: Named,
    /// Loaded in the transaction that checks the rest.
    pub seed: Option<Seed>,
}

/// How a start names, in a refusal of its terms, the settings that change them: the
/// command line its flag or variable (`default`), the library's builder its method.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    /// The setting that accepts a file test control has written.
    pub allow_test_file: &'static str,
    /// The control token's.
    pub control_token: &'static str,
    /// The token of principal `default`.
    pub token: &'static str,
}

impl Default for Named {
    fn default() -> Named {
        Named {
            allow_test_file: "--allow-test-file (PLANT_STORE_ALLOW_TEST_FILE=1)",
            control_token: "PLANT_STORE_CONTROL_TOKEN",
            token: "PLANT_STORE_TOKEN",
        }
    }
}

/// Why a store did not open.
#[derive(Debug)]
pub enum OpenError {
    /// The start's own terms refuse the file (the command line's exit status 2); the
    /// message names what and what to do.
    Refused(String),
    /// The seed does not fit the store (an id already owned, a token already stored):
    /// refused as `Refused`; the message names the seed's place.
    Seed(String),
    /// The database could not be opened (exit status 1).
    Failed(StoreError),
}

impl From<StoreError> for OpenError {
    fn from(e: StoreError) -> OpenError {
        OpenError::Failed(e)
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Refused(e) | OpenError::Seed(e) => f.write_str(e),
            OpenError::Failed(e) => write!(f, "{e}"),
        }
    }
}
