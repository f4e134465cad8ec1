//! Which windows belong to an app, and which of them was focused last.
//!
//! Matching looks at the window's `app_id` only (sway's app_id or X11 class, niri's
//! app_id), never at its title: titles are untrusted (PROTOCOL.md §9). From strongest to
//! weakest: the exact app_id; the same ignoring ASCII case; a desktop-id form, where a
//! trailing `.desktop` is dropped and a reverse-DNS id matches its last component
//! (`org.mozilla.firefox` ↔ `firefox`, `org.gnome.TextEditor.desktop` ↔ `texteditor`).

use crate::model::{Snapshot, Window};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// How well a name matches an app_id; lower is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Match {
    /// Byte for byte.
    Exact,
    /// Equal ignoring ASCII case.
    CaseInsensitive,
    /// Equal as desktop ids (`.desktop` stripped, last reverse-DNS component).
    DesktopId,
}

/// The desktop-id forms of a name: the lowercase name without a trailing `.desktop`, and its
/// last reverse-DNS component. A form that would be empty or only dots is `None`, so that
/// `.desktop` or `anything.` never match each other by an empty key.
fn desktop_forms(name: &str) -> (Option<String>, Option<String>) {
    let lower = name.to_ascii_lowercase();
    let base = lower.strip_suffix(".desktop").unwrap_or(&lower);
    let meaningful = |s: &str| !s.is_empty() && !s.bytes().all(|b| b == b'.');
    let last = base.rsplit('.').next().filter(|l| meaningful(l));
    (
        meaningful(base).then(|| base.to_owned()),
        last.map(str::to_owned),
    )
}

/// How `query` (a name the caller gave) matches `app_id`, if at all.
pub fn matches(query: &str, app_id: &str) -> Option<Match> {
    if query.is_empty() || app_id.is_empty() {
        return None;
    }
    if query == app_id {
        return Some(Match::Exact);
    }
    if query.eq_ignore_ascii_case(app_id) {
        return Some(Match::CaseInsensitive);
    }
    let (q_base, q_last) = desktop_forms(query);
    let (a_base, a_last) = desktop_forms(app_id);
    let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
    if same(&q_base, &a_base) || same(&q_last, &a_base) || same(&q_base, &a_last) {
        return Some(Match::DesktopId);
    }
    // Both reverse-DNS with the same last part (org.gnome.Foo vs com.example.Foo) is too
    // loose to count.
    None
}

/// The windows of `snapshot` matching any of `names`, best match first; within one match
/// strength, the most recently focused first (by `order`, what this plugin saw, then by
/// the compositor's [`Window::focused_at`], what happened before it started), then in the
/// snapshot's order.
pub fn windows_of<'a>(snapshot: &'a Snapshot, names: &[&str], order: &[u64]) -> Vec<&'a Window> {
    let mut found: Vec<(Match, usize, usize, &Window)> = snapshot
        .windows
        .iter()
        .enumerate()
        .filter_map(|(position, w)| {
            let app_id = w.app_id.as_deref()?;
            let best = names.iter().filter_map(|n| matches(n, app_id)).min()?;
            let recency = order
                .iter()
                .position(|id| *id == w.id)
                .unwrap_or(usize::MAX);
            Some((best, recency, position, w))
        })
        .collect();
    // Focused since this plugin started (its own order) before focused earlier (the
    // compositor's focus timestamp, latest first), before never seen focused.
    found.sort_by(|a, b| {
        (a.0, a.1)
            .cmp(&(b.0, b.1))
            .then_with(|| {
                let at = |w: &Window| w.focused_at.unwrap_or(f64::NEG_INFINITY);
                at(b.3).total_cmp(&at(a.3))
            })
            .then(a.2.cmp(&b.2))
    });
    found.into_iter().map(|(_, _, _, w)| w).collect()
}

/// The order in which windows had focus, most recent first, fed from the snapshot stream.
#[derive(Debug, Clone, Default)]
pub struct FocusOrder {
    ids: Arc<Mutex<VecDeque<u64>>>,
}

/// How many window ids the focus order remembers.
const REMEMBERED: usize = 256;

impl FocusOrder {
    /// Record that `id` got the focus.
    pub fn focused(&self, id: u64) {
        let mut ids = self.ids.lock().expect("focus order lock");
        if ids.front() == Some(&id) {
            return;
        }
        ids.retain(|i| *i != id);
        ids.push_front(id);
        ids.truncate(REMEMBERED);
    }

    /// Forget windows that are gone.
    pub fn retain(&self, alive: impl Fn(u64) -> bool) {
        self.ids
            .lock()
            .expect("focus order lock")
            .retain(|i| alive(*i));
    }

    /// The ids, most recently focused first.
    pub fn ids(&self) -> Vec<u64> {
        self.ids
            .lock()
            .expect("focus order lock")
            .iter()
            .copied()
            .collect()
    }

    /// Follow `state` until it closes: each snapshot's focused window moves to the front.
    pub fn track(&self, mut state: watch::Receiver<Snapshot>) -> tokio::task::JoinHandle<()> {
        let order = self.clone();
        tokio::spawn(async move {
            loop {
                {
                    let snapshot = state.borrow_and_update();
                    if let Some(focused) = &snapshot.focused {
                        order.focused(focused.id);
                    }
                    order.retain(|id| snapshot.window(id).is_some());
                }
                if state.changed().await.is_err() {
                    break;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(id: u64, app_id: &str) -> Window {
        Window {
            id,
            app_id: Some(app_id.into()),
            ..Default::default()
        }
    }

    #[test]
    fn names_match_in_three_strengths() {
        assert_eq!(matches("foot", "foot"), Some(Match::Exact));
        assert_eq!(matches("Foot", "foot"), Some(Match::CaseInsensitive));
        assert_eq!(
            matches("org.mozilla.firefox", "firefox"),
            Some(Match::DesktopId)
        );
        assert_eq!(
            matches("firefox", "org.mozilla.firefox"),
            Some(Match::DesktopId)
        );
        assert_eq!(
            matches("firefox.desktop", "firefox"),
            Some(Match::DesktopId)
        );
        assert_eq!(
            matches("org.gnome.TextEditor.desktop", "org.gnome.TextEditor"),
            Some(Match::DesktopId)
        );
        assert_eq!(matches("fire", "firefox"), None);
        assert_eq!(matches("org.gnome.Foo", "com.example.Foo"), None);
        assert_eq!(matches("", "foot"), None);
    }

    #[test]
    fn no_desktop_form_is_empty_or_only_dots() {
        for query in ["anything.", "x.", "org.mozilla.", "a.b.", ".", ".."] {
            assert_eq!(matches(query, ".desktop"), None, "{query}");
            assert_eq!(matches(query, "..desktop"), None, "{query}");
            assert_eq!(matches(query, "..."), None, "{query}");
        }
        assert_eq!(matches("firefox.", "firefox"), None);
        assert_eq!(matches("org.mozilla.", "firefox"), None);
        assert_eq!(matches(".desktop", ".desktop"), Some(Match::Exact));
        assert_eq!(
            matches(".DESKTOP", ".desktop"),
            Some(Match::CaseInsensitive)
        );
    }

    #[test]
    fn an_exact_match_comes_before_fuzzy_ones_whatever_the_focus_order() {
        let snapshot = Snapshot {
            windows: vec![
                window(1, "Firefox"),
                window(2, "org.mozilla.firefox"),
                window(3, "firefox"),
            ],
            ..Default::default()
        };
        let ids: Vec<u64> = windows_of(&snapshot, &["firefox"], &[2, 1])
            .iter()
            .map(|w| w.id)
            .collect();
        assert_eq!(ids, vec![3, 1, 2]);
    }

    #[test]
    fn the_best_and_most_recent_window_comes_first() {
        let snapshot = Snapshot {
            windows: vec![
                window(1, "org.mozilla.firefox"),
                window(2, "firefox"),
                window(3, "firefox"),
                window(4, "foot"),
            ],
            ..Default::default()
        };
        let ids = |order: &[u64]| -> Vec<u64> {
            windows_of(&snapshot, &["firefox"], order)
                .iter()
                .map(|w| w.id)
                .collect()
        };
        assert_eq!(ids(&[]), vec![2, 3, 1]);
        assert_eq!(ids(&[3, 2]), vec![3, 2, 1]);
        assert_eq!(ids(&[1, 3]), vec![3, 2, 1]);
    }

    #[test]
    fn focus_order_moves_to_front_and_forgets() {
        let order = FocusOrder::default();
        order.focused(1);
        order.focused(2);
        order.focused(1);
        assert_eq!(order.ids(), vec![1, 2]);
        order.retain(|id| id != 1);
        assert_eq!(order.ids(), vec![2]);
    }
}
