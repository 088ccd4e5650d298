//! The operating system's side of connections, for what tiny_http's public API does not
//! offer: our listener, the descriptor of each connection tiny_http accepts (so that
//! deadlines can end it), the bytes still unsent on it, a peek at its first line, and the
//! raw answer to a connection over the cap.

use socket2::{Domain, Socket, Type};
use std::collections::HashSet;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

/// Pending connections the kernel holds before refusing new ones.
pub const LISTEN_BACKLOG: i32 = 1024;
/// A write to a client that does not read for this long fails and closes the connection.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The listener: non-blocking (the accept loop polls it, so it can also watch the stop
/// flag), TCP_NODELAY (tiny_http writes through a 1 KiB buffer and would otherwise stall
/// on Nagle) and a write timeout, both inherited by accepted sockets. There is no read
/// timeout: the watchdog in `accept.rs` ends reads by deadline.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    let fail = |e: io::Error| format!("cannot listen on {addr}: {e}");
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(fail)?;
    socket.set_reuse_address(true).map_err(fail)?;
    socket.bind(&addr.into()).map_err(fail)?;
    socket.listen(LISTEN_BACKLOG).map_err(fail)?;
    socket.set_tcp_nodelay(true).map_err(fail)?;
    socket
        .set_write_timeout(Some(WRITE_TIMEOUT))
        .map_err(fail)?;
    socket.set_nonblocking(true).map_err(fail)?;
    let listener: TcpListener = socket.into();
    let _ = REPORTS_READS.set(tcp_info(listener.as_raw_fd()).is_some());
    Ok(listener)
}

/// Whether the kernel answers `TCP_INFO` in full (Linux 4.1 and later does; qemu-user does
/// not, see `TCP_INFO_NEEDED`): without it, `consumed` cannot say how much tiny_http has
/// read.
static REPORTS_READS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// True when `consumed` works here (known once the listener is bound).
pub fn reports_reads() -> bool {
    *REPORTS_READS.get().unwrap_or(&true)
}

/// The part of `tcp_info` this module reads: up to the end of `tcpi_bytes_received`
/// (Linux 4.1 and later). An older kernel writes less, and qemu-user (7.2) takes
/// `TCP_INFO` for an int option and writes 4 bytes: both count as "cannot say".
const TCP_INFO_NEEDED: usize = {
    let acked = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked);
    let received = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_received);
    (if acked > received { acked } else { received }) + std::mem::size_of::<u64>()
};

fn tcp_info(fd: RawFd) -> Option<libc::tcp_info> {
    // SAFETY: getsockopt writes at most `len` bytes into the struct.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    } == 0;
    (ok && len as usize >= TCP_INFO_NEEDED).then_some(info)
}

/// Lets the process hold as many connections as the hard limit allows (each uses 2 fds).
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Waits up to `timeout` for `fd` to be readable (for a listener: a connection to accept).
pub fn wait_readable(fd: RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 }
}

/// The descriptor the next `accept` will most likely return: the lowest free one; `None`
/// unless two are free (the accepted socket's and tiny_http's clone of it).
pub fn lowest_free_fd(any: RawFd) -> Option<RawFd> {
    // SAFETY: duplicates a descriptor we own twice and closes the duplicates at once.
    unsafe {
        let fd = libc::fcntl(any, libc::F_DUPFD_CLOEXEC, 0);
        let second = libc::fcntl(any, libc::F_DUPFD_CLOEXEC, 0);
        for d in [fd, second] {
            if d >= 0 {
                libc::close(d);
            }
        }
        (fd >= 0 && second >= 0).then_some(fd)
    }
}

/// A connected TCP socket's descriptor and its inode (which both of tiny_http's
/// descriptors for it share).
#[derive(Debug, Clone, Copy)]
pub struct Accepted {
    pub fd: RawFd,
    pub ino: u64,
}

/// Finds the connection tiny_http has just accepted from our listener on `port`.
/// `Server::accept_connection` keeps the socket to itself, so we look for it: a connected
/// TCP socket on our port whose inode belongs to no connection we already know. Only the
/// accept loop creates such sockets, and every earlier one is in `known` until its
/// descriptors are closed, so the match is exact. `predicted` (the lowest free descriptor
/// just before the accept) is nearly always it; otherwise every open descriptor is tried.
pub fn find_accepted(
    predicted: Option<RawFd>,
    port: u16,
    known: &HashSet<u64>,
) -> Option<Accepted> {
    let check = |fd: RawFd| -> Option<Accepted> {
        let ino = socket_inode(fd)?;
        (!known.contains(&ino) && is_peer_of(fd, port)).then_some(Accepted { fd, ino })
    };
    if let Some(p) = predicted
        && let Some(found) = (p..p + 4).find_map(check)
    {
        return Some(found);
    }
    std::fs::read_dir("/proc/self/fd")
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .find_map(check)
}

fn socket_inode(fd: RawFd) -> Option<u64> {
    // SAFETY: fstat writes only into the struct passed.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
    // `ino_t` is 32 bits on 32-bit glibc targets (armv7) and 64 elsewhere.
    #[allow(clippy::useless_conversion, reason = "u32 on 32-bit glibc targets")]
    let ino = u64::from(st.st_ino);
    (ok && st.st_mode & libc::S_IFMT == libc::S_IFSOCK).then_some(ino)
}

/// True when `fd` is a connected socket whose local port is `port`.
fn is_peer_of(fd: RawFd, port: u16) -> bool {
    let borrowed = Borrowed(fd);
    let sock = socket2::SockRef::from(&borrowed);
    sock.peer_addr().is_ok()
        && sock
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.port() == port)
}

/// A descriptor borrowed for one call of socket2 (which wants an `AsFd`).
struct Borrowed(RawFd);

impl std::os::fd::AsFd for Borrowed {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        // SAFETY: callers pass a descriptor that stays open for the call.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(self.0) }
    }
}

/// Shuts a connection down: `Read` makes a blocked read return at once (end of file),
/// `Both` also fails writes. The descriptor stays open until its owner closes it.
pub fn shutdown(fd: RawFd, how: std::net::Shutdown) {
    let how = match how {
        std::net::Shutdown::Read => libc::SHUT_RD,
        std::net::Shutdown::Write => libc::SHUT_WR,
        std::net::Shutdown::Both => libc::SHUT_RDWR,
    };
    // SAFETY: shutdown on a descriptor the caller keeps open.
    unsafe {
        libc::shutdown(fd, how);
    }
}

/// Shuts the connection down, and makes its close a reset: what is still queued for the
/// client is dropped rather than kept by the kernel for a client that barely reads.
pub fn abort(fd: RawFd) {
    let borrowed = Borrowed(fd);
    let _ = socket2::SockRef::from(&borrowed).set_linger(Some(Duration::ZERO));
    shutdown(fd, std::net::Shutdown::Both);
}

/// Resets the connection now (test control's `reset` fault): `SO_LINGER` 0, then the
/// socket is disconnected (`connect` to `AF_UNSPEC`), which sends the reset at once, before
/// tiny_http's drop could shut the write side gently; the reading side is shut so its
/// thread ends and closes it.
pub fn reset(fd: RawFd) {
    let borrowed = Borrowed(fd);
    let _ = socket2::SockRef::from(&borrowed).set_linger(Some(Duration::ZERO));
    // SAFETY: an `AF_UNSPEC` address, zeroed, on a descriptor the caller keeps open.
    unsafe {
        let mut unspec: libc::sockaddr = std::mem::zeroed();
        unspec.sa_family = libc::AF_UNSPEC as libc::sa_family_t;
        libc::connect(
            fd,
            &unspec,
            std::mem::size_of::<libc::sockaddr>() as libc::socklen_t,
        );
    }
    shutdown(fd, std::net::Shutdown::Read);
}

/// Sets (or, with `None`, removes) the timeout of each read from the socket.
pub fn set_read_timeout(fd: RawFd, timeout: Option<Duration>) {
    let borrowed = Borrowed(fd);
    let _ = socket2::SockRef::from(&borrowed).set_read_timeout(timeout);
}

/// Closes gently after a last answer: the write side is shut (the client sees the end of
/// the answer), then what the client still sends is read and dropped until it closes its
/// side, for at most `time` and `bytes`. Closing with unread data would make the kernel
/// reset the connection, and the client could lose the answer.
/// Out of line: its buffer would otherwise sit in every connection thread's frame
/// (`connection::read_request` says why that costs).
#[inline(never)]
pub fn linger(fd: RawFd, time: Duration, bytes: usize) {
    shutdown(fd, std::net::Shutdown::Write);
    let end = std::time::Instant::now() + time;
    let mut buf = [0u8; 4096];
    let mut read = 0;
    while read < bytes {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        set_read_timeout(fd, Some(left));
        // SAFETY: recv into a valid buffer on a descriptor the caller keeps open.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            break;
        }
        read += n as usize;
    }
}

/// Bytes of what this process wrote that the client has acknowledged so far; `None` when
/// the kernel cannot say.
pub fn acked(fd: RawFd) -> Option<u64> {
    tcp_info(fd).map(|info| info.tcpi_bytes_acked)
}

/// Bytes written to the socket that the client has not yet acknowledged.
pub fn unsent_bytes(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) } == 0;
    if ok { n.max(0) as usize } else { usize::MAX }
}

/// Appends to `buf` up to `max` bytes of what the client has sent so far, without
/// consuming them or waiting (0 when nothing is there); `None` on an error.
pub fn peek_into(fd: RawFd, buf: &mut Vec<u8>, max: usize) -> Option<usize> {
    buf.reserve(max);
    let spare = buf.spare_capacity_mut();
    let len = spare.len().min(max);
    // SAFETY: recv writes at most `len` bytes into the spare capacity, which is then
    // marked initialised for exactly the bytes written.
    let n = peek(fd, spare.as_mut_ptr().cast(), len, libc::MSG_DONTWAIT)?;
    unsafe { buf.set_len(buf.len() + n) };
    Some(n)
}

/// Copies into `buf` what the client has sent, without consuming it, once the receive
/// low-water mark is reached (or `buf` is full), the client closes, or the socket is shut
/// down: a blocking read that leaves the bytes where they are. `None` on an error.
pub fn peek_wait(fd: RawFd, buf: &mut [u8]) -> Option<usize> {
    peek(fd, buf.as_mut_ptr(), buf.len(), 0)
}

fn peek(fd: RawFd, to: *mut u8, len: usize, flags: libc::c_int) -> Option<usize> {
    loop {
        // SAFETY: the callers pass `len` writable bytes at `to`.
        let n = unsafe { libc::recv(fd, to.cast(), len, libc::MSG_PEEK | flags) };
        if n >= 0 {
            return Some(n as usize);
        }
        match io::Error::last_os_error().kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Some(0),
            _ => return None,
        }
    }
}

/// Bytes received on the socket that nobody has read yet.
pub fn inq(fd: RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD (SIOCINQ) writes one int.
    let ok = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) } == 0;
    if ok { n.max(0) as usize } else { 0 }
}

/// Bytes of the stream this process has read from the socket so far (tiny_http's reads
/// included), the bytes the kernel received less those still queued; and the bytes
/// queued. `None` when the kernel cannot say.
pub fn consumed(fd: RawFd) -> Option<(u64, usize)> {
    for _ in 0..8 {
        let before = inq(fd);
        let info = tcp_info(fd)?;
        // Bytes arrived between the two looks: look again. (Only this thread reads, so
        // the queue can only grow; a FIN does not change it.)
        if inq(fd) != before {
            continue;
        }
        // A received FIN counts as one byte in `tcpi_bytes_received` and none in the
        // queue. It has arrived unless the state is one of ESTABLISHED (1), SYN_SENT (2),
        // SYN_RECV (3), FIN_WAIT1 (4) or FIN_WAIT2 (5).
        let fin = u64::from(!(1..=5).contains(&info.tcpi_state));
        let received = info.tcpi_bytes_received.checked_sub(fin)?;
        return Some((received.checked_sub(before as u64)?, before));
    }
    None
}
/// Sets the socket's receive low-water mark: `poll` reports it readable (and a blocking
/// read returns) only once this many bytes are queued, or the client closed.
pub fn set_rcvlowat(fd: RawFd, bytes: usize) {
    let n = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads one int.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&n as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// How a wait for input ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// Enough bytes (the low-water mark) are queued.
    Ready,
    /// The client closed its side, the socket was shut down, or it failed.
    Hangup,
    Timeout,
}

/// Waits, without spinning, until the socket is readable (per its low-water mark), the
/// client closes, or `deadline` passes (`None`: no deadline of its own; a shutdown by the
/// watchdog still wakes it).
pub fn wait_for(fd: RawFd, deadline: Option<std::time::Instant>) -> Wake {
    loop {
        let ms = match deadline {
            None => -1,
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Wake::Timeout;
                }
                left.as_millis().clamp(1, i32::MAX as u128) as i32
            }
        };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Wake::Hangup;
        }
        if n == 0 {
            continue; // the deadline is looked at again above
        }
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Wake::Hangup;
        }
        return Wake::Ready;
    }
}

/// Sends what of `bytes` the socket takes now, without waiting: small answers that
/// tiny_http does not write (it has no request for them), and event streams. How many
/// bytes it took (`WouldBlock`: none).
pub fn send_now(fd: RawFd, bytes: &[u8]) -> io::Result<usize> {
    // SAFETY: a send from a valid buffer on a descriptor the caller keeps open.
    let n = unsafe {
        libc::send(
            fd,
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// What a look without waiting finds of the peer's side of a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Peer {
    /// Nothing, or bytes it sent (which hide whatever follows them).
    Open,
    /// The end of its bytes: it closed the connection, or only its sending side.
    Ended,
    /// The connection was reset.
    Reset,
}

/// Looks at the peer's side of a connection without waiting.
pub fn peer(fd: RawFd) -> Peer {
    let mut byte = 0u8;
    // SAFETY: a one-byte peek into a local on a descriptor the caller keeps open.
    let n = unsafe {
        libc::recv(
            fd,
            (&raw mut byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => Peer::Ended,
        n if n > 0 => Peer::Open,
        _ => match io::Error::last_os_error().kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Peer::Open,
            _ => Peer::Reset,
        },
    }
}

/// Sends all of `bytes`, waiting as a blocking socket does (each send at most
/// `WRITE_TIMEOUT`; the watchdog's shutdown ends it sooner). False when it could not.
pub fn send_all(fd: RawFd, mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: a send from a valid buffer on a descriptor the caller keeps open.
        let n = unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
        if n <= 0 {
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// Accepts one connection ourselves, sends it `answer` without waiting, and closes it:
/// for a connection over the cap. What it has sent already is read first (without
/// waiting), so the close is less likely to reset the answer away.
pub fn refuse(listener: &TcpListener, answer: &[u8]) -> io::Result<()> {
    let (stream, _) = listener.accept()?;
    stream.set_nonblocking(true)?;
    let fd = stream.as_raw_fd();
    let _ = send_now(fd, answer);
    // SAFETY: recv on the socket we own, into a valid buffer.
    unsafe {
        let mut sink = [0u8; 4096];
        while libc::recv(fd, sink.as_mut_ptr().cast(), sink.len(), 0) > 0 {}
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// True for the accept errors that mean "out of descriptors or memory": back off.
pub fn is_resource_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

#[cfg(test)]
mod tests;
