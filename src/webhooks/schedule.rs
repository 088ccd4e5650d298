//! When a failed delivery is tried again: the schedule of delays (`--webhook-schedule`),
//! and a receiver's `Retry-After`.

use std::time::Duration;

/// The default schedule, Standard Webhooks' example: 9 delays, 10 attempts, about 3 days.
pub const DEFAULT_SCHEDULE: &str = "5s,5m,30m,2h,5h,10h,14h,20h,24h";
/// Most delays a schedule may list.
pub const MAX_SCHEDULE_STEPS: usize = 100;
/// A `Retry-After` longer than the scheduled delay replaces it, up to this.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The longest delay a schedule may list.
pub const MAX_DELAY: Duration = Duration::from_secs(30 * 86_400);

/// The delays between the attempts at one event: N delays, N + 1 attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(pub Vec<Duration>);

impl Schedule {
    /// A comma-separated list of durations (`5s,5m,2h,1d`); `parse_duration` reads one.
    pub fn parse(
        v: &str,
        parse_duration: impl Fn(&str) -> Option<i64>,
    ) -> Result<Schedule, String> {
        let delays = v
            .split(',')
            .map(|d| parse_duration(d.trim()).map(|s| Duration::from_secs(s as u64)))
            .map(|d| d.filter(|d| *d <= MAX_DELAY))
            .collect::<Option<Vec<_>>>()
            .filter(|d| !d.is_empty() && d.len() <= MAX_SCHEDULE_STEPS)
            .ok_or_else(|| {
                format!(
                    "--webhook-schedule must list 1 to {MAX_SCHEDULE_STEPS} durations of at most 30d, such as 5s,5m,2h, not `{v}`"
                )
            })?;
        Ok(Schedule(delays))
    }

    /// The wait before the next attempt, after `failures` failed attempts at one event
    /// (the last of them answered with `retry_after`, if any); `None` when the schedule is
    /// used up.
    pub fn after(&self, failures: i64, retry_after: Option<Duration>) -> Option<Duration> {
        let step = usize::try_from(failures).ok()?.checked_sub(1)?;
        let scheduled = *self.0.get(step)?;
        Some(scheduled.max(retry_after.unwrap_or_default().min(MAX_RETRY_AFTER)))
    }
}

/// A `Retry-After` value: seconds, or an HTTP date (IMF-fixdate, `Sun, 06 Nov 1994 08:49:37
/// GMT`) as a wait from `now` (seconds since the Unix epoch). `None` when it is neither.
pub fn retry_after(value: &str, now: i64) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Duration::from_secs(value.parse().unwrap_or(u64::MAX)));
    }
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    let parts: Vec<&str> = value.split(' ').collect();
    let [_, day, month, year, time, "GMT"] = parts[..] else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == month)? + 1;
    if day.len() != 2 || year.len() != 4 || time.len() != 8 {
        return None;
    }
    let at = crate::ops::clock::parse_rfc3339(&format!("{year}-{month:02}-{day}T{time}Z"))?;
    Some(Duration::from_secs(at.saturating_sub(now).max(0) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(v: &str) -> Option<i64> {
        v.strip_suffix('s')?.parse().ok()
    }

    #[test]
    fn n_delays_make_n_plus_one_attempts() {
        let s = Schedule::parse("1s, 2s,3s", secs).unwrap();
        assert_eq!(s.after(1, None), Some(Duration::from_secs(1)));
        assert_eq!(s.after(3, None), Some(Duration::from_secs(3)));
        assert_eq!(s.after(4, None), None);
        assert_eq!(s.after(0, None), None);
    }

    #[test]
    fn a_longer_retry_after_replaces_the_delay_up_to_the_cap() {
        let s = Schedule::parse("5s", secs).unwrap();
        assert_eq!(
            s.after(1, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            s.after(1, Some(Duration::from_secs(60))),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            s.after(1, Some(Duration::from_secs(1 << 40))),
            Some(MAX_RETRY_AFTER)
        );
    }

    #[test]
    fn bad_schedules_are_refused() {
        assert!(
            Schedule::parse("30d", |v| {
                v.strip_suffix('d')
                    .and_then(|n| n.parse::<i64>().ok())
                    .map(|n| n * 86_400)
            })
            .is_ok()
        );
        for bad in ["", "5", "5s,", "5s,,5s", "x", "31d", "9223372036854775807s"] {
            assert!(Schedule::parse(bad, secs).is_err(), "{bad}");
        }
        let long = vec!["1s"; MAX_SCHEDULE_STEPS + 1].join(",");
        assert!(Schedule::parse(&long, secs).is_err());
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date() {
        assert_eq!(retry_after("120", 0), Some(Duration::from_secs(120)));
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777 - 30),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777 + 5),
            Some(Duration::ZERO)
        );
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994 08:49:37 UTC"] {
            assert_eq!(retry_after(bad, 0), None, "{bad}");
        }
    }
}
