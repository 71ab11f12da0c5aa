#!/usr/bin/env bash
# Installs every Debian package that the build, the tests and the demo need, and the
# virtualenv of PyPI's TensorFlow, JAX and Jupyter stack that the failure corpus runs.
# Idempotent, and quick when everything is already there (no apt-get update then).
set -euo pipefail

packages=(
  # build
  build-essential cmake ninja-build pkg-config clang-format
  libzmq3-dev cppzmq-dev nlohmann-json3-dev libspdlog-dev libcli11-dev catch2 libssl-dev
  libsimdjson-dev libcpp-httplib-dev
  # stacks: libdwfl's headers (libdw.so.1 itself is opened at run time, never linked); gdb
  # attaches after `stacks` in its tests, eu-stack is what `stacks` is measured against
  libdw-dev gdb elfutils
  # sanitizer builds (gcc's runtimes come with build-essential) and the libFuzzer targets:
  # clang with its runtimes (libFuzzer, ASan, UBSan), llvm-symbolizer for readable stacks
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
  # the HTML report is checked in headless Chromium, the terminal view in tmux
  chromium tmux
  # reports show times in the reader's time zone; a unit test reads Europe/Berlin's
  tzdata
  # packaging: `cpack -G DEB` (dpkg-shlibdeps, file), the man page rendered and found
  dpkg-dev file groff-base man-db
  # packaging: the Homebrew formula parsed and checked (packaging/homebrew/check_formula.rb)
  ruby
)

# The failure corpus (tests/integration/test_frameworks.py): Debian's PyTorch (CPU), a
# virtualenv for PyPI's TensorFlow and JAX (below), and qemu-user for a CPU without AVX. The
# demo does without them: KWD_SETUP_FRAMEWORKS=0.
frameworks="${KWD_SETUP_FRAMEWORKS:-1}"
if [ "$frameworks" != 0 ]; then
  packages+=(python3-torch python3-venv qemu-user)
  # The JupyterLab extension's UI tests: playwright-core from npm drives Debian's chromium.
  # (Where Node.js came from elsewhere, e.g. NodeSource's nodejs with its own npm, that stays.)
  if ! command -v npm >/dev/null; then packages+=(nodejs npm); fi
fi
# The macOS compile check (scripts/macos_compile.sh): Zig's toolchain from PyPI, in a
# virtualenv of its own (below). Made with the frameworks unless told: KWD_SETUP_ZIG=0|1.
zig_setup="${KWD_SETUP_ZIG:-$frameworks}"
if [ "$zig_setup" != 0 ]; then
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

# The newest TensorFlow, JAX, ipykernel and jupyter_client from PyPI, in a virtualenv of
# Debian's interpreter (never in the system Python). Made again only when the requirements
# change; pip's own cache (~/.cache/pip) keeps the downloads between runs.
venv=".cache/venv-frameworks"
requirements="scripts/frameworks-requirements.txt"
cd "$(dirname "$0")/.."
if [ "$frameworks" != 0 ] && ! cmp -s "$requirements" "$venv/.kwd-requirements" 2>/dev/null; then
  echo "setup: making $venv (TensorFlow, JAX, ipykernel from PyPI)" >&2
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q -r "$requirements"
  # A module built against NumPy 1.x (numexpr 2.8.4's wheel) in a site directory of its own, as
  # another environment on sys.path: imported under NumPy 2 it fails the way users' old builds do.
  "$venv/bin/pip" install -q --no-deps --target "$venv/numpy1/site-packages" 'numexpr==2.8.4'
  cp "$requirements" "$venv/.kwd-requirements"
  "$venv/bin/pip" list --format=freeze | grep -iE '^(tensorflow[-_a-z]*|jax|jaxlib|keras|numpy|ipykernel|jupyter.client)==' >&2
fi

# Zig (PyPI's ziglang wheel: its clang, LLVM's libc++ and macOS's libc and system headers),
# pinned in scripts/zig-requirements.txt; made again only when the pin changes.
zig_venv=".cache/venv-zig"
zig_requirements="scripts/zig-requirements.txt"
if [ "$zig_setup" != 0 ] && ! cmp -s "$zig_requirements" "$zig_venv/.kwd-requirements" 2>/dev/null; then
  echo "setup: making $zig_venv (Zig's toolchain from PyPI, for scripts/macos_compile.sh)" >&2
  rm -rf "$zig_venv"
  /usr/bin/python3 -m venv "$zig_venv"
  "$zig_venv/bin/pip" install -q -r "$zig_requirements"
  cp "$zig_requirements" "$zig_venv/.kwd-requirements"
fi
# JupyterLab and Notebook 7, added to that virtualenv with a stamp of their own: a change here
# installs them again without making the whole virtualenv anew (a new virtualenv has no stamp).
lab_requirements="scripts/jupyterlab-requirements.txt"
if [ "$frameworks" != 0 ] && ! cmp -s "$lab_requirements" "$venv/.kwd-jupyterlab-requirements" 2>/dev/null; then
  echo "setup: adding JupyterLab and Notebook 7 to $venv" >&2
  "$venv/bin/pip" install -q --upgrade -r "$lab_requirements"
  cp "$lab_requirements" "$venv/.kwd-jupyterlab-requirements"
fi
# playwright-core for the UI tests (tests/ui/package-lock.json; no browser is downloaded).
if [ "$frameworks" != 0 ] && ! cmp -s tests/ui/package-lock.json tests/ui/node_modules/.kwd-package-lock.json 2>/dev/null; then
  echo "setup: npm ci in tests/ui (playwright-core)" >&2
  (cd tests/ui && npm ci --no-audit --no-fund --loglevel=error)
  cp tests/ui/package-lock.json tests/ui/node_modules/.kwd-package-lock.json
fi
