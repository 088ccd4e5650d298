//! `plant-store healthcheck`: asks a running server for `GET /healthz` and says by its
//! exit status whether it answered 200 in time, for a container's `HEALTHCHECK` (an
//! image from an empty base has no curl). Every way of not being healthy is status 1,
//! a bad `--addr` included: a `HEALTHCHECK` reserves 2.

use crate::cli::failure::Failure;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The whole check's deadline: connecting, sending, and reading the answer's head.
pub const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The most of an answer read: a status line and `/healthz`'s few headers and body.
const MAX_ANSWER_BYTES: u64 = 4096;

/// Whether the arguments ask for `healthcheck` (its command word first, as `--help`
/// shows it), so that a bad one of them is unhealthy (1), not a usage error (2).
pub fn asked(args: &[String]) -> bool {
    args.first().is_some_and(|a| a == "healthcheck")
}

/// Exits 0 (`Ok`) when the server at `addr` answers `GET /healthz` with 200 within
/// `HEALTHCHECK_TIMEOUT`; 1 with what went wrong otherwise. An unspecified address
/// (`0.0.0.0`, `[::]`, what a container listens on) is asked on the loopback.
pub fn check(addr: SocketAddr) -> Result<(), Failure> {
    let addr = asked_at(addr);
    let deadline = Instant::now() + HEALTHCHECK_TIMEOUT;
    let unhealthy = |why: String| Failure::Failed(format!("unhealthy: {addr}: {why}"));
    let late = || {
        unhealthy(format!(
            "no answer within {} s",
            HEALTHCHECK_TIMEOUT.as_secs()
        ))
    };
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
    };
    let mut tcp = TcpStream::connect_timeout(&addr, HEALTHCHECK_TIMEOUT)
        .map_err(|e| unhealthy(format!("cannot connect: {e}")))?;
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tcp.set_write_timeout(Some(left().ok_or_else(late)?))
        .and_then(|()| tcp.write_all(request.as_bytes()))
        .map_err(|e| unhealthy(format!("cannot send the request: {e}")))?;
    let mut answer = Vec::new();
    let mut reader = tcp.take(MAX_ANSWER_BYTES);
    let mut buf = [0u8; 1024];
    // Until the head is whole or the server closes: each read bounded by what is left.
    while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
        reader
            .get_ref()
            .set_read_timeout(Some(left().ok_or_else(late)?))
            .map_err(|e| unhealthy(e.to_string()))?;
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(late());
            }
            Err(e) => return Err(unhealthy(format!("cannot read the answer: {e}"))),
        }
    }
    let head = String::from_utf8_lossy(&answer);
    let status = head.lines().next().unwrap_or("");
    match status.split(' ').nth(1) {
        Some("200") => Ok(()),
        Some(_) => Err(unhealthy(format!("GET /healthz answered `{status}`"))),
        None => Err(unhealthy("the answer is no HTTP answer".into())),
    }
}

/// The address to ask: the loopback of the same family for an unspecified one.
fn asked_at(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_address_is_asked_on_the_loopback() {
        let asked = |a: &str| asked_at(a.parse().unwrap()).to_string();
        assert_eq!(asked("0.0.0.0:8080"), "127.0.0.1:8080");
        assert_eq!(asked("[::]:8080"), "[::1]:8080");
        assert_eq!(asked("10.1.2.3:80"), "10.1.2.3:80");
    }

    #[test]
    fn help_gives_the_deadline() {
        let said = format!("within {} s", HEALTHCHECK_TIMEOUT.as_secs());
        let asked = ["healthcheck".to_owned(), "--help".to_owned()];
        let Ok(crate::cli::options::Command::Help(text)) =
            crate::cli::options::parse(&asked, |_| None)
        else {
            panic!("healthcheck --help is no help");
        };
        let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(&said), "{text}");
    }
}
