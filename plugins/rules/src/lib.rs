//! `utter-rules`: the deterministic rules router (kind `router`, PROTOCOL.md §8).
//!
//! It serves `router.plan`: a spoken or typed utterance goes in, and at most one step comes
//! out, chosen by fixed rules without any model: media keys, web sites from a catalog,
//! compositor actions (workspaces, windows, monitors, screenshots on niri), the user's own
//! niri key bindings, installed desktop applications, typing, key chords, scrolling and
//! clicking in the focused window ([`inapp`]) and bare host names (see [`rules`] for the
//! order). A step of a destructive compositor action ("close this window") carries
//! `confirm: true`, so the runner asks first. An
//! utterance no rule understands is not an error: the answer has no steps, `rule: null` and
//! a message, so the runner can fall back to another router. The message says why when a
//! rule came close ([`explain::explain`]: an unknown application name, a workspace number
//! out of range, a niri binding on sway), else `no rule matched "<utterance>"`.
//!
//! Usage: `utter-rules [--sites <catalog.toml>]` (parsed by clap, see [`Options`]; `--help`
//! explains it). Without `--sites`, `$UTTER_SITES` names the catalog, and without either the
//! built-in `data/sites.toml` is used. A catalog that cannot be read or parsed stops the
//! plugin at start with a message naming file and line.
//!
//! The compositor phrases are built in (`data/compositor-phrases.toml`). The user's niri
//! config is read at start and again whenever its modification time, size or inode changed,
//! looked at (one `stat`) at most once per plan and once per health check. It is read and
//! parsed in the background: the handshake never waits for it, and a plan waits at most a
//! second before it goes on with the previous version's bindings. A broken, oversized or
//! too deeply nested config turns the plugin's health `degraded` with `file:line:column`
//! and is logged on stderr, and planning goes on with the curated phrases (see
//! [`niri_config`]).
//!
//! `params.context`, when present, is the compositor plugin's snapshot; see [`context`] for
//! what is read from it (never a window title). The runner passes it on as a context plugin
//! made it, so a context of the wrong shape is not refused: the plan is made without it,
//! and an empty plan of a focus or close phrase says that the context was not used and why.
//! Only a bad utterance or provenance is invalid params (`-32602`).
//!
//! Module map: [`text`] normalises utterances, [`numbers`] turns spoken numbers into digits,
//! [`sites`] loads the site catalog, [`apps`] finds installed applications, [`phrases`]
//! holds the compositor phrase tables, [`niri_config`] reads the user's niri bindings,
//! [`context`] reads a request's desktop context, [`inapp`] holds the typing, key, scroll
//! and click rules, [`rules`] turns text into a step.

pub mod apps;
pub mod candidates;
pub mod commands;
pub mod context;
pub mod decide;
pub mod dictation;
pub mod eval;
pub mod examples;
pub mod explain;
pub mod grammar;
pub mod heard;
pub mod inapp;
pub mod language;
pub mod media;
pub mod niri_config;
pub mod numbers;
pub mod phrases;
pub mod plan;
pub mod profiles;
pub mod rules;
pub mod sites;
pub mod space;
pub mod text;
pub mod vocabulary;
pub mod web;
pub mod windows;

use apps::AppScanner;
use clap::Parser;
use commands::CommandWords;
use context::Context;
use niri_config::{Binds, BindsSource};
use phrases::{Curated, NiriAction};
use plan::{AppLookup, BindsLookup, Escalation, Matched, Sources};
use profiles::ProfilesSource;
use sites::Catalog;
use std::cell::OnceCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use utter_protocol::ErrorObject;
use utter_protocol::handshake::{HealthResult, HealthStatus};
use utter_protocol::plugin::{self, Call, Handler};
use utter_protocol::serde_json::{Value, json};

const MANIFEST: &str = include_str!("../utter-plugin.toml");

/// The method this plugin serves.
const PLAN: &str = "router.plan";

/// `router.vocabulary {context?}` → `{prompt, terms, counts: {sites, apps, installed, agents,
/// players, words}}`: the names this router acts on,
/// for a speech recogniser's prompt ([`vocabulary`]).
const VOCABULARY: &str = "router.vocabulary";

/// `router.candidates {hypotheses, context?}` → `{candidates: [{text, source, near,
/// hypothesis, op}]}`: phrases of the command space that sound like the recogniser's
/// hypotheses and that this router plans steps for in the context, for the runner to weigh
/// against the audio ([`candidates`]). With `dictation: {}` (the words are dictated), only
/// the dictation commands that sound like a short hypothesis ([`dictation::candidates`]):
/// `{candidates: [{text, source: "dictation", near}]}`.
const CANDIDATES: &str = "router.candidates";

/// The most hypotheses `router.candidates` takes, and the most candidates it returns.
pub const MAX_HYPOTHESES: usize = 10;
/// The most candidates one `router.candidates` answer holds (planned ones, nearest first).
pub const MAX_CANDIDATES: usize = 8;
/// The most proposed phrases `router.candidates` plans to find them (planning is most of
/// its time).
pub const MAX_PLANNED: usize = 24;

/// `router.examples {context?, all?}` → `{categories: [{name, about, examples: [{say, op,
/// focused?}]}]}`: what a person can say, by kind; with a context, the focused
/// application's and the compositor's categories first ([`examples::for_context`]).
const EXAMPLES_METHOD: &str = "router.examples";

/// The longest utterance planned, in bytes; a longer one is refused as invalid params.
pub const MAX_UTTERANCE: usize = 4096;

/// How long a plan that needs the niri bindings waits for a changed config to be read; after
/// that it plans with the previous version's (see [`BindsSource::current`]).
const PLAN_WAIT: Duration = Duration::from_secs(1);

/// How long a health check waits for the niri config to be read; after that it reports the
/// read as still going on. Short: the runner's handshake asks for health right away.
const HEALTH_WAIT: Duration = Duration::from_millis(500);

/// What a request shares: the catalog and the curated phrases, fixed at start, the
/// application scanner and the user's niri bindings.
struct State {
    catalog: Catalog,
    apps: AppScanner,
    curated: Curated,
    binds: BindsSource,
    profiles: ProfilesSource,
    words: CommandWords,
    /// `router.candidates`'s fixed phrases, made ready at its first call.
    fixed_phrases: std::sync::OnceLock<candidates::PhraseList>,
}

/// The `router.plan` handler.
struct RulesRouter {
    state: Arc<State>,
}

/// Reads the installed applications at most once per plan, and only if a rule asks.
struct LazyApps<'a> {
    scanner: &'a AppScanner,
    apps: OnceCell<Arc<Vec<apps::AppEntry>>>,
    defaults: OnceCell<Arc<apps::Defaults>>,
}

impl LazyApps<'_> {
    fn list(&self) -> &[apps::AppEntry] {
        self.apps.get_or_init(|| self.scanner.apps())
    }
}

impl AppLookup for LazyApps<'_> {
    fn find(&self, spoken: &str) -> Option<apps::AppEntry> {
        apps::find_app(self.list(), spoken).cloned()
    }

    fn names(&self) -> Vec<String> {
        self.list().iter().map(|app| app.name.clone()).collect()
    }

    fn all(&self) -> &[apps::AppEntry] {
        self.list()
    }

    fn defaults_for(&self, mime: &str) -> Vec<String> {
        self.defaults
            .get_or_init(|| self.scanner.defaults())
            .get(mime)
            .cloned()
            .unwrap_or_default()
    }
}

/// Looks at the niri config at most once per plan, and only if a rule asks.
struct LazyBinds<'a> {
    source: &'a BindsSource,
    binds: OnceCell<Arc<Binds>>,
}

impl BindsLookup for LazyBinds<'_> {
    fn lookup(&self, canonical: &str) -> Option<(Arc<NiriAction>, Option<u32>)> {
        let binds = self.binds.get_or_init(|| self.source.current(PLAN_WAIT));
        binds.table.lookup(canonical)
    }
}

/// The validated params of one `router.plan` request.
#[derive(Clone)]
struct PlanRequest {
    utterance: String,
    provenance: String,
    /// `params.context`, when it had the snapshot's shape.
    context: Option<Context>,
    /// Why a context that was sent is not used, when it had another shape.
    context_ignored: Option<String>,
    /// The decision head's tiers (`params.decide`, the runner's `[decide]`).
    decide: decide::Thresholds,
    /// `params.dictation.after` when the runner has dictation on: the text typed just
    /// before (clipped to its last 200 characters).
    dictation: Option<String>,
}

impl PlanRequest {
    fn from_params(params: &Value) -> Result<PlanRequest, ErrorObject> {
        let utterance = match params.get("utterance") {
            // A terminal escape sequence pasted or injected into the words ("open\e[31m
            // youtube") is no word: its parameters must not become one ("31m youtube").
            Some(Value::String(s)) => {
                let said = text::without_escape_sequences(s);
                if said.trim().is_empty() {
                    return Err(ErrorObject::invalid_params(
                        "router.plan: utterance is blank; send the words to plan for",
                    ));
                }
                said.trim().to_owned()
            }
            None | Some(Value::Null) => {
                return Err(ErrorObject::invalid_params(
                    "router.plan needs params.utterance (a non-empty string)",
                ));
            }
            Some(other) => {
                return Err(ErrorObject::invalid_params(format!(
                    "router.plan: utterance must be a string, not {}",
                    json_type(other)
                )));
            }
        };
        if utterance.len() > MAX_UTTERANCE {
            return Err(ErrorObject::invalid_params(format!(
                "router.plan: utterance is {} bytes long; at most {MAX_UTTERANCE} are planned",
                utterance.len()
            )));
        }
        let provenance = match params.get("provenance") {
            None | Some(Value::Null) => "user".to_owned(),
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
            Some(other) => {
                return Err(ErrorObject::invalid_params(format!(
                    "router.plan: provenance must be a non-empty string such as \"user\" or \
                     \"screen\", not {other}"
                )));
            }
        };
        // The context comes from a context plugin, passed on unchecked by the runner: one of
        // the wrong shape is no context, not a reason to refuse the utterance.
        let (context, context_ignored) = Context::from_param_or_none(params.get("context"));
        Ok(PlanRequest {
            utterance,
            provenance,
            context,
            context_ignored,
            decide: decide::Thresholds::from_param(params.get("decide")),
            dictation: match params.get("dictation") {
                None | Some(Value::Null) => None,
                Some(Value::Object(d)) => match d.get("after") {
                    None | Some(Value::Null) => Some(String::new()),
                    Some(Value::String(after)) => {
                        // The runner sends the last 200 characters; only they count.
                        let skip = after.chars().count().saturating_sub(200);
                        Some(after.chars().skip(skip).collect())
                    }
                    Some(other) => {
                        return Err(ErrorObject::invalid_params(format!(
                            "router.plan: dictation.after must be a string (the text typed just before), not {}",
                            json_type(other)
                        )));
                    }
                },
                Some(other) => {
                    return Err(ErrorObject::invalid_params(format!(
                        "router.plan: dictation must be an object {{after: string}}, not {}",
                        json_type(other)
                    )));
                }
            },
        })
    }
}

/// `1 site`, `25 sites`.
fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The most parts an utterance is split into ("open github and new tab").
const MAX_PARTS: usize = 4;

/// The words that join the parts of a command of several steps, longest first.
const CONJUNCTIONS: &[&str] = &[
    " and then ",
    ", and then ",
    ", then ",
    " then ",
    ", and ",
    " and ",
];

/// `steps`, or `refused` when one runs or types a shell command that would wipe the system,
/// the home folder or a disk ([`language::wipes_the_system`]).
fn refuse_wiping(steps: Vec<Matched>) -> Result<Vec<Matched>, Escalation> {
    for step in &steps {
        let text = match step.op {
            "terminal" => step.args["command"].as_str(),
            "type_text" => step.args["text"].as_str(),
            _ => None,
        };
        if let Some(refused) = text.and_then(language::refuse_wipe) {
            return Err(refused);
        }
    }
    Ok(steps)
}

/// Endings that take back the command said before them ("quit chromium, no wait", "close
/// the tab? No.", "pause, never mind"), as normalised words after its last comma or mark.
const TAKEN_BACK: &[&str] = &[
    "no",
    "no wait",
    "wait",
    "wait no",
    "no no",
    "nope",
    "never mind",
    "nevermind",
    // Not "cancel": "stop it, cancel that" is the command said twice (a terminal's ctrl+c).
    "actually no",
    "no dont",
    "dont",
    "forget it",
    "forget that",
    "scratch that",
    "not that",
    "no sorry",
    "sorry no",
    // A question answered at once ("quit firefox? no, it's fine").
    "its fine",
    "it is fine",
    "no its fine",
    "its ok",
    "its okay",
    "no thanks",
    "nah",
    "nah its fine",
    "leave it",
    "dont bother",
];

/// A clause between two others that corrects what came before it ("the first tab, sorry,
/// the second"): which of the two is meant is not guessed, nothing is done.
const CORRECTIONS: &[&str] = &[
    "sorry",
    "no",
    "no wait",
    "wait",
    "i mean",
    "or rather",
    "actually",
    "no sorry",
    "sorry no",
];

/// Why nothing is planned when the last clause of `utterance` takes back what came before
/// it ("quit chromium, no wait"): `None` when it does not.
fn taken_back(utterance: &str) -> Option<Escalation> {
    let trimmed = utterance
        .trim_end()
        .trim_end_matches(['.', '!', '?', ',', ' ']);
    // A full stop ends a clause where a sentence ends ("Quit Chromium. Never mind."), not
    // inside a name ("example.com").
    let clauses: Vec<String> = trimmed
        .replace(". ", ", ")
        .split([',', '?', '!', ';'])
        .map(text::normalize)
        .filter(|c| !c.trim().is_empty())
        .collect();
    let [first, .., last] = clauses.as_slice() else {
        return None;
    };
    let n = clauses.len();
    // The last clause takes it back ("quit chromium, no wait"), or the last two do ("quit
    // firefox? no, it's fine"), or a clause between corrects it ("the first tab, sorry, the
    // second").
    let last_two = (n >= 3).then(|| format!("{} {}", clauses[n - 2], clauses[n - 1]));
    // ("No, no, take me back": the opening words are no command to correct.)
    let corrected = n >= 3
        && !CORRECTIONS.contains(&first.as_str())
        && !TAKEN_BACK.contains(&first.as_str())
        && clauses[1..n - 1]
            .iter()
            .any(|c| CORRECTIONS.contains(&c.as_str()));
    if !(TAKEN_BACK.contains(&last.as_str())
        || last_two.is_some_and(|two| TAKEN_BACK.contains(&two.as_str()))
        || corrected)
    {
        return None;
    }
    Some(Escalation {
        reason: "refused",
        message: format!("\"{}\" was taken back; nothing is done", first.trim()),
    })
}

/// Words a remark ends with when what follows it is what someone said, not a command ("he
/// said, quit chromium", "i was like, close slack").
pub(crate) const REPORTED_SPEECH: &[&str] = &[
    "said",
    "says",
    "say",
    "told me",
    "tells me",
    "told us",
    "asked",
    "asks",
    "was like",
    "were like",
    "is like",
    "goes",
    "went",
    "wrote",
    "writes",
    "texted",
    "replied",
    "yelled",
];

/// Whether a normalised remark ends with a verb of saying ([`REPORTED_SPEECH`]): what
/// follows it is quoted.
pub(crate) fn quotes(remark: &str) -> bool {
    REPORTED_SPEECH
        .iter()
        .any(|verb| remark == *verb || remark.ends_with(&format!(" {verb}")))
}

/// First words of a remark the speaker makes before a command, after a comma ("i want to
/// draw something, open krita"): a pronoun or an exclamation, never a verb of a command.
const REMARK_LEADS: &[&str] = &[
    "i", "im", "ive", "id", "its", "it", "thats", "that", "theres", "this", "lets", "we", "were",
    "whats", "oh", "ugh", "wow", "man", "hmm", "ok", "okay", "alright", "right", "well", "yeah",
    "nah", "nope", "damn", "my", "our", "you", "youre", "youve", "he", "she", "they", "no", "oops",
    "sorry", "gosh", "where", "why", "how", "when", "who", "did", "dear",
];

/// `utterance` with the end of each sentence but the last ("… by mistake. Bring it back",
/// "… go? Show me …") written as a comma, for [`Planning::after_remark`]; a dot inside a
/// word ("example.com") is kept.
fn sentences_as_clauses(utterance: &str) -> String {
    let mut out = String::with_capacity(utterance.len());
    let mut chars = utterance.chars().peekable();
    while let Some(c) = chars.next() {
        if matches!(c, '.' | '?' | '!') && chars.peek().is_some_and(|n| n.is_whitespace()) {
            out.push(',');
        } else {
            out.push(c);
        }
    }
    out
}

/// Rules whose step takes the rest of the utterance as its text: their whole-utterance plan
/// gives way to a split one ("type hello and press enter" is two steps).
const FREE_TEXT_RULES: &[&str] = &["type_text", "search", "terminal"];

/// Whether `steps` is one click whose description goes on with "and" and a verb of typing,
/// pressing or scrolling ("click the search box and type watercolor brushes"): two
/// commands, tried as parts first. Another word after "and" stays in the description ("click
/// save and exit" is one button).
fn clicks_then_more(steps: &[Matched]) -> bool {
    let [step] = steps else { return false };
    if step.op != "click_element" {
        return false;
    }
    let description = step.args["description"].as_str().unwrap_or("");
    description.split(" and ").skip(1).any(|rest| {
        let verb = rest.split_whitespace().next().unwrap_or("");
        inapp::TYPE_VERBS
            .iter()
            .chain(inapp::KEY_VERBS)
            .chain(&["scroll"])
            .any(|v| v.split_whitespace().next() == Some(verb))
    })
}

/// What one request is planned against: the shared state, the profiles of the moment, and
/// the applications and niri bindings, each read at most once and only if a rule asks.
/// Every way of planning a request (whole, in parts, after a remark, a misheard lead, the
/// decision head) goes through it, with the context it plans in.
struct Planning<'a> {
    state: &'a State,
    profiles: &'a profiles::Profiles,
    apps: LazyApps<'a>,
    binds: LazyBinds<'a>,
}

impl Planning<'_> {
    /// Plan one utterance in `context`: the rules' steps or why none.
    fn plan_text(
        &self,
        utterance: &str,
        context: Option<&Context>,
    ) -> Result<Vec<Matched>, Escalation> {
        let normalized = text::normalize(utterance);
        let sources = self.sources(utterance, context);
        rules::plan_steps(text::strip_fillers(&normalized), &sources)
    }

    /// What the rules consult for `utterance`.
    fn sources<'s>(&'s self, utterance: &'s str, context: Option<&'s Context>) -> Sources<'s> {
        Sources {
            catalog: &self.state.catalog,
            apps: &self.apps,
            curated: &self.state.curated,
            binds: &self.binds,
            context,
            utterance,
            profiles: self.profiles,
            words: &self.state.words,
        }
    }

    /// "type drum and bass sample packs and press enter": text with a conjunction of its own
    /// ("drum and bass"), then a command. Split at the last conjunction only: the text before
    /// it (typed, searched or run) and, after it, a command that is no free text itself.
    fn free_text_then(&self, utterance: &str, context: Option<&Context>) -> Option<Vec<Matched>> {
        let lower = utterance.to_ascii_lowercase();
        let (at, conjunction) = CONJUNCTIONS
            .iter()
            .filter_map(|c| lower.rfind(c).map(|at| (at, *c)))
            .max_by_key(|(at, c)| (*at, std::cmp::Reverse(c.len())))?;
        let (head, tail) = (&utterance[..at], &utterance[at + conjunction.len()..]);
        let mut steps = self.plan_text(head, context).ok()?;
        if !steps.iter().any(|s| FREE_TEXT_RULES.contains(&s.rule)) {
            return None;
        }
        let after = self.plan_text(tail, context).ok()?;
        if after.is_empty() || after.iter().any(|s| FREE_TEXT_RULES.contains(&s.rule)) {
            return None;
        }
        steps.extend(after);
        Some(steps)
    }

    /// The steps of `utterance` split at its conjunctions, when every part plans; each part
    /// in the context the steps before it leave (a site opened: a browser is focused).
    fn plan_parts(&self, utterance: &str, context: Option<&Context>) -> Option<Vec<Matched>> {
        let parts = split_parts(utterance);
        if parts.len() < 2 || parts.len() > MAX_PARTS {
            return None;
        }
        let mut context = context.cloned();
        let mut steps = Vec::new();
        let mut verb: Option<String> = None;
        let mut site: Option<String> = None;
        for part in parts {
            // "go to youtube and search for synthwave": the site just opened searches.
            let on_site = site.as_deref().and_then(|site| {
                let query = text::after_lead(part, &["search for ", "search "])?;
                // "… and search for": nothing to search yet.
                if query.trim().is_empty() || query.trim().eq_ignore_ascii_case("for") {
                    return None;
                }
                let said = format!("search {site} for {query}");
                self.plan_text(&said, context.as_ref())
                    .ok()
                    .filter(|steps| steps.iter().all(|s| s.op == "open_url"))
            });
            // Its search page is the site: the step that only opened it goes.
            if on_site.is_some() {
                steps.pop();
            }
            let planned = match on_site.map_or_else(|| self.plan_text(part, context.as_ref()), Ok) {
                Ok(planned) => planned,
                // "open discord and telegram": the verb of the part before, said once for
                // both names.
                Err(_) => {
                    // "… and start a file manager there": where was said by the part before.
                    let part = ["over there", "there"]
                        .iter()
                        .find_map(|tail| {
                            text::strip_word_suffix(part.trim_end_matches(['.', ',']), tail)
                        })
                        .map(str::trim_end)
                        .filter(|p| !p.is_empty())
                        .unwrap_or(part);
                    match self.plan_text(part, context.as_ref()) {
                        Ok(planned) => planned,
                        Err(_) => {
                            let said = format!("{} {part}", verb.as_deref()?);
                            self.plan_text(&said, context.as_ref()).ok()?
                        }
                    }
                }
            };
            verb = leading_verb(part, &self.state.curated).or(verb);
            site = planned
                .last()
                .filter(|s| matches!(s.op, "ensure_url" | "open_url"))
                .and_then(|s| s.args["site"].as_str())
                .map(str::to_owned);
            for step in &planned {
                if let Some(app_id) = focused_after(step, self.profiles, context.as_ref()) {
                    let mut next = context.clone().unwrap_or_default();
                    if !next.app_ids.contains(&app_id) {
                        next.app_ids.insert(0, app_id.clone());
                    }
                    next.focused_app_id = Some(app_id);
                    context = Some(next);
                }
            }
            steps.extend(planned);
        }
        Some(steps)
    }

    /// The plan of `utterance` said once where the recogniser wrote one clause twice
    /// ("Clear, Clear,"), its first step's message saying so. A lead heard as another word
    /// of its sound is not planned here but proposed as a candidate for the audio to decide
    /// ([`heard`]).
    fn said_once(&self, utterance: &str, context: Option<&Context>) -> Option<Vec<Matched>> {
        let rewrite = heard::said_once(utterance)?;
        let mut steps = self.plan_text(&rewrite.utterance, context).ok()?;
        if let Some(first) = steps.first_mut() {
            first.message = format!(
                "heard \"{}\" as \"{}\"; {}",
                rewrite.heard.trim_end_matches([',', '.', ';']),
                rewrite.meant,
                first.message
            );
        }
        Some(steps)
    }

    /// The steps of the last clause of `utterance` when what comes before its last comma is
    /// a remark of the speaker's own ([`REMARK_LEADS`] first, or a statement with "is",
    /// "are": "i want to draw something, open krita", "it's way too loud, turn the volume
    /// down"), else of the clause before its first or last comma when what follows it is
    /// one ("zoom in a bit, the text is tiny", "um, start zoom, my lecture starts soon").
    /// Only after the whole utterance planned nothing, and only a remark: "reopen, close
    /// tab" (a transcript's comma inside one command) is not read as "close tab". Also the
    /// command before a reason or a purpose ("open obs so i can record my screen", "pause
    /// the music because the phone rings", "play some music while i study").
    fn after_remark(&self, utterance: &str, context: Option<&Context>) -> Option<Vec<Matched>> {
        // Sentences are clauses too: "oh no, i closed it by mistake. bring it back", "where
        // did my download go? show me the downloads".
        let sentences = sentences_as_clauses(utterance);
        let utterance = sentences.as_str();
        let is_remark = |clause: &str| {
            // "the meeting's over": a noun's "'s" is its "is".
            if clause.contains("'s ") || clause.contains("\u{2019}s ") {
                return true;
            }
            let padded = format!(" {} ", text::normalize(clause));
            let first = padded.split_whitespace().next().unwrap_or("");
            REMARK_LEADS.contains(&first)
                || [" is ", " are ", " was ", " looks "]
                    .iter()
                    .any(|verb| padded.contains(verb))
        };
        // "he said, quit chromium": what follows is quoted, not asked.
        let quoting = |remark: &str| quotes(&text::normalize(remark));
        // "we ship tomorrow, right?": a one-word question tag is no command.
        let tag = |command: &str| {
            let command = command.trim();
            command.ends_with('?') && !command.trim_end_matches('?').contains(' ')
        };
        // "i want to draw something, open krita".
        if let Some((remark, command)) = utterance.rsplit_once(',')
            && !command.trim().is_empty()
            && !quoting(remark)
            && !tag(command)
            && is_remark(remark)
            && let Ok(steps) = self.plan_text(command, context)
        {
            return Some(steps);
        }
        // "zoom in a bit, the text is tiny", "open obsidian, i wanna write some notes"; "um,
        // start zoom, my lecture starts soon" (the remark after the last comma). "open iate,
        // the eu term base": what was opened, described (only after opening something).
        let describes = |clause: &str| {
            let first = clause.split_whitespace().next().unwrap_or("");
            ["the", "a", "an"].contains(&first.to_ascii_lowercase().as_str())
        };
        for (command, remark) in [utterance.split_once(','), utterance.rsplit_once(',')]
            .into_iter()
            .flatten()
        {
            if command.trim().is_empty() || !(is_remark(remark) || describes(remark)) {
                continue;
            }
            let Ok(steps) = self.plan_text(command, context) else {
                continue;
            };
            let opens = steps.iter().all(|s| {
                matches!(
                    s.op,
                    "ensure_url" | "open_url" | "ensure_app" | "launch_app" | "focus_app"
                )
            });
            if is_remark(remark) || opens {
                return Some(steps);
            }
        }
        // "open obs so i can record my screen": the command, then why.
        let lower = utterance.to_lowercase();
        let at = [
            " so that i can ",
            " so i can ",
            " so we can ",
            " so that ",
            // "start anydesk so my nephew can help me": who it is for, then why.
            " so my ",
            " so our ",
            " so he ",
            " so she ",
            " so they ",
            " so you ",
            " so the ",
            " because ",
            " cause ",
            " since ",
            // "play some music while i study", "scroll up to see the older messages", "open
            // thunderbird i need to answer a client".
            " i need to ",
            " i have to ",
            " i want to ",
            " i gotta ",
            " while i ",
            " while we ",
            " to see ",
            " to read ",
            " to check ",
        ]
        .iter()
        .filter_map(|why| lower.find(why))
        .min()?;
        let command = utterance.get(..at)?;
        if command.trim().is_empty() {
            return None;
        }
        self.plan_text(command, context).ok()
    }

    /// The decision head's matcher on the whole utterance.
    fn decide(&self, request: &PlanRequest, context: Option<&Context>) -> Option<decide::Decision> {
        let normalized = text::normalize(&request.utterance);
        let sources = self.sources(&request.utterance, context);
        decide::decide(text::strip_fillers(&normalized), &sources, request.decide)
    }
}

impl State {
    /// Plan one request. Blocking: it may read the application directories.
    fn plan(&self, request: &PlanRequest) -> Value {
        // Dictation: what is heard is text, but for its few commands.
        if let Some(after) = &request.dictation {
            return match dictation::plan(&request.utterance, after) {
                dictation::Dictated::Steps(steps) if !steps.is_empty() => {
                    self.plan_json(request, Ok(steps), None)
                }
                dictation::Dictated::Steps(_) => self.plan_json(
                    request,
                    Err(Escalation {
                        reason: "no_rule",
                        message: "nothing to type was heard".to_owned(),
                    }),
                    None,
                ),
                dictation::Dictated::Command(rest) => self.plan(&PlanRequest {
                    utterance: rest,
                    dictation: None,
                    ..request.clone()
                }),
            };
        }
        let profiles = self.profiles.current();
        let planning = Planning {
            state: self,
            profiles: &profiles,
            apps: LazyApps {
                scanner: &self.apps,
                apps: OnceCell::new(),
                defaults: OnceCell::new(),
            },
            binds: LazyBinds {
                source: &self.binds,
                binds: OnceCell::new(),
            },
        };
        let context = request.context.as_ref();
        // "quit chromium, no wait": taken back before it was planned.
        if let Some(e) = taken_back(&request.utterance) {
            return self.plan_json(request, Err(e), None);
        }
        let whole = planning.plan_text(&request.utterance, context);
        let free_text = whole.as_ref().is_ok_and(|steps| {
            steps.iter().any(|s| FREE_TEXT_RULES.contains(&s.rule)) || clicks_then_more(steps)
        });
        let planned = match whole {
            Ok(steps) if !free_text => Ok(steps),
            whole => match planning
                .plan_parts(&request.utterance, context)
                .or_else(|| planning.free_text_then(&request.utterance, context))
            {
                Some(steps) => Ok(steps),
                None => whole,
            },
        };
        // "it's way too loud, turn the volume down": a remark, then the command.
        let planned = match planned {
            Err(e) if e.reason != "refused" => {
                match planning.after_remark(&request.utterance, context) {
                    Some(steps) => Ok(steps),
                    None => Err(e),
                }
            }
            other => other,
        };
        // "Clear, Clear,": a short command the recogniser wrote twice.
        let planned = match planned {
            Err(e) if matches!(e.reason, "no_rule" | "unknown_target") => {
                match planning.said_once(&request.utterance, context) {
                    Some(steps) => Ok(steps),
                    None => Err(e),
                }
            }
            other => other,
        };
        // Never a command that wipes the system, however it was reached (run, said bare,
        // typed and entered, one part of several).
        let planned = planned.and_then(refuse_wiping);
        // More parts than are planned at once ("open youtube and open github and pause and
        // mute and unmute"): that is why, not a name made of all of them.
        let parts = split_parts(&request.utterance).len();
        let too_many = || Escalation {
            reason: "too_many_parts",
            message: format!(
                "that is {parts} commands in one; at most {MAX_PARTS} are planned at once: say the rest after"
            ),
        };
        let planned = match planned {
            Err(e) if matches!(e.reason, "no_rule" | "unknown_target") => {
                if parts > MAX_PARTS {
                    Err(too_many())
                } else {
                    Err(e)
                }
            }
            // "click the x and type y and press z and scroll down and ...": not one label.
            Ok(steps) if parts > MAX_PARTS && clicks_then_more(&steps) => Err(too_many()),
            other => other,
        };
        // No rule: perhaps a misheard name (the decision head's matcher).
        let planned = match planned {
            Err(e) if matches!(e.reason, "no_rule" | "unknown_target") => {
                match planning.decide(request, context) {
                    Some(decide::Decision::Choose(choices, own)) => {
                        let fallback = self.decided(request, *own, e);
                        return self.choose_plan(request, &choices, fallback);
                    }
                    Some(decision) => return self.decided(request, decision, e),
                    None => Err(e),
                }
            }
            other => other,
        };
        self.plan_json(request, planned, None)
    }

    /// The plan of the matcher's own decision; `e` is why no rule planned.
    fn decided(&self, request: &PlanRequest, decision: decide::Decision, e: Escalation) -> Value {
        let planned = match decision {
            decide::Decision::Act(m) => Ok(vec![m]),
            decide::Decision::Ask(m, question) => {
                return self.plan_json(request, Ok(vec![m]), Some(question));
            }
            decide::Decision::Unsure(best) => Err(Escalation {
                reason: "unsure",
                // The explanation may have named the close names already.
                message: if e.message.contains("similar names") {
                    e.message
                } else {
                    format!(
                        "{}; the closest are {}",
                        e.message,
                        best.iter()
                            .map(|(label, score)| format!("{label} ({score:.2})"))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    )
                },
            }),
            // Not nested: the matcher offers the chooser once.
            decide::Decision::Choose(_, own) => return self.decided(request, *own, e),
        };
        self.plan_json(request, planned, None)
    }

    /// Candidates for the chooser (PROTOCOL.md §9.4), each asking "did you mean …?" first,
    /// with `fallback` for a chooser that fails or is unsure.
    fn choose_plan(
        &self,
        request: &PlanRequest,
        choices: &[decide::Choice],
        fallback: Value,
    ) -> Value {
        let candidates: Vec<Value> = choices
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "id": format!("c{}", i + 1),
                    "op": c.step.op,
                    "args": c.step.args,
                    "provenance": request.provenance,
                    "confirm": true,
                    "ask": format!("did you mean {}?", c.label),
                    "summary": c.summary,
                    "score": (c.score * 1000.0).round() / 1000.0,
                    "message": c.step.message,
                })
            })
            .collect();
        let named = choices
            .iter()
            .map(|c| format!("{} ({:.2})", c.label, c.score))
            .collect::<Vec<_>>()
            .join(", ");
        json!({
            "steps": [],
            "candidates": candidates,
            "choose": {"method": "llm.choose"},
            "rule": "decide",
            "message": format!("not sure what was meant; the chooser picks among {named}"),
            "fallback": fallback,
        })
    }

    /// A plan's JSON: its steps (asking `ask` where a step confirms), or its escalation.
    fn plan_json(
        &self,
        request: &PlanRequest,
        planned: Result<Vec<Matched>, Escalation>,
        ask: Option<String>,
    ) -> Value {
        match planned {
            Ok(steps) => {
                let mut rules: Vec<&str> = Vec::new();
                for s in &steps {
                    if !rules.contains(&s.rule) {
                        rules.push(s.rule);
                    }
                }
                let message = steps
                    .iter()
                    .map(|s| s.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; then ");
                let steps: Vec<Value> = steps
                    .into_iter()
                    .map(|s| {
                        let mut step = json!({
                            "op": s.op,
                            "args": s.args,
                            "provenance": request.provenance,
                            "confirm": s.confirm,
                        });
                        if let Some(question) = ask.as_ref().filter(|_| s.confirm) {
                            step["ask"] = Value::String(question.clone());
                        }
                        step
                    })
                    .collect();
                json!({"steps": steps, "rule": rules.join("+"), "message": message})
            }
            Err(escalation) => {
                let mut message = escalation.message;
                // Said only when the context could have made a difference: a window to focus
                // or close.
                let normalized = text::normalize(&request.utterance);
                if let Some(problem) = &request.context_ignored
                    && windows::names_a_window(text::strip_fillers(&normalized), &self.curated)
                {
                    message.push_str(&format!(
                        " (the request's desktop context was not used, so no open window was \
                         looked at: {problem})"
                    ));
                }
                json!({
                    "steps": [],
                    "rule": null,
                    "message": message,
                    "escalate": {"reason": escalation.reason, "message": message},
                })
            }
        }
    }
}

/// `utterance` cut at its conjunctions (" and ", " then ", ", and then "…), each part
/// trimmed of commas and spaces; one part when there is none.
fn split_parts(utterance: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut at = 0;
    // The conjunctions are ASCII: compared byte-wise without regard to ASCII case, at char
    // boundaries of the utterance itself (lowercasing could move them).
    while at < utterance.len() {
        let found = CONJUNCTIONS.iter().find(|c| {
            utterance
                .get(at..at + c.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(c))
        });
        match found {
            Some(c) => {
                parts.push(trim_part(&utterance[start..at]));
                at += c.len();
                start = at;
            }
            None => at += utterance[at..].chars().next().map_or(1, char::len_utf8),
        }
    }
    parts.push(trim_part(&utterance[start..]));
    parts.retain(|p| !p.is_empty());
    parts
}

/// The verb `part` starts with, as normalised, that a later part naming only its target
/// borrows ("open discord and telegram", "close spotify and vlc"): an opening verb
/// ([`plan::APP_VERBS`]) or a focusing or closing one of the curated phrases; the longest.
fn leading_verb(part: &str, curated: &Curated) -> Option<String> {
    let normalized = text::normalize(part);
    let words = text::strip_fillers(&normalized);
    let verbs = plan::APP_VERBS.iter().copied().chain(
        curated
            .focus_verbs
            .iter()
            .chain(&curated.close_verbs)
            .map(String::as_str),
    );
    verbs
        .filter(|verb| text::strip_word_prefix(words, verb).is_some_and(|rest| !rest.is_empty()))
        .max_by_key(|verb| verb.len())
        .map(str::to_owned)
}

/// A part without the commas and spaces around it.
fn trim_part(part: &str) -> &str {
    part.trim_matches(|ch: char| ch == ',' || ch.is_whitespace())
}

/// The `app_id` focused once `step` has run, when it is predictable: a browser's after a
/// site opened, the application's after it was opened or focused.
fn focused_after(
    step: &Matched,
    profiles: &profiles::Profiles,
    context: Option<&Context>,
) -> Option<String> {
    let arg = |k: &str| step.args.get(k).and_then(Value::as_str);
    match step.op {
        "ensure_url" | "open_url" => {
            let browsers: Vec<&profiles::Profile> = profiles
                .iter()
                .filter(|p| p.kind == profiles::Kind::Browser)
                .collect();
            // A browser with a window open, else the first browser profile.
            context
                .and_then(|c| {
                    c.app_ids
                        .iter()
                        .find(|id| browsers.iter().any(|b| b.has_app_id(id)))
                        .cloned()
                })
                .or_else(|| browsers.first().and_then(|b| b.app_ids.first().cloned()))
        }
        "ensure_app" | "focus_app" => arg("app").map(str::to_owned),
        "launch_app" => {
            let id = arg("app_id")?;
            Some(
                profiles
                    .for_app_id(id)
                    .and_then(|p| p.app_ids.first().cloned())
                    .unwrap_or_else(|| id.to_owned()),
            )
        }
        _ => None,
    }
}

impl Handler for RulesRouter {
    fn methods(&self) -> Vec<String> {
        vec![
            PLAN.into(),
            VOCABULARY.into(),
            CANDIDATES.into(),
            EXAMPLES_METHOD.into(),
        ]
    }

    fn side_effect_free(&self) -> Vec<String> {
        self.methods()
    }

    async fn health(&self) -> HealthResult {
        let state = self.state.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let binds = state.binds.current(HEALTH_WAIT);
            let profiles = state.profiles.current();
            (
                state.apps.apps().len(),
                binds,
                state.binds.loading(),
                profiles,
            )
        })
        .await;
        let mut health = HealthResult::ok();
        match looked {
            Ok((count, binds, loading, profiles)) => {
                if binds.problem.is_some() || !profiles.problems.is_empty() {
                    health.status = HealthStatus::Degraded;
                }
                let problems = if profiles.problems.is_empty() {
                    String::new()
                } else {
                    format!(" (skipped: {})", profiles.problems.join("; "))
                };
                health.detail = format!(
                    "{} from {}, {}, {}, {}{problems}; {}{}",
                    plural(self.state.catalog.sites().len(), "site"),
                    self.state.catalog.source(),
                    plural(count, "application"),
                    plural(profiles.len(), "profile"),
                    plural(self.state.curated.table.len(), "compositor phrase"),
                    binds.summary(),
                    if loading && !binds.pending {
                        "; a changed niri config is being read"
                    } else {
                        ""
                    },
                );
            }
            Err(e) => {
                health.status = HealthStatus::Degraded;
                health.detail = format!("application scan failed: {e}");
            }
        }
        health
    }

    async fn handle(&self, call: Call) -> Result<Value, ErrorObject> {
        match call.method.as_str() {
            PLAN => {
                let request = PlanRequest::from_params(&call.params)?;
                let state = self.state.clone();
                tokio::task::spawn_blocking(move || state.plan(&request))
                    .await
                    .map_err(|e| ErrorObject::internal(format!("router.plan failed: {e}")))
            }
            VOCABULARY => {
                let (context, _) = Context::from_param_or_none(call.params.get("context"));
                let state = self.state.clone();
                tokio::task::spawn_blocking(move || state.vocabulary(context.as_ref()))
                    .await
                    .map_err(|e| ErrorObject::internal(format!("router.vocabulary failed: {e}")))
            }
            CANDIDATES => {
                let hypotheses = hypotheses(&call.params)?;
                // In dictation, only its own few commands are candidates: the rest is text.
                match call.params.get("dictation") {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(_)) => {
                        let candidates: Vec<Value> = dictation::candidates(&hypotheses)
                            .into_iter()
                            .map(|(text, near)| {
                                json!({"text": text, "source": "dictation", "near": near})
                            })
                            .collect();
                        return Ok(json!({"candidates": candidates}));
                    }
                    Some(other) => {
                        return Err(ErrorObject::invalid_params(format!(
                            "router.candidates: dictation must be an object, not {}",
                            json_type(other)
                        )));
                    }
                }
                let (context, _) = Context::from_param_or_none(call.params.get("context"));
                let state = self.state.clone();
                tokio::task::spawn_blocking(move || state.candidates(&hypotheses, context))
                    .await
                    .map_err(|e| ErrorObject::internal(format!("router.candidates failed: {e}")))
            }
            EXAMPLES_METHOD => {
                // A context of the wrong shape is no context: the built-in list still answers.
                let (context, _) = Context::from_param_or_none(call.params.get("context"));
                let all = match call.params.get("all") {
                    None | Some(Value::Null) => false,
                    Some(Value::Bool(all)) => *all,
                    Some(other) => {
                        return Err(ErrorObject::invalid_params(format!(
                            "router.examples: all must be true or false, not {}",
                            json_type(other)
                        )));
                    }
                };
                let builtin = examples::Examples::builtin().map_err(ErrorObject::internal)?;
                let state = self.state.clone();
                // Every generated example is planned before it is offered.
                tokio::task::spawn_blocking(move || {
                    let profiles = state.profiles.current();
                    let first_op = |say: &str, context: Option<&Context>| {
                        let request = PlanRequest {
                            utterance: say.to_owned(),
                            provenance: "user".to_owned(),
                            context: context.cloned(),
                            context_ignored: None,
                            decide: decide::Thresholds::from_param(None),
                            dictation: None,
                        };
                        state.plan(&request)["steps"][0]["op"]
                            .as_str()
                            .map(str::to_owned)
                    };
                    // The built-in examples as they plan here (what is installed, what is
                    // open), so that none is shown doing what it would not.
                    let builtin = examples::as_planned(builtin, context.as_ref(), first_op);
                    let plans_as = |say: &str, context: Option<&Context>, op: &str| {
                        first_op(say, context).as_deref() == Some(op)
                    };
                    let answer =
                        examples::for_context(builtin, context.as_ref(), &profiles, all, plans_as);
                    json!(answer)
                })
                .await
                .map_err(|e| ErrorObject::internal(format!("router.examples failed: {e}")))
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }
}

impl State {
    /// `router.candidates`'s answer: the [`candidates::propose`]d phrases that plan steps
    /// in `context` (no question, no typed text), nearest first: at most
    /// [`MAX_CANDIDATES`], from the first [`MAX_PLANNED`] proposed.
    fn candidates(&self, hypotheses: &[String], context: Option<Context>) -> Value {
        let installed = self.apps.apps();
        let profiles = self.profiles.current();
        let agents: Vec<&str> = self.words.agents.iter().map(|a| a.name.as_str()).collect();
        let v = vocabulary::Vocabulary::gather(
            &self.catalog,
            &profiles,
            &installed,
            &agents,
            context.as_ref(),
        );
        let mut names: Vec<&str> = v
            .sites
            .iter()
            .chain(&v.apps)
            .chain(&v.installed)
            .chain(self.words.agents.iter().flat_map(|a| &a.names))
            .chain(&v.players)
            .map(String::as_str)
            .collect();
        // Key names of 4 letters or more: "esc" and "del" sound like too much.
        for key in inapp::key_names().filter(|k| k.len() > 3) {
            names.push(key);
        }
        let names = candidates::PhraseList::of_names(names);
        let focused = context
            .as_ref()
            .and_then(|c| c.focused_app_id.as_deref())
            .and_then(|id| profiles.for_app_id(id))
            .map(|p| {
                candidates::PhraseList::new(
                    p.shortcuts
                        .keys()
                        .chain(p.commands.keys())
                        .map(String::as_str),
                )
            })
            .unwrap_or_default();
        let fixed = self.fixed_phrases.get_or_init(|| self.fixed_phrases());
        let space = candidates::Space {
            names: &names,
            phrases: [fixed, &focused],
        };
        let proposed = candidates::propose(hypotheses, &space, &self.curated);
        let mut planned = Vec::new();
        for candidate in proposed.into_iter().take(MAX_PLANNED) {
            if planned.len() >= MAX_CANDIDATES {
                break;
            }
            let request = PlanRequest {
                utterance: candidate.text.clone(),
                provenance: "user".to_owned(),
                context: context.clone(),
                context_ignored: None,
                decide: decide::Thresholds::from_param(None),
                dictation: None,
            };
            let plan = self.plan(&request);
            let steps = plan["steps"].as_array().map_or(&[][..], Vec::as_slice);
            let acts = !steps.is_empty() && steps.iter().all(|s| s.get("ask").is_none());
            let typed = plan["rule"]
                .as_str()
                .is_some_and(|r| r.split('+').any(|r| r == "type_text"));
            if acts && !typed {
                planned.push(json!({
                    "text": candidate.text,
                    "source": candidate.source,
                    "near": (candidate.near * 1000.0).round() / 1000.0,
                    "hypothesis": candidate.hypothesis,
                    "op": steps[0]["op"],
                }));
            }
        }
        json!({"candidates": planned})
    }

    /// The fixed phrases of [`State::candidates`]: the common shortcut names and their
    /// synonyms, the playback verbs alone and with each known player, the compositor
    /// phrases, "press" with each key, the agents with their verbs and the built-in
    /// examples without free text.
    fn fixed_phrases(&self) -> candidates::PhraseList {
        let mut phrases: Vec<String> = Vec::new();
        phrases.extend(self.words.common.keys().cloned());
        phrases.extend(
            self.words
                .synonym_phrases()
                .map(|(said, _)| said.to_owned()),
        );
        for (verb, _) in decide::MEDIA_VERBS {
            phrases.push((*verb).to_owned());
            for player in crate::plan::KNOWN_PLAYERS {
                phrases.push(format!("{verb} {player}"));
            }
        }
        phrases.extend(self.curated.table.phrases().map(str::to_owned));
        for key in inapp::key_names().filter(|k| k.len() > 3) {
            phrases.push(format!("press {key}"));
        }
        for agent in self.words.agents.iter().flat_map(|a| &a.names) {
            for verb in ["start", "run", "open", "launch"] {
                phrases.push(format!("{verb} {agent}"));
            }
        }
        if let Ok(examples) = examples::Examples::builtin() {
            for example in examples.categories.iter().flat_map(|c| &c.examples) {
                if !matches!(example.op.as_str(), "type_text" | "open_url") {
                    phrases.push(example.say.clone());
                }
            }
        }
        candidates::PhraseList::new(phrases.iter().map(String::as_str))
    }

    /// `router.vocabulary`'s answer: `{prompt, terms, counts: {sites, apps, installed,
    /// players, words}}`. Blocking: it may read the application directories.
    fn vocabulary(&self, context: Option<&Context>) -> Value {
        let installed = self.apps.apps();
        let profiles = self.profiles.current();
        let agents: Vec<&str> = self.words.agents.iter().map(|a| a.name.as_str()).collect();
        let v =
            vocabulary::Vocabulary::gather(&self.catalog, &profiles, &installed, &agents, context);
        json!({
            "prompt": v.prompt(),
            "terms": v.terms(),
            "counts": {
                "sites": v.sites.len(),
                "apps": v.apps.len(),
                "installed": v.installed.len(),
                "players": v.players.len(),
                "agents": v.agents.len(),
                "words": v.words.len(),
            },
        })
    }
}

/// `router.candidates`'s `hypotheses`: 1–[`MAX_HYPOTHESES`] strings of at most
/// [`MAX_UTTERANCE`] bytes (blank ones are skipped); else `-32602` saying what is wrong.
fn hypotheses(params: &Value) -> Result<Vec<String>, ErrorObject> {
    let Some(list) = params.get("hypotheses").and_then(Value::as_array) else {
        return Err(ErrorObject::invalid_params(format!(
            "{CANDIDATES} needs params.hypotheses, an array of the recogniser's transcripts (best first), not {}",
            params.get("hypotheses").map_or("nothing", json_type)
        )));
    };
    if list.is_empty() || list.len() > MAX_HYPOTHESES {
        return Err(ErrorObject::invalid_params(format!(
            "{CANDIDATES}: hypotheses holds {}; give 1 to {MAX_HYPOTHESES}",
            list.len()
        )));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        match item.as_str() {
            Some(text) if text.len() > MAX_UTTERANCE => {
                return Err(ErrorObject::invalid_params(format!(
                    "{CANDIDATES}: hypotheses[{i}] is {} bytes; at most {MAX_UTTERANCE}",
                    text.len()
                )));
            }
            // A blank one is kept (it proposes nothing), so that each candidate's
            // `hypothesis` is its index in the list as sent.
            Some(text) => out.push(text.trim().to_owned()),
            None => {
                return Err(ErrorObject::invalid_params(format!(
                    "{CANDIDATES}: hypotheses[{i}] must be a string, not {}",
                    json_type(item)
                )));
            }
        }
    }
    Ok(out)
}

/// The variable naming the site catalog when `--sites` is not given.
pub const SITES_ENV: &str = "UTTER_SITES";

/// The examples at the end of `utter-rules --help`.
const EXAMPLES: &str = "\
Examples:
  Check that it starts and answers, the way the runner talks to it:
    utter plugin check -- utter-rules --sites ~/.config/utter/sites.toml

  Use your own catalog from the runner's config (config.toml):
    [[plugin]]
    id = \"rules\"
    kind = \"router\"
    entrypoint = [\"utter\", \"plugin\", \"rules\", \"--sites\", \"/home/me/sites.toml\"]

A catalog holds one [[site]] table per site (data/sites.toml in the Utter
sources is the built-in one):
    [[site]]
    name = \"YouTube\"
    url = \"https://www.youtube.com\"
    aliases = [\"you tube\", \"yt\"]
A catalog that cannot be read or parsed stops the plugin at start, with a
message naming the file and the line.";

/// Utter's rules router: turns an utterance into one desktop step, without a model.
///
/// This is a plugin: Utter's runner starts it (as `utter plugin rules`, or as
/// this program) and speaks JSON-RPC 2.0 with it on stdin and stdout until it
/// closes stdin. You do not normally run it by hand.
///
/// It serves router.plan for
///   - media keys: "pause", "next track", "pause spotify";
///   - web sites from the site catalog: "open youtube";
///   - compositor actions on niri: "workspace two", "move this to the
///     third workspace", "focus left", "close this window", "take a
///     screenshot", and "switch to firefox" or "close firefox";
///   - the key bindings of your niri config ($NIRI_CONFIG, else
///     $XDG_CONFIG_HOME/niri/config.kdl): "focus workspace one", or a
///     binding's hotkey-overlay-title such as "open a terminal";
///   - installed applications: "launch calculator", matched on the Name,
///     GenericName and Keywords of the .desktop files under $XDG_DATA_HOME
///     and $XDG_DATA_DIRS;
///   - typing and keys in the focused window: "type hello world",
///     "press control shift t", "press enter three times";
///   - scrolling and clicking: "scroll down a lot", "click the send
///     button" (matched against the accessibility tree by the action
///     plugin);
///   - bare host names: "open example.com".
///
/// An utterance that no rule understands gets an empty plan, so that another
/// router can take over.
//
// (verbatim_doc_comment: clap 4 without its wrap_help feature does not wrap help text, so the
// lines above are wrapped by hand.)
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(
    name = "utter-rules",
    version,
    verbatim_doc_comment,
    args_override_self = true,
    after_help = EXAMPLES
)]
pub struct Options {
    /// The site catalog: a TOML file like data/sites.toml.
    ///
    /// Without this option the file named by $UTTER_SITES is used, and
    /// without either the catalog built into the program.
    #[arg(long, value_name = "PATH", verbatim_doc_comment)]
    pub sites: Option<PathBuf>,
}

impl Options {
    /// Parse `args`, the command-line arguments after the program name. `--help` and
    /// `--version` come back as errors too, of kind `DisplayHelp` and `DisplayVersion`: print
    /// them with [`clap::Error::print`] and exit with [`clap::Error::exit_code`].
    pub fn parse_args<I, T>(args: I) -> Result<Options, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let program = OsString::from("utter-rules");
        Options::try_parse_from(std::iter::once(program).chain(args.into_iter().map(Into::into)))
    }

    /// The catalog file to load: `--sites`, else `$UTTER_SITES` (as `var` reports it; empty
    /// counts as unset); `None` means the built-in catalog.
    pub fn catalog_path(&self, var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
        self.sites
            .clone()
            .or_else(|| var(SITES_ENV).filter(|v| !v.is_empty()).map(PathBuf::from))
    }
}

/// Serve the rules router on stdin/stdout until the runner closes stdin.
///
/// `args` are the command-line arguments after the program name (see [`Options`]).
/// `--help` and `--version` print and return success; invalid arguments print a usage
/// error on stderr and return clap's usage exit code (2); a catalog that cannot be loaded
/// prints why and returns failure.
pub async fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let options = match Options::parse_args(args) {
        Ok(options) => options,
        Err(e) => return print_clap_error(&e),
    };
    utter_protocol::plugin::init_stderr_logging();
    let catalog = match options.catalog_path(|name| std::env::var_os(name)) {
        Some(path) => Catalog::load(&path),
        None => Catalog::builtin(),
    };
    let catalog = match catalog {
        Ok(catalog) => catalog,
        Err(e) => {
            eprintln!("utter-rules: {e}");
            return ExitCode::FAILURE;
        }
    };
    let curated = match Curated::builtin() {
        Ok(curated) => curated,
        Err(e) => {
            eprintln!("utter-rules: {e}");
            return ExitCode::FAILURE;
        }
    };
    let words = match CommandWords::builtin() {
        Ok(words) => words,
        Err(e) => {
            eprintln!("utter-rules: {e}");
            return ExitCode::FAILURE;
        }
    };
    let binds = BindsSource::new(niri_config::default_config_path());
    // Start reading it now, in the background, so that a broken config is reported right
    // away; the handshake does not wait for it.
    let _ = binds.current(Duration::ZERO);
    let state = State {
        catalog,
        apps: AppScanner::new(apps::application_dirs())
            .with_mimeapps(utter_desktop::entry::mimeapps_files()),
        curated,
        binds,
        profiles: ProfilesSource::new(profiles::default_user_dir()),
        words,
        fixed_phrases: Default::default(),
    };
    plugin::run_stdio(
        MANIFEST,
        RulesRouter {
            state: Arc::new(state),
        },
    )
    .await
}

/// Print a clap outcome (help and version on stdout, errors on stderr) and turn its exit
/// code into an [`ExitCode`].
fn print_clap_error(e: &clap::Error) -> ExitCode {
    // Nothing more can be said if stdout or stderr is gone.
    let _ = e.print();
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State {
            catalog: Catalog::builtin().expect("built-in catalog"),
            // No directories: no applications.
            apps: AppScanner::new(Vec::new()),
            curated: Curated::builtin().expect("built-in phrases"),
            // No niri config.
            binds: BindsSource::new(None),
            // The built-in profiles only.
            profiles: ProfilesSource::new(None),
            words: CommandWords::builtin().expect("built-in command words"),
            fixed_phrases: Default::default(),
        }
    }

    /// A directory of desktop entries: (desktop id, `Name`, `Categories`), each running the
    /// program of its id.
    fn applications(entries: &[(&str, &str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (id, name, categories) in entries {
            std::fs::write(
                dir.path().join(format!("{id}.desktop")),
                format!(
                    "[Desktop Entry]\nType=Application\nName={name}\nExec={id}\nCategories={categories}\n"
                ),
            )
            .expect("a desktop entry");
        }
        dir
    }

    fn plan(params: Value) -> Result<Value, ErrorObject> {
        let request = PlanRequest::from_params(&params)?;
        Ok(state().plan(&request))
    }

    /// "open a browser" with two installed starts the person's default one
    /// (`mimeapps.list`), and follows the file when it changes; without a default, none is
    /// guessed.
    #[test]
    fn a_kind_with_several_installed_is_the_persons_default() {
        let apps = applications(&[
            ("brave-browser", "Brave Web Browser", "Network;WebBrowser;"),
            ("google-chrome", "Google Chrome", "Network;WebBrowser;"),
        ]);
        let state = State {
            apps: AppScanner::new(vec![apps.path().to_path_buf()]),
            ..state()
        };
        let opened = |state: &State| {
            let request =
                PlanRequest::from_params(&json!({"utterance": "open a browser"})).expect("params");
            state.plan(&request)["steps"][0]["args"]["app_id"].clone()
        };
        assert_eq!(opened(&state), Value::Null);
        let list = apps.path().join("mimeapps.list");
        std::fs::write(
            &list,
            "[Default Applications]\nx-scheme-handler/https=google-chrome.desktop\n",
        )
        .expect("mimeapps.list");
        assert_eq!(opened(&state), json!("google-chrome"));
        std::fs::write(
            &list,
            "[Default Applications]\nx-scheme-handler/https=nothing-here.desktop;brave-browser.desktop\n",
        )
        .expect("mimeapps.list");
        assert_eq!(opened(&state), json!("brave-browser"));
    }

    /// "open my files" with Dolphin the only file manager installed opens Dolphin, not GNOME
    /// Files' program (a profile called "Files" whose application is not installed).
    #[test]
    fn a_kind_word_naming_an_uninstalled_profile_is_the_installed_app_of_the_kind() {
        let apps = applications(&[(
            "org.kde.dolphin",
            "Dolphin",
            "Qt;KDE;System;FileTools;FileManager;",
        )]);
        let state = State {
            apps: AppScanner::new(vec![apps.path().to_path_buf()]),
            ..state()
        };
        for said in ["open my files", "open files", "open the file manager"] {
            let request = PlanRequest::from_params(&json!({"utterance": said})).expect("params");
            let planned = state.plan(&request);
            let step = &planned["steps"][0];
            let app = step["args"]["app"]
                .as_str()
                .or(step["args"]["app_id"].as_str());
            assert_eq!(app, Some("org.kde.dolphin"), "{said}: {planned}");
        }
    }

    /// Every example of "what can I say" plans as it says, in the window it names, with a
    /// few applications installed.
    #[test]
    fn every_example_plans_to_its_op() {
        let apps = applications(&[
            ("firefox", "Firefox", ""),
            ("org.gnome.Calculator", "Calculator", ""),
        ]);
        let state = State {
            apps: AppScanner::new(vec![apps.path().to_path_buf()]),
            ..state()
        };
        let examples = examples::Examples::builtin().expect("parses");
        let mut wrong = Vec::new();
        for category in &examples.categories {
            for example in &category.examples {
                let mut params = json!({"utterance": example.say});
                if let Some(app_id) = &example.focused {
                    params["context"] = json!({"focused": {"app_id": app_id}});
                }
                let request = PlanRequest::from_params(&params).expect("params");
                let planned = state.plan(&request);
                if planned["steps"][0]["op"] != example.op.as_str() {
                    wrong.push(format!("{:?} ({}): {planned}", example.say, category.name));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "examples that plan otherwise:\n{}",
            wrong.join("\n")
        );
        let answer = utter_protocol::serde_json::to_value(&examples).expect("serialises");
        assert!(answer["categories"][0]["examples"][0]["say"].is_string());
    }

    #[test]
    fn plan_result_shape() {
        let result = plan(json!({"utterance": "Open YouTube!"})).expect("planned");
        assert_eq!(
            result,
            json!({
                "steps": [{
                    "op": "ensure_url",
                    "args": {"url": "https://www.youtube.com", "site": "YouTube"},
                    "provenance": "user",
                    "confirm": false,
                }],
                "rule": "open_site",
                "message": "open YouTube (https://www.youtube.com)",
            })
        );
        let result = plan(json!({"utterance": "pause", "provenance": "screen", "context": {}}))
            .expect("planned");
        assert_eq!(result["steps"][0]["provenance"], "screen");
        assert_eq!(result["steps"][0]["args"], json!({"command": "pause"}));
    }

    #[test]
    fn terminal_commands_are_kept_as_said_and_must_be_one_line() {
        let command = |utterance: &str| {
            let result = plan(json!({"utterance": utterance,
                "context": {"focused": {"app_id": "foot"}}}))
            .expect("planned");
            result["steps"][0]["args"]["command"].clone()
        };
        assert_eq!(command("run cd .."), "cd ..");
        assert_eq!(command("run ls *"), "ls *");
        assert_eq!(command("run echo $?"), "echo $?");
        assert_eq!(
            command("run echo hi > /dev/null &"),
            "echo hi > /dev/null &"
        );
        assert_eq!(
            command("run git commit -m \"fix\""),
            "git commit -m \"fix\""
        );
        assert_eq!(command("run \"make test\""), "make test");
        assert_eq!(command("Run ls."), "ls");
        let two_lines = plan(json!({"utterance": "run ls\nrm -rf ~",
            "context": {"focused": {"app_id": "foot"}}}))
        .expect("planned");
        assert_eq!(two_lines["steps"], json!([]), "{two_lines}");
        assert_eq!(two_lines["escalate"]["reason"], "incomplete", "{two_lines}");
    }

    #[test]
    fn addresses_with_credentials_backslashes_or_invisible_characters_are_not_opened() {
        for utterance in [
            "open https://evil.com\\@google.com",
            "open https://google.com@evil.com/x",
            "open https://example.com/\u{202e}gpj.exe",
            "open https://exa\u{200b}mple.com/x",
        ] {
            let result = plan(json!({"utterance": utterance})).expect("planned");
            let url = result["steps"][0]["args"]["url"].as_str().unwrap_or("");
            assert!(
                !url.contains('@') && !url.contains('\\') && !url.contains('\u{202e}'),
                "{utterance}: {result}"
            );
        }
    }

    #[test]
    fn utterances_that_lowercase_to_other_lengths_split_without_panicking() {
        assert_eq!(split_parts("Ω and İ"), ["Ω", "İ"]);
        assert_eq!(split_parts("K and İİ AND x"), ["K", "İİ", "x"]);
        assert_eq!(split_parts("copy, then paste"), ["copy", "paste"]);
        let result = plan(json!({"utterance": "K and İİ"})).expect("planned");
        assert_eq!(result["steps"], json!([]));
        // An utterance ending in "in" or "on" (a name could follow, none does).
        for utterance in ["click sign in", "log on", "type on", "in", "on on on"] {
            plan(json!({"utterance": utterance})).expect("planned");
        }
    }

    #[test]
    fn no_match_is_an_empty_plan() {
        let result = plan(json!({"utterance": " blorp the frobnicator "})).expect("planned");
        assert_eq!(
            result,
            json!({
                "steps": [],
                "rule": null,
                "message": "no rule matched \"blorp the frobnicator\"",
                "escalate": {"reason": "no_rule", "message": "no rule matched \"blorp the frobnicator\""},
            })
        );
        // Punctuation only is not blank, just not understood.
        let result = plan(json!({"utterance": "?!"})).expect("planned");
        assert_eq!(result["steps"], json!([]));
    }

    #[test]
    fn destructive_steps_carry_confirm_true() {
        for utterance in ["close this window", "Close it!", "kill this window"] {
            let result = plan(json!({"utterance": utterance})).expect("planned");
            assert_eq!(
                result["steps"],
                json!([{
                    "op": "niri",
                    "args": {"command": "close-window"},
                    "provenance": "user",
                    "confirm": true,
                }]),
                "{utterance}"
            );
        }
        let result = plan(json!({"utterance": "workspace two"})).expect("planned");
        assert_eq!(result["steps"][0]["confirm"], false);
    }

    #[test]
    fn an_empty_plan_says_why_when_a_rule_came_close() {
        let message = |params: Value| plan(params).expect("planned")["message"].clone();
        // No applications in this state, and no windows in the context.
        assert_eq!(
            message(json!({"utterance": "Switch to Blender.", "context": {"windows": []}})),
            "no installed application or open window is called \"blender\""
        );
        assert_eq!(
            message(json!({
                "utterance": "close kate",
                "context": {"windows": [{"app_id": "kate-esr"}]},
            })),
            "no installed application or open window is called \"kate\"; \
             similar names: kate-esr"
        );
        assert_eq!(
            message(json!({"utterance": "workspace -1"})),
            "focus-workspace needs a number from 1 to 255, not -1"
        );
        let result = plan(json!({"utterance": "workspace minus one"})).expect("planned");
        assert_eq!(
            (&result["steps"], &result["rule"]),
            (&json!([]), &Value::Null)
        );
    }

    #[test]
    fn bad_params_are_invalid_params() {
        for params in [
            json!({}),
            json!({"utterance": ""}),
            json!({"utterance": "   "}),
            json!({"utterance": null}),
            json!({"utterance": 3}),
            json!({"utterance": ["open", "youtube"]}),
            json!({"utterance": "pause", "provenance": 1}),
            json!({"utterance": "pause", "provenance": ""}),
            json!({"utterance": "x".repeat(MAX_UTTERANCE + 1)}),
        ] {
            let err = plan(params.clone()).expect_err("refused");
            assert_eq!(err.code, -32602, "{params}");
            assert!(err.message.contains("router.plan"), "{}", err.message);
        }
    }

    #[test]
    fn an_odd_context_is_no_context() {
        let many: Vec<Value> = (0..5000)
            .map(|i| json!({"app_id": format!("a{i}")}))
            .collect();
        for context in [
            json!("niri"),
            json!({"compositor": 7}),
            json!({"windows": 3}),
            json!({"windows": [{"app_id": ["x"]}]}),
            json!({"windows": many}),
        ] {
            let result =
                plan(json!({"utterance": "workspace two", "context": context})).expect("planned");
            assert_eq!(
                result["steps"][0]["args"],
                json!({"command": "focus-workspace", "args": [2]}),
                "{context}"
            );
            // Nothing about the context when the utterance did not need it.
            assert!(!result["message"].as_str().unwrap().contains("context"));
        }
        // The windows after the first 4096 are not read; the first ones are.
        let many: Vec<Value> = (0..5000)
            .map(|i| json!({"app_id": format!("a{i}")}))
            .collect();
        let result = plan(json!({"utterance": "switch to a4000", "context": {"windows": many}}))
            .expect("planned");
        assert_eq!(result["steps"][0]["args"], json!({"app": "a4000"}));
        // A focus phrase that fell through says the context was not used, and why.
        let result = plan(json!({
            "utterance": "switch to westonterm",
            "context": {"compositor": 7, "windows": [{"app_id": "westonterm"}]},
        }))
        .expect("planned");
        assert_eq!(result["steps"], json!([]));
        let message = result["message"].as_str().unwrap();
        assert!(
            message.starts_with("no installed application or open window is called \"westonterm\"")
                && message.contains("context was not used")
                && message.contains("context.compositor must be"),
            "{message}"
        );
    }

    #[test]
    fn command_line() {
        let parse = |a: &[&str]| Options::parse_args(a.iter().copied());
        let sites = |a: &[&str]| parse(a).map(|o| o.sites);
        assert_eq!(
            sites(&["--sites", "/x.toml"]).expect("parses"),
            Some(PathBuf::from("/x.toml"))
        );
        assert_eq!(
            sites(&["--sites=/y.toml"]).expect("parses"),
            Some(PathBuf::from("/y.toml"))
        );
        // The last one wins, as before clap.
        assert_eq!(
            sites(&["--sites", "/a.toml", "--sites=/b.toml"]).expect("parses"),
            Some(PathBuf::from("/b.toml"))
        );
        assert_eq!(sites(&[]).expect("parses"), None);
        for bad in [&["--sites"][..], &["--frob"], &["extra"], &["--sites="]] {
            let err = parse(bad).expect_err("refused");
            assert_eq!(err.exit_code(), 2, "{bad:?}");
            assert!(err.use_stderr(), "{bad:?}");
        }
        for (flag, kind) in [
            ("--help", clap::error::ErrorKind::DisplayHelp),
            ("-h", clap::error::ErrorKind::DisplayHelp),
            ("--version", clap::error::ErrorKind::DisplayVersion),
            ("-V", clap::error::ErrorKind::DisplayVersion),
        ] {
            let err = parse(&[flag]).expect_err("not options");
            assert_eq!(err.kind(), kind, "{flag}");
            assert_eq!(err.exit_code(), 0, "{flag}");
        }
    }

    #[test]
    fn the_catalog_comes_from_sites_then_the_environment() {
        let env = |value: Option<&'static str>| {
            move |name: &str| {
                assert_eq!(name, SITES_ENV);
                value.map(OsString::from)
            }
        };
        let given = Options {
            sites: Some(PathBuf::from("/given.toml")),
        };
        let none = Options { sites: None };
        assert_eq!(
            given.catalog_path(env(Some("/env.toml"))),
            Some(PathBuf::from("/given.toml"))
        );
        assert_eq!(
            none.catalog_path(env(Some("/env.toml"))),
            Some(PathBuf::from("/env.toml"))
        );
        assert_eq!(none.catalog_path(env(Some(""))), None);
        assert_eq!(none.catalog_path(env(None)), None);
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        Options::command().debug_assert();
    }

    #[test]
    fn manifest_is_valid() {
        let manifest =
            utter_protocol::manifest::Manifest::from_toml_str(MANIFEST, "utter-plugin.toml")
                .expect("manifest validates");
        assert_eq!(manifest.name, "rules");
    }

    /// The steps the whole router plans for `utterance` with a window of `app_id` focused.
    fn steps_focused(utterance: &str, app_id: &str) -> Value {
        plan(json!({"utterance": utterance, "context": {"focused": {"app_id": app_id}}}))
            .expect("planned")["steps"]
            .clone()
    }

    #[test]
    fn an_answer_or_a_correction_takes_a_command_back() {
        for said in [
            "quit firefox? no, it's fine",
            "Quit Chromium. Never mind.",
            "the first tab, sorry, the second",
            "reload the page? no, its fine",
            "close slack, no wait",
        ] {
            assert_eq!(steps_focused(said, "code"), json!([]), "{said}");
        }
        assert_eq!(
            steps_focused("open example.com", "code")[0]["op"],
            "ensure_url"
        );
        assert_eq!(
            steps_focused("pause, then play", "code")
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }

    /// A learner's phrasings planned since the thirty-first held-out set, and what a hostile
    /// tester found they must not become.
    #[test]
    fn a_learners_phrasings_plan_and_their_look_alikes_do_not() {
        let with_windows = |said: &str, focused: &str, open: &[&str]| {
            let windows: Vec<Value> = open
                .iter()
                .enumerate()
                .map(|(i, a)| json!({"id": i + 1, "app_id": a}))
                .collect();
            plan(json!({"utterance": said, "context": {
                "compositor": {"name": "niri"},
                "focused": {"id": 99, "app_id": focused},
                "windows": windows}}))
            .expect("planned")["steps"]
                .clone()
        };
        let first = |said: &str, app: &str| steps_focused(said, app)[0].clone();
        assert_eq!(first("make louder", "code")["args"]["command"], "volume_up");
        let page = steps_focused("go to page 12", "org.kde.okular");
        assert_eq!(page[0]["args"]["chord"], "ctrl+g", "{page}");
        assert_eq!(page[1]["args"]["text"], "12", "{page}");
        assert_eq!(page[2]["args"]["chord"], "Return", "{page}");
        assert_eq!(
            steps_focused("go to page 3", "code"),
            json!([]),
            "no page in an editor"
        );
        assert_eq!(
            first("the song before", "code")["args"]["command"],
            "previous"
        );
        assert_eq!(
            first("continue the music", "code")["args"]["command"],
            "play"
        );
        assert_eq!(first("volume on 30 percent", "code")["args"]["level"], 0.3);
        assert_eq!(
            first("open again the tab i closed", "firefox")["args"]["chord"],
            "ctrl+shift+t"
        );
        assert_eq!(first("the third tab", "firefox")["args"]["chord"], "alt+3");
        assert_eq!(first("make it undone please", "code")["op"], "undo");
        assert_eq!(
            first("click on the button reply", "firefox")["args"]["description"],
            "reply"
        );
        assert_eq!(
            first("search on amazon left handed mouse", "firefox")["args"]["url"],
            "https://www.amazon.com/s?k=left+handed+mouse"
        );
        assert_eq!(
            first("google scholar zebrafish fin regeneration", "firefox")["args"]["url"],
            "https://scholar.google.com/scholar?q=zebrafish+fin+regeneration"
        );
        assert_eq!(
            first("go on google scholar", "firefox")["args"]["site"],
            "Google Scholar"
        );
        // Not commands: a story's "then", advice after a comma, a "go on" that continues, the
        // one before, a button's place, a word that names no application of its own.
        for said in [
            "then end the meeting",
            "and then close firefox",
            "look on amazon, it's cheaper there",
            "go on, indeed",
            "the one before",
            "continue it",
            "go further down",
            "i need to cite this",
        ] {
            assert_eq!(steps_focused(said, "firefox"), json!([]), "{said}");
        }
        assert_eq!(
            first("click the link below", "firefox")["args"]["description"],
            "link below"
        );
        assert_eq!(
            with_windows("paste the code", "foot", &["code", "firefox"]),
            json!([]),
            "the code is no VS Code"
        );
        // ("reload firefox" with Firefox installed and open: the held-out sets' desktops.)
        assert_eq!(
            with_windows("reload firefox", "foot", &[]),
            json!([]),
            "an application named last must be open"
        );
        for said in [
            "go in the folder again",
            "change to another folder",
            "go in my folder",
        ] {
            assert_eq!(steps_focused(said, "foot"), json!([]), "{said}");
        }
        assert_eq!(
            first("go in the folder thesis", "foot")["args"]["command"],
            "cd thesis"
        );
    }

    #[test]
    fn talon_habits_and_other_orders_plan_as_their_command() {
        let first = |said: &str, app: &str| steps_focused(said, app)[0].clone();
        // Talon's object-first order is the verb-first command.
        assert_eq!(first("tab close", "firefox"), first("close tab", "firefox"));
        assert_eq!(
            first("tab restore", "firefox"),
            first("restore tab", "firefox")
        );
        // Talon's typing verbs type what follows; a described object is no text.
        assert_eq!(first("say good morning", "firefox")["op"], "type_text");
        assert_eq!(
            first("insert maintenance window", "gedit")["args"]["text"],
            "maintenance window"
        );
        assert_ne!(steps_focused("say the name", "gedit")[0]["op"], "type_text");
        // The place before the words of a find.
        let found = steps_focused("find on page dhcp", "firefox");
        assert_eq!(found[0]["args"]["chord"], "ctrl+f");
        assert_eq!(found[1]["args"]["text"], "dhcp");
        // A site and the kind of thing sought right after the verb.
        assert_eq!(
            first("find youtube videos about split keyboards", "firefox")["args"]["url"],
            "https://www.youtube.com/results?search_query=split+keyboards"
        );
        // Text given as a reply, then sent.
        let replied = steps_focused("reply with on my way and send it", "discord");
        assert_eq!(replied[0]["args"]["text"], "on my way");
        assert_eq!(replied[1]["args"]["chord"], "Return");
        // A plain "undo" after regret is the journal's; alone, the app's chord.
        assert_eq!(first("nope, undo", "gedit")["op"], "undo");
        assert_eq!(first("oops undo", "gedit")["op"], "undo");
        assert_eq!(first("undo", "gedit")["op"], "key");
        // A volume said as a level.
        let volume = first("set the volume to fifty percent", "firefox");
        assert_eq!(volume["args"]["command"], "set_volume");
        assert_eq!(volume["args"]["level"], 0.5);
    }

    #[test]
    fn taken_back_quoted_asked_and_described_plan_nothing() {
        let nothing = |said: &str, app: &str| {
            let planned = plan(json!({"utterance": said, "context": {"focused": {"app_id": app}}}))
                .expect("answered");
            assert_eq!(planned["steps"], json!([]), "{said:?} in {app}: {planned}");
        };
        // A command taken back at its end.
        for said in [
            "quit firefox, no wait",
            "Close the tab? No.",
            "pause, never mind",
            "scroll down, wait",
        ] {
            nothing(said, "firefox");
        }
        // Someone else's words, and a question tag.
        nothing("he said, quit firefox", "firefox");
        nothing("i was like, close the tab", "firefox");
        nothing("we ship tomorrow, right?", "gedit");
        // Talon's verbs before what is not text; a word of "new" that is no application.
        for said in [
            "say it again",
            "say what",
            "let's say 5",
            "insert link",
            "enter key",
        ] {
            nothing(said, "gedit");
        }
        nothing("new task", "gedit");
        // A level that is not one number.
        nothing("set volume to 0.8", "gedit");
        nothing("volume 1/2", "gedit");
        // In a messenger: no message said.
        for said in [
            "send me the link",
            "send bob a message",
            "reply with the password",
        ] {
            nothing(said, "discord");
        }
        // Still planned: the remark before a command.
        assert_eq!(
            steps_focused("it is way too loud, turn the volume down", "firefox")[0]["op"],
            "media"
        );
        // A new line in a messenger is shift+Return: Return sends.
        assert_eq!(
            steps_focused("new line", "discord")[0]["args"]["chord"],
            "shift+Return"
        );
    }

    #[test]
    fn wordy_polite_commands_plan_as_their_command() {
        let first = |said: &str, app: &str| steps_focused(said, app)[0].clone();
        // Whom it is said to, and "again", are no part of the command.
        assert_eq!(
            first("Print this page for me, dear.", "firefox"),
            first("print this page", "firefox")
        );
        assert_eq!(
            first("Play the music again.", "firefox")["args"]["command"],
            "play"
        );
        // A remark in a sentence of its own, before or after.
        assert_eq!(
            first(
                "Where did my download go? Show me the downloads.",
                "firefox"
            ),
            first("show downloads", "firefox")
        );
        assert_eq!(
            first(
                "That's not what I wanted. Put it back the way it was.",
                "firefox"
            )["op"],
            "undo"
        );
        // Ways back to where things were, and counts said as the assistant's doing.
        for said in [
            "take me back to where i was",
            "undo what you just did",
            "scratch that",
        ] {
            assert_eq!(first(said, "firefox")["args"]["count"], 1, "{said}");
        }
        assert_eq!(
            first("Undo the last three things you did, dear.", "firefox")["args"]["count"],
            3
        );
        // "cancel that" in a terminal is its interrupt, not an undo.
        assert_eq!(first("cancel that", "foot")["args"]["chord"], "ctrl+c");
        // The head noun any program has, a dialog's button, the page that scrolls.
        assert_eq!(first("press ok", "gimp")["op"], "click_element");
        assert_eq!(
            first("press the little arrow thing", "gimp")["op"],
            "click_element"
        );
        assert_eq!(
            first("go down the page a little", "firefox")["op"],
            "scroll"
        );
        assert_eq!(first("go down", "firefox")["op"], "niri");
        // Every terminal has the shared terminal's phrases, not its tabs.
        assert_eq!(
            first("clear the screen", "org.gnome.Console")["args"]["chord"],
            "ctrl+l"
        );
        assert!(
            steps_focused("new tab", "foot")
                .as_array()
                .is_none_or(Vec::is_empty)
        );
    }

    #[test]
    fn a_click_then_typing_is_two_commands_and_a_label_with_and_is_one() {
        let steps = steps_focused(
            "click the search box and type watercolor brushes",
            "firefox",
        );
        assert_eq!(steps[0]["op"], "click_element", "{steps}");
        assert_eq!(steps[0]["args"]["description"], "search box", "{steps}");
        assert_eq!(steps[1]["op"], "type_text", "{steps}");
        assert_eq!(steps[1]["args"]["text"], "watercolor brushes", "{steps}");
        let steps = steps_focused("click the name field and press enter", "firefox");
        assert_eq!(steps[1]["args"]["chord"], "Return", "{steps}");
        let steps = steps_focused("click save and exit", "firefox");
        assert_eq!(steps.as_array().map(Vec::len), Some(1), "{steps}");
        assert_eq!(steps[0]["args"]["description"], "save and exit", "{steps}");
        // More parts than are planned at once are not one long label either.
        let planned = plan(json!({"utterance":
            "click the x and type y and press z and scroll down and open firefox and go to github",
            "context": {"focused": {"app_id": "firefox"}}}))
        .expect("planned");
        assert_eq!(planned["escalate"]["reason"], "too_many_parts", "{planned}");
    }

    #[test]
    fn an_app_ids_control_characters_never_reach_a_message() {
        let planned = plan(json!({"utterance": "switch to red",
            "context": {"windows": [{"id": 1, "app_id": "\u{1b}[31mred"}]}}))
        .expect("planned");
        let message = planned["message"].as_str().unwrap_or("");
        assert!(message.contains("similar names"), "{planned}");
        assert!(!message.contains('\u{1b}'), "{planned}");
    }

    #[test]
    fn scroll_amounts_people_say_and_haste_after_a_command() {
        let scroll =
            |said: &str| steps_focused(said, "org.kde.okular")[0]["args"]["amount"].clone();
        assert_eq!(scroll("scroll down a bunch"), inapp::SCROLL_LOT);
        assert_eq!(scroll("scroll down a page"), inapp::SCROLL_PAGE);
        assert_eq!(scroll("scroll up one screen"), inapp::SCROLL_PAGE);
        // "for now" and "real quick" are no part of what is acted on.
        assert_eq!(
            steps_focused("scroll down a bit for now", "org.kde.okular"),
            steps_focused("scroll down a bit", "org.kde.okular")
        );
        // "pause for a moment" is a person pausing, not a command.
        assert!(
            steps_focused("pause for a moment", "org.kde.okular")
                .as_array()
                .is_none_or(Vec::is_empty)
        );
    }

    #[test]
    fn a_lead_word_heard_as_its_homophone_is_a_candidate_not_a_plan() {
        // From text alone a guessed lead acts on nothing: noise written as "Keep" or "And I"
        // must not press ctrl+c or ctrl+z. The audio decides among the candidates.
        for heard in ["Post", "And do.", "Keep", "And I", "Right, thank you."] {
            let steps = steps_focused(heard, "org.gnome.TextEditor");
            assert!(
                steps.as_array().is_none_or(Vec::is_empty),
                "{heard}: {steps}"
            );
        }
        let proposed = state().candidates(
            &["Post".to_owned()],
            Some(Context {
                app_ids: vec!["org.gnome.TextEditor".into()],
                focused_app_id: Some("org.gnome.TextEditor".into()),
                ..Context::default()
            }),
        );
        let leads: Vec<&str> = proposed["candidates"]
            .as_array()
            .expect("candidates")
            .iter()
            .filter(|c| c["source"] == "lead")
            .filter_map(|c| c["text"].as_str())
            .collect();
        assert!(leads.contains(&"paste"), "{proposed}");
        // A short command written twice is planned once.
        assert_eq!(
            steps_focused("Clear, Clear,", "foot"),
            steps_focused("clear", "foot")
        );
        // What plans as said is never rewritten; what sounds like no lead plans nothing.
        let moved = steps_focused("move the window right", "foot");
        assert_ne!(moved[0]["op"], "type_text", "{moved}");
        assert!(
            plan(json!({"utterance": "zebra crossing"})).expect("answered")["steps"]
                .as_array()
                .is_none_or(Vec::is_empty)
        );
    }

    #[test]
    fn a_remark_after_the_last_comma_and_a_purpose_after_the_command_are_not_planned() {
        assert_eq!(
            steps_focused(
                "um, open firefox, my lecture starts in five minutes",
                "foot"
            ),
            steps_focused("open firefox", "foot")
        );
        assert_eq!(
            steps_focused("scroll up to see the older messages", "firefox"),
            steps_focused("scroll up", "firefox")
        );
        assert_eq!(
            steps_focused("play some music while i study", "foot"),
            steps_focused("play some music", "foot")
        );
    }

    #[test]
    fn typed_text_with_a_conjunction_of_its_own_is_split_at_the_last_one() {
        let planned = steps_focused("type drum and bass sample packs and press enter", "firefox");
        assert_eq!(
            planned[0]["args"]["text"], "drum and bass sample packs",
            "{planned}"
        );
        assert_eq!(planned[1]["args"]["chord"], "Return", "{planned}");
        // Text that only has a conjunction stays whole.
        let planned = steps_focused("type salt and pepper", "firefox");
        assert_eq!(planned[0]["args"]["text"], "salt and pepper", "{planned}");
    }

    #[test]
    fn a_chooser_is_offered_only_names_the_matcher_cannot_tell_apart() {
        let offered = |utterance: &str| -> Vec<String> {
            let planned = plan(json!({"utterance": utterance,
                "decide": {"act": 0.88, "ask": 0.72, "chooser": "llm.choose"}}))
            .expect("planned");
            planned["candidates"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| c["args"]["site"].as_str().unwrap_or("").to_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        // Two wikis equally near: the chooser picks.
        let wikis = offered("open nearly wiki");
        assert!(wikis.contains(&"Arch Wiki".to_owned()), "{wikis:?}");
        assert!(wikis.contains(&"niri wiki".to_owned()), "{wikis:?}");
        // GitHub is far nearer than GitLab: no choice to make, the matcher asks itself.
        assert_eq!(offered("open get hub"), Vec::<String>::new());
        // Faint names only: nothing to offer.
        assert_eq!(offered("open my heart"), Vec::<String>::new());
        assert_eq!(offered("visit grandma"), Vec::<String>::new());
    }

    #[test]
    fn a_command_before_who_it_is_for_is_planned() {
        let planned = steps_focused("pause the music so my colleague can talk", "firefox");
        assert_eq!(planned[0]["op"], "media", "{planned}");
        assert_eq!(planned[0]["args"]["command"], "pause", "{planned}");
    }

    #[test]
    fn a_line_break_said_after_typed_text_is_a_step_of_its_own() {
        let planned = steps_focused(
            "type interview notes and then a new line",
            "org.gnome.TextEditor",
        );
        assert_eq!(planned[0]["args"]["text"], "interview notes", "{planned}");
        assert_eq!(planned[1]["args"]["chord"], "Return", "{planned}");
    }

    #[test]
    fn a_command_after_a_remark_is_planned_and_a_split_command_is_not() {
        let steps = |utterance: &str| {
            plan(json!({"utterance": utterance, "context": {"compositor": {"name": "niri"}}}))
                .expect("planned")["steps"]
                .clone()
        };
        let planned = steps("it's way too loud, turn the volume down");
        assert_eq!(planned[0]["op"], "media", "{planned}");
        assert_eq!(planned[0]["args"]["command"], "volume_down", "{planned}");
        let planned = steps("let's watch something, open youtube");
        assert_eq!(planned[0]["op"], "ensure_url", "{planned}");
        // A transcript's comma inside one command is no remark.
        assert_eq!(steps("reopen, close tab"), json!([]));
        // The remark alone, or a remark and no command, plans nothing.
        assert_eq!(steps("i think, the weather is nice"), json!([]));
        assert_eq!(steps("it's loud,"), json!([]));
        // The command, then why: the command.
        let planned = steps("pause the music because my phone is ringing");
        assert_eq!(planned[0]["args"]["command"], "pause", "{planned}");
        let planned = steps("open youtube so i can watch something");
        assert_eq!(planned[0]["op"], "ensure_url", "{planned}");
        assert_eq!(steps("because i said so"), json!([]));
    }

    #[test]
    fn a_command_that_wipes_the_system_is_refused_however_it_is_said() {
        let terminal = json!({"compositor": {"name": "niri"}, "focused": {"app_id": "foot"}});
        for utterance in [
            "run sudo rm dash rf slash",
            "run rm -rf /",
            "type rm -rf / and press enter",
            "run rm -r --no-preserve-root /",
            "run sudo mkfs.ext4 /dev/sda1",
            "run dd if=/dev/zero of=/dev/nvme0n1",
            "run dd if equals dev zero of equals dev sda",
            "run sudo dd if equals dev zero of equals dev nvme zero n one",
            "run sudo chmod dash r seven seven seven slash",
            "run sudo dd if equals dev urandom of equals slash dev slash nvme0n1",
            "in foot run rm -rf ~",
            "foot run rm dash rf tilde",
            // The target said in words, as a request rather than a path.
            "run rm -rf on my home directory",
            "run rm -r everything",
            "run sudo rm -rf the whole system",
        ] {
            let planned =
                plan(json!({"utterance": utterance, "context": terminal})).expect("answered");
            assert_eq!(planned["steps"], json!([]), "{utterance}: {planned}");
            assert_eq!(
                planned["escalate"]["reason"], "refused",
                "{utterance}: {planned}"
            );
        }
        // With no terminal focused, refused too: never "focus a terminal" for a wipe.
        let browser = json!({"compositor": {"name": "niri"}, "focused": {"app_id": "firefox"}});
        for utterance in [
            "run rm -rf /",
            "run sudo rm -rf --no-preserve-root /",
            "execute mkfs.ext4 /dev/sda",
        ] {
            for context in [&browser, &Value::Null] {
                let planned =
                    plan(json!({"utterance": utterance, "context": context})).expect("answered");
                assert_eq!(planned["steps"], json!([]), "{utterance}: {planned}");
                assert_eq!(
                    planned["escalate"]["reason"], "refused",
                    "{utterance}: {planned}"
                );
            }
        }
        for utterance in ["run rm -rf node_modules", "run rm -r ./build", "run ls /"] {
            let planned =
                plan(json!({"utterance": utterance, "context": terminal})).expect("answered");
            assert_eq!(
                planned["steps"][0]["op"], "terminal",
                "{utterance}: {planned}"
            );
        }
    }

    #[test]
    fn more_parts_than_are_planned_at_once_say_so() {
        let planned = plan(json!({
            "utterance": "open youtube and open github and pause and mute and unmute"
        }))
        .expect("answered");
        assert_eq!(planned["steps"], json!([]), "{planned}");
        assert_eq!(planned["escalate"]["reason"], "too_many_parts", "{planned}");
        let four = plan(json!({"utterance": "open youtube and open github and pause and mute"}))
            .expect("answered");
        assert_eq!(four["steps"].as_array().map(Vec::len), Some(4), "{four}");
    }

    #[test]
    fn a_search_after_opening_a_site_searches_that_site() {
        let planned =
            plan(json!({"utterance": "go to youtube and search for synthwave"})).expect("planned");
        let steps = planned["steps"].as_array().expect("steps");
        assert_eq!(steps.len(), 1, "{planned}");
        assert_eq!(
            steps[0]["args"]["url"], "https://www.youtube.com/results?search_query=synthwave",
            "{planned}"
        );
        // Nothing to search: not a search for "for".
        let planned = plan(json!({"utterance": "go to youtube and search for"})).expect("planned");
        assert!(
            !planned["steps"].to_string().contains("search_query=for"),
            "{planned}"
        );
        // Another part keeps its own meaning.
        let planned = plan(json!({"utterance": "open youtube and pause"})).expect("planned");
        assert_eq!(planned["steps"][0]["op"], "ensure_url", "{planned}");
        assert_eq!(planned["steps"][1]["op"], "media", "{planned}");
    }
}
