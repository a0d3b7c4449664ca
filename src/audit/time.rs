//! RFC 3339 timestamps (UTC, milliseconds) without a date library.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// let t = UNIX_EPOCH + Duration::from_millis(1_764_614_096_789);
/// assert_eq!(mcp_budget::audit::rfc3339(t), "2025-12-01T18:34:56.789Z");
/// ```
#[must_use]
pub fn rfc3339(t: SystemTime) -> String {
    // ASCII digits and separators: always UTF-8.
    String::from_utf8_lossy(write(&mut [0; LEN], t)).into_owned()
}

/// The length of an [`rfc3339`] time.
pub(crate) const LEN: usize = 24;

/// `t` as [`rfc3339`] writes it, in `out` (no allocation), as bytes (ASCII: an audit line
/// copies them without a UTF-8 check). The date and time to the second are worked out once a
/// second per thread (a busy gateway writes many lines a second).
pub(crate) fn write(out: &mut [u8; LEN], t: SystemTime) -> &[u8] {
    write_since(out, since_epoch(t))
}

/// `t` as the time since the Unix epoch (zero before it).
pub(crate) fn since_epoch(t: SystemTime) -> std::time::Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// [`write`] of the time `since` the Unix epoch.
pub(crate) fn write_since(out: &mut [u8; LEN], since: std::time::Duration) -> &[u8] {
    thread_local! {
        /// The last second written on this thread, and its text up to the seconds.
        static LAST: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
    }
    let secs = since.as_secs();
    let (last, mut seconds) = LAST.get();
    if last != secs {
        let (days, rest) = (secs / 86_400, secs % 86_400);
        let (year, month, day) = civil(days);
        // Written digit by digit: `format!` with padded fields costs more than the rest of an
        // audit line's serialization, and this runs twice per audited call.
        seconds = *b"0000-00-00T00:00:00";
        digits(&mut seconds[0..4], year.min(9999));
        digits(&mut seconds[5..7], month);
        digits(&mut seconds[8..10], day);
        digits(&mut seconds[11..13], rest / 3600);
        digits(&mut seconds[14..16], rest % 3600 / 60);
        digits(&mut seconds[17..19], rest % 60);
        LAST.set((secs, seconds));
    }
    out[..19].copy_from_slice(&seconds);
    out[19..].copy_from_slice(b".000Z");
    digits(&mut out[20..23], u64::from(since.subsec_millis()));
    out
}

/// `n` as zero-padded decimal digits filling `into` (its high digits dropped if too long).
fn digits(into: &mut [u8], mut n: u64) {
    for slot in into.iter_mut().rev() {
        // A digit is below 10, so the cast cannot truncate.
        #[allow(clippy::cast_possible_truncation)]
        let digit = (n % 10) as u8;
        *slot = b'0' + digit;
        n /= 10;
    }
}

/// The (year, month, day) of `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_zero_padded_to_the_millisecond() {
        use std::time::Duration;
        let at = |ms: u64| rfc3339(UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400_007), "2000-02-29T00:00:00.007Z");
        assert_eq!(at(1_767_225_599_999), "2025-12-31T23:59:59.999Z");
        // The same second again (from the thread's last second), then the next one.
        assert_eq!(at(1_767_225_599_001), "2025-12-31T23:59:59.001Z");
        assert_eq!(at(1_767_225_600_000), "2026-01-01T00:00:00.000Z");
    }

    #[test]
    fn days_become_dates_across_leap_years() {
        assert_eq!(civil(0), (1970, 1, 1));
        assert_eq!(civil(11_016), (2000, 2, 29));
        assert_eq!(civil(19_782), (2024, 2, 29));
        assert_eq!(civil(20_423), (2025, 12, 1));
    }
}
