//! The one door between the typed test control and the control surface: a call is the
//! request an HTTP client would send (method, target, JSON body, the control token),
//! handed in this process to the router the workers run (`api::routes::handle`), and
//! what comes back is the status and body the HTTP layer would send. So every rule (the
//! door's token check, each body's checks and their messages, the ids, the barrier of a
//! reset) is the control surface's own; nothing above this file knows the api layer.

use crate::api::caller::{Context, Seen};
use crate::api::control::Control;
use crate::api::control::journal::{self, Query};
use crate::api::error::ApiError;
use crate::api::routes::{self, Handled, Incoming, Reply};
use crate::ops::secret::Secret;
use std::fmt;
use std::io::Read;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};

/// Where a server's in-process control calls run: a worker's `Context` of their own (its
/// own read connection to the store), shared by the server's drain, which takes it away
/// before the store is closed. Empty without test control.
#[derive(Clone, Default)]
pub struct Slot(Arc<Shared>);

#[derive(Default)]
struct Shared {
    cx: Mutex<Option<Context>>,
    /// The journal listings waiting in this process, woken when the server stops.
    waiting: Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    closed: bool,
    next: u64,
    wakes: Vec<(u64, mpsc::Sender<()>)>,
}

impl Slot {
    /// A slot holding `cx`, the context in-process calls run on.
    pub fn new(cx: Context) -> Slot {
        let slot = Slot::default();
        *slot.lock() = Some(cx);
        slot
    }

    fn lock(&self) -> MutexGuard<'_, Option<Context>> {
        self.0.cx.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn waiting(&self) -> MutexGuard<'_, Waiting> {
        self.0.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server stops: a call under way ends first, later ones are answered 503, the
    /// listings that wait are listed now (as the HTTP layer answers its own at a stop),
    /// and the context's connection and its hold on the store's writer are dropped.
    pub fn close(&self) {
        drop(self.lock().take());
        let wakes = {
            let mut waiting = self.waiting();
            waiting.closed = true;
            std::mem::take(&mut waiting.wakes)
        };
        for (_, wake) in wakes {
            let _ = wake.send(());
        }
    }

    /// `wake` is sent when the server stops: its id, or `None` when it has stopped.
    fn at_close(&self, wake: mpsc::Sender<()>) -> Option<u64> {
        let mut waiting = self.waiting();
        if waiting.closed {
            return None;
        }
        waiting.next += 1;
        let id = waiting.next;
        waiting.wakes.push((id, wake));
        Some(id)
    }

    fn forget(&self, id: u64) {
        self.waiting().wakes.retain(|(i, _)| *i != id);
    }
}

/// What a `Running` with test control holds: the control token, and where its calls run.
pub struct Door {
    token: Secret,
    slot: Slot,
}

/// A control request's answer, as the HTTP layer would send it.
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Door {
    pub fn new(token: Secret, slot: Slot) -> Door {
        Door { token, slot }
    }

    /// The control token.
    pub fn token(&self) -> &str {
        self.token.expose()
    }

    /// One control request: `target` is its path and query as sent, `body` its JSON.
    /// Answered as a worker answers it (a panic of the handler is a 500); a journal
    /// listing that waits blocks the calling thread until it is answered.
    pub fn call(&self, method: &str, target: &str, body: Option<&[u8]>) -> Answer {
        let slot = self.slot.lock();
        let Some(cx) = slot.as_ref() else {
            return refused(ApiError::ShuttingDown);
        };
        let authorization = format!("Bearer {}", self.token.expose());
        let mut req = Local {
            method,
            target,
            authorization: &authorization,
            body,
            unread: body.unwrap_or_default(),
        };
        let mut seen = Seen::default();
        let handled = catch_unwind(AssertUnwindSafe(|| routes::handle(cx, &mut req, &mut seen)))
            .unwrap_or_else(|_| Err(ApiError::Internal("a handler panicked".into())));
        let control = cx.control.clone();
        // A listing that waits holds nothing of the server's.
        drop(slot);
        match (handled, control) {
            (Ok(Handled::Reply(Reply::NoContent)), _) => answer(204, Vec::new()),
            (Ok(Handled::Reply(Reply::Created(body))), _) => answer(201, body),
            (Ok(Handled::Reply(Reply::Json(body))), _) => answer(200, body),
            (Ok(Handled::Wait(query)), Some(control)) => {
                answer(200, waited(&self.slot, &control, query))
            }
            (Ok(_), _) => refused(ApiError::Internal(format!(
                "{method} {target} is no request of test control"
            ))),
            (Err(error), _) => {
                if let Some(cause) = error.cause() {
                    log::error!("{method} {target}: {cause}");
                }
                refused(error)
            }
        }
    }
}

fn answer(status: u16, body: Vec<u8>) -> Answer {
    Answer { status, body }
}

/// An error as the HTTP layer answers it: its status, and `{"error","message"}`.
fn refused(error: ApiError) -> Answer {
    answer(error.status(), error.body().into_bytes())
}

/// A journal listing that waits (`wait`, `min`): parked in the journal as the HTTP
/// layer parks one (`http::waiting`), on this thread instead of the delays thread: the
/// listing once `min` answered entries match, once the wait is over, or once the server
/// stops (`Slot::close`), whichever comes first.
fn waited(slot: &Slot, control: &Control, query: Query) -> Vec<u8> {
    let wait = query.wait.unwrap_or_default();
    let query = Arc::new(query);
    let (woken, wake) = mpsc::channel();
    let stopping = slot.at_close(woken.clone());
    let id = control.journal.park(
        query.clone(),
        Box::new(move || {
            let _ = woken.send(());
        }),
    );
    if stopping.is_some() {
        let _ = wake.recv_timeout(wait);
    }
    control.journal.unpark(id);
    if let Some(stopping) = stopping {
        slot.forget(stopping);
    }
    control.journal.list(&query)
}

/// What the journal shows of a request that sent `token`: `sha256:` and 8 hex digits.
pub fn fingerprint(token: &str) -> String {
    journal::token_fingerprint(token)
}

/// A control request made in this process: what the router reads of a request.
struct Local<'r> {
    method: &'r str,
    target: &'r str,
    authorization: &'r str,
    body: Option<&'r [u8]>,
    /// What the route has not read of the body yet.
    unread: &'r [u8],
}

impl Incoming for Local<'_> {
    fn method(&self) -> &str {
        self.method
    }

    fn url(&self) -> &str {
        self.target
    }

    fn header(&self, name: &str) -> Option<&str> {
        match name {
            _ if name.eq_ignore_ascii_case("Authorization") => Some(self.authorization),
            _ if name.eq_ignore_ascii_case("Content-Type") => self.body.map(|_| "application/json"),
            _ => None,
        }
    }

    fn repeated(&self, _: &str) -> bool {
        false
    }

    fn body_length(&self) -> Option<usize> {
        Some(self.body.map_or(0, <[u8]>::len))
    }

    fn body(&mut self) -> &mut dyn Read {
        &mut self.unread
    }

    fn sent_body(&self) -> &[u8] {
        self.body.unwrap_or_default()
    }
}

impl fmt::Debug for Door {
    /// Never the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Door").field("token", &self.token).finish()
    }
}
