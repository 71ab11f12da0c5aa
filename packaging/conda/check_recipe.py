#!/usr/bin/env python3
"""Checks packaging/conda/meta.yaml and build.sh where conda's own tools do not install.

conda-smithy's `recipe-lint` and conda-build come from conda channels, which this project's
machines cannot reach (conda-smithy's PyPI name is an empty placeholder, and neither
rattler-build nor conda-recipe-manager is on PyPI). So this script does the first part of what
they do, with Debian's Jinja2 and PyYAML:

- renders the recipe's Jinja and `# [selector]` lines for each platform conda-forge builds
  (linux-64, linux-aarch64, osx-64, osx-arm64, win-64) and parses the YAML;
- checks the sections and keys conda-forge's lint asks for (package, source, build number,
  compilers and the C stdlib, test commands, about with license and license_file, extra
  recipe-maintainers), that Windows is skipped, that the version is CMakeLists.txt's, that
  `source: path` is this repository, and that every library CMakeLists.txt finds is a host
  requirement under its conda-forge name;
- `bash -n` on build.sh.

With --build PREFIX it also runs build.sh as conda-build would (SRC_DIR, PREFIX, CPU_COUNT,
CMAKE_ARGS), with the libraries of the machine it runs on instead of conda-forge's, and then
the recipe's test commands against PREFIX: what a conda-build run checks after the build.

Usage: check_recipe.py [--build PREFIX]; exit status 1 with the problems on stderr.
"""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import yaml

RECIPE_DIR = Path(__file__).resolve().parent
ROOT = RECIPE_DIR.parent.parent

PLATFORMS = {
    "linux-64": {"linux": True, "x86_64": True},
    "linux-aarch64": {"linux": True, "aarch64": True},
    "osx-64": {"osx": True, "x86_64": True},
    "osx-arm64": {"osx": True, "arm64": True},
    "win-64": {"win": True, "x86_64": True},
}

# What CMakeLists.txt finds (find_package or pkg-config), by its conda-forge package name.
CONDA_NAME = {
    "libzmq": "zeromq",
    "cppzmq": "cppzmq",
    "nlohmann_json": "nlohmann_json",
    "spdlog": "spdlog",
    "CLI11": "cli11",
    "OpenSSL": "openssl",
    "simdjson": "simdjson",
    "cpp-httplib": "cpp-httplib",
    # Provided by the compiler and the C stdlib, or by CMake itself: no host package.
    "PkgConfig": None,
    "Threads": None,
    "Catch2": None,  # tests only (KWD_BUILD_TESTS=OFF in build.sh)
}


def render(platform):
    """The recipe as conda-build would read it on `platform`."""
    names = {"linux": False, "osx": False, "win": False, "x86_64": False, "aarch64": False,
             "arm64": False}
    names.update(PLATFORMS[platform])
    names["unix"] = not names["win"]
    lines = []
    for line in (RECIPE_DIR / "meta.yaml").read_text().splitlines():
        match = re.match(r"^(.*\S)\s+#\s*\[(.+)\]\s*$", line)
        if match and not line.lstrip().startswith("#"):
            if not eval(match.group(2), {"__builtins__": {}}, names):  # noqa: S307 (names only)
                continue
            line = match.group(1)
        lines.append(line)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    text = env.from_string("\n".join(lines)).render(
        compiler=lambda language: f"{language}_compiler_stub",
        stdlib=lambda language: f"{language}_stdlib_stub",
    )
    return yaml.safe_load(text)


def requirement_names(entries):
    return [str(entry).split()[0] for entry in entries or []]


def cmake_dependencies():
    text = (ROOT / "CMakeLists.txt").read_text()
    found = re.findall(r"^\s*find_package\((\w[\w-]*)", text, re.M)
    found += re.findall(r"^\s*pkg_check_modules\(\w+ REQUIRED IMPORTED_TARGET ([\w-]+)\)", text, re.M)
    tests = (ROOT / "tests/CMakeLists.txt").read_text()
    found += re.findall(r"^\s*find_package\((\w[\w-]*)", tests, re.M)
    return sorted(set(found))


def check(platform, recipe, problems):
    def say(text):
        problems.append(f"{platform}: {text}")

    if platform.startswith("win"):
        if not (recipe.get("build") or {}).get("skip"):
            say("Windows is not skipped (the watchdog is POSIX only)")
        return
    package = recipe.get("package") or {}
    if package.get("name") != "kernel-watchdog":
        say(f"package name {package.get('name')!r}")
    cmake_version = re.search(r"project\(kernel-watchdog VERSION ([\d.]+)",
                              (ROOT / "CMakeLists.txt").read_text()).group(1)
    if str(package.get("version")) != cmake_version:
        say(f"version {package.get('version')} is not CMakeLists.txt's {cmake_version}")
    source = recipe.get("source") or {}
    if "path" in source:
        if (RECIPE_DIR / source["path"]).resolve() != ROOT:
            say(f"source path {source['path']} is not the repository root")
    elif not ("url" in source and "sha256" in source):
        say("source has neither a path nor a url with its sha256")
    if not isinstance((recipe.get("build") or {}).get("number"), int):
        say("build has no number")
    requirements = recipe.get("requirements") or {}
    build = requirement_names(requirements.get("build"))
    for wanted in ("cxx_compiler_stub", "c_stdlib_stub", "cmake", "ninja", "pkg-config"):
        if wanted not in build:
            say(f"requirements/build lacks {wanted.replace('_stub', '')}")
    host = requirement_names(requirements.get("host"))
    if len(set(host)) != len(host):
        say("requirements/host names a package twice")
    for dependency in cmake_dependencies():
        if dependency not in CONDA_NAME:
            say(f"CMakeLists.txt finds {dependency}: add its conda-forge name to this check")
        elif CONDA_NAME[dependency] and CONDA_NAME[dependency] not in host:
            say(f"CMakeLists.txt finds {dependency}, but {CONDA_NAME[dependency]} is not in host")
    if not (recipe.get("test") or {}).get("commands"):
        say("test has no commands")
    about = recipe.get("about") or {}
    for key in ("home", "license", "license_file", "summary"):
        if not about.get(key):
            say(f"about has no {key}")
    if about.get("license_file") and not (ROOT / about["license_file"]).is_file():
        say(f"license_file {about['license_file']} is not in the source")
    if not (recipe.get("extra") or {}).get("recipe-maintainers"):
        say("extra has no recipe-maintainers")


def build_and_test(prefix, recipe, problems):
    prefix = Path(prefix).resolve()
    env = dict(os.environ, SRC_DIR=str(ROOT), PREFIX=str(prefix),
               CPU_COUNT=os.environ.get("CPU_COUNT", "2"),
               CMAKE_ARGS=os.environ.get("CMAKE_ARGS", ""))
    build_dir = ROOT / "build-conda"
    subprocess.run(["rm", "-rf", str(build_dir)], check=True)
    result = subprocess.run(["bash", str(RECIPE_DIR / "build.sh")], cwd=ROOT, env=env)
    if result.returncode != 0:
        problems.append(f"build.sh exited {result.returncode}")
        return
    env["PATH"] = f"{prefix / 'bin'}:{env['PATH']}"
    for command in recipe["test"]["commands"]:
        result = subprocess.run(["bash", "-c", command], cwd="/", env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        status = "ok" if result.returncode == 0 else f"FAILED ({result.returncode})"
        print(f"check_recipe: test command {command!r}: {status}")
        if result.returncode != 0:
            problems.append(f"test command {command!r} failed: {result.stderr.strip()[-400:]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", metavar="PREFIX",
                        help="also run build.sh into PREFIX and the recipe's test commands")
    args = parser.parse_args()
    problems = []
    rendered = {}
    for platform in PLATFORMS:
        try:
            rendered[platform] = render(platform)
        except (jinja2.TemplateError, yaml.YAMLError) as error:
            problems.append(f"{platform}: does not render: {error}")
            continue
        check(platform, rendered[platform], problems)
    syntax = subprocess.run(["bash", "-n", str(RECIPE_DIR / "build.sh")],
                            stderr=subprocess.PIPE, text=True)
    if syntax.returncode != 0:
        problems.append(f"build.sh: {syntax.stderr.strip()}")
    if args.build and not problems:
        build_and_test(args.build, rendered["linux-64"], problems)
    for problem in problems:
        print(f"check_recipe: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"check_recipe: meta.yaml renders and passes for {', '.join(PLATFORMS)}; "
          "build.sh parses" + ("; built and tested" if args.build else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
