//! Work put off for a while without holding a worker: test control's `delay` faults. One
//! thread per server ("delays", started at the first use) keeps the jobs by their time
//! and runs each when due: a request is put back on the workers' queue, an answer is
//! sent. Some run before their time, told why (`Cut`): a held job (a request not yet
//! carried out) at a reset or a restore (`release`), and every job at shutdown, and any
//! later one on the spot. A trickle's writer thread pauses here too (`pause`): a stop, or
//! a reset or restore (`cut`), ends its pauses.

use crate::ops::threads::Threads;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Stack of the delays thread (it may send an answer).
const DELAYS_STACK_BYTES: usize = 256 * 1024;
/// How often a pause asks whether it is still wanted (its client is still there).
pub const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Why a job runs before its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cut {
    /// Test control was reset, or a snapshot restored (held jobs only).
    Barrier,
    /// The server is stopping.
    Stop,
}

type Job = Box<dyn FnOnce(Option<Cut>) + Send>;

struct Waiting {
    due: Instant,
    n: u64,
    /// Run at once at a reset or a restore (`Delays::release`).
    held: bool,
    job: Job,
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.n) == (other.due, other.n)
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.n).cmp(&(other.due, other.n))
    }
}

#[derive(Default)]
struct State {
    jobs: BinaryHeap<Reverse<Waiting>>,
    /// Jobs taken in so far (their order among jobs due at the same time).
    n: u64,
    started: bool,
    stopped: bool,
    /// Resets and restores so far (`cut`).
    cuts: u64,
}

/// One server's delayed jobs.
#[derive(Default)]
pub struct Delays {
    state: Mutex<State>,
    changed: Condvar,
}

impl Delays {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server is stopping: every waiting job runs now (told `Cut::Stop`), and any
    /// later one at once.
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// A reset or restore of test control: the pauses of the trickles begun before it
    /// end now.
    pub fn cut(&self) {
        self.lock().cuts += 1;
        self.changed.notify_all();
    }

    /// The resets and restores so far: what a trickle gives `pause`.
    pub fn cuts(&self) -> u64 {
        self.lock().cuts
    }

    /// Waits `wait` on the caller's thread (a trickle's writer thread): true once waited.
    /// False sooner when the server stops (or has stopped), a reset or restore came since
    /// `cuts` was `since`, or `gone` (asked every `LOOK_EVERY`) says the wait is for
    /// nothing: no stop or reset waits on it.
    pub fn pause(&self, wait: Duration, since: u64, gone: impl Fn() -> bool) -> bool {
        let until = Instant::now() + wait;
        let mut look = Instant::now() + LOOK_EVERY;
        let mut state = self.lock();
        loop {
            if state.stopped || state.cuts != since {
                return false;
            }
            let now = Instant::now();
            if now >= until {
                return true;
            }
            if now >= look {
                drop(state);
                if gone() {
                    return false;
                }
                look = Instant::now() + LOOK_EVERY;
                state = self.lock();
                continue;
            }
            state = self
                .changed
                .wait_timeout(state, until.min(look) - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A reset or a restore: every held job runs now, on this thread, told
    /// `Cut::Barrier`; the others wait on.
    pub fn release(&self) {
        let mut held: Vec<Waiting> = {
            let mut state = self.lock();
            let (held, rest): (Vec<Waiting>, Vec<Waiting>) = std::mem::take(&mut state.jobs)
                .into_iter()
                .map(|Reverse(w)| w)
                .partition(|w| w.held);
            state.jobs = rest.into_iter().map(Reverse).collect();
            held
        };
        held.sort();
        for w in held {
            run_job(w.job, Some(Cut::Barrier));
        }
    }
}

impl Delays {
    /// Runs `job` after `wait` on the delays thread (started through `threads` at the
    /// first use; at once when the server is stopping, or the thread cannot be started);
    /// a `held` one also at a reset or a restore (`release`). The job is told why it runs
    /// early, if it does.
    pub fn later(
        self: &Arc<Self>,
        threads: &Threads,
        wait: Duration,
        held: bool,
        job: impl FnOnce(Option<Cut>) + Send + 'static,
    ) {
        let mut state = self.lock();
        if state.stopped {
            drop(state);
            return job(Some(Cut::Stop));
        }
        if !state.started {
            let me = self.clone();
            match threads.spawn("delays", DELAYS_STACK_BYTES, move || run(&me)) {
                Ok(()) => state.started = true,
                Err(e) => {
                    drop(state);
                    log::warn!("cannot start the delays thread ({e}); a fault's delay is skipped");
                    return job(None);
                }
            }
        }
        state.n += 1;
        let n = state.n;
        state.jobs.push(Reverse(Waiting {
            due: Instant::now() + wait,
            n,
            held,
            job: Box::new(job),
        }));
        drop(state);
        self.changed.notify_all();
    }
}

fn run(delays: &Delays) {
    let mut state = delays.lock();
    loop {
        let now = Instant::now();
        let due = match state.jobs.peek() {
            Some(Reverse(w)) if state.stopped || w.due <= now => true,
            _ if state.stopped => return,
            _ => false,
        };
        if due {
            let Some(Reverse(w)) = state.jobs.pop() else {
                continue;
            };
            let cut = state.stopped.then_some(Cut::Stop);
            drop(state);
            run_job(w.job, cut);
            state = delays.lock();
            continue;
        }
        let wait = state
            .jobs
            .peek()
            .map_or(Duration::from_secs(3600), |Reverse(w)| w.due - now);
        state = delays
            .changed
            .wait_timeout(state, wait)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Runs a job; a panic (the hook logged it) costs that job, never the thread.
fn run_job(job: Job, cut: Option<Cut>) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || job(cut)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;

    #[test]
    fn jobs_run_in_order_of_their_time_and_all_at_once_on_stop() {
        let (delays, threads) = (Arc::new(Delays::default()), Threads::default());
        let (tx, rx) = mpsc::channel();
        for (name, ms) in [("late", 300), ("soon", 10), ("sooner", 1)] {
            let tx = tx.clone();
            delays.later(&threads, Duration::from_millis(ms), false, move |cut| {
                tx.send((name, cut)).unwrap()
            });
        }
        let first = [rx.recv().unwrap(), rx.recv().unwrap()];
        assert_eq!(first, [("sooner", None), ("soon", None)]);
        let tx2 = tx.clone();
        delays.later(&threads, Duration::from_secs(3600), true, move |cut| {
            tx2.send(("never waited", cut)).unwrap()
        });
        let stopped = Instant::now();
        delays.stop();
        threads.join_all();
        let mut rest: Vec<_> = rx.try_iter().collect();
        rest.sort();
        assert_eq!(
            rest,
            [("late", Some(Cut::Stop)), ("never waited", Some(Cut::Stop))]
        );
        assert!(stopped.elapsed() < Duration::from_secs(60));
        // After the stop, a job runs at once, on the caller's thread.
        delays.later(&threads, Duration::from_secs(3600), false, move |cut| {
            tx.send(("inline", cut)).unwrap()
        });
        assert_eq!(rx.try_recv().unwrap(), ("inline", Some(Cut::Stop)));
    }

    #[test]
    fn a_release_runs_the_held_jobs_at_once_and_leaves_the_others_waiting() {
        let (delays, threads) = (Arc::new(Delays::default()), Threads::default());
        let (tx, rx) = mpsc::channel();
        for (name, held) in [("answer", false), ("held 1", true), ("held 2", true)] {
            let tx = tx.clone();
            delays.later(&threads, Duration::from_secs(3600), held, move |cut| {
                tx.send((name, cut)).unwrap()
            });
        }
        delays.release();
        let released: Vec<_> = rx.try_iter().collect();
        assert_eq!(
            released,
            [
                ("held 1", Some(Cut::Barrier)),
                ("held 2", Some(Cut::Barrier))
            ]
        );
        delays.stop();
        threads.join_all();
        assert_eq!(
            rx.try_iter().collect::<Vec<_>>(),
            [("answer", Some(Cut::Stop))]
        );
    }

    #[test]
    fn a_pause_waits_its_time_or_until_a_stop_a_cut_or_its_client_is_gone() {
        let delays = Arc::new(Delays::default());
        let here = || false;
        let started = Instant::now();
        assert!(delays.pause(Duration::from_millis(30), 0, here));
        assert!(started.elapsed() >= Duration::from_millis(30));
        // Ended by what it is asked every `LOOK_EVERY`.
        let asked = std::sync::atomic::AtomicUsize::new(0);
        let gone_at_the_second_look = || asked.fetch_add(1, Ordering::SeqCst) == 1;
        assert!(!delays.pause(Duration::from_secs(3600), 0, gone_at_the_second_look));
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        // A cut ends the pauses begun before it; a later one waits as usual.
        let waiting = {
            let delays = delays.clone();
            let since = delays.cuts();
            std::thread::spawn(move || delays.pause(Duration::from_secs(3600), since, || false))
        };
        delays.cut();
        assert!(!waiting.join().unwrap());
        assert_eq!(delays.cuts(), 1);
        assert!(delays.pause(Duration::from_millis(1), 1, here));
        assert!(
            !delays.pause(Duration::from_secs(3600), 0, here),
            "begun before the cut"
        );
        let stopped = {
            let delays = delays.clone();
            std::thread::spawn(move || delays.pause(Duration::from_secs(3600), 1, || false))
        };
        delays.stop();
        assert!(!stopped.join().unwrap());
        let started = Instant::now();
        assert!(!delays.pause(Duration::from_secs(3600), 1, here));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "stopped: no wait"
        );
    }
}
