//! The dictation mode: "start dictation" turns it on, and while it is on, what the voice
//! loop hears is planned as text to type (the router's `dictation`), until "stop
//! dictation". The runner keeps the phrases it typed, so that the router can write the next
//! one after them (a capital letter after a full stop, a space between) and "scratch that"
//! can take the last one back from what comes before.
//!
//! Only the voice loop dictates: a command given as text (`utter say`) is planned as usual,
//! and can say "stop dictation".

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many typed phrases are kept for the router's `after`.
const KEPT: usize = 20;

/// The most characters of `after` sent to the router.
pub const AFTER_CHARS: usize = 200;

/// The mode and what it typed.
#[derive(Debug, Default)]
pub struct Dictation {
    on: AtomicBool,
    typed: Mutex<Vec<String>>,
    /// The journal id of the first command of this dictation.
    since: std::sync::atomic::AtomicU64,
}

impl Dictation {
    /// Off, nothing typed.
    pub fn new() -> Dictation {
        Dictation::default()
    }

    /// Whether dictation is on.
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }

    /// Turn it on or off; whether that changed it. Turning it on starts a new text.
    pub fn set(&self, on: bool) -> bool {
        let was = self.on.swap(on, Ordering::SeqCst);
        if on && !was {
            self.typed.lock().expect("dictation lock").clear();
        }
        was != on
    }

    /// Where this dictation's commands begin in the journal (set when it is turned on).
    pub fn since(&self) -> u64 {
        self.since.load(Ordering::SeqCst)
    }

    /// Note the journal id the dictation begins at.
    pub fn begin_at(&self, id: u64) {
        self.since.store(id, Ordering::SeqCst);
    }

    /// The text typed last, at most [`AFTER_CHARS`] characters, for the router's `after`.
    pub fn after(&self) -> String {
        let typed = self.typed.lock().expect("dictation lock");
        let all: String = typed.concat();
        let skip = all.chars().count().saturating_sub(AFTER_CHARS);
        all.chars().skip(skip).collect()
    }

    /// One phrase typed (a line break is `"\n"`).
    pub fn push(&self, text: &str) {
        let mut typed = self.typed.lock().expect("dictation lock");
        if typed.len() == KEPT {
            typed.remove(0);
        }
        typed.push(text.to_owned());
    }

    /// The last phrase was taken back ("scratch that").
    pub fn pop(&self) {
        self.typed.lock().expect("dictation lock").pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_are_kept_in_order_and_taken_back() {
        let d = Dictation::new();
        assert!(!d.is_on());
        assert!(d.set(true));
        assert!(!d.set(true));
        d.push("Hello,");
        d.push(" how are you?");
        assert_eq!(d.after(), "Hello, how are you?");
        d.pop();
        assert_eq!(d.after(), "Hello,");
        d.push(&"x".repeat(AFTER_CHARS + 5));
        assert_eq!(d.after().chars().count(), AFTER_CHARS);
        // Back on after off: a new text.
        assert!(d.set(false));
        assert!(d.set(true));
        assert_eq!(d.after(), "");
    }
}
