//! Test control's faults where answers are made (`api::control::faults`): the fault that
//! took a request acts on its answer here. `status` replaces it, `delay` sends it later
//! (from the delays thread, holding no worker), `reset` and `close` drop it with the
//! connection, `truncate` sends its head and less than its body, `cut_stream` goes with
//! the stream to `http::feed`. A `before` delay puts the request back on the workers'
//! queue once waited (`put_off`).

use super::{Body, Exchange, Queue, send};
use crate::api::caller::Seen;
use crate::api::control::faults::{Action, Taken, When};
use crate::api::error::ApiError;
use crate::api::routes::Reply;
use crate::http::access::AccessLine;
use crate::http::{delay, socket};
use std::io::{Read, Write};
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;

/// The fault that took this request (if one did, and has not acted yet) acts on its
/// answer: the exchange and answer to send on, or `None` when the fault took it.
#[inline]
pub(super) fn answer(
    mut exchange: Exchange,
    reply: Result<Reply, ApiError>,
) -> Option<(Exchange, Result<Reply, ApiError>)> {
    let Some(taken) = exchange.seen.fault.as_mut().filter(|f| !f.done) else {
        return Some((exchange, reply));
    };
    taken.done = true;
    match taken.action {
        Action::Status { .. } => {
            let error = taken.error();
            Some((exchange, Err(error)))
        }
        Action::Delay { ms } => {
            let site = exchange.site.clone();
            delay::later(&site, Duration::from_millis(ms), move || {
                send(exchange, reply)
            });
            None
        }
        Action::Reset | Action::Close => {
            let reset = taken.action == Action::Reset;
            unanswered(exchange, reset);
            None
        }
        _ => Some((exchange, reply)),
    }
}

/// A request that gets no answer: journaled (status `null`) and logged (status 0) with
/// its fault, then its connection reset (`SO_LINGER` 0, and its thread closes it) or
/// closed.
fn unanswered(exchange: Exchange, reset: bool) {
    let fault = exchange.seen.fault.as_ref().map(|f| f.id.clone());
    let mut line = AccessLine::of(
        exchange.request.method().as_str(),
        exchange.request.url(),
        exchange.started,
        exchange.seen.principal.clone(),
    );
    line.fault = fault.clone();
    if let Some(control) = &exchange.site.control {
        control.journal.record(
            &line.method,
            exchange.request.url(),
            line.principal.as_deref(),
            None,
            fault.as_deref(),
            exchange.started,
        );
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

/// Whether the fault that took this answer truncates it.
pub(super) fn truncates(seen: &Seen) -> bool {
    seen.fault
        .as_ref()
        .is_some_and(|f| f.action == Action::Truncate)
}

/// A list to be truncated is read whole first: its length goes in its head.
pub(super) fn whole(body: Body) -> Body {
    match body {
        Body::Stream(mut list, _) => {
            let mut all = Vec::new();
            if let Err(e) = list.read_to_end(&mut all) {
                log::debug!("a list to truncate could not be read whole: {e}");
            }
            Body::Fixed(all.into())
        }
        body => body,
    }
}

/// The length a truncated answer's head declares (a fixed body's).
pub(super) fn length(body: &Body) -> Option<usize> {
    match body {
        Body::Fixed(data) => Some(data.len()),
        _ => None,
    }
}

/// Sends the head and less than the whole body (part of the head when there is no
/// body), then closes the connection. `head` is a fixed body's (the others carry
/// theirs).
pub(super) fn truncate(exchange: Exchange, line: AccessLine, head: Vec<u8>, body: Body) {
    let head_only = exchange.request.method() == &tiny_http::Method::Head;
    let (head, data) = match body {
        Body::Fixed(data) => (head, data.into_owned()),
        Body::Last(data, head) => (head, data.into_owned()),
        Body::Stream(..) => (head, Vec::new()),
        Body::Events(stream, head, slot) => {
            drop((stream, slot));
            (head, Vec::new())
        }
    };
    let mut out = head;
    let body_bytes = if data.is_empty() || head_only {
        out.truncate(out.len() / 2);
        0
    } else {
        out.extend_from_slice(&data[..data.len() / 2]);
        data.len() / 2
    };
    line.write(body_bytes as u64, &exchange.site.metrics);
    let conn = exchange.flight.conn();
    let fd = conn.fd();
    conn.close_after_answer();
    let Exchange {
        request, flight, ..
    } = exchange;
    let mut writer = request.into_writer();
    let sent = writer.write_all(&out).and_then(|()| writer.flush());
    drop(writer);
    socket::shutdown(fd, Shutdown::Both);
    if let Err(e) = sent {
        log::debug!("a truncated answer was not sent: {e}");
    }
    drop(flight);
}

/// `cut_stream`'s count, when the fault that took this stream cuts it.
pub(super) fn cut_after(seen: &Seen) -> Option<u64> {
    match seen.fault.as_ref()?.action {
        Action::CutStream { after_events } => Some(after_events),
        _ => None,
    }
}

/// A request a `before` delay took is carried out once waited: until then it is kept
/// by the delays thread (no worker), then put back on the queue. Its rate-limit headers
/// (charged once) go with it.
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
    exchange.seen = Seen {
        principal: None,
        headers: seen
            .headers
            .drain(..)
            .filter(|(name, _)| name.starts_with("RateLimit"))
            .collect(),
        fault: seen.fault.map(|f| Taken { done: true, ..f }),
    };
    let (site, queue) = (exchange.site.clone(), queue.clone());
    delay::later(&site, Duration::from_millis(ms), move || {
        if let Err(exchange) = queue.offer(exchange) {
            exchange.flight.conn().close_after_answer();
            send(exchange, Err(ApiError::ShuttingDown));
        }
    });
    None
}
