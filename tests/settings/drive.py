#!/usr/bin/python3
"""Drive an application through AT-SPI for tests/settings.rs, as a screen reader would.

Reads one JSON command per line on stdin and answers each with one JSON line on stdout:
  {"op": "wait", "role": R, "name": N, "timeout": S}       -> {"ok": true} once it exists
  {"op": "set_text", "role": R, "name": N, "text": T}      -> EditableText.setTextContents
  {"op": "action", "role": R, "name": N}                   -> Action.doAction(0)
  {"op": "read", "role": R, "name": N}                     -> {"ok": true, "text": ...}
  {"op": "names", "role": R}                               -> every name with that role
  {"op": "texts", "role": R}                               -> the text of every node with that role
  {"op": "values", "role": R}                              -> the Value of every node with that role
  {"op": "tree"}                                           -> the whole tree, one line a node
  {"op": "state", "role": R, "name": N}                    -> {"ok": true, "name", "description",
                                                              "states": [...], "actions": [...],
                                                              "shown": bool}
  {"op": "row", "name": N}                                 -> the list item (a settings row)
                                                              named N: {"labels": [...],
                                                              "buttons": [...]}
  {"op": "tabs"}                                           -> every page tab: {"tabs": [{"name",
                                                              "selected", "shown", "actions"}]}
  {"op": "controls"}                                       -> every control (buttons, switches,
                                                              tabs, entries, bars): role, name,
                                                              actions
R is pyatspi's role name ("push button", "text", "check box", "label", ...); N may end in
"*" to match a prefix, or start and end with "*" to match a part. Instead of "name", "near": L finds the nearest node of role R around
the label L (a switch in a settings row is announced with its row's title). Where several
nodes match, one that is shown is taken (GTK keeps a stack's hidden pages on the bus, with
no size). "shown" is what a person sees: the node has a size on screen (GTK 4.8 sets no
"showing" state). Errors are {"ok": false, "error": ...}; the driver never exits on one.
"""
import json
import sys
import time

import pyatspi


def walk(node, out):
    try:
        out.append(node)
        for i in range(node.childCount):
            child = node.getChildAtIndex(i)
            if child is not None:
                walk(child, out)
    except Exception:
        pass
    return out


def nodes():
    desktop = pyatspi.Registry.getDesktop(0)
    return walk(desktop, [])


def matches(node, role, name):
    try:
        if role and node.getRoleName() != role:
            return False
        if name is None:
            return True
        if len(name) > 1 and name.startswith("*") and name.endswith("*"):
            return name[1:-1] in (node.name or "")
        if name.endswith("*"):
            return (node.name or "").startswith(name[:-1])
        return node.name == name
    except Exception:
        return False


def window_of(node):
    up = node
    while up is not None:
        try:
            if up.getRoleName() in ("frame", "window", "dialog"):
                return up
            up = up.parent
        except Exception:
            return None
    return None


def shown(node):
    """Whether the node takes room inside its window: a stack's page never shown and an
    unrevealed widget have no size, a squeezed-out one keeps a place outside the window.
    (A page shown once and hidden since keeps its place: which page is shown is said by the
    window's title.)"""
    try:
        e = node.queryComponent().getExtents(pyatspi.WINDOW_COORDS)
        if e.width <= 0 or e.height <= 0:
            return False
        window = window_of(node)
        if window is None:
            return True
        w = window.queryComponent().getExtents(pyatspi.WINDOW_COORDS)
        return e.x >= 0 and e.y >= 0 and e.x + e.width <= w.width and e.y + e.height <= w.height
    except Exception:
        return False


def find(role, name, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        found = [node for node in nodes() if matches(node, role, name)]
        if found:
            return next((n for n in found if shown(n)), found[0])
        if time.time() >= deadline:
            raise LookupError(f"no {role!r} named {name!r} within {timeout} s")
        time.sleep(0.2)


# The node each (role, name) of a "read" found last: a meter read ten times a second must
# not walk the whole tree each time (a walk of the settings app takes about a second).
READ_TARGETS = {}


def read_target(role, name, timeout):
    """The node a "read" of (role, name) found before, while it still matches and is shown;
    else a fresh find."""
    node = READ_TARGETS.get((role, name))
    if node is not None and matches(node, role, name) and shown(node):
        return node
    node = find(role, name, timeout)
    READ_TARGETS[(role, name)] = node
    return node


def descendants_with_role(node, role):
    return [n for n in walk(node, []) if matches(n, role, None)]


def find_near(role, label, timeout=10.0):
    """The node of `role` in the smallest subtree around the label named `label`."""
    deadline = time.time() + timeout
    while True:
        for node in nodes():
            if matches(node, "label", label):
                # The label's own widget first (a button's label), then the smallest
                # subtree around it, but never beyond the label's row or group.
                up = node.parent
                while up is not None:
                    if matches(up, role, None):
                        return up
                    up = up.parent
                up = node.parent
                for _ in range(4):
                    if up is None:
                        break
                    found = descendants_with_role(up, role)
                    if found:
                        return found[0]
                    up = up.parent
        if time.time() >= deadline:
            raise LookupError(f"no {role!r} near the label {label!r} within {timeout} s")
        time.sleep(0.2)


CONTROLS = {"push button", "toggle button", "check box", "radio button", "page tab", "text",
            "entry", "password text", "spin button", "slider", "combo box", "level bar",
            "progress bar"}


def actions(node):
    try:
        a = node.queryAction()
        return [a.getName(i) for i in range(a.nActions)]
    except Exception:
        return []


def states(node):
    try:
        return sorted(pyatspi.stateToString(s) for s in node.getState().getStates())
    except Exception:
        return []


def labels_under(node):
    out = []
    for n in walk(node, []):
        if matches(n, "label", None):
            try:
                t = n.queryText()
                out.append(t.getText(0, t.characterCount))
            except Exception:
                pass
    return out


def run(cmd):
    op = cmd["op"]
    role = cmd.get("role")
    name = cmd.get("name")
    timeout = float(cmd.get("timeout", 10))
    if op == "tree":
        lines = []

        def dump(node, depth):
            try:
                lines.append("  " * depth + f"{node.getRoleName()} {node.name!r}")
                for i in range(node.childCount):
                    child = node.getChildAtIndex(i)
                    if child is not None:
                        dump(child, depth + 1)
            except Exception:
                pass

        dump(pyatspi.Registry.getDesktop(0), 0)
        return {"ok": True, "tree": lines}
    if op == "names":
        return {"ok": True, "names": [n.name for n in nodes() if matches(n, role, None)]}
    if op == "texts":
        texts = []
        for n in nodes():
            if matches(n, role, None):
                try:
                    t = n.queryText()
                    texts.append(t.getText(0, t.characterCount))
                except Exception:
                    pass
        return {"ok": True, "texts": texts}
    if op == "values":
        values = []
        for n in nodes():
            if matches(n, role, None):
                try:
                    values.append(n.queryValue().currentValue)
                except Exception:
                    pass
        return {"ok": True, "values": values}
    if op == "tabs":
        tabs = [{"name": n.name, "selected": "selected" in states(n), "shown": shown(n),
                 "actions": actions(n)} for n in nodes() if matches(n, "page tab", None)]
        return {"ok": True, "tabs": tabs}
    if op == "controls":
        found = []
        for n in nodes():
            try:
                r = n.getRoleName()
            except Exception:
                continue
            if r in CONTROLS:
                found.append({"role": r, "name": n.name or "", "actions": actions(n)})
        return {"ok": True, "controls": found}
    if op == "row":
        row = find("list item", name, timeout)
        buttons = [n.name for n in walk(row, []) if matches(n, "push button", None)]
        return {"ok": True, "labels": labels_under(row), "buttons": buttons}
    if "near" in cmd:
        node = find_near(role, cmd["near"], timeout)
    elif op == "read":
        node = read_target(role, name, timeout)
    else:
        node = find(role, name, timeout)
    if op == "wait":
        return {"ok": True}
    if op == "state":
        return {"ok": True, "name": node.name, "description": node.description or "",
                "states": states(node), "actions": actions(node), "shown": shown(node)}
    if op == "set_text":
        done = node.queryEditableText().setTextContents(cmd["text"])
        return {"ok": bool(done)}
    if op == "action":
        done = node.queryAction().doAction(0)
        return {"ok": bool(done)}
    if op == "read":
        text = node.queryText()
        return {"ok": True, "text": text.getText(0, text.characterCount)}
    return {"ok": False, "error": f"unknown op {op}"}


for line in sys.stdin:
    line = line.strip()
    if not line:
        continue
    try:
        answer = run(json.loads(line))
    except Exception as e:  # the test reads the error; the driver goes on
        answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(answer), flush=True)
