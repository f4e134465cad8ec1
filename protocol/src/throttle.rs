//! A bound on log volume per source: at most a number of lines per window, then silence,
//! then one line that says how many were left out.
//!
//! A peer can make a log line happen at will (a malformed frame, a refused connection, a
//! plugin's stderr); without a bound it decides how fast the journal fills. Each source
//! that a peer drives holds one [`Throttle`] and asks it before logging:
//!
//! ```
//! use std::time::Duration;
//! use utter_protocol::throttle::Throttle;
//!
//! let throttle = Throttle::new(2, Duration::from_secs(10));
//! let mut logged = 0;
//! for _ in 0..5 {
//!     if let Some(suppressed) = throttle.allow() {
//!         // tracing::warn!(suppressed, "malformed frame");
//!         assert_eq!(suppressed, 0);
//!         logged += 1;
//!     }
//! }
//! assert_eq!(logged, 2);
//! assert_eq!(throttle.suppressed(), 3);
//! ```
//!
//! When the next window begins, the first line allowed carries the count of the lines
//! left out before it (`suppressed = 3` above), so the log says that it was cut and by
//! how much.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines allowed per window by [`Throttle::default`].
pub const DEFAULT_LINES: u32 = 20;
/// The window of [`Throttle::default`].
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct State {
    window_start: Option<Instant>,
    used: u32,
    suppressed: u64,
}

/// At most `lines` log lines per `window` for one source (see the module docs).
#[derive(Debug)]
pub struct Throttle {
    lines: u32,
    window: Duration,
    state: Mutex<State>,
}

impl Default for Throttle {
    /// [`DEFAULT_LINES`] per [`DEFAULT_WINDOW`].
    fn default() -> Self {
        Throttle::new(DEFAULT_LINES, DEFAULT_WINDOW)
    }
}

impl Throttle {
    /// At most `lines` (at least 1) per `window`.
    pub const fn new(lines: u32, window: Duration) -> Throttle {
        Throttle {
            lines: if lines == 0 { 1 } else { lines },
            window,
            state: Mutex::new(State {
                window_start: None,
                used: 0,
                suppressed: 0,
            }),
        }
    }

    /// Whether a line may be logged now: `Some(n)` where `n` lines were left out since the
    /// last one logged (log it with the line), `None` when this one is left out.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(Instant::now())
    }

    fn allow_at(&self, now: Instant) -> Option<u64> {
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        let expired = state
            .window_start
            .is_none_or(|start| now.saturating_duration_since(start) >= self.window);
        if expired {
            state.window_start = Some(now);
            state.used = 0;
        }
        if state.used < self.lines {
            state.used += 1;
            Some(std::mem::take(&mut state.suppressed))
        } else {
            state.suppressed += 1;
            None
        }
    }

    /// Lines left out since the last one allowed.
    pub fn suppressed(&self) -> u64 {
        match self.state.lock() {
            Ok(state) => state.suppressed,
            Err(poisoned) => poisoned.into_inner().suppressed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_cut_to_the_bound_and_the_next_window_says_how_much() {
        let t = Throttle::new(3, Duration::from_secs(10));
        let start = Instant::now();
        let allowed: Vec<_> = (0..1000).filter_map(|_| t.allow_at(start)).collect();
        assert_eq!(allowed, vec![0, 0, 0]);
        assert_eq!(t.suppressed(), 997);
        // Still inside the window: nothing more.
        assert_eq!(t.allow_at(start + Duration::from_secs(9)), None);
        // The next window: the first line carries the count, the next ones do not.
        let later = start + Duration::from_secs(10);
        assert_eq!(t.allow_at(later), Some(998));
        assert_eq!(t.allow_at(later), Some(0));
        assert_eq!(t.suppressed(), 0);
    }

    #[test]
    fn zero_lines_still_lets_one_through() {
        let t = Throttle::new(0, Duration::from_secs(1));
        assert_eq!(t.allow(), Some(0));
        assert_eq!(t.allow(), None);
    }
}
