//! Test control's faults on the bytes of an answer (`truncate`, `trickle`;
//! `api::control::faults`): the answer as `response::send` made it, head and body, is
//! sent cut short or in pieces, then the connection is closed.
//!
//! Written by a writer thread of its own (`Site::on_writer`), so no worker waits on a
//! client; a trickle's waits between its pieces are that thread's, on the server's
//! `Delays`: a stop ends them, and the rest of the answer goes at once.

use crate::api::caller::Seen;
use crate::api::control::faults::Action;
use crate::http::access::AccessLine;
use crate::http::conn::InFlight;
use crate::http::site::Site;
use crate::http::socket;
use std::io::Write;
use std::net::Shutdown;
use std::sync::Arc;
use std::time::Duration;
use tiny_http::Request;

/// What is written: the bytes, how many of them are of the body (for the access line),
/// the size of a piece and the wait between two (none: all at once).
struct Shaped {
    bytes: Vec<u8>,
    body: usize,
    piece: usize,
    every: Option<Duration>,
}

/// Sends the answer to `request` (`head`, then `body` but for HEAD) as the fault in
/// `seen` says; the connection ends with it.
pub fn send(
    request: Request,
    flight: InFlight,
    site: Arc<Site>,
    seen: Seen,
    line: AccessLine,
    head: Vec<u8>,
    body: Vec<u8>,
) {
    let head_only = *request.method() == tiny_http::Method::Head;
    let shaped = match seen.fault.map(|f| f.action) {
        Some(Action::Trickle {
            bytes: piece,
            every_ms,
        }) => {
            let (bytes, body) = whole(head, &body, head_only);
            Shaped {
                bytes,
                body,
                piece: usize::try_from(piece).unwrap_or(usize::MAX),
                every: Some(Duration::from_millis(every_ms)),
            }
        }
        action => {
            let cut = match action {
                Some(Action::Truncate { bytes }) => bytes,
                _ => None,
            };
            let (bytes, body) = truncated(head, &body, head_only, cut);
            Shaped {
                bytes,
                body,
                piece: usize::MAX,
                every: None,
            }
        }
    };
    let fd = flight.conn().fd();
    // No request after this one is read or run: the connection ends with this answer.
    flight.conn().close_after_answer();
    let what = (request, flight, site.clone(), line, shaped);
    site.on_writer(fd, what, |(r, f, s, l, shaped)| write(r, f, &s, l, &shaped));
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

/// Writes the shaped bytes in their pieces, waiting between two, then shuts the
/// connection: at once and both ways after a truncated answer (the client sees it end
/// there), for writing after a whole one. The access line goes out before the last piece.
fn write(request: Request, flight: InFlight, site: &Site, line: AccessLine, shaped: &Shaped) {
    let fd = flight.conn().fd();
    let mut writer = request.into_writer();
    let pieces = shaped.bytes.chunks(shaped.piece.max(1));
    let last = pieces.len().saturating_sub(1);
    if shaped.bytes.is_empty() {
        line.write(0, &site.metrics);
    }
    for (i, bytes) in pieces.enumerate() {
        if let (Some(every), true) = (shaped.every, i > 0) {
            site.delays.pause(every);
        }
        if i == last {
            line.write(shaped.body as u64, &site.metrics);
        }
        if let Err(e) = writer.write_all(bytes).and_then(|()| writer.flush()) {
            log::debug!("an answer a fault shapes was not sent whole: {e}");
            break;
        }
    }
    drop(writer);
    let how = match shaped.every {
        Some(_) => Shutdown::Write,
        None => Shutdown::Both,
    };
    socket::shutdown(fd, how);
    drop(flight);
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
