"""The DRM fdinfo probe on a live machine: a real kernel under `kernel-watchdog run` opens a
DRM render node (as ROCm's or oneAPI's runtime does when a framework first touches the GPU),
holds it, and dies; its report's drm_gpu section names the client, its driver and its device.

It needs a DRM device (an AMD or Intel GPU, or any driver with a render node): where
/dev/dri is absent, as on the machine this was written on, the test is skipped and says so.
The probe's parsing of each driver's layout is tested on fixture trees (tests/unit/
test_probes_drm.cpp, tests/fixtures/drm/).
"""

import pathlib
import signal

import pytest

from conftest import load_reports

DEV_DRI = pathlib.Path("/dev/dri")


def render_nodes():
    return sorted(DEV_DRI.glob("renderD*")) if DEV_DRI.is_dir() else []


@pytest.mark.skipif(not DEV_DRI.is_dir(),
                    reason="no /dev/dri on this machine: the live DRM fdinfo test needs a GPU "
                           "with a DRM render node (AMD or Intel)")
def test_a_kernel_holding_a_drm_render_node_is_reported(start_kernel, jupyter_env):
    nodes = render_nodes()
    if not nodes:
        pytest.skip("/dev/dri has no render node (renderD*) on this machine")
    node = nodes[0]
    k = start_kernel()
    # Opened read-write like a GPU runtime does; a node not ours to open is this machine's
    # permissions (the video/render group), not the probe's business.
    opened = k.execute(
        "import os\n"
        f"try:\n    fd = os.open({str(node)!r}, os.O_RDWR | os.O_CLOEXEC)\n"
        "except OSError as e:\n    fd = None; print('cannot open:', e)\n"
        "print('fd', fd)\n")
    if "cannot open" in str(opened):
        k.close()
        pytest.skip(f"{node} is not ours to open here (its group: video/render)")
    # Cells' ends read the probe; a second cell makes sure a reading followed the open.
    k.execute("import time; time.sleep(1.5)")
    rc = k.execute_until_death("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert rc == -signal.SIGSEGV
    (report,) = load_reports(jupyter_env["report_dir"])
    probes = {p["name"]: p for p in report["probes"]}
    assert probes["drm-fdinfo"]["available"], probes["drm-fdinfo"]
    drm = report["drm_gpu"]
    assert drm["source"] == "drm-fdinfo"
    assert drm["drm_descriptors"] >= 1
    kernel = [p for p in drm["processes"] if p["pid"] == report["kernel"]["pid"]]
    assert kernel, drm["processes"]
    device = drm["devices"][kernel[0]["device"]]
    assert device["driver"]
    assert device["vendor"]
