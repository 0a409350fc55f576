#!/usr/bin/env python3
"""Generates crates/server/src/meta/meta_data.rs from redis 7.0's command JSON.

Redis describes every command in src/commands/*.json; its own
utils/generate-command-code.py turns them into commands.c, and redis-server
then derives more at start-up (the implicit ACL categories of
setImplicitACLCategories, the `movablekeys` flag and the legacy first/last/step
key range of populateCommandLegacyRangeSpec). This script does both steps, so
the table it writes is what `COMMAND INFO` and `COMMAND DOCS` of a
redis-server 7.0 answer, field for field.

It covers every command a non-sentinel redis-server registers (commands
flagged ONLY_SENTINEL are left out, as redis-server leaves them out), not only
the ones respite implements: ACL rules name commands respite may not have, and
adding a command to respite then needs no re-run.

Usage (re-runnable; the output is committed):

    python3 scripts/command-meta.py [/path/to/redis/src/commands]

The default source is /tmp/r7/src/commands (a redis 7.0.15 checkout).
"""

import glob
import json
import os
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/tmp/r7/src/commands"
# Commands respite implements that redis 7.2 added (CLIENT SETINFO, CLIENT
# NO-TOUCH, WAITAOF): their 7.2 JSON, copied from redis 7.2.6, described
# the same way. redis-server 7.0 does not list them.
EXTRA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis-7.2-commands")
OUT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "crates", "server", "src", "meta", "meta_data.rs"
)

# addReplyFlagsForCommand's order; hidden flags (sentinel, may_replicate,
# protected, touches_arbitrary_keys) are left out as redis-server leaves them.
COMMAND_FLAGS = [
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
    "blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking",
    "fast", "no_auth", "no_mandatory_keys", "no_async_loading", "no_multi",
    "movablekeys", "allow_busy",
]

# acl.c's ACLCommandCategories, in ACL CAT order.
CATEGORIES = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
]

# addReplyFlagsForKeyArgs's order and spelling.
KEY_FLAGS = [
    ("RO", "RO"), ("RW", "RW"), ("OW", "OW"), ("RM", "RM"),
    ("ACCESS", "access"), ("UPDATE", "update"), ("INSERT", "insert"),
    ("DELETE", "delete"), ("NOT_KEY", "not_key"), ("INCOMPLETE", "incomplete"),
    ("VARIABLE_FLAGS", "variable_flags"),
]

GROUPS = {"sorted_set": "sorted-set"}


def rs_str(s):
    """A Rust string literal."""
    return json.dumps(s, ensure_ascii=False)


def rs_opt(s):
    return "None" if s is None else "Some(%s)" % rs_str(s)


def rs_strs(items):
    return "&[%s]" % ", ".join(rs_str(i) for i in items)


def categories(desc, flags):
    """setImplicitACLCategories: the declared categories plus the implied."""
    cats = {c.lower() for c in desc.get("acl_categories", [])}
    if "WRITE" in flags:
        cats.add("write")
    if "READONLY" in flags and "scripting" not in cats:
        cats.add("read")
    if "ADMIN" in flags:
        cats |= {"admin", "dangerous"}
    if "PUBSUB" in flags:
        cats.add("pubsub")
    if "FAST" in flags:
        cats.add("fast")
    if "BLOCKING" in flags:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    unknown = cats - set(CATEGORIES)
    assert not unknown, unknown
    return [c for c in CATEGORIES if c in cats]


def legacy_range(specs):
    """populateCommandLegacyRangeSpec: (first, last, step, movablekeys)."""
    if not specs:
        return 0, 0, 0, False

    def is_range(s):
        return "index" in s["begin_search"] and "range" in s["find_keys"]

    def absolute(pos, last):
        return last + pos if last >= 0 else last

    if len(specs) == 1 and is_range(specs[0]):
        s = specs[0]
        pos = s["begin_search"]["index"]["pos"]
        r = s["find_keys"]["range"]
        return pos, absolute(pos, r["lastkey"]), r["step"], "INCOMPLETE" in s["flags"]
    movable = False
    first, last, prev_last = None, 0, 0
    for s in specs:
        if not is_range(s):
            movable = True
            continue
        pos = s["begin_search"]["index"]["pos"]
        r = s["find_keys"]["range"]
        if r["step"] != 1 or (prev_last and prev_last != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in s["flags"]:
            movable = True
        first = pos if first is None else min(first, pos)
        abs_last = absolute(pos, r["lastkey"])
        # Redis compares as unsigned: a negative (counted from the end) wins.
        last = max(last, abs_last, key=lambda v: v % (1 << 32))
        prev_last = last
    if first is None:
        return 0, 0, 0, True
    return first, last, 1, movable


def key_spec(s):
    flags = [out for name, out in KEY_FLAGS if name in s["flags"]]
    bs = s["begin_search"]
    if "index" in bs:
        begin = "BeginSearch::Index(%d)" % bs["index"]["pos"]
    elif "keyword" in bs:
        begin = "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            rs_str(bs["keyword"]["keyword"]), bs["keyword"]["startfrom"])
    else:
        begin = "BeginSearch::Unknown"
    fk = s["find_keys"]
    if "range" in fk:
        find = "FindKeys::Range { lastkey: %d, keystep: %d, limit: %d }" % (
            fk["range"]["lastkey"], fk["range"]["step"], fk["range"]["limit"])
    elif "keynum" in fk:
        find = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            fk["keynum"]["keynumidx"], fk["keynum"]["firstkey"], fk["keynum"]["step"])
    else:
        find = "FindKeys::Unknown"
    return "KeySpec { notes: %s, flags: %s, begin_search: %s, find_keys: %s }" % (
        rs_opt(s.get("notes")), rs_strs(flags), begin, find)


def arg(a, indent):
    flags = []
    if a.get("optional"):
        flags.append("optional")
    if a.get("multiple"):
        flags.append("multiple")
    if a.get("multiple_token"):
        flags.append("multiple_token")
    token = a.get("token")
    # MIGRATE's empty-key token is written `"\"\""` in redis's JSON; the
    # server answers it as the empty string in COMMAND DOCS.
    if token == '""':
        token = ""
    sub = ""
    if a["type"] in ("oneof", "block"):
        inner = ",\n".join(arg(x, indent + "    ") for x in a["arguments"])
        sub = "&[\n%s,\n%s]" % (inner, indent)
    else:
        sub = "&[]"
    return "%sArg { name: %s, kind: %s, key_spec_index: %d, token: %s, summary: %s, since: %s, deprecated_since: %s, flags: %s, arguments: %s }" % (
        indent, rs_str(a["name"].lower()), rs_str(a["type"]), a.get("key_spec_index", -1),
        rs_opt(token.upper() if token is not None else None), rs_opt(a.get("summary")), rs_opt(a.get("since")),
        rs_opt(a.get("deprecated_since")), rs_strs(flags), sub)


def command(command_name, sub_name, d):
    flags_in = set(d.get("command_flags", []))
    specs = d.get("key_specs", [])
    first, last, step, movable = legacy_range(specs)
    flags = {f.lower() for f in flags_in}
    if movable:
        flags.add("movablekeys")
    flags = [f for f in COMMAND_FLAGS if f in flags]
    fullname = command_name if sub_name is None else "%s|%s" % (command_name, sub_name)
    history = d.get("history") or []
    args = d.get("arguments") or []
    args_rs = "&[]" if not args else "&[\n%s,\n        ]" % ",\n".join(arg(a, "            ") for a in args)
    fields = [
        ("name", rs_str(fullname)),
        ("command", rs_str(command_name)),
        ("sub", rs_opt(sub_name)),
        ("arity", str(d["arity"])),
        ("flags", rs_strs(flags)),
        ("categories", rs_strs(categories(d, flags_in))),
        ("first_key", str(first)),
        ("last_key", str(last)),
        ("step", str(step)),
        ("tips", rs_strs(t.lower() for t in d.get("command_tips", []))),
        ("key_specs", "&[%s]" % ", ".join(key_spec(s) for s in specs)),
        ("summary", rs_opt(d.get("summary"))),
        ("since", rs_opt(d.get("since"))),
        ("group", rs_str(GROUPS.get(d["group"], d["group"]))),
        ("complexity", rs_opt(d.get("complexity"))),
        ("doc_flags", rs_strs(f.lower() for f in ["DEPRECATED", "SYSCMD"] if f in d.get("doc_flags", []))),
        ("deprecated_since", rs_opt(d.get("deprecated_since"))),
        ("replaced_by", rs_opt(d.get("replaced_by"))),
        ("history", "&[%s]" % ", ".join("(%s, %s)" % (rs_str(v), rs_str(t)) for v, t in history)),
        ("arguments", args_rs),
        ("get_keys_function", rs_opt(d.get("get_keys_function"))),
    ]
    return "    Meta {\n%s\n    }" % "\n".join("        %s: %s," % f for f in fields)


def main():
    rows = []
    paths = sorted(glob.glob(os.path.join(SRC, "*.json")))
    assert paths, "no command JSON in %s" % SRC
    paths += sorted(glob.glob(os.path.join(EXTRA, "*.json")))
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for name, d in doc.items():
            if "ONLY_SENTINEL" in d.get("command_flags", []):
                continue
            if "container" in d:
                key = (d["container"].lower(), name.lower())
            else:
                key = (name.lower(), None)
            rows.append((key, d))
    # Sorted by (command, subcommand), the container before its subcommands:
    # meta.rs looks rows up by binary search.
    rows.sort(key=lambda r: (r[0][0], r[0][1] or ""))
    out = [
        "// Generated by scripts/command-meta.py from redis 7.0's src/commands/*.json.",
        "// Do not edit: change the script and run it again.",
        "",
        "use super::{Arg, BeginSearch, FindKeys, KeySpec, Meta};",
        "",
        "/// Every command and subcommand of redis-server 7.0, sorted by",
        "/// (command, subcommand), containers before their subcommands.",
        "pub(super) static COMMANDS: &[Meta] = &[",
    ]
    for (cmd, sub), d in rows:
        out.append(command(cmd, sub, d) + ",")
    out.append("];")
    out.append("")
    out.append("/// redis 7.0's ACL categories, in ACL CAT order.")
    out.append("pub(super) static CATEGORIES: &[&str] = %s;" % rs_strs(CATEGORIES))
    with open(OUT, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote %d commands to %s" % (len(rows), os.path.normpath(OUT)))


if __name__ == "__main__":
    main()
