//! Time as plant-store shows and reads it: seconds since the Unix epoch, UTC, written
//! and parsed as RFC 3339 (proleptic Gregorian civil dates, no leap seconds).

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now (UTC).
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Milliseconds since the Unix epoch.
pub fn unix_now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Seconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Now, as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_millis_now() -> String {
    utc_millis(unix_now_millis())
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_millis(ms: i64) -> String {
    let whole = utc(ms.div_euclid(1000));
    format!("{}.{:03}Z", &whole[..whole.len() - 1], ms.rem_euclid(1000))
}

/// An RFC 3339 time (`2027-01-31T12:00:00Z`, `2027-01-31t12:00:00.5+02:00`) in seconds
/// since the Unix epoch, UTC; a fraction of a second is dropped.
pub fn parse_rfc3339(v: &str) -> Option<i64> {
    let b = v.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = v.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &v[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let d = |i: usize| i64::from(digits[i] - b'0');
            let (h, m) = (d(0) * 10 + d(1), d(2) * 10 + d(3));
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'-' {
                -(h * 3600 + m * 60)
            } else {
                h * 3600 + m * 60
            }
        }
        _ => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month)
        || day < 1
        || day > month_days[month as usize - 1]
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    // Days from 1970-01-01 (days-from-civil, proleptic Gregorian).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_millis_keeps_the_milliseconds() {
        assert_eq!(utc_millis(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc_millis(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn utc_formats_known_instants() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_795_367_045), "2026-11-22T17:04:05Z");
        assert!(utc_millis_now().ends_with('Z') && utc_millis_now().len() == 24);
    }

    #[test]
    fn rfc3339_times_parse_to_utc_seconds() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(parse_rfc3339("2027-01-31T12:00:00Z"), Some(1_801_396_800));
        assert_eq!(
            parse_rfc3339("2027-01-31T14:00:00.999+02:00"),
            Some(1_801_396_800)
        );
        assert_eq!(
            parse_rfc3339("2027-01-31t11:30:00-00:30"),
            Some(1_801_396_800)
        );
        for bad in [
            "2027-01-31",
            "2027-01-31 12:00:00Z",
            "2027-02-29T00:00:00Z",
            "2027-13-01T00:00:00Z",
            "2027-01-31T24:00:00Z",
            "2027-01-31T12:00:00",
            "2027-01-31T12:00:00+2:00",
            "2027-01-31T12:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
