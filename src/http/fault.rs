//! Test control's faults where requests are answered (`api::control::faults`): a worker
//! answers a request a fault took through `send`, which acts before the answer is made:
//! `status` replaces it, `delay` sends it later (from the delays thread, holding no
//! worker), `reset` and `close` drop it with the connection. `truncate`, `trickle` and
//! `cut_stream` act once the answer is made (`http::fault_bytes`, `http::feed`). A
//! `before` delay puts the request back on the workers' queue once waited (`put_off`), or
//! answers it 503 when a reset, a restore or the stop comes first. `gate` is test
//! control's barrier for a request.

use crate::api::caller::Seen;
use crate::api::control::Control;
use crate::api::control::faults::Action;
use crate::api::control::faults::Taken;
use crate::api::control::faults::When;
use crate::api::error::ApiError;
use crate::api::error::Injected;
use crate::api::routes::{self, Incoming, Reply, Route};
use crate::http::delay::Cut;
use crate::http::response::{self, Exchange, Queue};
use crate::http::socket;
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::RwLockReadGuard;
use std::time::Duration;

/// Answers a request a fault took (`response::send` once the fault has acted).
pub fn send(mut exchange: Exchange, reply: Result<Reply, ApiError>) {
    // The journal shows the body the client sent also when a fault took the request's
    // place before the route read it (a client's retry resends it: a test compares).
    if exchange.seen.fault.is_some() {
        exchange.journal_body();
    }
    let Some(taken) = exchange.seen.fault.as_mut().filter(|f| !f.done) else {
        return response::send(exchange, reply);
    };
    taken.done = true;
    match taken.action {
        Action::Status { .. } => {
            let error = taken.error();
            response::send(exchange, Err(error))
        }
        Action::Delay { ms } => {
            // Carried out already: its answer is sent, when due or at once at a stop.
            let site = exchange.site.clone();
            site.delays
                .later(&site.threads, Duration::from_millis(ms), false, move |_| {
                    response::send(exchange, reply)
                });
        }
        Action::Reset => unanswered(exchange, true),
        Action::Close => unanswered(exchange, false),
        _ => response::send(exchange, reply),
    }
}

/// A request that gets no answer: journaled (status `null`) and logged (status 0) with
/// its fault, then its connection reset (at once: `socket::reset`) or closed.
fn unanswered(mut exchange: Exchange, reset: bool) {
    let line = exchange.access_line();
    if let Some(ticket) = exchange.journal.take() {
        ticket.answered(None, line.principal.as_deref(), line.fault.as_deref());
    }
    line.write(0, &exchange.site.metrics);
    let conn = exchange.flight.conn();
    let fd = conn.fd();
    conn.close_after_answer();
    if reset {
        socket::reset(fd);
    } else {
        socket::shutdown(fd, Shutdown::Both);
    }
    let Exchange {
        request, flight, ..
    } = exchange;
    // Taking its writer leaves tiny_http nothing to answer for it.
    drop(request.into_writer());
    drop(flight);
}

/// A request a `before` delay took is carried out once waited: until then it is kept
/// by the delays thread (no worker), then put back on the queue. Its rate-limit headers
/// (charged once) and its principal go with it. A reset, a restore or the server's stop
/// while it waits ends the wait: it is answered 503 at once, not carried out. `Some`
/// when it is no such request.
pub fn put_off(mut exchange: Exchange, queue: &Arc<Queue>) -> Option<Exchange> {
    let ms = match &exchange.seen.fault {
        Some(Taken {
            when: When::Before,
            action: Action::Delay { ms },
            done: false,
            ..
        }) => *ms,
        _ => return Some(exchange),
    };
    let mut seen = std::mem::take(&mut exchange.seen);
    // The principal stays for the answer if it is not carried out (a reset came); a
    // request carried out is authenticated again.
    exchange.seen = Seen {
        principal: seen.principal.take(),
        headers: seen
            .headers
            .drain(..)
            .filter(|(name, _)| name.starts_with("RateLimit"))
            .collect(),
        fault: seen.fault.map(|f| Taken { done: true, ..f }),
    };
    let (site, queue) = (exchange.site.clone(), queue.clone());
    site.delays
        .later(&site.threads, Duration::from_millis(ms), true, move |cut| {
            let what = match cut {
                None => {
                    if let Err(exchange) = queue.offer(exchange) {
                        shut(exchange, ApiError::ShuttingDown);
                    }
                    return;
                }
                Some(Cut::Barrier) => "test control was reset or a snapshot restored",
                Some(Cut::Stop) => "the server began to stop",
            };
            let error = match &exchange.seen.fault {
                Some(taken) => released(taken, what),
                None => ApiError::ShuttingDown,
            };
            match cut {
                Some(Cut::Stop) => shut(exchange, error),
                _ => response::send(exchange, Err(error)),
            }
        });
    None
}

/// Answers `error` and closes the connection after it (the server is stopping).
fn shut(exchange: Exchange, error: ApiError) {
    exchange.flight.conn().close_after_answer();
    response::send(exchange, Err(error));
}

/// Test control's barrier for a request (`Control::gate`), taken before anything of it
/// reads the store and held until its write is submitted or its read is done, so that a
/// reset or a restore finds it wholly before or wholly after: `None` without test
/// control, and for the requests that never touch a principal's store (test control's
/// own: a reset runs on one). A request a `before` delay put off, back from its wait,
/// is refused 503 when a reset or a restore came since the fault took it (it is not
/// carried out: the store it was sent to is gone).
pub fn gate<'c>(
    control: Option<&'c Control>,
    exchange: &Exchange,
) -> Result<Option<RwLockReadGuard<'c, ()>>, ApiError> {
    let Some(control) = control else {
        return Ok(None);
    };
    // The target as routed (an absolute-form target is served as its path).
    if routes::route(Incoming::url(exchange)).0 == Route::Other {
        return Ok(None);
    }
    let gate = control.gate();
    match &exchange.seen.fault {
        Some(taken) if is_put_off(taken) && control.passed() != taken.resets => Err(released(
            taken,
            "test control was reset or a snapshot restored",
        )),
        _ => Ok(Some(gate)),
    }
}

/// A request a `before` delay took, once waited (`put_off`).
fn is_put_off(taken: &Taken) -> bool {
    taken.done && taken.when == When::Before && matches!(taken.action, Action::Delay { .. })
}

/// The answer to a request held by a `before` delay when `what` came: 503, try again in
/// a second; it was not carried out.
fn released(taken: &Taken, what: &str) -> ApiError {
    ApiError::Injected(Box::new(Injected {
        status: 503,
        retry_after: Some(1),
        message: Some(format!(
            "{what} while this request waited out the delay of fault {}; it was not carried out",
            taken.id
        )),
        ..Default::default()
    }))
}
