//! A server that listens (`Running`: its address, its stop, its drop) and why one did not
//! start or ended badly (`Error`): what a library user holds of a server.

use crate::server::control::Door;
#[cfg(feature = "test-control")]
use crate::server::control::{Control, ControlError};
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// A server that listens: its address, and what stops it. Dropping it stops the server.
#[derive(Debug)]
#[must_use = "dropping a Running stops the server at once"]
pub struct Running {
    addr: SocketAddr,
    /// With test control on: the control token (`Debug` shows none), and where
    /// `control()`'s calls run.
    door: Option<Door>,
    stop: Arc<AtomicBool>,
    /// The listening socket, shut down by `stop` so that the accept loop wakes at once.
    listener: TcpListener,
    /// The thread that accepts, then drains and closes; `None` once joined.
    life: Option<JoinHandle<Result<(), String>>>,
}

impl Running {
    /// A server whose accept thread, `life`, listens on `listener` until `stop` is set.
    pub(super) fn new(
        addr: SocketAddr,
        stop: Arc<AtomicBool>,
        listener: TcpListener,
        life: JoinHandle<Result<(), String>>,
        door: Option<Door>,
    ) -> Running {
        Running {
            addr,
            door,
            stop,
            listener,
            life: Some(life),
        }
    }

    /// The address it listens on (the port picked when the address asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT` of `addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// With test control on, its control token: the one `Builder::control_token` gave,
    /// or the random one `Builder::test_control` made. `None` without test control.
    /// The server never logs it.
    pub fn control_token(&self) -> Option<&str> {
        self.door.as_ref().map(Door::token)
    }

    /// Test control, typed and in-process ([`crate::control`]): tokens, reset,
    /// snapshots, faults, the journal, the clock, each call checked and answered by the
    /// server as the HTTP surface's `/_control/` is.
    ///
    /// # Errors
    /// Without test control (neither `Builder::test_control` nor
    /// `Builder::control_token`), a [`ControlError`] with status 404, as `/_control/`
    /// answers then. A build without the `test-control` feature has no `control()`.
    #[cfg(feature = "test-control")]
    pub fn control(&self) -> Result<Control<'_>, ControlError> {
        Control::of(self.door.as_ref())
    }

    /// A flag that stops the server once set (for a signal handler: the binary registers
    /// SIGTERM, SIGINT and SIGHUP on it); `wait` then returns.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stops the server: no new connection is taken, requests in flight are answered
    /// (for at most `--drain-timeout`; past it, connections still open are reset), the
    /// database is closed, and every thread the server started has ended when it
    /// returns.
    pub fn stop(mut self) -> Result<(), Error> {
        self.halt();
        self.join()
    }

    /// Sets the stop flag and wakes the accept loop.
    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = socket2::SockRef::from(&self.listener).shutdown(std::net::Shutdown::Read);
    }

    /// Waits until the stop flag is set, then stops as `stop` does.
    pub fn wait(mut self) -> Result<(), Error> {
        self.join()
    }

    fn join(&mut self) -> Result<(), Error> {
        match self.life.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(ended)) => ended.map_err(Error::Failed),
            Some(Err(_)) => Err(Error::Failed("the server's thread panicked".into())),
        }
    }
}

impl Drop for Running {
    /// Stops the server as `stop` does.
    fn drop(&mut self) {
        self.halt();
        if let Err(e) = self.join() {
            log::error!("{e}");
        }
    }
}

/// Why a server did not start, or ended badly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// An option is unknown, or its value is not one the command line would take; the
    /// message is the command line's.
    Option(String),
    /// The server could not start: its address, its database, or a thread.
    Start(String),
    /// The server failed while it ran (its accept loop ended, or a thread of its
    /// panicked).
    Failed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Option(e) | Error::Start(e) | Error::Failed(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for Error {}
