//! Test control's faults on the bytes of an answer (`truncate`, `trickle`;
//! `api::control::faults`): the answer as `response::send` made it, head and body, is
//! sent cut short or in pieces, then the connection is closed.
//!
//! A truncated answer that fits the socket's buffer is written by the worker, any other by
//! a writer thread of its own (`response::on_writer`), so no worker waits on a client. A
//! trickle's waits between its pieces are its writer thread's, on the server's `Delays`:
//! a stop ends them, and the rest of the answer goes at once.

use crate::api::control::faults::Action;
use crate::http::access::AccessLine;
use crate::http::response::{self, Exchange, WORKER_WRITE_BYTES};
use crate::http::socket;
use std::io::Write;
use std::net::Shutdown;
use std::time::Duration;

/// Sends the answer (`head`, then `body` but for HEAD) as the fault that took it says.
pub fn send(exchange: Exchange, line: AccessLine, head: Vec<u8>, body: Vec<u8>) {
    let head_only = *exchange.request.method() == tiny_http::Method::Head;
    let action = exchange.seen.fault.as_ref().map(|f| f.action.clone());
    let fd = exchange.flight.conn().fd();
    // No request after this one is read or run: the connection ends with this answer.
    exchange.flight.conn().close_after_answer();
    let site = exchange.site.clone();
    match action {
        Some(Action::Trickle { bytes, every_ms }) => {
            let (out, body) = whole(head, &body, head_only);
            let piece = usize::try_from(bytes).unwrap_or(usize::MAX);
            let every = Duration::from_millis(every_ms);
            let what = (exchange, line, out, body, piece, Some(every));
            response::on_writer(&site, fd, what, |(e, l, o, b, p, w)| {
                write(e, l, &o, b, p, w)
            });
        }
        action => {
            let bytes = match action {
                Some(Action::Truncate { bytes }) => bytes,
                _ => None,
            };
            let (out, body) = truncated(head, &body, head_only, bytes);
            let what = (exchange, line, out, body, usize::MAX, None);
            if socket::unsent_bytes(fd).saturating_add(what.2.len()) <= WORKER_WRITE_BYTES {
                let (e, l, o, b, p, w) = what;
                return write(e, l, &o, b, p, w);
            }
            response::on_writer(&site, fd, what, |(e, l, o, b, p, w)| {
                write(e, l, &o, b, p, w)
            });
        }
    }
}

/// The whole answer: its head, then its body unless `head_only`; and the body's length.
fn whole(mut head: Vec<u8>, body: &[u8], head_only: bool) -> (Vec<u8>, usize) {
    if head_only {
        return (head, 0);
    }
    head.extend_from_slice(body);
    (head, body.len())
}

/// What a `truncate` sends of an answer (`head` and `body`, the body left out when
/// `head_only`): its first `bytes` (all of it when it is shorter); without `bytes`, its
/// head and the first half of its body, or the first half of its head when it has no
/// body. And how many bytes of the body that is.
pub fn truncated(
    mut head: Vec<u8>,
    body: &[u8],
    head_only: bool,
    bytes: Option<u64>,
) -> (Vec<u8>, usize) {
    let head_len = head.len();
    if let Some(n) = bytes {
        let (mut all, _) = whole(head, body, head_only);
        all.truncate(usize::try_from(n).unwrap_or(usize::MAX));
        let of_body = all.len().saturating_sub(head_len);
        return (all, of_body);
    }
    if body.is_empty() || head_only {
        head.truncate(head_len / 2);
        return (head, 0);
    }
    let half = body.len() / 2;
    head.extend_from_slice(&body[..half]);
    (head, half)
}

/// Writes `out` in pieces of `piece` bytes, waiting `every` between two (none: all at
/// once), then shuts the connection: at once and both ways after a truncated answer (the
/// client sees it end there), for writing after a whole one. The access line (`body`
/// bytes of the body) goes out before the last piece.
fn write(
    exchange: Exchange,
    line: AccessLine,
    out: &[u8],
    body: usize,
    piece: usize,
    every: Option<Duration>,
) {
    let site = exchange.site.clone();
    let fd = exchange.flight.conn().fd();
    let mut writer = exchange.request.into_writer();
    let pieces = out.chunks(piece.max(1));
    let last = pieces.len().saturating_sub(1);
    if out.is_empty() {
        line.write(0, &site.metrics);
    }
    for (i, bytes) in pieces.enumerate() {
        if let (Some(every), true) = (every, i > 0) {
            site.delays.pause(every);
        }
        if i == last {
            line.write(body as u64, &site.metrics);
        }
        if let Err(e) = writer.write_all(bytes).and_then(|()| writer.flush()) {
            log::debug!("an answer a fault shapes was not sent whole: {e}");
            break;
        }
    }
    drop(writer);
    let how = match every {
        Some(_) => Shutdown::Write,
        None => Shutdown::Both,
    };
    socket::shutdown(fd, how);
}

#[cfg(test)]
mod tests {
    use super::truncated;

    #[test]
    fn truncate_sends_the_first_bytes_or_half() {
        let head = || b"HEAD\r\n\r\n".to_vec();
        let body = b"0123456789";
        assert_eq!(
            truncated(head(), body, false, None),
            (b"HEAD\r\n\r\n01234".to_vec(), 5)
        );
        assert_eq!(truncated(head(), b"", false, None), (b"HEAD".to_vec(), 0));
        assert_eq!(truncated(head(), body, true, None), (b"HEAD".to_vec(), 0));
        assert_eq!(
            truncated(head(), body, false, Some(3)),
            (b"HEA".to_vec(), 0)
        );
        assert_eq!(
            truncated(head(), body, false, Some(11)),
            (b"HEAD\r\n\r\n012".to_vec(), 3)
        );
        let all = b"HEAD\r\n\r\n0123456789".to_vec();
        assert_eq!(truncated(head(), body, false, Some(18)), (all.clone(), 10));
        assert_eq!(truncated(head(), body, false, Some(1 << 40)), (all, 10));
        assert_eq!(truncated(head(), body, true, Some(100)), (head(), 0));
        assert_eq!(truncated(head(), body, false, Some(0)), (Vec::new(), 0));
    }
}
