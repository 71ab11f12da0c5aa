#!/usr/bin/env bash
# Builds the JupyterLab extension's frontend (labextension/) with JupyterLab's own tooling
# (@jupyter/builder from npm, `jupyter-builder build` from the framework virtualenv's
# JupyterLab, whose `jupyter labextension build` it replaces) into labextension/prebuilt, which is committed: the wheel carries it, so
# installing the package needs no Node.js. Run it after changing labextension/; the tests
# check that prebuilt/ was built from the sources there (prebuilt/kwd-sources.sha256).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$PWD/.cache/venv-frameworks"
cd labextension
npm ci --no-audit --no-fund --loglevel=error
rm -rf lib tsconfig.tsbuildinfo prebuilt
PATH="$venv/bin:$PATH" npm run build
../scripts/labextension_sources_hash.py > prebuilt/kwd-sources.sha256
echo "built labextension/prebuilt from $(cut -c1-12 prebuilt/kwd-sources.sha256)" >&2
