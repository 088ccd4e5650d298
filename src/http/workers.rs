//! The worker pool: a fixed number of threads that take requests off the queue, run the
//! router, and answer, or hand a write to the store's writer thread, which puts it back
//! on the queue once committed. No worker waits for a commit.

use crate::api::caller::Context;
use crate::api::error::ApiError;
use crate::api::routes::{self, Handled, Reply};
use crate::http::fault;
use crate::http::queue::Task;
use crate::http::response::{self, Exchange, Queue, Settled};
use crate::http::waiting;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Stack of each worker (SQLite runs there).
pub const WORKER_STACK_BYTES: usize = 512 * 1024;

/// Starts worker `n`, which serves `queue` with its own context until the queue closes;
/// a request that waited longer than `queue_timeout` for it is answered 503.
pub fn spawn(
    n: usize,
    cx: Context,
    queue: Arc<Queue>,
    queue_timeout: Duration,
) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new()
        .name(format!("worker-{n}"))
        .stack_size(WORKER_STACK_BYTES)
        .spawn(move || run(&cx, &queue, queue_timeout))
}

fn run(cx: &Context, queue: &Arc<Queue>, queue_timeout: Duration) {
    while let Some(task) = queue.take() {
        // A panic while handling answers 500 (in `start`); one while sending is caught
        // here so the worker lives on.
        let _ = catch_unwind(AssertUnwindSafe(|| match task {
            Task::Request(exchange, queued) if queued.elapsed() > queue_timeout => {
                response::send(exchange, Err(ApiError::Overloaded))
            }
            Task::Request(exchange, _) if exchange.listing.is_some() => waiting::list(exchange),
            Task::Request(exchange, _) => start(cx, queue, exchange),
            Task::Settled(s) => {
                let mut exchange = s.exchange;
                let answer = routes::settle(cx, s.pending, s.outcome, &mut exchange.seen);
                answer_it(exchange, answer)
            }
        }));
    }
}

/// Handles a request: answers it, or hands its change to the writer thread, which puts
/// it back on the queue once committed. No worker waits for a commit.
fn start(cx: &Context, queue: &Arc<Queue>, mut exchange: Exchange) {
    // Test control: the request holds resets and restores off until its write is
    // submitted or its read is done; one back from a fault's delay is refused when one
    // came meanwhile (`fault::gate`).
    let gate = match fault::gate(cx.control.as_deref(), &exchange) {
        Ok(gate) => gate,
        Err(error) => return answer_it(exchange, Err(error)),
    };
    // Empty, but for a request carried out after a fault's delay (`fault::put_off`).
    let mut seen = std::mem::take(&mut exchange.seen);
    let handled = catch_unwind(AssertUnwindSafe(|| {
        routes::handle(cx, &mut exchange, &mut seen)
    }))
    .unwrap_or_else(|_| Err(ApiError::Internal("a handler panicked".into())));
    exchange.seen = seen;
    // Test control: a fault's `before` delay keeps the request off the workers.
    if exchange.seen.fault.is_some() {
        match fault::put_off(exchange, queue) {
            Some(e) => exchange = e,
            None => return,
        }
    }
    match handled {
        Ok(Handled::Write(change, pending)) => {
            let queue = queue.clone();
            let settle = move |outcome| {
                queue.settle(Settled {
                    exchange,
                    pending,
                    outcome,
                })
            };
            cx.db.submit(change, Box::new(settle));
            drop(gate);
        }
        Ok(Handled::Wait(query)) => {
            drop(gate);
            waiting::park(exchange, query, queue)
        }
        Ok(Handled::Reply(reply)) => {
            // An answer (a long list, a stream) is never sent holding resets off.
            drop(gate);
            answer_it(exchange, Ok(reply))
        }
        Err(error) => {
            drop(gate);
            answer_it(exchange, Err(error))
        }
    }
}

/// Answers a request: through test control's fault first, when one took it.
fn answer_it(exchange: Exchange, reply: Result<Reply, ApiError>) {
    match exchange.seen.fault {
        None => response::send(exchange, reply),
        Some(_) => fault::send(exchange, reply),
    }
}
