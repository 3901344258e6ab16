//! Date-times on the command line (`--to-datetime`): ISO 8601 in the shape
//! Kafka's tools take, turned into milliseconds since the Unix epoch.

/// `YYYY-MM-DDTHH:MM:SS[.fff][Z|±HH:MM]`, UTC when no offset is given.
pub fn parse_datetime(s: &str) -> Result<i64, String> {
    let bad = || format!("expected YYYY-MM-DDTHH:MM:SS[.sss][Z|+HH:MM], got {s:?}");
    let (date, time) = s.split_once(['T', ' ']).ok_or_else(bad)?;
    let mut d = date.splitn(3, '-');
    let (year, month, day) = (
        number(d.next(), 4).ok_or_else(bad)?,
        number(d.next(), 2).ok_or_else(bad)?,
        number(d.next(), 2).ok_or_else(bad)?,
    );
    // The offset: Z, or a sign after the seconds.
    let (clock, offset_minutes) = if let Some(c) = time.strip_suffix(['Z', 'z']) {
        (c, 0)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let (c, off) = time.split_at(at);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (h, m) = off[1..].split_once(':').ok_or_else(bad)?;
        let (h, m) = (
            number(Some(h), 2).ok_or_else(bad)?,
            number(Some(m), 2).ok_or_else(bad)?,
        );
        if h > 23 || m > 59 {
            return Err(bad());
        }
        (c, sign * (h * 60 + m))
    } else {
        (time, 0)
    };
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f))
            if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) =>
        {
            // Milliseconds: the first three digits.
            let ms: i64 = format!("{f:0<3}")[..3].parse().map_err(|_| bad())?;
            (hms, ms)
        }
        Some(_) => return Err(bad()),
        None => (clock, 0),
    };
    let mut t = hms.splitn(3, ':');
    let (hour, minute, second) = (
        number(t.next(), 2).ok_or_else(bad)?,
        number(t.next(), 2).ok_or_else(bad)?,
        number(t.next(), 2).ok_or_else(bad)?,
    );
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1_000 + fraction)
}

/// Exactly `digits` ASCII digits.
fn number(s: Option<&str>, digits: usize) -> Option<i64> {
    let s = s?;
    (s.len() == digits && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `y-m-d` in the proleptic Gregorian calendar (Howard
/// Hinnant's days-from-civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_become_epoch_milliseconds() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(parse_datetime("1970-01-01T00:00:00"), Ok(0));
        assert_eq!(
            parse_datetime("2026-12-02T13:00:00.250Z"),
            Ok(1_796_216_400_250)
        );
        assert_eq!(
            parse_datetime("2026-12-02T14:00:00+01:00"),
            Ok(1_796_216_400_000)
        );
        assert_eq!(
            parse_datetime("2000-02-29T00:00:00-00:30"),
            Ok(951_784_200_000)
        );
        for bad in [
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-12-02",
            "2026-12-02T25:00:00Z",
            "2026-12-02T10:00Z",
            "yesterday",
        ] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
    }
}
