//! Test control's faults where requests are answered (`api::control::faults`): a worker
//! answers a request a fault took through `send`, which acts before the answer is made:
//! `status` replaces it, `delay` sends it later (from the delays thread, holding no
//! worker), `reset` and `close` drop it with the connection. `truncate` and `cut_stream`
//! act once the answer is made (`response::send`, `http::feed`). A `before` delay puts
//! the request back on the workers' queue once waited (`put_off`).

use crate::api::caller::Seen;
use crate::api::control::Control;
use crate::api::control::faults::Action;
use crate::api::control::faults::Taken;
use crate::api::control::faults::When;
use crate::api::error::ApiError;
use crate::api::error::Injected;
use crate::api::routes::Reply;
use crate::http::response::{self, Exchange, Queue};
use crate::http::socket;
use std::net::Shutdown;
use std::sync::Arc;
use std::sync::RwLockReadGuard;
use std::time::Duration;

/// Answers a request a fault took (`response::send` once the fault has acted).
pub fn send(mut exchange: Exchange, reply: Result<Reply, ApiError>) {
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
            let site = exchange.site.clone();
            site.delays
                .later(&site.threads, Duration::from_millis(ms), move || {
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
/// (charged once) go with it. `Some` when it is no such request.
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
        .later(&site.threads, Duration::from_millis(ms), move || {
            if let Err(exchange) = queue.offer(exchange) {
                exchange.flight.conn().close_after_answer();
                response::send(exchange, Err(ApiError::ShuttingDown));
            }
        });
    None
}

/// A request a `before` delay put off, back from its wait: the gate (`Control::gate`) to
/// hold until its write is submitted, or 503 when a reset came since the fault took it
/// (it is not carried out: the store it was sent to is gone). `Ok(None)` for any other.
pub fn resumed<'c>(
    control: Option<&'c Control>,
    exchange: &Exchange,
) -> Result<Option<RwLockReadGuard<'c, u64>>, ApiError> {
    let (Some(control), Some(taken)) = (control, &exchange.seen.fault) else {
        return Ok(None);
    };
    if !(taken.done && taken.when == When::Before && matches!(taken.action, Action::Delay { .. })) {
        return Ok(None);
    }
    let gate = control.gate();
    if *gate == taken.resets {
        return Ok(Some(gate));
    }
    Err(ApiError::Injected(Box::new(Injected {
        status: 503,
        retry_after: None,
        message: Some(format!(
            "test control was reset while this request waited out the delay of fault {}; \
             it was not carried out",
            taken.id
        )),
    })))
}
