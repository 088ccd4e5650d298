//! A time as the control surface writes it (RFC 3339), read by the server: a clock's
//! reading, an expiry, a journal entry's arrival.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time as the control surface writes it: RFC 3339 (`2030-01-01T00:00:00.000Z`). From
/// a `SystemTime`, or text the server reads (checked by the server). Equality compares
/// the text; `unix_millis` compares instants.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Time(String);

impl Time {
    /// The RFC 3339 text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Milliseconds since the Unix epoch; `None` when it is no RFC 3339 time.
    pub fn unix_millis(&self) -> Option<i64> {
        crate::ops::clock::parse_rfc3339_millis(&self.0)
    }

    /// As a `SystemTime`; `None` when it is no RFC 3339 time.
    pub fn to_system_time(&self) -> Option<SystemTime> {
        let ms = self.unix_millis()?;
        let since = Duration::from_millis(ms.unsigned_abs());
        match ms >= 0 {
            true => UNIX_EPOCH.checked_add(since),
            false => UNIX_EPOCH.checked_sub(since),
        }
    }
}

impl From<SystemTime> for Time {
    /// To the millisecond (the clock keeps no finer).
    fn from(t: SystemTime) -> Time {
        let ms = match t.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
            Err(e) => {
                let d = e.duration();
                let whole = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                -whole - i64::from(d.subsec_nanos() % 1_000_000 != 0)
            }
        };
        Time(crate::ops::clock::utc_millis(ms))
    }
}

impl From<&str> for Time {
    fn from(text: &str) -> Time {
        Time(text.to_owned())
    }
}

impl From<String> for Time {
    fn from(text: String) -> Time {
        Time(text)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}
