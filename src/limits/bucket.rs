//! A token bucket: `rate` calls per second on average, bursts of up to `burst`.
//!
//! Pure: time is a parameter (milliseconds since any fixed origin), so tests need no clock.

/// One bucket's state.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    at_ms: u64,
}

impl Bucket {
    /// A full bucket at `now_ms`: `rate` tokens a second, holding at most `burst` (at least 1).
    #[must_use]
    pub fn new(rate: f64, burst: u32, now_ms: u64) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            rate: rate.max(0.0),
            burst,
            tokens: burst,
            at_ms: now_ms,
        }
    }

    /// A bucket holding `tokens` (0 to `burst`) at `at_ms`, refilling from then: one that takes
    /// over from another, such as a replica's share of a shared bucket it last saw at `at_ms`.
    #[must_use]
    pub fn starting_at(rate: f64, burst: u32, tokens: f64, at_ms: u64) -> Self {
        let mut bucket = Self::new(rate, burst, at_ms);
        bucket.tokens = tokens.clamp(0.0, bucket.burst);
        bucket
    }

    /// Holds no more at `now_ms` than `other` does then (both refilled to it).
    pub fn at_most(&mut self, other: &Self, now_ms: u64) {
        let mut other = other.clone();
        other.refill(now_ms);
        self.refill(now_ms);
        self.tokens = self.tokens.min(other.tokens);
    }

    /// Takes one token at `now_ms`, or says in how many milliseconds one will be there.
    ///
    /// # Errors
    /// The wait in milliseconds (at least 1; `u64::MAX` for a rate of 0) when the bucket is
    /// empty.
    pub fn take(&mut self, now_ms: u64) -> Result<(), u64> {
        self.refill(now_ms);
        // The same hair as the wait below, so a call made after the wait said is admitted.
        if self.tokens >= 1.0 - 1e-9 {
            self.tokens = (self.tokens - 1.0).max(0.0);
            return Ok(());
        }
        if self.rate <= 0.0 {
            return Err(u64::MAX);
        }
        // Less a hair: 0.998 tokens at 2 a second is 1 ms away, not 1.0000000000000009.
        let wait = ((1.0 - self.tokens) * 1000.0 / self.rate - 1e-9).ceil();
        // In range: tokens < 1 and rate > 0 make it positive; the cast saturates past u64.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Err((wait as u64).max(1))
    }

    fn refill(&mut self, now_ms: u64) {
        // A clock that went back refills nothing (and does not go back with it).
        let elapsed = now_ms.saturating_sub(self.at_ms);
        self.at_ms = self.at_ms.max(now_ms);
        #[allow(clippy::cast_precision_loss)] // elapsed milliseconds: far below 2^52
        let gained = elapsed as f64 * self.rate / 1000.0;
        self.tokens = (self.tokens + gained).min(self.burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_burst_then_the_rate() {
        let mut b = Bucket::new(2.0, 3, 0);
        assert_eq!((b.take(0), b.take(0), b.take(0)), (Ok(()), Ok(()), Ok(())));
        assert_eq!(b.take(0), Err(500), "2 a second: the next in 500 ms");
        assert_eq!(b.take(499), Err(1));
        assert_eq!(b.take(500), Ok(()));
        assert_eq!(b.take(10_000), Ok(()), "refilled");
    }

    #[test]
    fn a_bucket_taking_over_starts_from_what_was_left_and_refills_from_then() {
        let mut b = Bucket::starting_at(2.0, 4, 1.0, 1_000);
        assert_eq!(b.take(1_000), Ok(()));
        assert_eq!(b.take(1_000), Err(500), "one token was left");
        let mut c = Bucket::starting_at(2.0, 4, 0.0, 0);
        assert_eq!(
            (c.take(1_000), c.take(1_000)),
            (Ok(()), Ok(())),
            "refilled since 0"
        );
        assert_eq!(c.take(1_000), Err(500));
        assert_eq!(
            Bucket::starting_at(1.0, 2, 9.0, 0),
            Bucket::new(1.0, 2, 0),
            "at most full"
        );
        let mut full = Bucket::new(2.0, 4, 0);
        full.at_most(&Bucket::starting_at(2.0, 4, 0.0, 0), 500);
        assert_eq!(
            (full.take(500), full.take(500)),
            (Ok(()), Err(500)),
            "the lesser: 1 token"
        );
    }

    #[test]
    fn a_rate_of_zero_never_refills_and_a_clock_going_back_refills_nothing() {
        let mut b = Bucket::new(0.0, 1, 100);
        assert_eq!(b.take(100), Ok(()));
        assert_eq!(b.take(1_000_000), Err(u64::MAX));
        let mut c = Bucket::new(1.0, 1, 5_000);
        assert_eq!(c.take(5_000), Ok(()));
        assert_eq!(c.take(0), Err(1000));
    }

    proptest! {
        /// Over any window, a bucket lets through at most burst + rate × window calls.
        #[test]
        fn never_more_than_burst_plus_rate(rate in 0.5f64..50.0, burst in 1u32..20, steps in proptest::collection::vec(0u64..200, 1..300)) {
            let mut b = Bucket::new(rate, burst, 0);
            let mut now = 0;
            let mut passed = 0u32;
            for step in steps {
                now += step;
                if b.take(now).is_ok() {
                    passed += 1;
                }
            }
            #[allow(clippy::cast_precision_loss)]
            let allowed = f64::from(burst) + rate * now as f64 / 1000.0;
            prop_assert!(f64::from(passed) <= allowed + 1e-6, "{passed} > {allowed}");
        }

        /// A refused call's wait is enough: taking at now + wait succeeds.
        #[test]
        fn the_wait_said_is_enough(rate in 0.5f64..50.0, burst in 1u32..5, at in 0u64..10_000) {
            let mut b = Bucket::new(rate, burst, 0);
            for _ in 0..burst {
                prop_assert!(b.take(at).is_ok());
            }
            let wait = b.take(at).unwrap_err();
            prop_assert!(b.take(at + wait).is_ok());
        }
    }
}
