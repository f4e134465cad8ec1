//! The runner's log lines as data, for the clients that follow them
//! (`runner.subscribe {logs: true}`: the settings app's Logs page, `utter events --logs`).
//!
//! [`layer`] is a `tracing` layer the daemon installs beside its journal or stderr output; it
//! turns every event of level INFO, WARN or ERROR that passes the daemon's filter into a
//! [`LogLine`], keeps the last [`RECENT`] of them and sends each to the current followers
//! ([`follow`]). DEBUG and TRACE lines are left to the journal: sending a line to a client
//! must never itself log a line that is sent again.
//!
//! A follower that falls more than [`BACKLOG`] lines behind misses the oldest ones and is
//! told how many (`tokio::sync::broadcast`); nothing here waits on a client.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use utter_ipc::LogLine;

/// How many of the last lines a new follower gets first.
pub const RECENT: usize = 200;
/// How many lines a follower may fall behind before it misses some.
pub const BACKLOG: usize = 512;

struct Tap {
    sender: broadcast::Sender<LogLine>,
    recent: Mutex<VecDeque<LogLine>>,
}

fn tap() -> &'static Tap {
    static TAP: OnceLock<Tap> = OnceLock::new();
    TAP.get_or_init(|| Tap {
        sender: broadcast::channel(BACKLOG).0,
        recent: Mutex::new(VecDeque::with_capacity(RECENT)),
    })
}

/// The last lines kept (oldest first) and a receiver of every later one, taken together so
/// that no line is missed or repeated between the two.
pub fn follow() -> (Vec<LogLine>, broadcast::Receiver<LogLine>) {
    let tap = tap();
    let recent = tap.recent.lock().unwrap_or_else(|e| e.into_inner());
    (recent.iter().cloned().collect(), tap.sender.subscribe())
}

/// Keep `line` and send it to the followers.
fn publish(line: LogLine) {
    let tap = tap();
    let mut recent = tap.recent.lock().unwrap_or_else(|e| e.into_inner());
    if recent.len() == RECENT {
        recent.pop_front();
    }
    recent.push_back(line.clone());
    // No follower is not an error.
    let _ = tap.sender.send(line);
}

/// Now, in milliseconds since the Unix epoch (0 before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The layer that feeds [`follow`]; see the module docs.
pub fn layer() -> LogTap {
    LogTap
}

/// A `tracing_subscriber` layer that publishes INFO, WARN and ERROR events as [`LogLine`]s.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogTap;

impl<S: Subscriber> Layer<S> for LogTap {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > Level::INFO {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        publish(LogLine {
            time_ms: now_ms(),
            level: meta.level().as_str().to_owned(),
            target: meta.target().to_owned(),
            message: fields.message,
            fields: fields.others,
        });
    }
}

/// Collects an event's `message` and its other fields as bounded text: each value at most
/// [`LogLine::MAX_TEXT`] bytes, all of them with their names at most [`LogLine::MAX_LINE`]
/// (a field with no room left is left out).
#[derive(Default)]
struct Fields {
    message: String,
    others: BTreeMap<String, String>,
    /// Bytes taken so far (values and field names).
    size: usize,
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        let room = LogLine::MAX_LINE
            .saturating_sub(self.size + field.name().len())
            .min(LogLine::MAX_TEXT);
        if room < '…'.len_utf8() && field.name() != "message" {
            // No room left: the field is left out.
            return;
        }
        let value = bounded(value, room);
        self.size += value.len() + field.name().len();
        if field.name() == "message" {
            self.message = value;
        } else {
            self.others.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.put(field, text);
    }
}

/// `text` cut to at most `max` bytes on a character boundary (but never below the 3 bytes
/// of `…`), ending with `…` when it was cut.
fn bounded(mut text: String, max: usize) -> String {
    let max = max.max('…'.len_utf8());
    if text.len() > max {
        let mut end = max - '…'.len_utf8();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[test]
    fn info_and_above_are_published_with_their_fields_and_bounded() {
        let subscriber = tracing_subscriber::registry().with(layer());
        let (_, mut rx) = follow();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(plugin = "rules", epoch = 3, "plugin started");
            tracing::debug!("not sent");
            tracing::warn!(detail = %"y".repeat(10_000), "{}", "x".repeat(10_000));
        });
        let first = rx.try_recv().expect("the info line");
        assert_eq!(first.level, "INFO");
        assert_eq!(first.message, "plugin started");
        assert_eq!(first.fields["plugin"], "rules");
        assert_eq!(first.fields["epoch"], "3");
        assert!(
            first
                .display()
                .ends_with("plugin started epoch=3 plugin=rules")
        );
        let second = rx
            .try_recv()
            .expect("the warn line; the debug one is not sent");
        assert_eq!(second.level, "WARN");
        assert!(second.message.len() <= LogLine::MAX_TEXT && second.message.ends_with('…'));
        assert!(second.fields["detail"].len() <= LogLine::MAX_TEXT);
        // Three more long fields: the line as a whole stays within MAX_LINE.
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer()), || {
            let long = "z".repeat(10_000);
            tracing::warn!(a = %long, b = %long, c = %long, "{long}");
        });
        let third = rx.try_recv().expect("the line of many fields");
        let size: usize = third.message.len()
            + third
                .fields
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>();
        assert!(size <= LogLine::MAX_LINE, "{size}");
        assert!(third.fields["a"].ends_with('…'), "cut to the room left");
        assert_eq!(
            third.fields.len(),
            1,
            "the fields past the bound are left out"
        );
        assert!(rx.try_recv().is_err(), "nothing else");
        let (recent, _) = follow();
        assert!(recent.len() >= 2 && recent.len() <= RECENT);
        assert_eq!(recent.last(), Some(&third));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let cut = bounded("é".repeat(LogLine::MAX_TEXT), LogLine::MAX_TEXT);
        assert!(cut.len() <= LogLine::MAX_TEXT && cut.ends_with('…'));
        assert_eq!(bounded("short".into(), LogLine::MAX_TEXT), "short");
        assert_eq!(bounded("short".into(), 0), "…");
    }
}
