//! The input rate limit: one token bucket, shared by every acting path, that bounds how many
//! key and pointer events the runner lets plugins send, so a runaway plan ("press enter"
//! a thousand times, a router in a loop) cannot flood the desktop.
//!
//! Each input step costs its events: `key` its `repeat` (default 1), `type_keys` its
//! characters, `scroll` its `amount` (default 5), `click_point` its `count` (default 1),
//! `pointer_move` and the raw `input` op 1. Other ops cost nothing (`type_text` through
//! accessibility sends no events; its keystroke fallback is a `type_keys` step and pays
//! there). The bucket holds [`BURST`] events and refills at [`PER_SECOND`]; a step that
//! costs more than is left is refused whole (`-32003`), never cut short, and the message
//! says how long to wait. The gate charges a step when it admits it, as the last gate; a
//! plan with a refused step runs none, and the steps it had admitted are refunded
//! ([`InputRate::refund`]). A step gated again after its approval is not charged twice.

use serde_json::Value;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use utter_protocol::{ErrorCode, ErrorObject};

/// Events the bucket holds: one `type_keys` of its longest text (2000 characters) fits.
pub const BURST: f64 = 2500.0;
/// Events it regains each second.
pub const PER_SECOND: f64 = 500.0;

/// The events a step sends, or `None` for an op that sends none.
pub fn cost(op: &str, args: &Value) -> Option<f64> {
    let n = |k: &str, default: u64| args.get(k).and_then(Value::as_u64).unwrap_or(default);
    let events = match op {
        "key" => n("repeat", 1),
        "type_keys" => args
            .get("text")
            .and_then(Value::as_str)
            .map(|t| t.chars().count() as u64)
            .unwrap_or(1),
        "scroll" => n("amount", 5),
        "click_point" => n("count", 1),
        "pointer_move" | "input" => 1,
        _ => return None,
    };
    Some(events.max(1) as f64)
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The shared bucket.
#[derive(Debug)]
pub struct InputRate {
    bucket: Mutex<Bucket>,
}

impl Default for InputRate {
    fn default() -> Self {
        InputRate {
            bucket: Mutex::new(Bucket {
                tokens: BURST,
                at: Instant::now(),
            }),
        }
    }
}

impl InputRate {
    /// A full bucket.
    pub fn new() -> InputRate {
        InputRate::default()
    }

    /// Take the cost of `op` with `args` now.
    ///
    /// # Errors
    /// `-32003` (denied) when the bucket holds less than the step costs; nothing is taken.
    pub fn take(&self, op: &str, args: &Value) -> Result<(), ErrorObject> {
        self.take_at(op, args, Instant::now())
    }

    /// Give back what [`InputRate::take`] took for a step that then did not run (its plan
    /// was refused), up to a full bucket.
    pub fn refund(&self, op: &str, args: &Value) {
        if let Some(cost) = cost(op, args) {
            let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
            b.tokens = (b.tokens + cost).min(BURST);
        }
    }

    fn take_at(&self, op: &str, args: &Value, now: Instant) -> Result<(), ErrorObject> {
        let Some(cost) = cost(op, args) else {
            return Ok(());
        };
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * PER_SECOND).min(BURST);
        b.at = now;
        if cost > BURST {
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!("{op} would send {cost} input events; one step may send at most {BURST}"),
            ));
        }
        if cost > b.tokens {
            let wait = Duration::from_secs_f64((cost - b.tokens) / PER_SECOND);
            return Err(ErrorObject::new(
                ErrorCode::Denied,
                format!(
                    "input rate limit: {op} would send {cost} key or pointer events, and only {} \
                     are allowed right now (at most {BURST} at once, {PER_SECOND} a second); \
                     try again in {:.1} s",
                    b.tokens.floor(),
                    wait.as_secs_f64().max(0.1)
                ),
            ));
        }
        b.tokens -= cost;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn costs_count_events() {
        assert_eq!(cost("key", &json!({"chord": "Return"})), Some(1.0));
        assert_eq!(
            cost("key", &json!({"chord": "Return", "repeat": 7})),
            Some(7.0)
        );
        assert_eq!(cost("type_keys", &json!({"text": "héllo"})), Some(5.0));
        assert_eq!(cost("scroll", &json!({"direction": "down"})), Some(5.0));
        assert_eq!(
            cost("click_point", &json!({"x": 1, "y": 2, "count": 2})),
            Some(2.0)
        );
        assert_eq!(cost("type_text", &json!({"text": "x"})), None);
        assert_eq!(cost("ensure_url", &json!({})), None);
    }

    #[test]
    fn a_flood_is_refused_and_the_bucket_refills() {
        let rate = InputRate::new();
        let t0 = Instant::now();
        let key = json!({"chord": "Return", "repeat": 50});
        for _ in 0..50 {
            rate.take_at("key", &key, t0).unwrap();
        }
        let e = rate.take_at("key", &key, t0).unwrap_err();
        assert_eq!(e.code, -32003);
        assert!(e.message.contains("input rate limit"), "{}", e.message);
        assert!(e.message.contains("try again in 0.1 s"), "{}", e.message);
        // Other ops are never limited.
        rate.take_at("ensure_url", &json!({}), t0).unwrap();
        // A tenth of a second later, 50 events are back.
        rate.take_at("key", &key, t0 + Duration::from_millis(100))
            .unwrap();
        assert!(
            rate.take_at("key", &key, t0 + Duration::from_millis(100))
                .is_err()
        );
        // A refund gives back what a step that did not run took.
        rate.refund("key", &key);
        rate.take_at("key", &key, t0 + Duration::from_millis(100))
            .unwrap();
        // A step larger than the burst is refused even with a full bucket.
        let huge = json!({"text": "x".repeat(3000)});
        let e = rate
            .take_at("type_keys", &huge, t0 + Duration::from_secs(60))
            .unwrap_err();
        assert!(e.message.contains("at most"), "{}", e.message);
    }
}
