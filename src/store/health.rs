//! `/healthz` during an outage: at most one probe write at a time, waited for a second at
//! most (the writer answers it; no worker is held by it longer), its answer reused for a
//! while, and the cause of the unhealthy answers logged once per interval, not once per
//! request (the health check needs no token, so anyone can ask it as often as they like).

use crate::store::seam::{StoreError, StoreResult};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A failed probe's answer is reused this long: during an outage, `/healthz` makes at
/// most one probe write per `PROBE_REUSE`, however often it is asked.
pub const PROBE_REUSE: Duration = Duration::from_secs(1);
/// The same cause of unhealthy answers (digits aside) is logged at most once this often.
pub const CAUSE_LOG_EVERY: Duration = Duration::from_secs(10);

/// A health check waits this long at most for a probe's answer (its own, or the one
/// under way it found), then fails with "a probe write is under way": the probe goes on
/// in the writer, no worker waits for it longer.
pub const PROBE_WAIT: Duration = Duration::from_secs(1);

/// The probes of `/healthz`, and what of their failures was logged.
#[derive(Default)]
pub struct Probes {
    shared: Arc<Shared>,
    /// The cause last logged (without its digits), and when.
    logged: Mutex<Option<(Instant, String)>>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    ended: Condvar,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Default)]
struct State {
    in_flight: bool,
    /// The last probe's answer, and when it came.
    last: Option<(Instant, Result<(), String>)>,
}

/// The probe under way, as its starter holds it: `finish` records its answer and wakes
/// those waiting, from any thread; dropped without, it ends as failed (a panic, a job
/// dropped), so a probe is never under way forever.
pub struct ProbeDone(Option<Arc<Shared>>);

impl ProbeDone {
    pub fn finish(mut self, answer: StoreResult<()>) {
        if let Some(shared) = self.0.take() {
            let mut state = shared.state();
            state.in_flight = false;
            state.last = Some((Instant::now(), answer.map_err(|e| e.0)));
            drop(state);
            shared.ended.notify_all();
        }
    }
}

impl Drop for ProbeDone {
    fn drop(&mut self) {
        if self.0.is_some() {
            ProbeDone(self.0.take()).finish(Err(StoreError(
                "the probe write ended without an answer".into(),
            )));
        }
    }
}

impl Probes {
    /// The answer of a probe, started with `start` (which returns at once and finishes
    /// its `ProbeDone` when the probe ends) only when no other is under way and none
    /// failed within `PROBE_REUSE`; otherwise that answer. Waits `PROBE_WAIT` at most for
    /// an answer, then fails: the probe goes on alone.
    pub fn probe(&self, start: impl FnOnce(ProbeDone)) -> StoreResult<()> {
        let asked = Instant::now();
        let mut start = Some(start);
        let mut state = self.shared.state();
        loop {
            // A failure is reused for `PROBE_REUSE`; any answer that ended after this was
            // asked (the probe it waited for, or started) is this one's too. A success is
            // not reused later: once a probe commits the store is healthy, and only a new
            // failure leads here again.
            if let Some((at, answer)) = &state.last
                && ((answer.is_err() && at.elapsed() < PROBE_REUSE) || *at >= asked)
            {
                return answer.clone().map_err(StoreError);
            }
            if !state.in_flight
                && let Some(start) = start.take()
            {
                state.in_flight = true;
                drop(state);
                start(ProbeDone(Some(self.shared.clone())));
                state = self.shared.state();
                continue;
            }
            let left = PROBE_WAIT.saturating_sub(asked.elapsed());
            if left.is_zero() {
                return Err(StoreError(format!(
                    "a probe write is under way (no answer within {} s)",
                    PROBE_WAIT.as_secs()
                )));
            }
            state = self
                .shared
                .ended
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Whether `cause` is to be logged now: not when the same cause (digits aside, as in
    /// "waited 21 s") was logged within `CAUSE_LOG_EVERY`.
    pub fn to_log(&self, cause: &str) -> bool {
        let kind: String = cause.chars().filter(|c| !c.is_ascii_digit()).collect();
        let mut logged = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        if logged
            .as_ref()
            .is_some_and(|(at, last)| *last == kind && at.elapsed() < CAUSE_LOG_EVERY)
        {
            return false;
        }
        *logged = Some((Instant::now(), kind));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_probe_is_reused_and_a_second_one_does_not_run_meanwhile() {
        let probes = Probes::default();
        let ran = std::cell::Cell::new(0);
        let fail = |done: ProbeDone| {
            ran.set(ran.get() + 1);
            done.finish(Err(StoreError("database or disk is full".into())));
        };
        assert!(probes.probe(fail).is_err());
        let again = probes.probe(|done| {
            ran.set(ran.get() + 1);
            done.finish(Ok(()));
        });
        assert_eq!(again.unwrap_err().0, "database or disk is full");
        assert_eq!(ran.get(), 1, "the failure was reused");
    }

    #[test]
    fn while_a_probe_runs_others_wait_for_its_answer() {
        let probes = Probes::default();
        let (started, go) = std::sync::mpsc::channel();
        let ran = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let first = scope.spawn(|| {
                probes.probe(|done| {
                    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    started.send(()).unwrap();
                    // Answered by another thread, as the writer answers.
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(100));
                        done.finish(Err(StoreError("database or disk is full".into())));
                    });
                })
            });
            go.recv().unwrap();
            let second = probes.probe(|done| {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                done.finish(Ok(()));
            });
            assert_eq!(second.unwrap_err().0, "database or disk is full");
            assert!(first.join().unwrap().is_err());
        });
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// A probe that does not answer holds no caller past `PROBE_WAIT`, neither the one
    /// that started it nor one that finds it under way (which starts no other).
    #[test]
    fn a_probe_without_an_answer_is_waited_for_at_most_probe_wait() {
        let probes = Probes::default();
        let held = std::sync::Mutex::new(None);
        for first in [true, false] {
            let asked = Instant::now();
            let answer = probes.probe(|done| {
                assert!(first, "a second probe started while one is under way");
                *held.lock().unwrap() = Some(done);
            });
            let waited = asked.elapsed();
            assert!(
                answer
                    .unwrap_err()
                    .0
                    .starts_with("a probe write is under way"),
                "first: {first}"
            );
            assert!(waited >= PROBE_WAIT && waited < PROBE_WAIT + Duration::from_millis(500));
        }
        // Its answer, once in, ends it: the next check probes again.
        held.lock().unwrap().take().unwrap().finish(Ok(()));
        let ran = std::cell::Cell::new(false);
        let answer = probes.probe(|done| {
            ran.set(true);
            done.finish(Ok(()));
        });
        assert!(answer.is_ok() && ran.get());
        // A probe dropped without an answer (its job lost) ends as failed, at once.
        let dropped = probes.probe(drop);
        assert_eq!(
            dropped.unwrap_err().0,
            "the probe write ended without an answer"
        );
    }

    #[test]
    fn a_success_is_not_reused_by_a_later_check() {
        let probes = Probes::default();
        assert!(probes.probe(|done| done.finish(Ok(()))).is_ok());
        let later =
            probes.probe(|done| done.finish(Err(StoreError("database or disk is full".into()))));
        assert!(later.is_err(), "a new failure is probed again");
    }

    #[test]
    fn a_repeated_cause_is_logged_once_per_interval() {
        let probes = Probes::default();
        assert!(probes.to_log("a commit has waited 21 s for the database"));
        assert!(!probes.to_log("a commit has waited 22 s for the database"));
        assert!(probes.to_log("database or disk is full"), "a new cause");
        assert!(!probes.to_log("database or disk is full"));
    }
}
