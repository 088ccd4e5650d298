//! Standard output and standard error written without waiting: what the log's writer, the
//! panic hook and the `listening on` line write through, so that an output nobody reads
//! (a pipe nobody drains, a stalled journald, a stopped terminal) never holds a thread
//! that has to go on.
//!
//! The descriptors are shared with whoever started the process, so their `O_NONBLOCK`
//! flag is left alone (setting it would set it for the parent too, a shell's terminal
//! included). Instead, by kind: a socket (journald's stream) is written with
//! `MSG_DONTWAIT`; a pipe, a FIFO or a terminal is opened again through `/proc/self/fd`,
//! which gives a description of our own, non-blocking; anything else (a regular file,
//! `/dev/null`) never waits for a reader and is written as it is (a write to a full disk
//! fails with `ENOSPC`; one to a hung network file system can still wait: no flag changes
//! that). Where `/proc` is missing, a pipe or terminal is written only when `poll` finds
//! room in it (another process writing to the same pipe at that instant could still
//! make that write wait).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Bytes that a pipe takes whole or not at all (POSIX `PIPE_BUF` on Linux).
pub const PIPE_BUF: usize = 4096;

/// One of the process's standard outputs, written without waiting.
#[derive(Debug)]
pub struct Output {
    fd: RawFd,
    how: How,
}

#[derive(Debug)]
enum How {
    /// A socket: `send` with `MSG_DONTWAIT`.
    Send,
    /// A pipe or terminal opened again, non-blocking.
    Own(OwnedFd),
    /// A pipe or terminal that could not be opened again: written after `poll`.
    Polled,
    /// Anything else: written as it is.
    Plain,
}

impl Output {
    /// Standard output.
    pub fn stdout() -> Output {
        Output::open(libc::STDOUT_FILENO)
    }

    /// Standard error.
    pub fn stderr() -> Output {
        Output::open(libc::STDERR_FILENO)
    }

    /// `fd`, which must stay open as long as the `Output`.
    pub fn open(fd: RawFd) -> Output {
        // SAFETY: fstat fills a zeroed struct for a descriptor we only inspect.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return Output {
                fd,
                how: How::Plain,
            };
        }
        let kind = st.st_mode & libc::S_IFMT;
        // SAFETY: isatty only inspects the descriptor.
        let how = if kind == libc::S_IFSOCK {
            How::Send
        } else if kind == libc::S_IFIFO || unsafe { libc::isatty(fd) } == 1 {
            reopen(fd).map_or(How::Polled, How::Own)
        } else {
            How::Plain
        };
        Output { fd, how }
    }

    /// Whether a write of up to `PIPE_BUF` bytes goes whole or not at all, so a writer that
    /// keeps its writes to whole lines under it never leaves half a line for another.
    pub fn takes_whole_writes(&self) -> bool {
        matches!(self.how, How::Own(_) | How::Polled)
    }

    /// Writes what the output takes now: the number of bytes written, or `WouldBlock`
    /// when it takes none without waiting. Never waits for a reader.
    pub fn try_write(&self, bytes: &[u8]) -> io::Result<usize> {
        let n = match &self.how {
            // SAFETY: `bytes` is valid for its length; the descriptor is ours to write.
            How::Send => unsafe {
                libc::send(
                    self.fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            },
            How::Own(fd) => write(fd.as_raw_fd(), bytes),
            How::Polled => {
                if !self.wait_writable(Duration::ZERO) {
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                write(self.fd, &bytes[..bytes.len().min(PIPE_BUF)])
            }
            How::Plain => write(self.fd, bytes),
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// Waits until the output can take bytes, at most `timeout`: true when it can.
    pub fn wait_writable(&self, timeout: Duration) -> bool {
        let fd = match &self.how {
            How::Own(fd) => fd.as_raw_fd(),
            _ => self.fd,
        };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        // An error or a hang-up is "writable": the write that follows says what happened.
        n > 0 || n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted
    }
}

/// Writes `line` to standard output without holding the caller (the `listening on`
/// line): what the output takes now is written at once, the rest by a thread of its own
/// that waits for the output as long as it takes. An error of the output (closed) is
/// returned.
pub fn announce(line: &str) -> io::Result<()> {
    let out = Output::stdout();
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        match out.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => return Err(e),
        }
    }
    if rest.is_empty() {
        return Ok(());
    }
    let mut rest = rest.to_vec();
    std::thread::Builder::new()
        .name("stdout".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            while !rest.is_empty() {
                out.wait_writable(Duration::from_secs(1));
                match out.try_write(&rest) {
                    Ok(n) => drop(rest.drain(..n)),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                        ) => {}
                    Err(_) => return,
                }
            }
        })
        .map(drop)
}

/// Writes `text` to standard error now, without waiting: lost when it cannot take it at
/// once (a message at exit, which must not hang on a log nobody reads).
pub fn say(text: &str) {
    let _ = Output::stderr().try_write(text.as_bytes());
}

fn write(fd: RawFd, bytes: &[u8]) -> isize {
    // SAFETY: `bytes` is valid for its length.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) }
}

/// `fd` opened again through `/proc/self/fd`, non-blocking: a description of our own.
fn reopen(fd: RawFd) -> Option<OwnedFd> {
    let path = std::ffi::CString::new(format!("/proc/self/fd/{fd}")).ok()?;
    // SAFETY: a valid C string; the descriptor returned is ours alone.
    let own = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_WRONLY | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    // SAFETY: a descriptor just opened, owned by nothing else.
    (own >= 0).then(|| unsafe { OwnedFd::from_raw_fd(own) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe nobody reads: writes go until it is full, then `WouldBlock` at once, and
    /// the pipe's own descriptor stays blocking (the flag is not shared with its owner).
    #[test]
    fn a_full_pipe_refuses_at_once_and_its_own_flags_are_left_alone() {
        let mut fds = [0; 2];
        // SAFETY: a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let out = Output::open(fds[1]);
        assert!(out.takes_whole_writes());
        let line = [b'x'; 100];
        let mut written = 0;
        let err = loop {
            match out.try_write(&line) {
                Ok(n) => written += n,
                Err(e) => break e,
            }
            assert!(written < 10 << 20, "the pipe never filled");
        };
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
        assert!(written >= PIPE_BUF, "{written}");
        assert!(!out.wait_writable(Duration::from_millis(10)));
        // SAFETY: F_GETFL on descriptors we made.
        let flags = unsafe { libc::fcntl(fds[1], libc::F_GETFL) };
        assert_eq!(
            flags & libc::O_NONBLOCK,
            0,
            "the shared description changed"
        );
        let mut buf = vec![0u8; 65536];
        // SAFETY: reading into a buffer of its length.
        assert!(unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) } > 0);
        assert!(out.wait_writable(Duration::from_millis(10)));
        assert_eq!(out.try_write(&line).unwrap(), line.len());
        drop(out);
        // SAFETY: closing the descriptors we made.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
    }
}
