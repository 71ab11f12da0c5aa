#!/usr/bin/python3
"""The cost of watching a notebook suite the way users run it: 20 notebooks under
`pytest --nbmake -n 2` (nbmake and pytest-xdist from PyPI, the framework virtualenv's),

  plain        pytest --nbmake -n 2                       (what people run today)
  watched      pytest --nbmake -n 2 --kernel-watchdog     (every kernel under `run`, through
                                                           the provisioner the plugin turns on)
  smoke        kernel-watchdog smoke -j 2                 (the same notebooks, our own runner)

alternating, `--repeat` times, each a fresh process. Each notebook imports numpy, computes a
little and prints, in 5 cells: a notebook suite's typical short notebook, so the kernel's
start dominates, which is where a launcher's cost would show. Prints each way's median wall
time and the ratios watched/plain (the cost of watching) and smoke/plain.

The package comes from this checkout, built as a wheel without its C++ and installed into a
temporary folder (as tests/integration/test_python_package.py does); the program is
--watchdog.

  /usr/bin/python3 bench/runner_bench.py --watchdog build/kernel-watchdog [--repeat 3]
"""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import nbformat

REPO = pathlib.Path(__file__).resolve().parent.parent
VENV_PYTHON = REPO / ".cache" / "venv-frameworks" / "bin" / "python"
CELLS = [
    "import numpy as np",
    "a = np.arange(100_000, dtype=np.float64)",
    "b = (a * 2).sum()",
    "print(b)",
    "assert b > 0",
]


def write_suite(folder, count):
    folder.mkdir()
    for i in range(count):
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_code_cell(code) for code in CELLS]
        nbformat.write(nb, str(folder / f"nb{i:02d}.ipynb"))
    return sorted(str(p) for p in folder.glob("*.ipynb"))


def install_package(into):
    wheels = into / "wheel"
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "--config-settings=wheel.cmake=false", "-w",
                    str(wheels), str(REPO)], check=True)
    site = into / "site"
    subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(site), *map(str, wheels.glob("*.whl"))], check=True)
    return site


def timed(argv, env, cwd):
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{argv[:4]}... failed ({proc.returncode}):\n{proc.stdout[-3000:]}"
                 f"\n{proc.stderr[-3000:]}")
    return took


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchdog", default=str(REPO / "build" / "kernel-watchdog"))
    parser.add_argument("--notebooks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not VENV_PYTHON.exists():
        sys.exit(f"{VENV_PYTHON} is missing: run scripts/setup.sh")
    watchdog = str(pathlib.Path(args.watchdog).resolve())
    with tempfile.TemporaryDirectory(prefix="kwd-runner-bench-") as tmp:
        tmp = pathlib.Path(tmp)
        notebooks = write_suite(tmp / "suite", args.notebooks)
        site = install_package(tmp)
        # The python3 kernel is the virtualenv's interpreter, for all three.
        spec = tmp / "jupyter" / "kernels" / "python3"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(
            '{"argv": ["%s", "-m", "ipykernel_launcher", "-f", "{connection_file}"], '
            '"display_name": "Python 3", "language": "python"}' % VENV_PYTHON)
        env = {k: v for k, v in os.environ.items()
               if k not in ("JUPYTER_DEFAULT_PROVISIONER_NAME", "PYTEST_ADDOPTS")}
        env.update(PYTHONPATH=str(site), KERNEL_WATCHDOG_BINARY=watchdog,
                   JUPYTER_PATH=str(tmp / "jupyter"), JUPYTER_DATA_DIR=str(tmp / "data"),
                   JUPYTER_RUNTIME_DIR=str(tmp / "runtime"), TMPDIR=str(tmp),
                   KERNEL_WATCHDOG_REPORT_DIR=str(tmp / "reports"))
        pytest = [str(VENV_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbmake",
                  "-n", "2", *notebooks]
        ways = {
            "plain": pytest,
            "watched": [*pytest, "--kernel-watchdog"],
            "smoke": [watchdog, "smoke", "-j", "2", "--output-dir", str(tmp / "smoke-out"),
                      *notebooks],
        }
        times = {name: [] for name in ways}
        for _ in range(args.repeat):
            for name, argv in ways.items():
                times[name].append(timed(argv, env, tmp))
        median = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.notebooks} notebooks of {len(CELLS)} cells, 2 at once, median of "
          f"{args.repeat} (all runs: seconds)")
    for name, argv in ways.items():
        print(f"  {name:8} {median[name]:7.2f} s   {' '.join(f'{t:.2f}' for t in times[name])}")
    print(f"  watched / plain: {median['watched'] / median['plain']:.3f}  (the cost of watching)")
    print(f"  smoke / plain:   {median['smoke'] / median['plain']:.3f}")


if __name__ == "__main__":
    main()
