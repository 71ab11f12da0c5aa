#!/usr/bin/env python3
"""The modules' floors, and a check that every `#include "kwd/..."` points down them.

    check_layers.py [REPO_ROOT]   checks src/ and include/kwd/; exit status 1 on a violation
    check_layers.py --self-test   shows on a small made-up tree that violations are caught

A module is a folder under src/ or include/kwd/ (src/main.cpp is the module `main`). A file
may include its own module's headers and those of modules on floors below its own; never a
module on its own floor or above. Since every allowed include points strictly down, the
modules cannot include each other in a circle; cycles are still looked for and named, so a
violation reads as the circle it closes. docs/architecture.md draws this table.
"""

import os
import re
import sys
import tempfile

# Lowest first. Each floor: its name, its modules, and what it is (for the messages).
FLOORS = [
    ("ground", ["util", "logging", "data", "timeline"], "include nothing of kwd"),
    ("system", ["platform", "loop"], "the operating system and the event loop"),
    ("single concerns", ["kernelspec", "hang", "http", "diagnosis", "faulthandler"],
     "one concern each, on the system"),
    ("stacks", ["stacks"], "where each thread of a process is"),
    ("wire and documents", ["protocol", "report", "metrics"],
     "Jupyter's wire, the report document, metrics"),
    ("sources", ["probes", "client"], "memory/GPU/kernel-log sources, the kernel client"),
    ("fingerprint", ["fingerprint"], "what a kernel process has loaded"),
    ("watch", ["watch"], "one kernel under watch"),
    ("launch", ["launch"], "a kernel started as our child"),
    ("front ends", ["smoke", "daemon"], "notebook runs, discovery of running kernels"),
    ("commands", ["cli"], "the command line"),
    ("program", ["main"], "src/main.cpp"),
]

FLOOR_OF = {module: index for index, (_, modules, _) in enumerate(FLOORS) for module in modules}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]kwd/([^/">]+)/')


def module_of(root, path):
    """The module a file of src/ or include/kwd/ belongs to."""
    relative = os.path.relpath(path, root).split(os.sep)
    if relative[0] == "src":
        return "main" if len(relative) == 2 else relative[1]
    return relative[2]  # include/kwd/<module>/...


def includes(root):
    """(file, line number, including module, included module) for every kwd include."""
    for top in (os.path.join(root, "src"), os.path.join(root, "include", "kwd")):
        for folder, _, names in sorted(os.walk(top)):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp", ".h", ".c")):
                    continue
                path = os.path.join(folder, name)
                source = module_of(root, path)
                with open(path, encoding="utf-8", errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        match = INCLUDE.match(line)
                        if match:
                            yield os.path.relpath(path, root), number, source, match.group(1)


def describe(module):
    floor = FLOOR_OF[module]
    return f"{module} (floor {floor}, {FLOORS[floor][0]})"


def cycles(edges):
    """The modules that include each other in a circle: Tarjan's strongly connected
    components of more than one module."""
    graph = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def describe_cycle(members, edges):
    """One circle through `members`, closed by an edge that does not point down, as
    "a -> b (file:line) -> ... -> a (file:line)"."""
    inside = {(s, t): where for (s, t), where in edges.items() if s in members and t in members}
    closing = sorted((s, t) for s, t in inside if FLOOR_OF[t] >= FLOOR_OF[s])[0]
    # The shortest way back from the closing edge's target to its source.
    came_from = {closing[1]: None}
    queue = [closing[1]]
    while closing[0] not in came_from:
        node = queue.pop(0)
        for s, t in sorted(inside):
            if s == node and t not in came_from:
                came_from[t] = s
                queue.append(t)
    path = [closing[0]]
    while path[-1] != closing[1]:
        path.append(came_from[path[-1]])
    path.reverse()  # closing target ... closing source
    text = closing[0] + f" -> {closing[1]} ({inside[closing]})"
    for s, t in zip(path, path[1:]):
        text += f" -> {t} ({inside[(s, t)]})"
    return text


def check(root):
    """The violations under `root`, one line each (empty when the floors hold)."""
    problems = []
    edges = {}
    for path, number, source, target in includes(root):
        if source == target:
            continue
        where = f"{path}:{number}"
        unknown = [m for m in (source, target) if m not in FLOOR_OF]
        if unknown:
            problems.append(f"{where}: module {unknown[0]} is on no floor of tests/check_layers.py")
            continue
        edges.setdefault((source, target), where)
        if FLOOR_OF[target] > FLOOR_OF[source]:
            problems.append(f"{where}: {source} includes {target}, which is above it: "
                            f"{describe(source)} -> {describe(target)}")
        elif FLOOR_OF[target] == FLOOR_OF[source]:
            problems.append(f"{where}: {source} includes {target}, on the same floor: "
                            f"{describe(source)} -> {describe(target)}; put one below the other")
    for component in cycles(edges):
        problems.append("cycle: " + describe_cycle(set(component), edges))
    return problems


def self_test():
    """A made-up tree with an include that points up and one that closes a circle."""
    files = {
        "src/util/a.cpp": '#include "kwd/util/a.hpp"\n',
        "src/platform/b.cpp": '#include "kwd/util/a.hpp"\n#include "kwd/probes/c.hpp"\n',
        "include/kwd/probes/c.hpp": '#include "kwd/platform/b.hpp"\n',
        "src/nowhere/d.cpp": '#include "kwd/util/a.hpp"\n',
    }
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
            with open(os.path.join(root, name), "w", encoding="utf-8") as out:
                out.write(text)
        problems = check(root)
    expected = [
        "src/platform/b.cpp:2: platform includes probes, which is above it",
        "src/nowhere/d.cpp:1: module nowhere is on no floor",
        "cycle: platform -> probes (src/platform/b.cpp:2) -> platform (include/kwd/probes/c.hpp:1)",
    ]
    missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
    for line in problems:
        print(line)
    if missing or len(problems) != len(expected):
        print("self-test FAILED; expected lines starting with:", *expected, sep="\n  ")
        return 1
    print("self-test passed: the violations above were caught")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for line in problems:
        print(line)
    if problems:
        print(f"{len(problems)} include(s) break the floors; see docs/architecture.md")
        return 1
    print(f"every kwd include points down the {len(FLOORS)} floors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
