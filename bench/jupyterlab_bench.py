"""What the JupyterLab extension costs a notebook's cells (issue 31): a 200-cell notebook run
with "Run All Cells" in a real JupyterLab (the framework virtualenv's) in Debian's Chromium,
with the package's extension on (server extension, frontend, its status item refreshing once a
second) and off (the same server without the package's Jupyter paths), on the same watched
kernel (the kernel-watchdog provisioner) both times, rounds alternating. Printed: each side's
median time from the click to the last cell's execution count, and their ratio.

Usage: /usr/bin/python3 bench/jupyterlab_bench.py --build-dir build [--rounds 5] [--cells 200]
Needs what the UI tests need: the framework virtualenv with JupyterLab (scripts/setup.sh),
tests/ui/node_modules (playwright-core), /usr/bin/chromium.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "integration"))
os.environ.setdefault("KWD_BINARY", str(REPO / "build" / "kernel-watchdog"))

import nbformat  # noqa: E402
from framework_corpus import VENV_PYTHON  # noqa: E402
from jupyter_server_app import TOKEN, Server, server_env  # noqa: E402


def install_package(folder):
    wheels = folder / "wheel"
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--config-settings=wheel.cmake=false",
                    "-w", str(wheels), str(REPO)], check=True)
    [wheel] = wheels.glob("kernel_watchdog-*.whl")
    site = folder / "site"
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), str(wheel)], check=True)
    return site


def one_run(root, site, extension, cells):
    root.mkdir()
    env = server_env(root, site)
    if not extension:
        # The package stays importable (the provisioner), its Jupyter paths go: no server
        # extension, no frontend.
        env["JUPYTER_CONFIG_PATH"] = str(root / "no-config")
        env["JUPYTER_PATH"] = str(root / "jupyter")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}\nx * 2") for i in range(cells)]
    nbformat.write(nb, str(root / "notebooks" / "cells.ipynb"))
    server = Server(root, env, app="jupyterlab")
    try:
        out = subprocess.run(
            ["node", str(REPO / "bench" / "jupyterlab_run_all.cjs"),
             f"{server.url}/lab/tree/cells.ipynb?token={TOKEN}", str(cells)],
            env={**os.environ, "NODE_PATH": str(REPO / "tests" / "ui" / "node_modules")},
            capture_output=True, text=True, timeout=600, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["ms"]
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(REPO / "build"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=200)
    args = parser.parse_args()
    os.environ["KWD_BINARY"] = str(Path(args.build_dir) / "kernel-watchdog")
    import jupyter_server_app
    jupyter_server_app.KWD_BINARY = os.environ["KWD_BINARY"]
    times = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        site = install_package(tmp)
        for r in range(args.rounds):
            for extension in ((True, False) if r % 2 == 0 else (False, True)):
                ms = one_run(tmp / f"r{r}-{extension}", site, extension, args.cells)
                times[extension].append(ms)
                print(f"round {r + 1}: extension {'on ' if extension else 'off'} {ms} ms",
                      flush=True)
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"Run All Cells, {args.cells} cells, median of {args.rounds}: extension on {on:.0f} ms, "
          f"off {off:.0f} ms, on/off {on / off:.3f}")


if __name__ == "__main__":
    main()
