//! Test-only routes (the `fault-injection` feature, never in a release build).

use crate::api::caller::Context;
use crate::api::error::ApiError;

/// How long `/__fault/hold-read` holds its read at most, waiting for `release-reads`.
const HOLD_AT_MOST: std::time::Duration = std::time::Duration::from_secs(30);

/// `/__panic`: a handler panics. `/__sleep`: holds its worker for 1.5 s, so tests can
/// make other requests wait for one. `/__fault/read-panic`: a read panics inside its
/// transaction. `/__fault/hold-read`: holds a read transaction open on its worker until
/// `/__fault/release-reads`. `/__fault/hold-stream-checks`: event streams wait after
/// checking their position until `/__fault/release-stream-checks`;
/// `/__fault/hold-list-pages`: long lists wait before each page after the first until
/// `/__fault/release-list-pages`; `/__fault/hold-listings`: journal listings that waited
/// wait before they are built until `/__fault/release-listings`. `/__fault/NAME`: arms a fault of the store
/// (`store::fault::arm`). `/__clock?offset=S`: steps the wall clock to S seconds from
/// the system's.
pub fn route(cx: &Context, path: &str, query: &str) -> Result<(), ApiError> {
    match path {
        "/__clock" => cx
            .db
            .clock()
            .step_for_test(query)
            .map_err(ApiError::BadRequest)?,
        "/__panic" => panic!("fault injection: a handler panicked"),
        "/__sleep" => {
            // Said in the log, so tests can wait for the worker to be held.
            log::info!("fault injection: holding a worker for 1.5 s");
            std::thread::sleep(std::time::Duration::from_millis(1500));
        }
        "/__fault/read-panic" => cx.db.read(|| -> Result<(), ApiError> {
            cx.db.log_bounds("")?;
            panic!("fault injection: a read panicked")
        })?,
        "/__fault/hold-read" => {
            crate::store::fault::arm("hold-reads").map_err(ApiError::NotFound)?;
            cx.db.read(|| -> Result<(), ApiError> {
                cx.db.log_bounds("")?;
                log::info!("fault injection: holding a read");
                let started = std::time::Instant::now();
                while crate::store::fault::reads_held() && started.elapsed() < HOLD_AT_MOST {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Ok(())
            })?
        }
        _ => match path.strip_prefix("/__fault/") {
            Some(name) => crate::store::fault::arm(name).map_err(ApiError::NotFound)?,
            None => return Err(ApiError::NotFound("no such fault route".into())),
        },
    }
    Ok(())
}
