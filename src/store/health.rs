//! `/healthz` during an outage: at most one probe write at a time, its answer reused for a
//! while, and the cause of the unhealthy answers logged once per interval, not once per
//! request (the health check needs no token, so anyone can ask it as often as they like).

use crate::store::seam::{StoreError, StoreResult};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A failed probe's answer is reused this long: during an outage, `/healthz` makes at
/// most one probe write per `PROBE_REUSE`, however often it is asked.
pub const PROBE_REUSE: Duration = Duration::from_secs(1);
/// The same cause of unhealthy answers (digits aside) is logged at most once this often.
pub const CAUSE_LOG_EVERY: Duration = Duration::from_secs(10);

/// The probes of `/healthz`, and what of their failures was logged.
#[derive(Default)]
pub struct Probes {
    in_flight: AtomicBool,
    /// The last failed probe: when it ended, and its cause.
    failed: Mutex<Option<(Instant, String)>>,
    /// The cause last logged (without its digits), and when.
    logged: Mutex<Option<(Instant, String)>>,
}

/// Clears `in_flight` however the probe ends (a panic included).
struct InFlight<'a>(&'a AtomicBool);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Probes {
    /// The answer of `probe`, run only when no other is under way and no failed one ended
    /// within `PROBE_REUSE`; otherwise the last failure's (or, while the first runs, that
    /// one is under way).
    pub fn probe(&self, probe: impl FnOnce() -> StoreResult<()>) -> StoreResult<()> {
        if let Some(cause) = self.last_failure(Some(PROBE_REUSE)) {
            return Err(StoreError(cause));
        }
        if self.in_flight.swap(true, Ordering::AcqRel) {
            return Err(StoreError(self.last_failure(None).unwrap_or_else(|| {
                "the last write failed; a probe write is under way".into()
            })));
        }
        let _in_flight = InFlight(&self.in_flight);
        let answer = probe();
        *self.failed.lock().unwrap_or_else(|e| e.into_inner()) =
            answer.as_ref().err().map(|e| (Instant::now(), e.0.clone()));
        answer
    }

    /// The last failed probe's cause, if it ended within `within` (`None`: ever).
    fn last_failure(&self, within: Option<Duration>) -> Option<String> {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        let (at, cause) = failed.as_ref()?;
        within
            .is_none_or(|w| at.elapsed() < w)
            .then(|| cause.clone())
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
    fn while_a_probe_runs_others_answer_without_probing() {
        let probes = Probes::default();
        let inner = probes.probe(|| {
            let nested = probes.probe(|| panic!("a second probe ran"));
            assert!(nested.unwrap_err().0.contains("under way"));
            Ok(())
        });
        assert!(inner.is_ok());
        assert!(probes.probe(|| Ok(())).is_ok(), "the next probe runs");
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
