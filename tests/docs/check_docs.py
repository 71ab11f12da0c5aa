#!/usr/bin/env python3
"""Docs that cannot lie: checks README.md and docs/*.md against the program they describe.

- Every ```console block is run, in order, one sandbox per file (a home, a Jupyter data and
  runtime dir and a report store of its own; the repository's root as working directory; the
  program's folder first on PATH): each `$ ` line is a command, the lines after it the output
  it must print (stdout and stderr together). In the expected output, `...` inside a line
  stands for any text, and a line that is only `...` for any number of lines.
- Every `kernel-watchdog ...` command line written in the docs (code spans and code blocks)
  names only subcommands and options that the program's `--help` for that subcommand lists.
- Facts checked against where the code defines them: the metric names of the daemon's page
  against src/metrics/exposition.cpp; the report id format of docs/report-format.md against the
  ids of real reports; every top-level section of docs/report.schema.json in report-format.md;
  every `CAUSE=...` against the causes of the schema; every `Name::member` against the sources.
- Words: what users read says no "here" or "this machine" (whose?), no "shim" or "exited
  unasked", and a page that says "fail open" or "last words" links to the words page.

    tests/docs/check_docs.py --binary build/kernel-watchdog [--only-console FILE...]
"""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
# Pages for contributors may talk about the code's own names ("shim") and the test machine.
CONTRIBUTOR_PAGES = {"development.md", "architecture.md", "protocol.md", "CONTRACT.md"}
FENCE = re.compile(r"^```([A-Za-z0-9_-]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")


def pages():
    return [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))


def user_pages():
    return [p for p in pages() if p.name not in CONTRIBUTOR_PAGES]


def blocks(text):
    """(language, body, line number) of each fenced code block."""
    for m in FENCE.finditer(text):
        yield m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1


def prose(text):
    """The text outside code blocks and code spans."""
    text = FENCE.sub("", text)
    return SPAN.sub("", text)


class Failures:
    def __init__(self):
        self.items = []

    def add(self, where, what):
        self.items.append(f"{where}: {what}")


# ---------------------------------------------------------------------------------------------
# console blocks

def matches(expected, actual):
    """Whether the actual lines fit the expected ones (`...` as above)."""
    pattern = []
    for line in expected:
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(".*?".join(re.escape(part) for part in line.split("...")) + r"[ \t]*\n")
    return re.fullmatch("".join(pattern), "".join(line + "\n" for line in actual)) is not None


def sandbox_env(root, binary):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("JUPYTER", "KERNEL_WATCHDOG", "XDG_", "JPY_"))}
    home = root / "home"
    home.mkdir()
    (root / "tmp").mkdir()
    env.update(HOME=str(home), TMPDIR=str(root / "tmp"), JUPYTER_RUNTIME_DIR=str(root / "runtime"),
               PATH=f"{binary.parent}:/usr/local/bin:/usr/bin:/bin", NO_COLOR="1")
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    return env


def run_console_blocks(page, binary, failures):
    text = page.read_text()
    consoles = [(body, line) for lang, body, line in blocks(text) if lang == "console"]
    if not consoles:
        return 0
    root = pathlib.Path(tempfile.mkdtemp(prefix="kwd-docs-"))
    try:
        env = sandbox_env(root, binary)
        count = 0
        for body, first_line in consoles:
            lines = body.splitlines()
            i = 0
            while i < len(lines):
                if not lines[i].startswith("$ "):
                    failures.add(f"{page.name}:{first_line + 1 + i}",
                                 "console block: output with no `$ ` command before it")
                    break
                command = lines[i][2:]
                at = first_line + 1 + i
                i += 1
                expected = []
                while i < len(lines) and not lines[i].startswith("$ "):
                    expected.append(lines[i].rstrip())
                    i += 1
                try:
                    out = subprocess.run(["bash", "-c", command], cwd=REPO, env=env,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True, errors="replace", timeout=180).stdout
                except subprocess.TimeoutExpired:
                    failures.add(f"{page.name}:{at}", f"`{command}` ran past 180 s")
                    continue
                count += 1
                actual = [line.rstrip() for line in out.splitlines()]
                if not matches(expected, actual):
                    failures.add(f"{page.name}:{at}",
                                 f"`{command}` printed\n" + "\n".join("    | " + a for a in actual)
                                 + "\n  which does not fit\n"
                                 + "\n".join("    | " + e for e in expected))
        return count
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# command lines against --help

class HelpTree:
    def __init__(self, binary):
        self.binary = binary
        self.cache = {}

    def help(self, path):
        if path not in self.cache:
            out = subprocess.run([str(self.binary), *path, "--help"], capture_output=True,
                                 text=True, timeout=30)
            self.cache[path] = out.stdout if out.returncode == 0 else None
        return self.cache[path]

    def subcommands(self, path):
        text = self.help(path) or ""
        if "Subcommands:" not in text:
            return set()
        # The section's own lines: indented, up to the first that is not (a footer follows).
        section = re.match(r"\n?((?:[ \t][^\n]*\n?)*)", text.split("Subcommands:", 1)[1]).group(1)
        return set(re.findall(r"^  ([a-z][a-z0-9-]*)\s", section, re.M))


# Where a command starts: a line's start, after a shell operator, `sudo`, `$(`, `exec POD --`,
# or in YAML after `- ` or `run: `
# (a `kernel-watchdog` elsewhere is a namespace's or a unit's name).
STARTS = r"(?:^|[;&|(]\s*|\bsudo\s+|\s--\s+|^-\s+|:\s+)"


def command_lines(text):
    """Each `kernel-watchdog ...` command written in a page: from code blocks (a line, or after
    `$ `) and code spans."""
    found = []
    for lang, body, _ in blocks(text):
        if lang in ("json", "text"):
            continue
        for line in body.splitlines():
            line = line[2:] if line.startswith("$ ") else line
            found.extend(re.findall(STARTS + r"(kernel-watchdog\s[^#;&|)`]*)", line.strip()))
    for span in SPAN.findall(FENCE.sub("", text)):
        found.extend(re.findall(STARTS + r"(kernel-watchdog\s[^;&|)]*)", span))
    return found


def check_command_line(page, line, tree, failures):
    """Each option must be one the subcommand it follows takes: CLI11 (no fallthrough) refuses
    a parent's option written after a subcommand."""
    words = line.split()[1:]
    path = ()
    for w in words:
        if not w.startswith("-") and w in tree.subcommands(path):
            path = path + (w,)
            if tree.help(path) is None:
                failures.add(page.name, f"`{line.strip()}`: `kernel-watchdog {' '.join(path)} "
                                        "--help` fails")
                return
            continue
        if not path and not w.startswith("-"):
            failures.add(page.name, f"`{line.strip()}`: `{w}` is no command of kernel-watchdog")
            return
        option = re.match(r"(--?[A-Za-z][A-Za-z0-9-]*)", w)
        if option and option.group(1) != "--" and \
                not re.search(r"(?<![\w-])" + re.escape(option.group(1)) + r"\b", tree.help(path)):
            failures.add(page.name, f"`{line.strip()}`: `{option.group(1)}` is not in "
                                    f"`kernel-watchdog {' '.join(path)} --help`")
        if w == "--":
            break


# ---------------------------------------------------------------------------------------------
# facts against the code

def check_metrics(failures):
    source = (REPO / "src/metrics/exposition.cpp").read_text()
    defined = set(re.findall(r'"((?:kernel_watchdog|process)_[a-z_]+)"', source))
    doc = (REPO / "docs/daemon.md").read_text()
    documented = set()
    for row in re.findall(r"^\| (`[^|]+`) \|", doc, re.M):
        documented.update(re.findall(r"`((?:kernel_watchdog|process)_[a-z_]+)`", row))
    if not defined:
        failures.add("src/metrics/exposition.cpp", "no metric names found")
    for name in sorted(defined - documented):
        failures.add("docs/daemon.md", f"metric {name} (src/metrics/exposition.cpp) has no row")
    for name in sorted(documented - defined):
        failures.add("docs/daemon.md", f"metric {name} is not in src/metrics/exposition.cpp")


def report_id_pattern():
    doc = (REPO / "docs/report-format.md").read_text()
    row = re.search(r"^\| `id` \|.*?It matches `([^`]+)`", doc, re.M)
    return re.compile(row.group(1)) if row else None


def check_report_ids(binary, failures):
    pattern = report_id_pattern()
    if pattern is None:
        failures.add("docs/report-format.md", "the `id` row gives no pattern (\"It matches `...`\")")
        return
    root = pathlib.Path(tempfile.mkdtemp(prefix="kwd-docs-ids-"))
    try:
        env = dict(sandbox_env(root, binary), KERNEL_WATCHDOG_REPORT_DIR=str(root / "reports"))
        for kernel_id in ("4f6c1a2b-81234", "näive id/with:odd"):
            # A kernel that aborts at once, with a connection file named as Jupyter names one.
            connection = root / f"kernel-{kernel_id.replace('/', '_')}.json"
            subprocess.run([str(binary), "run", "--", "/usr/bin/python3", "-c", "import os; os.abort()",
                            "-f", str(connection)], env=env, capture_output=True, timeout=60)
        listing = json.loads(subprocess.run([str(binary), "reports", "list", "--json"], env=env,
                                            capture_output=True, text=True, timeout=30).stdout)
        ids = [r["id"] for r in listing["reports"]]
        if len(ids) != 2:
            failures.add("check_report_ids", f"expected 2 reports, found {ids}")
        for rid in ids:
            if not pattern.fullmatch(rid):
                failures.add("docs/report-format.md", f"the id of a real report, {rid}, does not "
                                                      f"match the documented {pattern.pattern}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check_schema_sections(failures):
    schema = json.loads((REPO / "docs/report.schema.json").read_text())
    doc = (REPO / "docs/report-format.md").read_text()
    for name in schema.get("properties", {}):
        if f"`{name}`" not in doc:
            failures.add("docs/report-format.md", f"the report's section `{name}` (schema) is not described")


def check_causes_named(failures):
    schema = json.loads((REPO / "docs/report.schema.json").read_text())
    causes = set(schema["properties"]["diagnosis"]["properties"]["cause"]["enum"])
    for page in pages():
        for value in re.findall(r"\bCAUSE=([a-z_]+)", page.read_text()):
            if value not in causes:
                failures.add(page.name, f"CAUSE={value} is not a cause id ({', '.join(sorted(causes))})")


def check_code_names(failures):
    sources = "\n".join(p.read_text(errors="replace")
                        for d in ("src", "include") for p in (REPO / d).rglob("*.[ch]pp"))
    for page in pages():
        for span in SPAN.findall(page.read_text()):
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)::([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?", span)
            if not m:
                continue
            owner, member = m.groups()
            if not re.search(rf"\b(?:class|struct|enum class)\s+{owner}\b"
                             rf"|\bnamespace\s+(?:\w+::)*{owner}\b", sources):
                failures.add(page.name, f"`{span}`: no class or namespace {owner} in src/ or include/")
            elif not re.search(rf"\b{member}\b", sources):
                failures.add(page.name, f"`{span}`: no {member} in src/ or include/")


def check_words(failures):
    for page in user_pages():
        text = prose(page.read_text())
        for bad in (r"\bhere\b", r"\bthis machine\b", r"\bshim\b", r"\bexited unasked\b",
                    r"never built|not (?:been )?compiled yet|has not been compiled"):
            if page.name == "words.md" and bad == r"\bshim\b":
                continue  # where the old word is explained
            for m in re.finditer(bad, text, re.I):
                line = text[max(0, m.start() - 50):m.end() + 30].replace("\n", " ")
                failures.add(page.name, f"says {m.group(0)!r}: ...{line}...")
        for term in ("fail open", "fails open", "last words"):
            if term in text.lower() and page.name != "words.md" and "words.md" not in page.read_text():
                failures.add(page.name, f"says {term!r} without a link to words.md")


def check_help_texts(binary, failures):
    tree = HelpTree(binary)
    pending = [()]
    while pending:  # every command's --help: the words users read there too
        path = pending.pop()
        text = tree.help(path) or ""
        if len(path) < 3:
            pending += [path + (sub,) for sub in tree.subcommands(path)]
        for bad in ("shim", "this machine", "fail open", "exited unasked"):
            if re.search(rf"\b{bad}\b", text, re.I):
                failures.add(f"kernel-watchdog {' '.join(path)} --help", f"says {bad!r}")
    daemon = subprocess.run([str(binary), "daemon", "--help"], capture_output=True, text=True,
                            timeout=30).stdout
    if "loopback" in daemon and "0.0.0.0" in daemon:
        failures.add("daemon --help", "asks for a loopback metrics address and shows 0.0.0.0")
    wrap = subprocess.run([str(binary), "kernelspec", "wrap", "--help"], capture_output=True,
                          text=True, timeout=30).stdout
    if '"<name>-watchdog"' not in wrap or "(watchdog)" not in wrap:
        failures.add("kernelspec wrap --help", "does not say the name and display name a wrap gets")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True, type=pathlib.Path)
    ap.add_argument("--only-console", nargs="*", help="run only these pages' console blocks")
    args = ap.parse_args()
    binary = args.binary.resolve()
    failures = Failures()

    ran = 0
    for page in pages():
        if args.only_console is not None and page.name not in args.only_console:
            continue
        ran += run_console_blocks(page, binary, failures)
    if args.only_console is None:
        tree = HelpTree(binary)
        lines = 0
        for page in pages():
            for line in command_lines(page.read_text()):
                lines += 1
                check_command_line(page, line, tree, failures)
        check_metrics(failures)
        check_report_ids(binary, failures)
        check_schema_sections(failures)
        check_causes_named(failures)
        check_code_names(failures)
        check_words(failures)
        check_help_texts(binary, failures)
        print(f"check_docs: {ran} console commands run, {lines} command lines checked against --help")
    for item in failures.items:
        print(f"check_docs: {item}", file=sys.stderr)
    return 1 if failures.items else 0


if __name__ == "__main__":
    sys.exit(main())
