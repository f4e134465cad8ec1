// The long-running part of the Utter plugin: it follows the runner's events with
// `utter events --json` (one JSON object per line) and keeps the state every widget shows.
// Actions go through the CLI with list arguments: `utter ptt toggle` and
// `utter confirm ID yes|no`. The `utter` binary is admitted to the runner's socket without a
// token, so nothing secret lives here.
import QtQuick
import Quickshell
import Quickshell.Io
import qs.Commons
import "UtterState.js" as UtterState

Item {
    id: root

    property var pluginApi: null

    readonly property string utterCommand:
        pluginApi?.pluginSettings?.utterCommand ??
        pluginApi?.manifest?.metadata?.defaultSettings?.utterCommand ??
        "utter"
    readonly property int restartDelayMs:
        pluginApi?.pluginSettings?.restartDelayMs ??
        pluginApi?.manifest?.metadata?.defaultSettings?.restartDelayMs ??
        3000

    // The whole state (see UtterState.js); replaced, never mutated, so bindings update.
    property var state: UtterState.initial()
    readonly property string phase: UtterState.phase(state)
    readonly property string description: UtterState.describe(state)
    readonly property string iconName: UtterState.icon(phase)
    // The stderr of the last failed action, for the panel.
    property string actionError: ""

    function onEventLine(line) {
        const event = UtterState.parseLine(line);
        if (event === null)
            return;
        root.state = UtterState.apply(root.state, event);
        if (event.event === "snapshot")
            pending.running = true;   // confirmations asked before we subscribed
    }

    function togglePushToTalk() {
        runAction(["ptt", "toggle"]);
    }

    function answer(id, approved) {
        runAction(["confirm", id, approved ? "yes" : "no"]);
    }

    function runAction(args) {
        const proc = actionProcess.createObject(root, { command: [root.utterCommand].concat(args) });
        proc.running = true;
    }

    Process {
        id: events
        command: [root.utterCommand, "events", "--json"]
        running: true
        stdout: SplitParser {
            onRead: data => root.onEventLine(data)
        }
        onExited: (exitCode, exitStatus) => {
            Logger.w("Utter", "utter events ended with", exitCode, "; trying again in", root.restartDelayMs, "ms");
            root.state = UtterState.disconnected(root.state);
            restart.restart();
        }
    }

    // A voice cycle that never reports back (the runner restarted mid-way) must not leave
    // the icon spinning.
    Timer {
        interval: 60000
        running: root.phase === "transcribing"
        onTriggered: root.state = UtterState.transcribeTimedOut(root.state)
    }

    Timer {
        id: restart
        interval: root.restartDelayMs
        onTriggered: events.running = true
    }

    Process {
        id: pending
        command: [root.utterCommand, "pending", "--json"]
        stdout: StdioCollector {
            onStreamFinished: root.state = UtterState.withPending(root.state, text)
        }
    }

    Component {
        id: actionProcess
        Process {
            id: action
            stderr: StdioCollector { id: actionStderr }
            onExited: (exitCode, exitStatus) => {
                root.actionError = exitCode === 0 ? "" : actionStderr.text.trim();
                if (exitCode !== 0)
                    Logger.w("Utter", command.join(" "), "failed:", root.actionError);
                action.destroy();
            }
        }
    }
}
