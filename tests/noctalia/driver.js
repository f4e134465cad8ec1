// Runs the Noctalia widget's state file (clients/noctalia/UtterState.js) under node, as
// QML's JavaScript engine would: the file is evaluated on its own (its `.pragma library`
// line is a QML directive, dropped here), then each stdin line is one input:
//   {"line": "<a line of utter events --json>"} | {"pending": "<utter pending --json>"} |
//   {"disconnected": true} | {"timed_out": true}
// and for each, one stdout line: {"phase", "describe", "icon", "state"}.
"use strict";
const fs = require("fs");
const vm = require("vm");
const readline = require("readline");

const source = fs.readFileSync(process.argv[2], "utf8").replace(/^\.pragma library\s*$/m, "");
const context = vm.createContext({});
vm.runInContext(source, context, { filename: "UtterState.js" });
const S = context;

let state = S.initial();
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (text) => {
    const input = JSON.parse(text);
    if ("line" in input) {
        state = S.apply(state, S.parseLine(input.line));
    } else if ("pending" in input) {
        state = S.withPending(state, input.pending);
    } else if (input.disconnected) {
        state = S.disconnected(state);
    } else if (input.timed_out) {
        state = S.transcribeTimedOut(state);
    }
    const phase = S.phase(state);
    process.stdout.write(JSON.stringify({
        phase: phase,
        describe: S.describe(state),
        icon: S.icon(phase),
        state: state,
    }) + "\n");
});
