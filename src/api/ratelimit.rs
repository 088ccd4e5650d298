//! A request budget per token (`--rate-limit`, `--rate-burst`): a token bucket that holds
//! up to `burst` requests and refills at `per_second`. In memory, per process: with
//! several instances each keeps its own budgets. Only a token found valid gets a bucket,
//! and there are at most `MAX_BUCKETS`, so a flood of made-up tokens grows nothing.
//! Budgets refill by the server's clock's ticks (`Clock::monotonic_millis`): moving the
//! test clock forward refills them, and they stand while it is frozen.

use std::collections::HashMap;
use std::sync::Mutex;

/// Most buckets kept. Past it, the buckets that have refilled (the same as new ones) are
/// dropped; if that is not enough, all are (every caller gets a fresh budget once).
pub const MAX_BUCKETS: usize = 65_536;

/// A budget: `burst` requests at once, refilled at `per_second`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl RateLimit {
    /// `RateLimit-Policy` (IETF httpapi draft): the quota and the window it refills in.
    pub fn policy(&self) -> String {
        let window = (f64::from(self.burst) / self.per_second).ceil().max(1.0);
        format!("\"default\";q={};w={window}", self.burst)
    }
}

/// The budget of one caller, after a request.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Served: `remaining` requests left now, full again in `reset` seconds.
    Allowed { remaining: u32, reset: u64 },
    /// Refused: one request's worth is back in `retry_after` seconds (at least 1).
    Limited { retry_after: u64 },
}

impl Verdict {
    /// The `RateLimit` header (IETF httpapi draft) for this verdict.
    pub fn header(&self) -> String {
        match self {
            Verdict::Allowed { remaining, reset } => format!("\"default\";r={remaining};t={reset}"),
            Verdict::Limited { retry_after } => format!("\"default\";r=0;t={retry_after}"),
        }
    }
}

struct Bucket {
    tokens: f64,
    /// When it was last refilled: the clock's ticks, in milliseconds.
    at: i64,
}

pub struct Limiter {
    limit: RateLimit,
    buckets: Mutex<HashMap<[u8; 32], Bucket>>,
}

impl Limiter {
    pub fn new(limit: RateLimit) -> Limiter {
        Limiter {
            limit,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    pub fn limit(&self) -> RateLimit {
        self.limit
    }

    fn refill(&self, b: &mut Bucket, now: i64) {
        b.tokens = (b.tokens + seconds(b.at, now) * self.limit.per_second)
            .min(f64::from(self.limit.burst));
        b.at = b.at.max(now);
    }

    /// The verdict for a caller whose budget is spent, without touching anything else:
    /// lets a spent budget be refused before the token is looked up in the database.
    pub fn spent(&self, key: &[u8; 32], now: i64) -> Option<Verdict> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let b = buckets.get_mut(key)?;
        self.refill(b, now);
        (b.tokens < 1.0).then(|| self.limited(b))
    }

    /// Takes one request from the caller's budget (a valid token's hash); `now` (here and
    /// below): the clock's ticks (`Clock::monotonic_millis`).
    pub fn take(&self, key: &[u8; 32], now: i64) -> Verdict {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if !buckets.contains_key(key) && buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, b| {
                b.tokens + seconds(b.at, now) * self.limit.per_second < f64::from(self.limit.burst)
            });
            if buckets.len() >= MAX_BUCKETS {
                buckets.clear();
            }
        }
        let b = buckets.entry(*key).or_insert(Bucket {
            tokens: f64::from(self.limit.burst),
            at: now,
        });
        self.charge(b, now)
    }

    /// Takes one request from the caller's budget if it has one (a token found valid
    /// before); `None` when it has none.
    pub fn take_known(&self, key: &[u8; 32], now: i64) -> Option<Verdict> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.get_mut(key).map(|b| self.charge(b, now))
    }

    /// Drops every budget (test control's reset).
    pub fn clear(&self) {
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Drops the caller's budget: a token found invalid after it was charged.
    pub fn forget(&self, key: &[u8; 32]) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.remove(key);
    }

    fn charge(&self, b: &mut Bucket, now: i64) -> Verdict {
        self.refill(b, now);
        if b.tokens < 1.0 {
            return self.limited(b);
        }
        b.tokens -= 1.0;
        let missing = f64::from(self.limit.burst) - b.tokens;
        Verdict::Allowed {
            remaining: b.tokens as u32,
            reset: (missing / self.limit.per_second).ceil() as u64,
        }
    }

    fn limited(&self, b: &Bucket) -> Verdict {
        let wait = (1.0 - b.tokens) / self.limit.per_second;
        Verdict::Limited {
            retry_after: (wait.ceil() as u64).max(1),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.lock().unwrap().len()
    }
}

/// Seconds from `at` to `now` (ticks in milliseconds), never less than 0.
fn seconds(at: i64, now: i64) -> f64 {
    now.saturating_sub(at).max(0) as f64 / 1000.0
}

/// `100/s`, `6000/m` or `50000/h`, and the burst: `burst`, or one second's worth (at
/// least 1).
pub fn parse(rate: &str, burst: Option<u32>) -> Option<RateLimit> {
    let (n, unit) = rate.split_once('/')?;
    let seconds = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u32 = n.parse().ok().filter(|&n| n > 0)?;
    let per_second = f64::from(n) / seconds;
    let burst = burst.unwrap_or((per_second.ceil() as u32).max(1));
    (burst > 0).then_some(RateLimit { per_second, burst })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_a_burst_of_one_seconds_worth() {
        let l = parse("100/s", None).unwrap();
        assert_eq!((l.per_second, l.burst), (100.0, 100));
        assert_eq!(parse("6000/m", None).unwrap().burst, 100);
        assert_eq!(parse("30/m", None).unwrap().burst, 1);
        assert_eq!(parse("10/s", Some(3)).unwrap().burst, 3);
        for bad in ["", "100", "0/s", "-1/s", "1.5/s", "10/d", "/s"] {
            assert!(parse(bad, None).is_none(), "{bad}");
        }
        assert!(parse("10/s", Some(0)).is_none());
        assert_eq!(
            parse("10/s", Some(20)).unwrap().policy(),
            "\"default\";q=20;w=2"
        );
    }

    #[test]
    fn a_burst_is_served_then_refused_until_it_refills() {
        let lim = Limiter::new(parse("2/s", Some(3)).unwrap());
        let (key, t0) = ([7u8; 32], 1_000);
        assert_eq!(
            lim.spent(&key, t0),
            None,
            "no bucket before a valid request"
        );
        for left in [2, 1, 0] {
            assert!(
                matches!(lim.take(&key, t0), Verdict::Allowed { remaining, .. } if remaining == left)
            );
        }
        assert_eq!(lim.take(&key, t0), Verdict::Limited { retry_after: 1 });
        assert_eq!(
            lim.spent(&key, t0),
            Some(Verdict::Limited { retry_after: 1 })
        );
        // Half a second later one request's worth is back.
        let t1 = t0 + 500;
        assert_eq!(lim.spent(&key, t1), None);
        assert!(matches!(
            lim.take(&key, t1),
            Verdict::Allowed { remaining: 0, .. }
        ));
        // Another caller has its own budget.
        assert!(matches!(
            lim.take(&[8u8; 32], t1),
            Verdict::Allowed {
                remaining: 2,
                reset: 1
            }
        ));
    }

    #[test]
    fn buckets_are_bounded() {
        let lim = Limiter::new(parse("1/s", Some(1)).unwrap());
        let now = 1;
        for i in 0..MAX_BUCKETS + 10 {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64).to_le_bytes());
            lim.take(&key, now);
        }
        assert!(lim.len() <= MAX_BUCKETS);
    }
}
