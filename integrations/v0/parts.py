"""A message's `parts` rebuilt from the `message.parts.chunk` deltas of a V0 stream, enough to show progress.

The deltas are jsondiffpatch deltas (plus V0's own string-append form
`[[index…, "text"], 9, 9]`, see the SDK's stream/diffpatch.ts). Written here
because the one Python port on the package index is an unmaintained 0.1
release; progress needs only additions, replacements, deletions and appends,
so text diffs (`[patch, 0, 2]`) and array moves are left as they were.
"""

import copy


def apply_delta(value, delta):
    """`value` with `delta` applied (a new value; the input is not changed)."""
    if isinstance(delta, list):
        if len(delta) == 3 and delta[1] == 9 and delta[2] == 9 and isinstance(delta[0], list):
            return _append(copy.deepcopy(value), delta[0])
        if len(delta) == 1:
            return copy.deepcopy(delta[0])
        if len(delta) == 2:
            return copy.deepcopy(delta[1])
        return value  # deletion ([old, 0, 0]) is handled by the container; text diffs are skipped
    if not isinstance(delta, dict):
        return value
    if delta.get("_t") == "a":
        return _patch_array(list(value) if isinstance(value, list) else [], delta)
    result = dict(value) if isinstance(value, dict) else {}
    for key, sub in delta.items():
        if _is_deletion(sub):
            result.pop(key, None)
        else:
            result[key] = apply_delta(result.get(key), sub)
    return result


def _patch_array(items: list, delta: dict) -> list:
    removed = sorted(
        (int(k[1:]) for k, sub in delta.items() if k.startswith("_") and k != "_t" and _is_deletion(sub)),
        reverse=True,
    )
    for index in removed:
        if index < len(items):
            del items[index]
    for key in sorted((k for k in delta if k.isdigit()), key=int):
        index, sub = int(key), delta[key]
        if isinstance(sub, list) and len(sub) == 1:
            items.insert(min(index, len(items)), copy.deepcopy(sub[0]))
        elif index < len(items):
            items[index] = apply_delta(items[index], sub)
    return items


def _is_deletion(sub) -> bool:
    return isinstance(sub, list) and len(sub) == 3 and sub[1] == 0 and sub[2] == 0


def _append(value, path: list):
    *indexes, text = path
    if not indexes:
        return (value if isinstance(value, str) else "") + str(text)
    if not isinstance(value, list) or not isinstance(indexes[0], int) or indexes[0] >= len(value):
        return value
    value[indexes[0]] = _append(value[indexes[0]], [*indexes[1:], text])
    return value


def describe_part(part) -> str:
    """What the generator is doing, as a visitor may read it (file paths are the app's, never personal)."""
    if not isinstance(part, dict):
        return "Working on your prototype"
    kind = part.get("type")
    if kind == "file-edit" and part.get("path"):
        return f"Writing {part['path']}"
    if kind == "agent-action" and part.get("summary"):
        return str(part["summary"])[:200]
    return {
        "thinking": "Thinking about your request",
        "text": "Explaining the approach",
        "file-read": "Reading the project files",
        "search": "Looking things up",
        "bash": "Running a build step",
        "tool-call": "Using a tool",
    }.get(kind, "Working on your prototype")
