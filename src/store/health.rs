//! `/healthz` during an outage: at most one probe write at a time, its answer reused for a
//! while, and the cause of the unhealthy answers logged once per interval, not once per
//! request (the health check needs no token, so anyone can ask it as often as they like).

use crate::store::seam::{StoreError, StoreResult};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A failed probe's answer is reused this long: during an outage, `/healthz` makes at
/// most one probe write per `PROBE_REUSE`, however often it is asked.
pub const PROBE_REUSE: Duration = Duration::from_secs(1);
/// The same cause of unhealthy answers (digits aside) is logged at most once this often.
pub const CAUSE_LOG_EVERY: Duration = Duration::from_secs(10);

/// A request that finds a probe under way waits this long at most for its answer.
pub const PROBE_WAIT: Duration = Duration::from_secs(5);

/// The probes of `/healthz`, and what of their failures was logged.
#[derive(Default)]
pub struct Probes {
    state: Mutex<State>,
    ended: Condvar,
    /// The cause last logged (without its digits), and when.
    logged: Mutex<Option<(Instant, String)>>,
}

#[derive(Default)]
struct State {
    in_flight: bool,
    /// The last probe's answer, and when it came.
    last: Option<(Instant, Result<(), String>)>,
}

/// Ends the probe under way however it ends (a panic included), and wakes those waiting.
struct InFlight<'a>(&'a Probes);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.state().in_flight = false;
        self.0.ended.notify_all();
    }
}

impl Probes {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer of `probe`, run only when no other is under way and none failed within
    /// `PROBE_REUSE`; otherwise that answer (waiting up to `PROBE_WAIT` for the one under
    /// way).
    pub fn probe(&self, probe: impl FnOnce() -> StoreResult<()>) -> StoreResult<()> {
        let mut state = self.state();
        let asked = Instant::now();
        loop {
            // A failure is reused for `PROBE_REUSE`; any answer that ended after this was
            // asked (the probe it waited for) is this one's too. A success is not reused
            // later: once a probe commits the store is healthy, and only a new failure
            // leads here again.
            if let Some((at, answer)) = &state.last {
                if (answer.is_err() && at.elapsed() < PROBE_REUSE) || *at >= asked {
                    return answer.clone().map_err(StoreError);
                }
            }
            if !state.in_flight {
                break;
            }
            let left = PROBE_WAIT.saturating_sub(asked.elapsed());
            if left.is_zero() {
                return Err(StoreError(format!(
                    "a probe write has not ended within {} s",
                    PROBE_WAIT.as_secs()
                )));
            }
            state = self
                .ended
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state.in_flight = true;
        drop(state);
        let in_flight = InFlight(self);
        let answer = probe();
        self.state().last = Some((
            Instant::now(),
            answer.as_ref().map_err(|e| e.0.clone()).copied(),
        ));
        drop(in_flight);
        answer
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
        let fail = || {
            ran.set(ran.get() + 1);
            Err(StoreError("database or disk is full".into()))
        };
        assert!(probes.probe(fail).is_err());
        let again = probes.probe(|| {
            ran.set(ran.get() + 1);
            Ok(())
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
                probes.probe(|| {
                    ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    started.send(()).unwrap();
                    std::thread::sleep(Duration::from_millis(100));
                    Err(StoreError("database or disk is full".into()))
                })
            });
            go.recv().unwrap();
            let second = probes.probe(|| {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            });
            assert_eq!(second.unwrap_err().0, "database or disk is full");
            assert!(first.join().unwrap().is_err());
        });
        assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn a_success_is_not_reused_by_a_later_check() {
        let probes = Probes::default();
        assert!(probes.probe(|| Ok(())).is_ok());
        let later = probes.probe(|| Err(StoreError("database or disk is full".into())));
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
