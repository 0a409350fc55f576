#!/usr/bin/env python3
"""Import cycles between the modules of a Rust crate, file by file.

Every `.rs` file under a crate's `src/` is one module (`src/lib.rs` and
`src/main.rs` the root, `src/a.rs` and `src/a/mod.rs` the module `a`,
`src/a/b.rs` the module `a::b`; `src/bin/*.rs` are roots of their own). A
file depends on another when it names it: a `crate::`, `super::` or
`self::` path anywhere in its code (use declarations, with their braces
expanded, and paths in expressions and types), a path through a child
module it declares, or through a name a `use` bound to a module. A path is
resolved to the deepest module it names; a name a module re-exports
(`pub use child::Item`) is followed to the module that defines it, so
importing `crate::command::Session` depends on `command/session.rs`, not
on `command/mod.rs`. Comments, doc comments and string literals are
ignored, and paths into other crates do not count.

The graph's strongly connected components of more than one file are the
cycles; each is printed with the edges that tie it, and the exit status
is 1 if there is any. An edge may be allowed (left out of the graph) with
`--allow CRATE:FROM->TO`, where FROM and TO are module paths and TO may
end in `*` (a prefix): respite allows only its command table naming the
families, `crates/server:command::table->cmd::*`.

Usage: scripts/module_cycles.py [--allow CRATE:FROM->TO]... CRATE_DIR...
"""

import argparse
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The code without comments, string and char literals (each replaced
    by a space, newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
            out.append(" ")
        elif c == "r" and re.match(r'r#*"', text[i:i + 20]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append(" ")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_tests(code):
    """The code without its `#[cfg(test)]` items: a test may use what the
    module under test may not (the table, from a test of `meta/`)."""
    out, pos = [], 0
    for m in re.finditer(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]", code):
        if m.start() < pos:
            continue
        # The item runs to its first `;` at depth 0 or the end of its
        # first top-level brace block, whichever comes first.
        j, depth = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif ch == ";" and depth == 0:
                j += 1
                break
            j += 1
        out.append(code[pos:m.start()])
        out.append("\n" * code.count("\n", m.start(), j))
        pos = j
    out.append(code[pos:])
    return "".join(out)


def crate_files(crate_dir):
    """(module path, file) of every module file of the crate, each module
    path a tuple; binaries under src/bin get the root ("bin", name)."""
    src = os.path.join(crate_dir, "src")
    files = []
    for root, _, names in os.walk(src):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src).split(os.sep)
            if rel[-1] in ("mod.rs", "lib.rs", "main.rs"):
                parts = rel[:-1]
            else:
                parts = rel[:-1] + [rel[-1][:-3]]
            files.append((tuple(parts), path))
    return files


def use_trees(code):
    """Each `use` declaration: (start offset, its text without `use`/`;`,
    whether it is public)."""
    for m in re.finditer(r"\b((?:pub(?:\s*\([^)]*\))?\s+)?)use\s+([^;]*);", code):
        yield m.start(), m.group(2), bool(m.group(1))


def expand(tree):
    """The paths of a use tree, each (segments, bound name or None for a
    glob)."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        # Split s on top-level commas.
        depth, start, parts = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                parts.append(s[start:i])
                start = i + 1
        parts.append(s[start:])
        for p in parts:
            if not p:
                continue
            brace = p.find("{")
            if brace >= 0:
                head = [x for x in p[:brace].split("::") if x]
                walk(prefix + head, p[brace + 1:p.rfind("}")])
                continue
            alias = None
            if "@" in p:
                p, alias = p.split("@", 1)
            segs = prefix + [x for x in p.split("::") if x]
            if segs and segs[-1] == "*":
                out.append((segs[:-1], None))
            elif segs:
                if segs[-1] == "self":
                    segs = segs[:-1]
                name = alias or (segs[-1] if segs else None)
                out.append((segs, name))

    walk([], tree)
    return out


class Crate:
    def __init__(self, crate_dir):
        self.dir = crate_dir
        self.files = dict(crate_files(crate_dir))
        self.code = {}
        for mod, path in self.files.items():
            with open(path, encoding="utf-8") as f:
                self.code[mod] = without_tests(strip(f.read()))
        self.modules = set(self.files)
        # Names each module re-exports: name -> absolute path of the item.
        self.reexports = {}
        # Names each module binds with `use` (any visibility).
        self.bindings = {}
        for mod, code in self.code.items():
            pub, bound = {}, {}
            for _, tree, public in use_trees(code):
                for segs, name in expand(tree):
                    absolute = self.absolute(mod, segs)
                    if absolute is None or name is None:
                        continue
                    bound[name] = absolute
                    if public:
                        pub[name] = absolute
            self.reexports[mod] = pub
            self.bindings[mod] = bound

    def root_of(self, mod):
        return mod[:2] if mod[:1] == ("bin",) else ()

    def absolute(self, mod, segs):
        """The absolute path (tuple) of `segs` as written in module `mod`,
        or None if it leaves the crate."""
        if not segs:
            return None
        head = segs[0]
        if head == "crate":
            return self.root_of(mod) + tuple(segs[1:])
        if head in ("self", "super"):
            base = list(mod)
            rest = list(segs)
            while rest and rest[0] in ("self", "super"):
                if rest.pop(0) == "super":
                    if not base:
                        return None
                    base.pop()
            return tuple(base) + tuple(rest)
        if mod + (head,) in self.modules:
            return mod + tuple(segs)
        return None

    def module_of(self, path, seen=None):
        """The module file that defines what `path` names: the deepest
        module on it, following re-exports of the next name."""
        seen = seen or set()
        if path in seen:
            return None
        seen.add(path)
        best = None
        for i in range(len(path), -1, -1):
            if path[:i] in self.modules:
                best = i
                break
        if best is None:
            return None
        mod = path[:best]
        if best < len(path):
            target = self.reexports.get(mod, {}).get(path[best])
            if target is not None:
                deeper = self.module_of(target + path[best + 1:], seen)
                if deeper is not None:
                    return deeper
        return mod

    def edges(self, mod):
        """The modules `mod` depends on."""
        code = self.code[mod]
        deps = set()
        # Inline modules (`mod tests { ... }`): a `super::` inside one is
        # relative to it.
        inline = []
        for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
            depth, j = 1, m.end()
            while j < len(code) and depth:
                if code[j] == "{":
                    depth += 1
                elif code[j] == "}":
                    depth -= 1
                j += 1
            inline.append((m.start(), j, m.group(1)))

        def scope(offset):
            path = mod
            for start, end, name in inline:
                if start <= offset < end:
                    path = path + (name,)
            return path

        def add(where, segs):
            here = scope(where)
            absolute = self.absolute(here, segs) if segs[0] in ("crate", "self", "super") else None
            if absolute is None:
                bound = self.bindings[mod].get(segs[0])
                if bound is not None and len(segs) > 1:
                    absolute = bound + tuple(segs[1:])
                elif mod + (segs[0],) in self.modules:
                    absolute = mod + tuple(segs)
            if absolute is None:
                return
            target = self.module_of(absolute)
            if target is not None and target != mod:
                deps.add(target)

        for start, tree, _ in use_trees(code):
            for segs, _ in expand(tree):
                if segs:
                    add(start, segs)
        # Paths outside use declarations.
        masked = re.sub(r"\b(?:pub(?:\s*\([^)]*\))?\s+)?use\s+[^;]*;", lambda m: " " * len(m.group(0)), code)
        for m in re.finditer(r"(?<![A-Za-z0-9_:$])(" + IDENT + r"(?:\s*::\s*" + IDENT + r")+)", masked):
            segs = [s.strip() for s in m.group(1).split("::")]
            add(m.start(), segs)
        return deps


def sccs(graph):
    """Tarjan's strongly connected components."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def name(mod):
    return "::".join(mod) or "crate"


def allowed(rules, crate_dir, src, dst):
    for crate, frm, to in rules:
        if os.path.normpath(crate) != os.path.normpath(crate_dir):
            continue
        if name(src) != frm:
            continue
        if to.endswith("*") and name(dst).startswith(to[:-1]) or name(dst) == to:
            return True
    return False


def check(crate_dir, rules):
    crate = Crate(crate_dir)
    graph = {m: set() for m in crate.modules}
    for mod in crate.modules:
        if crate.root_of(mod) == mod:
            # The crate root declares the modules and assembles them; its
            # own uses are not a layer of the crate (see the module doc).
            continue
        for dep in crate.edges(mod):
            if not allowed(rules, crate_dir, mod, dep):
                graph[mod].add(dep)
    cycles = [sorted(c) for c in sccs(graph) if len(c) > 1]
    for comp in cycles:
        members = set(comp)
        print(f"{crate_dir}: import cycle of {len(comp)} modules:")
        for mod in comp:
            inside = sorted(name(d) for d in graph[mod] if d in members)
            print(f"  {name(mod)} ({os.path.relpath(crate.files[mod], crate_dir)}) -> {', '.join(inside)}")
    return len(cycles)


def self_test():
    """The checker against scripts/testdata/module_cycles: a cycle through a
    re-export, a brace group and `super::super` is found; a cycle through
    an allowed edge is not, and comments, strings and `#[cfg(test)]` code
    make no edge."""
    import contextlib
    import io

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata", "module_cycles")
    cycle, table = os.path.join(here, "cycle"), os.path.join(here, "table")
    allow = [(table, "framework::table", "family::*")]
    cases = [(cycle, [], 1), (table, [], 1), (table, allow, 0)]
    for crate_dir, rules, want in cases:
        with contextlib.redirect_stdout(io.StringIO()):
            got = check(crate_dir, rules)
        if got != want:
            print(f"self-test: {crate_dir} with {rules}: {got} cycle(s), expected {want}")
            return 1
    print("module_cycles self-test: ok")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allow", action="append", default=[], help="CRATE:FROM->TO, an edge left out")
    parser.add_argument("--graph", action="store_true", help="print every edge instead of checking")
    parser.add_argument("--self-test", action="store_true", help="check the checker on its fixtures")
    parser.add_argument("crates", nargs="*")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    if not args.crates:
        parser.error("no crate given")
    rules = []
    for a in args.allow:
        m = re.match(r"([^:]+):(.+?)->(.+)$", a)
        if not m:
            parser.error(f"--allow {a}: expected CRATE:FROM->TO")
        rules.append((m.group(1), m.group(2), m.group(3)))
    if args.graph:
        for crate_dir in args.crates:
            crate = Crate(crate_dir)
            for mod in sorted(crate.modules):
                for dep in sorted(crate.edges(mod)):
                    print(f"{crate_dir}: {name(mod)} -> {name(dep)}")
        return 0
    found = 0
    for crate_dir in args.crates:
        if not os.path.isdir(os.path.join(crate_dir, "src")):
            parser.error(f"{crate_dir}: no src/ directory")
        found += check(crate_dir, rules)
    if found:
        print(f"{found} import cycle(s)")
        return 1
    print(f"no import cycle in {len(args.crates)} crate(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
