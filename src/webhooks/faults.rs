//! Test control's faults on webhook deliveries (`api::control::faults`, a fault whose
//! `match` names a webhook or `"target":"webhook"`): drawn once per attempt. `delay`
//! sends the attempt that much later, `duplicate` sends it twice (same `webhook-id` and
//! body), `bad_signature` signs it with another key, `status` sends nothing and counts
//! the attempt as answered with that status (a 2xx delivers; anything else is a failed
//! attempt, retried on the schedule). A fault that makes the attempt last longer (a
//! delay, a duplicate) has the lease renewed to cover that first (`lease_extra`).

use crate::api::control::Control;
use crate::api::control::faults::{Action, Taken, Target};
use crate::store::Endpoint;
use crate::webhooks::client::{Answer, Client, Message};
use crate::webhooks::sign;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often a delivery thread waiting out a fault's delay looks whether the server is
/// stopping, or test control was reset or restored.
const RELEASE_CHECK_EVERY: Duration = Duration::from_millis(50);

/// The fault that takes this attempt, if one does.
pub(super) fn take(control: &Control, ep: &Endpoint) -> Option<Taken> {
    // No reset or restore runs while the fault takes the attempt: it counts those made
    // before. (A delivery thread holds no read transaction here.)
    let gate = control.gate();
    let mut taken = control.faults.take(&Target::Delivery {
        webhook: &ep.id,
        principal: &ep.principal,
    })?;
    taken.resets = control.passed();
    drop(gate);
    log::info!("webhook {}: fault {} takes an attempt", ep.id, taken.id);
    Some(taken)
}

/// How much longer than one post the attempt that `taken` takes may last, and so how much
/// longer than usual its lease must be: a `delay`'s wait, a `duplicate`'s second post.
pub(super) fn lease_extra(taken: &Taken, timeout: Duration) -> Duration {
    match taken.action {
        Action::Delay { ms } => Duration::from_millis(ms),
        Action::Duplicate => timeout,
        _ => Duration::ZERO,
    }
}

/// A `delay`: waits it out before the attempt. False when a reset or a restore came
/// meanwhile, or the server began to stop: the attempt is not made (for a reset or a
/// restore: it was for the store before; the restored endpoint's next claim makes its
/// own), and it ends the wait at once.
pub(super) fn wait(stopping: &AtomicBool, control: &Control, taken: &Taken) -> bool {
    let released = || stopping.load(Ordering::Relaxed) || control.passed() != taken.resets;
    if let Action::Delay { ms } = taken.action {
        let until = Instant::now() + Duration::from_millis(ms);
        while !released() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(RELEASE_CHECK_EVERY));
        }
    }
    !released()
}

/// The attempt, as the fault makes it.
pub(super) fn post(
    client: &Client,
    ep: &Endpoint,
    key: &[u8],
    message: &Message,
    taken: &Taken,
) -> Answer {
    match &taken.action {
        Action::Duplicate => {
            let _ = client.post(&ep.url, message);
            client.post(&ep.url, message)
        }
        Action::BadSignature => {
            let other: Vec<u8> = key.iter().map(|b| b ^ 0x5a).collect();
            let signature = sign::signature(&other, message.id, message.timestamp, message.body);
            let forged = Message {
                signature: &signature,
                ..*message
            };
            client.post(&ep.url, &forged)
        }
        Action::Status {
            status,
            retry_after,
            ..
        } => match status {
            200..=299 => Answer::Delivered,
            _ => Answer::Failed {
                error: format!("HTTP {status} (fault {} of test control)", taken.id),
                retry_after: retry_after.map(|r| r.to_string()),
            },
        },
        _ => client.post(&ep.url, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::control::faults::When;

    fn taken(action: Action) -> Taken {
        Taken {
            id: "flt_0".into(),
            when: When::Before,
            action,
            done: false,
            resets: 0,
        }
    }

    #[test]
    fn the_lease_is_lengthened_by_a_delay_or_a_second_post() {
        let timeout = Duration::from_secs(10);
        // The largest a fault allows (`fault_body::MAX_FAULT_DELAY_MS`).
        let longest = taken(Action::Delay { ms: 60_000 });
        assert_eq!(lease_extra(&longest, timeout), Duration::from_secs(60));
        assert_eq!(lease_extra(&taken(Action::Duplicate), timeout), timeout);
        assert_eq!(
            lease_extra(&taken(Action::BadSignature), timeout),
            Duration::ZERO
        );
    }
}
