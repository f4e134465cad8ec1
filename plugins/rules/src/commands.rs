//! The command words that belong to no one application (`data/commands.toml`): synonyms of
//! shortcut names, the common chords (copy, paste, …), the command-line coding agents and
//! the default search engine.

use crate::sites::check_search_template;
use crate::text::{compact, line_of, normalize};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use toml::Spanned;

/// The built-in file.
pub const BUILTIN_TOML: &str = include_str!("../../../data/commands.toml");

/// A command-line coding agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its table name (`claude`).
    pub name: String,
    /// The argv that starts it.
    pub command: Vec<String>,
    /// The argv that continues its most recent session (`claude --continue`), if it has one.
    pub resume: Option<Vec<String>>,
    /// Compacted spoken names: the name and the aliases.
    spoken: Vec<String>,
    /// The name and the aliases as written in the table ("claude", "claude code").
    pub names: Vec<String>,
}

impl Agent {
    /// Whether `spoken` (normalised words) names this agent.
    pub fn is_named(&self, spoken: &str) -> bool {
        let key = compact(spoken);
        !key.is_empty() && self.spoken.contains(&key)
    }
}

/// The table, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandWords {
    /// The default search template.
    pub search_url: String,
    /// Shortcut name → chord, where no profile says otherwise.
    pub common: BTreeMap<String, String>,
    /// Spoken phrase → the shortcut name it stands for.
    synonyms: HashMap<String, String>,
    /// The agents.
    pub agents: Vec<Agent>,
    /// Programs whose name opens a shell command said without "run" while a terminal is
    /// focused ("git pull", "cargo test"), lowercase, each with the words that may follow
    /// it first: its subcommands (`status`, `pull`), `*` for any argument, none for the
    /// program alone.
    pub shell_programs: BTreeMap<String, Vec<String>>,
    /// Kinds of application as people say them ("the file manager", "my email client") →
    /// what an application of that kind is.
    pub kinds: HashMap<String, AppKind>,
    /// Spoken shell phrases → the command each runs ("go up one directory" → `cd ..`),
    /// keyed by the normalised phrase; a key with ` {x}` takes what was said there (one
    /// name), put where the command has `{x}` ("make a directory called {x}" → `mkdir {x}`,
    /// "install {x} with pip" → `pip install {x}`).
    pub shell_phrases: HashMap<String, String>,
    /// What people ask a terminal for in words ("how much disk space do I have left"):
    /// normalised topic ("disk space") → the command it runs (`df -h`). Matched by
    /// [`CommandWords::shell_intent`] once the words of [`CommandWords::shell_asking`] are
    /// taken out.
    pub shell_intents: HashMap<String, String>,
    /// The words around a topic that only ask ("how much", "show me", "do i have", "left"),
    /// normalised, longest first.
    pub shell_asking: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    search: SearchFile,
    #[serde(default)]
    common: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    synonyms: BTreeMap<String, Vec<Spanned<String>>>,
    #[serde(default)]
    agents: BTreeMap<String, AgentFile>,
    #[serde(default)]
    shell: ShellFile,
    #[serde(default)]
    kinds: BTreeMap<String, Spanned<KindFile>>,
}

/// A kind: a list of `Categories`, or `{categories?, apps?}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum KindFile {
    Categories(Vec<String>),
    Full {
        #[serde(default)]
        categories: Vec<String>,
        #[serde(default)]
        apps: Vec<String>,
        mime: Option<String>,
    },
}

/// A kind of application ([`CommandWords::kinds`]): an installed application is of it when
/// its desktop entry has every one of `categories`, or its desktop id is one of `apps`
/// (kinds that have no category of their own: notes, password managers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppKind {
    /// Desktop entry `Categories`, all wanted; may be empty.
    pub categories: Vec<String>,
    /// Desktop ids (without `.desktop`) of applications of this kind, compared up to ASCII
    /// case.
    pub apps: Vec<String>,
    /// The MIME type whose default application (`mimeapps.list`) is the person's own of
    /// this kind, where several are installed (`x-scheme-handler/https` for a browser).
    pub mime: Option<String>,
}

impl AppKind {
    /// Whether the installed application `app` is of this kind.
    pub fn has(&self, app: &crate::apps::AppEntry) -> bool {
        app.is_of(&self.categories) || self.apps.iter().any(|id| id.eq_ignore_ascii_case(&app.id))
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ShellFile {
    #[serde(default)]
    programs: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    phrases: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    intents: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    asking: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchFile {
    url: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AgentFile {
    command: Spanned<Vec<String>>,
    #[serde(default)]
    resume: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    aliases: Vec<String>,
}

impl CommandWords {
    /// The built-in table.
    ///
    /// # Errors
    /// A problem of the shipped file (a test loads it), with its line.
    pub fn builtin() -> Result<CommandWords, String> {
        CommandWords::parse(BUILTIN_TOML, "data/commands.toml (built in)")
    }

    /// Parse a table; `source` names it in errors.
    ///
    /// # Errors
    /// `source, line N: problem`.
    pub fn parse(text: &str, source: &str) -> Result<CommandWords, String> {
        let at =
            |offset: usize, m: String| format!("{source}, line {}: {m}", line_of(text, offset));
        let file: File = toml::from_str(text).map_err(|e| {
            at(
                e.span().map_or(0, |s| s.start),
                e.message().trim().to_owned(),
            )
        })?;
        let search_url = file.search.url.get_ref().trim().to_owned();
        if let Some(problem) = check_search_template(&search_url) {
            return Err(at(file.search.url.span().start, problem));
        }
        let mut common = BTreeMap::new();
        for (name, chord) in &file.common {
            utter_keys::parse_chord(chord.get_ref())
                .map_err(|e| at(chord.span().start, format!("{name:?}: {e}")))?;
            common.insert(normalize(name), chord.get_ref().trim().to_owned());
        }
        let mut synonyms = HashMap::new();
        for (name, phrases) in &file.synonyms {
            let name = normalize(name);
            for phrase in phrases {
                let key = normalize(phrase.get_ref());
                if key.is_empty() || key == name {
                    return Err(at(
                        phrase.span().start,
                        format!("synonym {:?} of {name:?} adds nothing", phrase.get_ref()),
                    ));
                }
                if let Some(other) = synonyms.insert(key.clone(), name.clone())
                    && other != name
                {
                    return Err(at(
                        phrase.span().start,
                        format!("{key:?} is a synonym of both {other:?} and {name:?}"),
                    ));
                }
            }
        }
        let mut agents = Vec::new();
        for (name, agent) in file.agents {
            let argv_ok = |argv: &[String]| {
                !argv.is_empty()
                    && !argv
                        .iter()
                        .any(|a| a.is_empty() || a.chars().any(char::is_control))
            };
            let command = agent.command.get_ref().clone();
            if !argv_ok(&command) {
                return Err(at(
                    agent.command.span().start,
                    format!("agent {name:?}: command must list a program and its arguments"),
                ));
            }
            if let Some(resume) = &agent.resume
                && !argv_ok(resume.get_ref())
            {
                return Err(at(
                    resume.span().start,
                    format!("agent {name:?}: resume must list a program and its arguments"),
                ));
            }
            let resume = agent.resume.map(|r| r.into_inner());
            let mut spoken = vec![compact(&normalize(&name))];
            spoken.extend(agent.aliases.iter().map(|a| compact(&normalize(a))));
            spoken.retain(|s| !s.is_empty());
            let names = std::iter::once(name.clone())
                .chain(agent.aliases.iter().cloned())
                .collect();
            agents.push(Agent {
                name,
                command,
                resume,
                spoken,
                names,
            });
        }
        let mut shell_programs = BTreeMap::new();
        for (program, then) in &file.shell.programs {
            let one_word = |w: &str| {
                !w.is_empty()
                    && !w.contains(char::is_whitespace)
                    && !w.chars().any(char::is_control)
            };
            if !one_word(program) || !then.get_ref().iter().all(|w| one_word(w)) {
                return Err(at(
                    then.span().start,
                    format!(
                        "shell program {program:?}: the program and each word after it are one word"
                    ),
                ));
            }
            shell_programs.insert(program.to_lowercase(), then.get_ref().clone());
        }
        let mut shell_phrases = HashMap::new();
        for (phrase, command) in &file.shell.phrases {
            // {x} is a slot, kept as it is written, with the words around it normalised.
            let key = match phrase.trim().split_once("{x}") {
                Some((head, tail)) => format!("{} {{x}} {}", normalize(head), normalize(tail))
                    .trim()
                    .to_owned(),
                None => normalize(phrase),
            };
            let run = command.get_ref().trim();
            if key.is_empty() || run.is_empty() || run.chars().any(char::is_control) {
                return Err(at(
                    command.span().start,
                    format!("shell phrase {phrase:?}: needs words and a one-line command"),
                ));
            }
            shell_phrases.insert(key, run.to_owned());
        }
        let mut shell_intents = HashMap::new();
        for (run, topics) in &file.shell.intents {
            let run = run.trim();
            if run.is_empty() || run.chars().any(char::is_control) || topics.get_ref().is_empty() {
                return Err(at(
                    topics.span().start,
                    format!("shell intent {run:?}: needs a one-line command and its topics"),
                ));
            }
            for topic in topics.get_ref() {
                let key = normalize(topic);
                if key.is_empty() {
                    return Err(at(
                        topics.span().start,
                        format!("shell intent {run:?}: an empty topic"),
                    ));
                }
                shell_intents.insert(key, run.to_owned());
            }
        }
        let mut shell_asking: Vec<String> = file
            .shell
            .asking
            .iter()
            .map(|w| normalize(w))
            .filter(|w| !w.is_empty())
            .collect();
        shell_asking.sort_by_key(|w| std::cmp::Reverse(w.split(' ').count()));
        let mut kinds = HashMap::new();
        for (kind, value) in &file.kinds {
            let (categories, apps, mime) = match value.get_ref() {
                KindFile::Categories(c) => (c.clone(), Vec::new(), None),
                KindFile::Full {
                    categories,
                    apps,
                    mime,
                } => (categories.clone(), apps.clone(), mime.clone()),
            };
            let word = |c: &String, dot: bool| {
                !c.is_empty()
                    && c.chars().all(|ch| {
                        ch.is_ascii_alphanumeric()
                            || ch == '-'
                            || ch == '_' && dot
                            || ch == '.' && dot
                    })
            };
            let mime_ok = mime.as_deref().is_none_or(|m| {
                m.split_once('/')
                    .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
                    && !m.contains(char::is_whitespace)
            });
            if categories.is_empty() && apps.is_empty()
                || !mime_ok
                || !categories.iter().all(|c| word(c, false))
                || !apps.iter().all(|a| word(a, true))
            {
                return Err(at(
                    value.span().start,
                    format!(
                        "kind {kind:?}: list one or more desktop entry Categories, or {{ categories = [..], apps = [desktop ids], mime = \"type/subtype\" }}"
                    ),
                ));
            }
            kinds.insert(
                normalize(kind),
                AppKind {
                    categories,
                    apps,
                    mime,
                },
            );
        }
        Ok(CommandWords {
            kinds,
            search_url,
            common,
            synonyms,
            agents,
            shell_programs,
            shell_phrases,
            shell_intents,
            shell_asking,
        })
    }

    /// The command of the topic `phrase` (normalised words) asks about: the longest run of
    /// its words that is a topic with only asking words around it ("what version of python
    /// do i have" → `python3 --version`, though "of" is an asking word), else what is left
    /// once the asking words are taken out wherever they stand ("how much disk space do i
    /// have left" → `df -h`). Every other word must be the topic's, so "delete the disk
    /// space" is none.
    pub fn shell_intent(&self, phrase: &str) -> Option<&str> {
        let words: Vec<&str> = phrase.split(' ').filter(|w| !w.is_empty()).collect();
        // The words left once every asking phrase is taken out, wherever it stands.
        let unasked = |part: &[&str]| -> Vec<String> {
            let mut rest: Vec<&str> = part.to_vec();
            for asking in &self.shell_asking {
                let asked: Vec<&str> = asking.split(' ').collect();
                while let Some(at) = rest
                    .windows(asked.len())
                    .position(|w| w == asked.as_slice())
                {
                    rest.drain(at..at + asked.len());
                }
            }
            rest.into_iter().map(str::to_owned).collect()
        };
        // The longest run of words that is a topic, with only asking words before and after
        // it: a topic may hold an asking word itself ("version of python" holds "of").
        let n = words.len();
        let run = (1..=n).rev().find_map(|len| {
            (0..=n - len).find_map(|start| {
                let run = self
                    .shell_intents
                    .get(&words[start..start + len].join(" "))?;
                (unasked(&words[..start]).is_empty() && unasked(&words[start + len..]).is_empty())
                    .then_some(run.as_str())
            })
        });
        // Else the words left without any asking word ("pull the latest changes" is "pull
        // latest changes").
        run.or_else(|| {
            self.shell_intents
                .get(&unasked(&words).join(" "))
                .map(String::as_str)
        })
    }

    /// The shortcut name a phrase says: its synonym's name, else the phrase itself.
    pub fn shortcut_name<'a>(&'a self, phrase: &'a str) -> &'a str {
        self.synonyms.get(phrase).map_or(phrase, String::as_str)
    }

    /// Every synonym phrase with the shortcut name it stands for.
    pub fn synonym_phrases(&self) -> impl Iterator<Item = (&str, &str)> {
        self.synonyms.iter().map(|(p, n)| (p.as_str(), n.as_str()))
    }

    /// The agent a spoken name names.
    pub fn agent(&self, spoken: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.is_named(spoken))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_loads() {
        let words = CommandWords::builtin().expect("data/commands.toml is valid");
        assert_eq!(words.shortcut_name("refresh the page"), "reload");
        assert_eq!(words.shortcut_name("new tab"), "new tab");
        assert_eq!(words.common["copy"], "ctrl+c");
        assert_eq!(words.agent("claude code").unwrap().command, ["claude"]);
        assert_eq!(
            words.agent("claude").unwrap().resume.as_deref(),
            Some(&["claude".to_owned(), "--continue".to_owned()][..])
        );
        assert_eq!(
            words.shell_intent("how much disk space do i have left"),
            Some("df -h")
        );
        assert_eq!(words.shell_intent("delete the disk space"), None);
        assert!(words.agent("firefox").is_none());
        assert!(words.search_url.contains("{q}"));
    }

    #[test]
    fn bad_tables_name_the_line() {
        for (text, needle) in [
            ("[search]\nurl = \"https://e.com/\"\n", "line 2"),
            (
                "[search]\nurl = \"https://e.com/?q={q}\"\n[common]\ncopy = \"ctrl+nope\"\n",
                "line 4",
            ),
            (
                "[search]\nurl = \"https://e.com/?q={q}\"\n[synonyms]\na = [\"x\"]\nb = [\"x\"]\n",
                "both",
            ),
            (
                "[search]\nurl = \"https://e.com/?q={q}\"\n[agents]\nx = { command = [\"x\"], resume = [] }\n",
                "resume must list a program",
            ),
            (
                "[search]\nurl = \"https://e.com/?q={q}\"\n[shell.intents]\n\"df -h\" = []\n",
                "needs a one-line command and its topics",
            ),
            (
                "[search]\nurl = \"https://e.com/?q={q}\"\n[shell.intents]\n\"df -h\" = [\"!!\"]\n",
                "an empty topic",
            ),
        ] {
            let e = CommandWords::parse(text, "c.toml").unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }
}
