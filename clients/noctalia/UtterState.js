.pragma library
// The widget's state, derived only from the JSON lines of `utter events --json` (one event
// object per line, tagged by "event") and from `utter pending --json` (an array of pending
// confirmations). Kept free of QML types so that the same file runs under node in the
// project's contract test (tests/noctalia.rs), fed with real output of a running runner.
//
// The event shapes it reads are pinned by tests/noctalia.rs and listed in README.md here.

// A fresh state: nothing known until the first snapshot arrives.
function initial() {
    return {
        connected: false,      // a snapshot was read and `utter events` still runs
        runnerState: "",       // "starting" | "ready" | "degraded" | "stopping"
        listening: false,      // push-to-talk held
        transcribing: false,   // released; waiting for the voice cycle's outcome
        voiceOn: false,        // the runner has a voice loop (status.voice.state is not "off")
        pending: [],           // [{id, op, summary, expires}] waiting for Approve/Deny
        degradedBy: [],        // ids of plugins that are not ok
        plugins: {},           // id -> status word
        partial: "",           // what was heard so far while the key is held ("" when nothing)
        lastTranscript: "",
        lastResult: null,      // {ok, text} of the last command or voice cycle
        lastError: "",         // why the last voice cycle failed ("" when it did not)
        undoable: "",          // what "undo that" would reverse ("" when nothing)
        dictation: false,      // what the voice loop hears is typed ("stop dictation" ends it)
    };
}

function copy(state) {
    var next = {};
    for (var k in state) next[k] = state[k];
    next.pending = state.pending.slice();
    next.plugins = {};
    for (var p in state.plugins) next.plugins[p] = state.plugins[p];
    return next;
}

// One line of `utter events --json` as an event object, or null for a line that is not one
// (a blank line, a line cut short): the widget skips it rather than failing.
function parseLine(line) {
    if (typeof line !== "string") return null;
    var text = line.trim();
    if (text.length === 0 || text.charAt(0) !== "{") return null;
    try {
        var event = JSON.parse(text);
        if (event === null || typeof event !== "object" || typeof event.event !== "string") return null;
        return event;
    } catch (e) {
        return null;
    }
}

function recomputeDegraded(state) {
    var bad = [];
    for (var id in state.plugins) {
        var s = state.plugins[id];
        if (s !== "ok" && s !== "disabled") bad.push(id);
    }
    bad.sort();
    state.degradedBy = bad;
}

// A one-line account of step results (`results` of command_finished, or a voice report's
// `command.results`): "ok: open_url" / "failed: key (no input plugin)".
function describeResults(results) {
    if (!Array.isArray(results) || results.length === 0) return { ok: false, text: "nothing to do" };
    var failed = null;
    var ops = [];
    for (var i = 0; i < results.length; i++) {
        var r = results[i] || {};
        ops.push(String(r.op || "?"));
        if (!r.ok && failed === null) failed = r;
    }
    if (failed === null) return { ok: true, text: "done: " + ops.join(", ") };
    var why = failed.error && failed.error.message ? failed.error.message : (failed.detail || "");
    return { ok: false, text: "failed: " + String(failed.op || "?") + (why ? " (" + why + ")" : "") };
}

// One pending confirmation as `utter pending --json` lists it and the
// confirmation_requested event carries it: {id, op, args, provenance, summary, digest,
// created, expires} (the request's fields flattened beside the id).
function pendingEntry(p) {
    var c = p || {};
    return {
        id: String(c.id || ""),
        op: String(c.op || ""),
        summary: String(c.summary || c.op || ""),
        expires: Number(c.expires || 0),
    };
}

// The state after one event. Unknown events leave it as it was (a newer runner's).
function apply(state, event) {
    if (!event || typeof event.event !== "string") return state;
    var next = copy(state);
    switch (event.event) {
    case "snapshot": {
        var status = event.status || {};
        next.connected = true;
        next.runnerState = String(status.state || "");
        next.undoable = typeof status.undoable === "string" ? status.undoable : "";
        next.dictation = status.dictation === true;
        next.listening = !!(status.ptt && status.ptt.listening);
        next.transcribing = false;
        next.voiceOn = !!(status.voice && status.voice.state && status.voice.state !== "off");
        next.plugins = {};
        var plugins = status.plugins || [];
        for (var i = 0; i < plugins.length; i++) {
            next.plugins[String(plugins[i].id)] = String(plugins[i].status);
        }
        recomputeDegraded(next);
        break;
    }
    case "state":
        next.runnerState = String(event.state || "");
        break;
    case "plugin_state":
        next.plugins[String(event.id)] = String(event.status);
        recomputeDegraded(next);
        break;
    case "ptt":
        if (event.transition === "pressed") {
            next.listening = true;
            next.transcribing = false;
            next.lastError = "";
            next.partial = "";
        } else if (event.transition === "released") {
            next.listening = false;
            // Without a voice loop no voice event follows: nothing to wait for.
            next.transcribing = next.voiceOn;
        } else if (event.transition === "cancelled") {
            next.listening = false;
            next.transcribing = false;
            next.partial = "";
        }
        break;
    case "voice_partial":
        // A preview while the key is held; a late one (after the release) is not shown.
        if (next.listening) next.partial = String(event.text || "");
        break;
    case "voice":
        next.transcribing = false;
        next.listening = false;
        next.partial = "";
        next.lastTranscript = event.transcript ? String(event.transcript) : "";
        if (event.outcome === "ok") {
            next.lastError = "";
            next.lastResult = describeResults(event.command ? event.command.results : null);
        } else if (event.outcome === "no-speech") {
            next.lastError = "";
            next.lastResult = { ok: false, text: "no speech heard" };
        } else {
            next.lastError = String(event.error || ("failed at " + (event.stage || "?")));
            next.lastResult = { ok: false, text: next.lastError };
        }
        break;
    case "dictation":
        next.dictation = event.on === true;
        break;
    case "command_finished":
        next.lastResult = describeResults(event.results);
        next.undoable = typeof event.undoable === "string" ? event.undoable : "";
        break;
    case "confirmation_requested": {
        var entry = pendingEntry(event);
        next.pending = next.pending.filter(function (p) { return p.id !== entry.id; });
        next.pending.push(entry);
        break;
    }
    case "confirmation_resolved":
        next.pending = next.pending.filter(function (p) { return p.id !== event.id; });
        break;
    default:
        return state;
    }
    return next;
}

// The state with the list `utter pending --json` printed (the confirmations asked before
// this widget subscribed). Text that is not such a list leaves it unchanged.
function withPending(state, text) {
    var list;
    try {
        list = JSON.parse(text);
    } catch (e) {
        return state;
    }
    if (!Array.isArray(list)) return state;
    var next = copy(state);
    next.pending = list.map(pendingEntry).filter(function (p) { return p.id !== ""; });
    return next;
}

// No voice event came long after the release (Main.qml's watchdog): stop showing
// "transcribing" and say so.
function transcribeTimedOut(state) {
    if (!state.transcribing) return state;
    var next = copy(state);
    next.transcribing = false;
    next.lastError = "no result from the voice loop";
    return next;
}

// `utter events` ended (the runner stopped, or the binary is missing).
function disconnected(state) {
    var next = copy(state);
    next.connected = false;
    next.listening = false;
    next.transcribing = false;
    next.pending = [];
    return next;
}

// What the bar shows, in order of what needs the person most:
// "offline" | "confirm" | "listening" | "transcribing" | "error" | "idle".
function phase(state) {
    if (!state.connected) return "offline";
    if (state.pending.length > 0) return "confirm";
    if (state.listening) return "listening";
    if (state.transcribing) return "transcribing";
    if (state.lastError !== "" || state.runnerState === "degraded") return "error";
    return "idle";
}

// A tooltip line for the phase.
function describe(state) {
    switch (phase(state)) {
    case "offline": return "Utter is not running";
    case "confirm": return state.pending.length === 1
        ? "Waiting for your answer: " + state.pending[0].summary
        : state.pending.length + " confirmations wait for your answer";
    case "listening": return state.partial !== "" ? "Listening… “" + state.partial + "”" : "Listening…";
    case "transcribing": return "Transcribing…";
    case "error": return state.lastError !== ""
        ? state.lastError
        : "Degraded: " + state.degradedBy.join(", ") + " not running";
    default: return state.lastTranscript !== "" ? "Last: " + state.lastTranscript : "Utter is ready";
    }
}

// Tabler icon names (Noctalia's icon set) for each phase.
function icon(phaseName) {
    switch (phaseName) {
    case "offline": return "microphone-off";
    case "confirm": return "help-circle";
    case "listening": return "microphone";
    case "transcribing": return "loader-2";
    case "error": return "alert-triangle";
    default: return "microphone-2";
    }
}
