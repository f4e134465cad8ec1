//! The router's live vocabulary, for the speech recogniser (`router.vocabulary`).
//!
//! Whisper spells a name it has been told about far more often right ("GitHub", not "Gate
//! Hub"): its decoder takes a "previous text" prompt (`<|startofprev|>`), and names in that
//! text become likelier. [`Vocabulary`] gathers the names this router acts on — catalog
//! sites, application profiles, installed applications, open windows' applications, media
//! players and compositor words — and [`Vocabulary::prompt`] writes them as one short text
//! in the shape of commands ("Open YouTube, GitHub. Switch to Firefox, foot.").
//!
//! Whisper keeps only the last 223 prompt tokens, so the text is written least important
//! first and most important last: compositor words, players, installed applications,
//! profiles and open windows, then the sites. A prompt longer than [`MAX_PROMPT_CHARS`] is
//! cut at the front.

use crate::apps::AppEntry;
use crate::context::Context;
use crate::plan::KNOWN_PLAYERS;
use crate::profiles::Profiles;
use crate::sites::Catalog;

/// The longest prompt written, in characters (about 110 Whisper tokens). A longer prompt
/// costs decoding time (about 50 ms more for 900 characters on two cores, measured with
/// tiny.en) and helped no more on the spoken test set: a few likely names beat many.
pub const MAX_PROMPT_CHARS: usize = 450;

/// How many names of each list the prompt takes, in list order (open windows and the
/// catalog's first sites first): sites, apps, installed, agents, players, words.
const PROMPT_TAKES: [usize; 6] = [12, 8, 8, 6, 5, 3];

/// Words of the compositor and in-app commands that Whisper tends to split or mishear.
const COMMAND_WORDS: &[&str] = &["workspace", "screenshot", "fullscreen"];

/// Players as their makers write them.
fn player_name(player: &str) -> String {
    match player {
        "vlc" => "VLC".into(),
        "mpv" => "mpv".into(),
        "mpd" => "MPD".into(),
        "cmus" => "cmus".into(),
        other => capitalised(other),
    }
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The names one `router.vocabulary` answer holds, each list without repeats
/// (case-insensitive), in the order they were found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vocabulary {
    /// Catalog site names ("YouTube").
    pub sites: Vec<String>,
    /// Application profile names and the names of open windows' applications ("Firefox").
    pub apps: Vec<String>,
    /// Installed applications' `Name`s not already in `apps`.
    pub installed: Vec<String>,
    /// Media player names ("Spotify", "VLC").
    pub players: Vec<String>,
    /// Coding agents a terminal can start ("Claude", "Codex").
    pub agents: Vec<String>,
    /// Command words ("workspace", "screenshot").
    pub words: Vec<String>,
}

fn push_unique(list: &mut Vec<String>, seen: &mut Vec<String>, name: &str) {
    let name = name.trim();
    if name.is_empty() || name.len() > 60 {
        return;
    }
    let key = name.to_lowercase();
    if !seen.contains(&key) {
        seen.push(key);
        list.push(name.to_owned());
    }
}

impl Vocabulary {
    /// Gather the names: the catalog's sites, the profiles, the applications of the
    /// context's windows (by profile or installed entry), the installed applications, the
    /// known players and the command words.
    pub fn gather(
        catalog: &Catalog,
        profiles: &Profiles,
        installed: &[AppEntry],
        agents: &[&str],
        context: Option<&Context>,
    ) -> Vocabulary {
        let mut seen = Vec::new();
        let mut v = Vocabulary::default();
        for site in catalog.sites() {
            push_unique(&mut v.sites, &mut seen, &site.name);
        }
        // Open windows first: what is on screen is what is most likely named.
        if let Some(context) = context {
            for app_id in &context.app_ids {
                if let Some(profile) = profiles.for_app_id(app_id) {
                    push_unique(&mut v.apps, &mut seen, &profile.name);
                } else if let Some(app) = installed.iter().find(|a| a.has_app_id(app_id)) {
                    push_unique(&mut v.apps, &mut seen, &app.name);
                }
            }
        }
        // Profiles of installed applications before the rest; a player's profile (Spotify,
        // VLC) is said as a player.
        let installed_profile = |p: &crate::profiles::Profile| {
            installed.iter().any(|a| {
                p.has_app_id(&a.id) || a.wm_class.as_deref().is_some_and(|w| p.has_app_id(w))
            })
        };
        let player = |p: &crate::profiles::Profile| {
            p.kind == crate::profiles::Kind::App && KNOWN_PLAYERS.contains(&p.id.as_str())
        };
        let (first, rest): (Vec<_>, Vec<_>) = profiles
            .iter()
            .filter(|p| !player(p) && p.categories.is_empty())
            .partition(|p| installed_profile(p));
        for profile in first.into_iter().chain(rest) {
            push_unique(&mut v.apps, &mut seen, &profile.name);
        }
        for app in installed {
            push_unique(&mut v.installed, &mut seen, &app.name);
        }
        for player in KNOWN_PLAYERS {
            push_unique(&mut v.players, &mut seen, &player_name(player));
        }
        for agent in agents {
            push_unique(&mut v.agents, &mut seen, &capitalised(agent));
        }
        for word in COMMAND_WORDS {
            push_unique(&mut v.words, &mut seen, word);
        }
        v
    }

    /// Every name, most important first: sites, apps, installed, agents, players, words.
    pub fn terms(&self) -> Vec<&str> {
        self.sites
            .iter()
            .chain(&self.apps)
            .chain(&self.installed)
            .chain(&self.agents)
            .chain(&self.players)
            .chain(&self.words)
            .map(String::as_str)
            .collect()
    }

    /// The names as one prompt text, least important first, the first [`PROMPT_TAKES`] of
    /// each list, at most [`MAX_PROMPT_CHARS`] characters (cut at the front, at a sentence
    /// or comma): "Workspace, screenshot.
    /// Play on Spotify, VLC. Launch Calculator. Switch to Firefox, foot. Open YouTube,
    /// GitHub."
    pub fn prompt(&self) -> String {
        let mut sentences = Vec::new();
        let list = |names: &[String], take: usize| {
            names
                .iter()
                .take(take)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        };
        let [sites, apps, installed, agents, players, words] = PROMPT_TAKES;
        if !self.words.is_empty() {
            sentences.push(capitalised(&list(&self.words, words)));
        }
        if !self.players.is_empty() {
            sentences.push(format!("Play on {}", list(&self.players, players)));
        }
        if !self.agents.is_empty() {
            sentences.push(format!("Start {}", list(&self.agents, agents)));
        }
        if !self.installed.is_empty() {
            sentences.push(format!("Launch {}", list(&self.installed, installed)));
        }
        if !self.apps.is_empty() {
            sentences.push(format!("Switch to {}", list(&self.apps, apps)));
        }
        if !self.sites.is_empty() {
            sentences.push(format!("Open {}", list(&self.sites, sites)));
        }
        let mut text = sentences.join(". ");
        if !text.is_empty() {
            text.push('.');
        }
        if text.chars().count() > MAX_PROMPT_CHARS {
            let skip = text.chars().count() - MAX_PROMPT_CHARS;
            let cut = text.char_indices().nth(skip).map_or(0, |(i, _)| i);
            // Start at the next whole name.
            let start = text[cut..].find([',', '.']).map_or(cut, |i| cut + i + 1);
            text = text[start..].trim_start().to_owned();
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_ends_with_the_sites_and_starts_with_command_words() {
        let catalog = Catalog::builtin().unwrap();
        let profiles = Profiles::builtin();
        let v = Vocabulary::gather(&catalog, &profiles, &[], &["claude"], None);
        let prompt = v.prompt();
        assert!(prompt.starts_with("Workspace, screenshot"), "{prompt}");
        assert!(prompt.contains("Play on Spotify, VLC, mpv"), "{prompt}");
        assert!(
            prompt.contains("Switch to Firefox") && prompt.contains("Alacritty"),
            "{prompt}"
        );
        assert!(prompt.contains("GitHub"), "{prompt}");
        assert!(prompt.ends_with('.'), "{prompt}");
        let open = prompt.rfind("Open ").unwrap();
        assert!(prompt[open..].contains("YouTube"), "{prompt}");
        // Spotify is a profile and a player: said once, as a player.
        assert_eq!(v.terms().iter().filter(|t| **t == "Spotify").count(), 1);
        assert!(prompt.chars().count() <= MAX_PROMPT_CHARS);
    }

    #[test]
    fn open_windows_come_first_and_each_list_gives_a_few_names() {
        let catalog = Catalog::builtin().unwrap();
        let profiles = Profiles::builtin();
        let context = Context {
            compositor: Some("sway".into()),
            app_ids: vec!["foot".into(), "unknown.app".into()],
            focused_app_id: Some("foot".into()),
        };
        let installed: Vec<AppEntry> = (0..200)
            .map(|i| AppEntry::new(&format!("app{i}"), &format!("Application {i}"), None, &[]))
            .collect();
        let v = Vocabulary::gather(&catalog, &profiles, &installed, &[], Some(&context));
        assert_eq!(v.apps[0], "foot");
        let prompt = v.prompt();
        assert!(
            prompt.chars().count() <= MAX_PROMPT_CHARS,
            "{}",
            prompt.len()
        );
        // A few names of each list: the open window first, eight installed applications.
        assert!(prompt.contains("YouTube") && prompt.contains("Switch to foot"));
        assert!(prompt.contains("Application 7") && !prompt.contains("Application 8"));
        assert!(!prompt.starts_with(','), "{prompt}");
    }
}
