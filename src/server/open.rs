//! The database a server opens (`serve::start`, once its port is taken): the start's
//! terms from its settings (`store::terms`: test control's file of its own and its mark,
//! `--allow-test-file`, the control token no principal's), the seed file read and checked
//! first, and which refusal is the command line's (exit status 2) and which a failure (1).

use crate::api::auth;
use crate::config::ServeConfig;
use crate::ops::clock::Clock;
use crate::store::Store;
use crate::store::terms::{OpenError, Terms};
use std::sync::Arc;

/// Why a store was not opened: the command line's fault (`Usage`: a seed, a file the
/// start's terms refuse; exit status 2), or a failure (exit status 1).
pub(super) enum Refused {
    Usage(String),
    Failed(String),
}

/// The store, on the start's terms (`store::terms`), with the seed loaded; the server's
/// clock and source of ids.
pub(super) fn open(
    config: &ServeConfig,
) -> Result<(Store, Arc<Clock>, crate::ops::random::Random), Refused> {
    let retention = crate::store::retention::Retention {
        keep: config.event_retention,
        hold: config.webhook_hold,
    };
    // The server's one clock, handed to everything that reads time (test control moves
    // it; with test control, event times never go back).
    let clock = Arc::new(Clock::new(config.test_control));
    let random = crate::ops::random::Random::new(config.test_seed);
    // The control token is no principal's: a seeded or stored token equal to it is refused.
    let control = config
        .control_token
        .as_ref()
        .map(|t| auth::hash_token(t.expose()));
    let seed = match &config.seed {
        None => None,
        Some(path) => Some(
            crate::api::seed::read(path, clock.unix_now())
                .and_then(|seed| match seed.tokens.iter().position(|t| Some(t.hash) == control) {
                    Some(i) => Err(format!(
                        "tokens[{i}].token: the control token is no principal's, and may not be seeded"
                    )),
                    None => Ok(seed),
                })
                .map_err(|e| Refused::Usage(format!("{e}; nothing of it was loaded")))?,
        ),
    };
    let terms = Terms {
        test_control: config.test_control,
        control_token: control,
        allow_test_file: config.allow_test_file,
        named: config.named,
        seed,
    };
    let store = Store::open(
        &config.db,
        config.db_pool,
        retention,
        (clock.clone(), random.clone()),
        terms,
    )
    .map_err(|e| match e {
        OpenError::Refused(e) => Refused::Usage(e),
        OpenError::Seed(e) => Refused::Usage(format!(
            "seed file {}: {e}; nothing of it was loaded",
            config
                .seed
                .as_deref()
                .unwrap_or(std::path::Path::new(""))
                .display()
        )),
        OpenError::Failed(e) => {
            Refused::Failed(format!("cannot open the database {}: {e}", config.db))
        }
    })?;
    Ok((store, clock, random))
}
