//! Test control's faults (docs/control.md, "Faults"): the table `/_control/faults` keeps,
//! which requests and webhook deliveries a fault matches, and the deterministic draw.
//!
//! Faults are tried in the order they were added; at most one applies to a request, and a
//! request taken by one is neither counted nor drawn for by the others. A fault with a
//! `probability` draws once per matching request it is tried on: the `k`-th draw is
//! `splitmix64(seed + k·γ)`, so the decisions are a function of the seed and the order of
//! the matching requests, nothing else. A delay range draws each request's delay the same
//! way from a stream of its own (`DELAY_STREAM`): the same seed, the same delays. Its body
//! is read in `fault_body.rs`, its `match` in `fault_match.rs`.

use crate::api::control::fault_body::{self, Asked};
pub use crate::api::control::fault_body::{Action, When};
use crate::api::control::fault_match::Exact;
pub use crate::api::control::fault_match::Request;
use crate::api::error::ApiError;
use crate::api::error::Injected;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

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

    /// It acts on the bytes of the answer made (`truncate`, `trickle`).
    pub fn shapes(&self) -> bool {
        matches!(
            self.action,
            Action::Truncate { .. } | Action::Trickle { .. }
        )
    }

    /// Its id (`flt_…`).
    pub fn id(&self) -> &str {
        &self.id
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
        let injected = match &self.action {
            Action::Status {
                status,
                retry_after,
                message,
                body,
                content_type,
            } => Injected {
                status: *status,
                retry_after: *retry_after,
                message: message.clone(),
                body: body.clone(),
                content_type: content_type.clone(),
            },
            _ => Injected {
                status: 503,
                ..Default::default()
            },
        };
        ApiError::Injected(Box::new(injected))
    }
}

/// What a request or a delivery is, as a fault's `match` sees it.
pub enum Target<'t> {
    Request {
        request: Request<'t>,
        /// A `GET /events` stream (the only requests `cut_stream` takes, and never a
        /// `trickle`).
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
    /// Its number among the faults added (their order).
    n: u64,
    asked: Arc<Asked>,
    /// The seed of its draws (given, or picked when a probability is given without one).
    seed: Option<u64>,
    hits: u64,
    draws: u64,
    /// Delays drawn so far (a delay range's).
    delays: u64,
}

impl Fault {
    fn spent(&self) -> bool {
        self.asked.times.is_some_and(|n| self.hits >= n)
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

    /// The action a request it takes gets: a delay range's next delay drawn (uniformly,
    /// from the seed's stream of delays), any other as it is.
    fn act(&mut self) -> Action {
        let Action::DelayRange { min, max } = self.asked.action else {
            return self.asked.action.clone();
        };
        let k = self.delays;
        self.delays += 1;
        let start = self.seed.unwrap_or(0).wrapping_add(DELAY_STREAM);
        let x = splitmix64(start.wrapping_add(k.wrapping_mul(GAMMA)));
        // Lemire's multiply-shift: `x` scaled to the span, its bias below 2^-47.
        let span = max - min + 1;
        let ms = min + ((u128::from(x) * u128::from(span)) >> 64) as u64;
        Action::Delay { ms }
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

/// Whether a fault asked so matches the target; `sent` is a request's body read exactly,
/// once for every fault.
fn matches(asked: &Asked, target: &Target, sent: Option<&BTreeMap<String, Exact>>) -> bool {
    let m = &asked.matching;
    match target {
        Target::Request { request, stream } => {
            let fits = match asked.action {
                Action::CutStream { .. } => *stream,
                Action::Trickle { .. } => !*stream,
                _ => true,
            };
            fits && m.request(request, sent)
        }
        Target::Delivery { webhook, principal } => m.delivery(webhook, principal),
    }
}

/// SplitMix64's increment.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
/// Where a fault's stream of delays starts from its seed: far from its draws' stream
/// (`seed + k·γ`), so the two never meet in practice.
const DELAY_STREAM: u64 = 0xD1B5_4A32_D192_ED03;

/// SplitMix64's output function (Steele, Lea, Flood 2014): a good 64-bit mix of `x`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What each fault matches, with its number, in order.
type Matchers = Arc<[(u64, Arc<Asked>)]>;

/// One server's faults.
#[derive(Default)]
pub struct Faults {
    table: Mutex<Vec<Fault>>,
    /// The table's matchers, remade with each change of it: what `take` compares a
    /// request with, outside the table's lock (which it takes only to count and draw).
    matchers: RwLock<Matchers>,
    /// How many are kept: none, and a request does not even take the lock.
    count: AtomicUsize,
    /// Faults added so far (each one's `n`).
    added: AtomicU64,
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Fault>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table has changed (its lock is held): its count and matchers follow.
    fn changed(&self, table: &[Fault]) {
        let matchers = table.iter().map(|f| (f.n, f.asked.clone())).collect();
        *self.matchers.write().unwrap_or_else(|e| e.into_inner()) = matchers;
        self.count.store(table.len(), Ordering::Release);
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
        let seed = match asked.seed {
            None if fault_body::draws(&asked) => Some(pick()? & fault_body::MAX_SEED_MASK),
            seed => seed,
        };
        let fault = Fault {
            id,
            n: self.added.fetch_add(1, Ordering::Relaxed),
            asked: Arc::new(asked),
            seed,
            hits: 0,
            draws: 0,
            delays: 0,
        };
        let body = fault.json().to_string().into_bytes();
        let mut table = self.lock();
        if table.len() >= MAX_FAULTS {
            return Err(ApiError::Full(format!(
                "at most {MAX_FAULTS} faults are kept; delete one first"
            )));
        }
        table.push(fault);
        self.changed(&table);
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
        self.changed(&table);
        Ok(())
    }

    /// `DELETE /_control/faults`, and a reset.
    pub fn clear(&self) {
        let mut table = self.lock();
        table.clear();
        self.changed(&table);
    }

    /// No fault is defined: one atomic load, what a request pays with test control on
    /// and no fault.
    pub fn none(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// The fault that takes this request or delivery, if one does: the first in order
    /// that matches, is not spent, and whose draw fires; it is counted. What matches is
    /// found outside the table's lock (a request's body read once, then compared with
    /// each fault's `match.body`); the lock is held only to count and draw.
    pub fn take(&self, target: &Target) -> Option<Taken> {
        if self.none() {
            return None;
        }
        let matchers = self
            .matchers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let sent = match target {
            Target::Request { request, .. }
                if matchers.iter().any(|(_, a)| a.matching.body.is_some()) =>
            {
                Exact::read(request.body).ok().and_then(Exact::members)
            }
            _ => None,
        };
        let matching: Vec<u64> = matchers
            .iter()
            .filter(|(_, asked)| matches(asked, target, sent.as_ref()))
            .map(|(n, _)| *n)
            .collect();
        if matching.is_empty() {
            return None;
        }
        let mut table = self.lock();
        for f in table.iter_mut() {
            if matching.binary_search(&f.n).is_err() || f.spent() || !f.draw() {
                continue;
            }
            f.hits += 1;
            return Some(Taken {
                id: f.id.clone(),
                when: f.asked.when.unwrap_or(When::Before),
                action: f.act(),
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

    fn no_header(_: &str) -> Option<&'static str> {
        None
    }

    fn post(principal: &'static str) -> Target<'static> {
        Target::Request {
            request: Request {
                method: "POST",
                path: "/plants",
                query: "",
                header: &no_header,
                body: b"",
                principal: Some(principal),
            },
            stream: false,
        }
    }

    fn delays(f: &Faults, n: usize) -> Vec<u64> {
        (0..n)
            .map(|_| match f.take(&post("a")).map(|t| t.action) {
                Some(Action::Delay { ms }) => ms,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_delay_range_draws_from_its_seed_within_its_ends() {
        let body = r#"{"action":{"kind":"delay","ms":{"min":10,"max":20}},"seed":5}"#;
        let (a, b) = (faults(&[body]), faults(&[body]));
        let drawn = delays(&a, 200);
        assert_eq!(drawn, delays(&b, 200), "the same seed, the same delays");
        assert!(drawn.iter().all(|ms| (10..=20).contains(ms)), "{drawn:?}");
        for end in [10, 20] {
            assert!(drawn.contains(&end), "{end} is drawn too: {drawn:?}");
        }
        let other = faults(&[r#"{"action":{"kind":"delay","ms":{"min":10,"max":20}},"seed":6}"#]);
        assert_ne!(drawn, delays(&other, 200));
        // A range picks a seed when none is given, and lists the range as given.
        let picked = faults(&[r#"{"action":{"kind":"delay","ms":{"min":0,"max":5}}}"#]);
        let list: Value = serde_json::from_slice(&picked.list()).unwrap();
        assert_eq!(list[0]["seed"], 7);
        assert_eq!(
            list[0]["action"],
            json!({"kind":"delay","ms":{"min":0,"max":5}})
        );
        // Drawing delays does not move the probability's draws.
        let both =
            r#"{"action":{"kind":"delay","ms":{"min":1,"max":9}},"probability":0.5,"seed":42}"#;
        let chance = r#"{"action":{"kind":"delay","ms":3},"probability":0.5,"seed":42}"#;
        assert_eq!(
            pattern(&faults(&[both]), 64),
            pattern(&faults(&[chance]), 64)
        );
        let fixed = faults(&[r#"{"action":{"kind":"delay","ms":{"min":4,"max":4}}}"#]);
        assert_eq!(delays(&fixed, 3), [4, 4, 4]);
        // A webhook delivery's delay is drawn the same way.
        let hooks = faults(&[
            r#"{"match":{"target":"webhook"},"action":{"kind":"delay","ms":{"min":7,"max":8}}}"#,
        ]);
        let hook = Target::Delivery {
            webhook: "wh_1",
            principal: "a",
        };
        let ms = hooks.take(&hook).map(|t| t.action);
        assert!(matches!(ms, Some(Action::Delay { ms: 7 | 8 })), "{ms:?}");
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
