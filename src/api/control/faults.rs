//! Test control's faults (docs/testing.md, "Faults"): the table `/_control/faults` keeps,
//! which requests and webhook deliveries a fault matches, and the deterministic draw.
//!
//! Faults are tried in the order they were added; at most one applies to a request, and a
//! request taken by one is neither counted nor drawn for by the others. A fault with a
//! `probability` draws once per matching request it is tried on: the `k`-th draw is
//! `splitmix64(seed + k·γ)`, so the decisions are a function of the seed and the order of
//! the matching requests, nothing else. Its body is read in `fault_body.rs`.

use crate::api::control::fault_body::{self, Asked};
pub use crate::api::control::fault_body::{Action, When};
use crate::api::error::ApiError;
use crate::api::error::Injected;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Faults kept at most; one more is 409.
pub const MAX_FAULTS: usize = 1000;

/// A fault that took a request (or a delivery): what the layers above act on.
#[derive(Clone, Debug)]
pub struct Taken {
    /// Its id (`flt_…`), for the access log and the journal.
    pub id: String,
    pub when: When,
    pub action: Action,
    /// Its action is done (a status fault's answer made, or a delay waited): nothing
    /// more is to be done to the request but name the fault.
    pub done: bool,
    /// The resets and restores test control had made when the fault took the request
    /// (`Control::passed`): one held by a delay is not carried out after either.
    pub resets: u64,
}

impl Taken {
    /// The request is not carried out now: `status`, `reset` and `close` take its place,
    /// a `delay` carries it out once waited.
    pub fn stops(&self) -> bool {
        self.when == When::Before && !self.done
    }

    /// It truncates the answer.
    pub fn truncates(&self) -> bool {
        self.action == Action::Truncate
    }

    /// `cut_stream`'s count of events.
    pub fn cut_after(&self) -> Option<u64> {
        match self.action {
            Action::CutStream { after_events } => Some(after_events),
            _ => None,
        }
    }

    /// The answer a `status` fault gives; any other action's is not sent (its own
    /// action takes it).
    pub fn error(&self) -> ApiError {
        match &self.action {
            Action::Status {
                status,
                retry_after,
                message,
            } => ApiError::Injected(Box::new(Injected {
                status: *status,
                retry_after: *retry_after,
                message: message.clone(),
            })),
            _ => ApiError::Injected(Box::new(Injected {
                status: 503,
                retry_after: None,
                message: None,
            })),
        }
    }
}

/// What a request or a delivery is, as a fault's `match` sees it.
pub enum Target<'t> {
    Request {
        method: &'t str,
        /// The path, without the query.
        path: &'t str,
        principal: Option<&'t str>,
        /// A `GET /events` stream (the only requests `cut_stream` takes).
        stream: bool,
    },
    Delivery {
        webhook: &'t str,
        principal: &'t str,
    },
}

/// A fault as stored.
struct Fault {
    id: String,
    asked: Asked,
    /// The seed of its draws (given, or picked when a probability is given without one).
    seed: Option<u64>,
    hits: u64,
    draws: u64,
}

impl Fault {
    fn spent(&self) -> bool {
        self.asked.times.is_some_and(|n| self.hits >= n)
    }

    fn matches(&self, target: &Target) -> bool {
        let m = &self.asked.matching;
        match *target {
            Target::Request {
                method,
                path,
                principal,
                stream,
            } => {
                !m.deliveries
                    && m.method.as_deref().is_none_or(|x| x == method)
                    && m.path.as_deref().is_none_or(|p| match p.strip_suffix('*') {
                        Some(prefix) => path.starts_with(prefix),
                        None => path == p,
                    })
                    && m.principal.as_deref().is_none_or(|p| principal == Some(p))
                    && (stream || !matches!(self.asked.action, Action::CutStream { .. }))
            }
            Target::Delivery { webhook, principal } => {
                m.deliveries
                    && m.webhook.as_deref().is_none_or(|w| w == webhook)
                    && m.principal.as_deref().is_none_or(|p| p == principal)
            }
        }
    }

    /// The next draw: whether it fires on this matching request.
    fn draw(&mut self) -> bool {
        let Some(p) = self.asked.probability else {
            return true;
        };
        let k = self.draws;
        self.draws += 1;
        let x = splitmix64(self.seed.unwrap_or(0).wrapping_add(k.wrapping_mul(GAMMA)));
        ((x >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn json(&self) -> Value {
        let a = &self.asked;
        json!({
            "id": self.id,
            "match": a.shown_match,
            "when": a.when.map(|w| if w == When::Before { "before" } else { "after" }),
            "action": fault_body::action_json(&a.action),
            "times": a.times,
            "probability": a.probability,
            "seed": self.seed,
            "hits": self.hits,
            "remaining": a.times.map(|n| n.saturating_sub(self.hits)),
        })
    }
}

/// What a `truncate` fault sends of an answer: its head and the first half of its
/// body, or the first half of its head when it has no body (or none is sent, `head_only`);
/// and how many bytes of the body that is.
pub fn truncated(mut head: Vec<u8>, body: &[u8], head_only: bool) -> (Vec<u8>, usize) {
    if body.is_empty() || head_only {
        head.truncate(head.len() / 2);
        return (head, 0);
    }
    let half = body.len() / 2;
    head.extend_from_slice(&body[..half]);
    (head, half)
}

/// SplitMix64's increment.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function (Steele, Lea, Flood 2014): a good 64-bit mix of `x`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One server's faults.
#[derive(Default)]
pub struct Faults {
    table: Mutex<Vec<Fault>>,
    /// How many are kept: none, and a request does not even take the lock.
    count: AtomicUsize,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Fault>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `POST /_control/faults`: the fault as stored, as JSON. `id` is its id; `pick`
    /// gives a seed when a probability comes without one.
    pub fn add(
        &self,
        body: &[u8],
        id: String,
        pick: impl FnOnce() -> Result<u64, ApiError>,
    ) -> Result<Vec<u8>, ApiError> {
        let asked = fault_body::parse(body).map_err(ApiError::BadRequest)?;
        let seed = match (asked.probability, asked.seed) {
            (Some(_), None) => Some(pick()? & fault_body::MAX_SEED_MASK),
            (_, seed) => seed,
        };
        let fault = Fault {
            id,
            asked,
            seed,
            hits: 0,
            draws: 0,
        };
        let body = fault.json().to_string().into_bytes();
        let mut table = self.lock();
        if table.len() >= MAX_FAULTS {
            return Err(ApiError::Full(format!(
                "at most {MAX_FAULTS} faults are kept; delete one first"
            )));
        }
        table.push(fault);
        self.count.store(table.len(), Ordering::Release);
        Ok(body)
    }

    /// `GET /_control/faults`: every fault in order, with `hits` and `remaining`.
    pub fn list(&self) -> Vec<u8> {
        let list: Vec<Value> = self.lock().iter().map(Fault::json).collect();
        serde_json::to_vec(&list).expect("JSON values serialize")
    }

    /// `DELETE /_control/faults/{id}`.
    pub fn remove(&self, id: &str) -> Result<(), ApiError> {
        let mut table = self.lock();
        let at = table.iter().position(|f| f.id == id).ok_or_else(|| {
            ApiError::NotFound(format!("no fault {}", crate::api::error::printable(id, 64)))
        })?;
        table.remove(at);
        self.count.store(table.len(), Ordering::Release);
        Ok(())
    }

    /// `DELETE /_control/faults`, and a reset.
    pub fn clear(&self) {
        let mut table = self.lock();
        table.clear();
        self.count.store(0, Ordering::Release);
    }

    /// No fault is defined: one atomic load, what a request pays with test control on
    /// and no fault.
    pub fn none(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// The fault that takes this request or delivery, if one does: the first in order
    /// that matches, is not spent, and whose draw fires; it is counted.
    pub fn take(&self, target: &Target) -> Option<Taken> {
        if self.none() {
            return None;
        }
        let mut table = self.lock();
        for f in table.iter_mut() {
            if f.spent() || !f.matches(target) || !f.draw() {
                continue;
            }
            f.hits += 1;
            return Some(Taken {
                id: f.id.clone(),
                when: f.asked.when.unwrap_or(When::Before),
                action: f.asked.action.clone(),
                done: false,
                resets: 0,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faults(bodies: &[&str]) -> Faults {
        let f = Faults::default();
        for (i, b) in bodies.iter().enumerate() {
            f.add(b.as_bytes(), format!("flt_{i}"), || Ok(7)).unwrap();
        }
        f
    }

    fn post<'t>(principal: &'t str) -> Target<'t> {
        Target::Request {
            method: "POST",
            path: "/plants",
            principal: Some(principal),
            stream: false,
        }
    }

    fn pattern(f: &Faults, n: usize) -> String {
        (0..n)
            .map(|_| {
                if f.take(&post("a")).is_some() {
                    'x'
                } else {
                    '.'
                }
            })
            .collect()
    }

    #[test]
    fn times_then_spent_and_listed() {
        let f = faults(&[r#"{"action":{"kind":"status","status":503},"times":2}"#]);
        assert_eq!(pattern(&f, 4), "xx..");
        let list: Value = serde_json::from_slice(&f.list()).unwrap();
        assert_eq!(list[0]["hits"], 2);
        assert_eq!(list[0]["remaining"], 0);
    }

    #[test]
    fn the_draws_follow_the_seed_and_times_caps_them() {
        let body = r#"{"action":{"kind":"close"},"probability":0.5,"seed":42}"#;
        let (a, b) = (faults(&[body]), faults(&[body]));
        let pa = pattern(&a, 64);
        assert_eq!(pa, pattern(&b, 64));
        assert!(pa.contains('x') && pa.contains('.'), "{pa}");
        let other = faults(&[r#"{"action":{"kind":"close"},"probability":0.5,"seed":43}"#]);
        assert_ne!(pa, pattern(&other, 64));
        let capped =
            faults(&[r#"{"action":{"kind":"close"},"probability":0.5,"seed":42,"times":3}"#]);
        assert_eq!(pattern(&capped, 64).matches('x').count(), 3);
    }

    #[test]
    fn one_fault_per_request_in_order_and_principals_apart() {
        let f = faults(&[
            r#"{"match":{"principal":"b"},"action":{"kind":"reset"},"times":1}"#,
            r#"{"match":{"path":"/plants*"},"action":{"kind":"close"},"times":1}"#,
            r#"{"action":{"kind":"delay","ms":5}}"#,
        ]);
        assert_eq!(f.take(&post("a")).unwrap().id, "flt_1");
        assert_eq!(f.take(&post("a")).unwrap().id, "flt_2");
        assert_eq!(f.take(&post("b")).unwrap().id, "flt_0");
        let list: Value = serde_json::from_slice(&f.list()).unwrap();
        assert_eq!(list[2]["hits"], 1);
        assert_eq!(list[2]["remaining"], Value::Null);
        let hook = Target::Delivery {
            webhook: "wh_1",
            principal: "a",
        };
        assert!(
            f.take(&hook).is_none(),
            "request faults never take deliveries"
        );
    }

    #[test]
    fn a_picked_seed_is_shown() {
        let f = faults(&[r#"{"action":{"kind":"close"},"probability":1}"#]);
        let list: Value = serde_json::from_slice(&f.list()).unwrap();
        assert_eq!(list[0]["seed"], 7);
    }
}
