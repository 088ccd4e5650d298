//! Times and durations as text: RFC 3339 written (`utc`, `utc_millis`) and read
//! (`parse_rfc3339`, `parse_rfc3339_millis`), and DURATION (`parse_duration`).

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

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn utc_millis(ms: i64) -> String {
    let whole = utc(ms.div_euclid(1000));
    format!("{}.{:03}Z", &whole[..whole.len() - 1], ms.rem_euclid(1000))
}

/// A duration: a whole number of seconds (`90`), or a whole number and a unit, `s`, `m`,
/// `h` or `d` (`90s`, `15m`, `2h`, `7d`), in seconds. No sign, blank or fraction; `None`
/// when it is not one or does not fit.
pub fn parse_duration(v: &str) -> Option<i64> {
    let (digits, unit) = match v.bytes().last()? {
        b's' => (&v[..v.len() - 1], 1),
        b'm' => (&v[..v.len() - 1], 60),
        b'h' => (&v[..v.len() - 1], 3600),
        b'd' => (&v[..v.len() - 1], 86_400),
        _ => (v, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

/// A duration as DURATION text (`parse_duration`): whole seconds, `90s`. A fraction of a
/// second is shown as `Duration` shows it (`1.5s`), which every DURATION refuses, so
/// that the refusal names the value given.
pub fn duration_text(d: std::time::Duration) -> String {
    match d.subsec_nanos() {
        0 => format!("{}s", d.as_secs()),
        _ => format!("{d:?}"),
    }
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

/// An RFC 3339 time (`parse_rfc3339`) in milliseconds since the Unix epoch: its fraction
/// of a second kept to the millisecond (further digits dropped).
pub fn parse_rfc3339_millis(v: &str) -> Option<i64> {
    let secs = parse_rfc3339(v)?;
    let fraction = v.get(19..).and_then(|r| r.strip_prefix('.')).unwrap_or("");
    let ms = fraction
        .bytes()
        .take_while(u8::is_ascii_digit)
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |ms, d| ms * 10 + i64::from(d - b'0'));
    secs.checked_mul(1000)?.checked_add(ms)
}
