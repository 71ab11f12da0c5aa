"""The failure corpus: small notebooks that make real frameworks kill their kernel (or fail a
cell) the way users' kernels die, with what the watchdog must say about each.

Each entry is run for real by test_frameworks.py, under `kernel-watchdog run` (a kernel that
jupyter_client starts, as JupyterLab does) and under `kernel-watchdog smoke`. Nothing here is
simulated: TensorFlow and JAX come from PyPI (the virtualenv scripts/setup.sh makes), PyTorch
and the other Jupyter stack from Debian; memory limits are real cgroups, a container's small
/dev/shm is a real tmpfs in a mount namespace, and a CPU without AVX is qemu-user's model of
one. docs/failures.md is the same table for people.
"""
import dataclasses
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
VENV = REPO_ROOT / ".cache" / "venv-frameworks"
VENV_PYTHON = VENV / "bin" / "python"
# A module built against NumPy 1.x (numexpr 2.8.4's wheel) in a site directory of its own, as
# another environment's on sys.path; setup.sh installs it.
NUMPY1_MODULES = VENV / "numpy1" / "site-packages"
DEBIAN_PYTHON = pathlib.Path("/usr/bin/python3")


@dataclasses.dataclass
class Failure:
    name: str
    # Which Python runs the kernel: "venv" (PyPI's TensorFlow and JAX), "debian" (Debian's
    # Jupyter stack and python3-torch), "venv-no-avx" (the venv under a CPU without AVX).
    interpreter: str
    cells: list
    # True: the kernel dies and `run` writes a crash report. False: a cell fails, the kernel
    # lives on, and no crash report is written.
    dies: bool
    # The cause the report (death) or smoke's failed cell states.
    cause: str
    # Regular expressions the headline must match (all of them).
    headline: list
    # Regular expressions that must each match one line of the evidence.
    evidence: list
    # Remedy ids the report must give.
    remedies: list
    # The framework the report names (fingerprint for a death, the cause's own words else).
    framework: str
    run_options: list = dataclasses.field(default_factory=list)
    # The size of /dev/shm in the kernel's container (a private tmpfs), as Docker's 64 MiB.
    container_shm: str = ""
    timeout: int = 180
    # For a failure whose first OOM victim is a process of the kernel: Linux may take the
    # kernel second when the first victim's memory is not yet given back by the next failed
    # charge (CI saw it on 2026-11-28, oom_kill 0 -> 2). The kernel's death is then the
    # kernel's choice, not the watchdog's, and the crash report must say it came second:
    # {"headline": [...], "evidence": [...], "remedies": [...]} as above. None: it must live.
    taken_second: dict = None


TF_IMPORT = "import tensorflow as tf"
TORCH_IMPORT = "import torch"

CORPUS = [
    Failure(
        name="tensorflow_eager_tensors_kept_until_oom",
        interpreter="venv",
        cells=[TF_IMPORT,
               "history = []\n"
               "for step in range(100000):\n"
               "    x = tf.random.normal([1024, 1024])\n"
               "    history.append(x * 2.0)  # every step's result kept alive\n"],
        dies=True,
        cause="oom_killed_cgroup",
        headline=[r"memory limit kernel-watchdog set", r"cell \[[0-9]+\]"],
        evidence=[r"OOM killer's record names", r"oom_kill"],
        remedies=["tensorflow.release_tensors"],
        framework="tensorflow",
        run_options=["--memory-limit=1536M"],
    ),
    Failure(
        name="keras_models_built_in_a_loop_until_oom",
        interpreter="venv",
        cells=["import keras",
               "models = []\n"
               "for trial in range(10000):\n"
               "    model = keras.Sequential([keras.Input((2048,)), keras.layers.Dense(2048),\n"
               "                              keras.layers.Dense(10)])\n"
               "    model.compile(optimizer='adam', loss='mse')\n"
               "    models.append(model)  # each trial's model kept, as a sweep does\n"],
        dies=True,
        cause="oom_killed_cgroup",
        headline=[r"memory limit kernel-watchdog set", r"cell \[[0-9]+\]"],
        evidence=[r"OOM killer's record names"],
        remedies=["tensorflow.clear_session"],
        framework="tensorflow",
        run_options=["--memory-limit=1536M"],
    ),
    Failure(
        name="tensorflow_allocation_larger_than_the_machine",
        interpreter="venv",
        cells=[TF_IMPORT, "x = tf.zeros([2**40])"],
        dies=False,
        cause="framework_out_of_memory",
        headline=[r"TensorFlow could not allocate", r"4\.0+ TiB", r"CPU"],
        evidence=[r"OOM when allocating tensor with shape\[1099511627776\]"],
        remedies=["framework_oom.smaller_allocation"],
        framework="tensorflow",
    ),
    Failure(
        name="tensorflow_check_failed_abort",
        interpreter="venv",
        # A shape CHECK in LRNGrad's kernel (tensorflow/tensorflow#66761, open; checked to abort
        # under TensorFlow 2.21). Conv3DBackpropFilterV2's CHECK, used here before, raises an
        # InvalidArgumentError since 2.21.
        cells=[TF_IMPORT,
               "tf.raw_ops.LRNGrad(\n"
               "    input_grads=tf.zeros([0, 0, 0, 0]), input_image=tf.zeros([0, 0, 0, 0]),\n"
               "    output_image=tf.zeros([0]), depth_radius=1, bias=1.5, alpha=0.1, beta=0.4)"],
        dies=True,
        cause="abort",
        headline=[r"Check failed: d < dims\(\) \(1 vs\. 1\)", r"cell \[[0-9]+\]"],
        evidence=[r"tensorflow\.check_failed", r"killed by SIGABRT",
                  # The abort is TensorFlow's own: the function whose CHECK failed (past
                  # Abseil's logging frames), in TensorFlow's library.
                  r"native stack at the crash: tensorflow::.* in (libtensorflow_framework|"
                  r"_pywrap_tensorflow_internal|libtensorflow_cc)\.so"],
        remedies=["signature.tensorflow.check_failed"],
        framework="tensorflow",
    ),
    Failure(
        name="numpy_segfault_in_its_own_loop",
        interpreter="debian",
        # A view whose strides point far outside its one-element buffer (as_strided trusts
        # them: NumPy's docs warn of exactly this); the sum reads there, inside NumPy's C
        # reduction loop, with no Python frame below the call.
        cells=["import numpy as np\n"
               "x = np.zeros(1)\n"
               "y = np.lib.stride_tricks.as_strided(x, shape=(1 << 20,), strides=(1 << 40,))",
               "def kwd_total(a):\n"
               "    return a.sum()\n"
               "kwd_total(y)"],
        dies=True,
        cause="native_crash",
        headline=[r"SIGSEGV", r"in _multiarray_umath\.", r"cell \[[0-9]+\]"],
        # Debian's NumPy is stripped: the library is named, its static functions are not.
        evidence=[r"killed by SIGSEGV", r"native stack at the crash: (.* in )?_multiarray_umath\."],
        remedies=["native.check_call"],
        framework="numpy",
    ),
    Failure(
        name="pytorch_segfault_in_its_own_kernel",
        interpreter="debian",
        # The same view handed to PyTorch (from_numpy keeps NumPy's strides): the sum faults in
        # libtorch_cpu's reduction kernel.
        cells=[TORCH_IMPORT + "\nimport numpy as np\n"
               "x = np.zeros(1)\n"
               "y = np.lib.stride_tricks.as_strided(x, shape=(1 << 20,), strides=(1 << 40,))",
               "torch.from_numpy(y).sum()"],
        dies=True,
        cause="native_crash",
        # Debian's libtorch_cpu is stripped of its static functions: the nearest exported one
        # the fault came through names the part of PyTorch (TensorIterator's loop).
        headline=[r"SIGSEGV", r"in libtorch_cpu\.so[.0-9]* \(under at::", r"cell \[[0-9]+\]"],
        evidence=[r"killed by SIGSEGV",
                  r"native stack at the crash: libtorch_cpu\.so[.0-9]* \(under at::"],
        remedies=["native.check_call"],
        framework="torch",
    ),
    Failure(
        name="tensorflow_build_needs_avx_the_cpu_lacks",
        interpreter="venv-no-avx",
        cells=["import sys", TF_IMPORT],
        dies=True,
        cause="cpu_unsupported",
        headline=[r"SIGILL", r"TensorFlow 2\.[0-9]+", r"CPU instructions this CPU lacks"],
        evidence=[r"illegal instruction", r"in tensorflow's code: preload_check\(\)"],
        remedies=["cpu.rosetta_native_arm64", "cpu.build_for_this_cpu"],
        framework="tensorflow",
        timeout=300,
    ),
    Failure(
        name="pytorch_tensors_kept_until_oom",
        interpreter="debian",
        cells=[TORCH_IMPORT,
               "held = []\n"
               "while True:\n"
               "    held.append(torch.ones(8 * 1024 * 1024))  # 32 MiB each, all kept\n"],
        dies=True,
        cause="oom_killed_cgroup",
        headline=[r"memory limit kernel-watchdog set", r"cell \[[0-9]+\]"],
        evidence=[r"OOM killer's record names"],
        remedies=["torch.release_tensors"],
        framework="torch",
        run_options=["--memory-limit=600M"],
    ),
    Failure(
        name="pytorch_shared_tensor_larger_than_dev_shm",
        interpreter="debian",
        container_shm="64m",
        cells=[TORCH_IMPORT,
               "t = torch.ones(32 * 1024 * 1024)  # 128 MiB\n"
               "t.share_memory_()"],
        dies=True,
        cause="shared_memory_full",
        headline=[r"/dev/shm", r"64(\.0)? MiB", r"cell \[[0-9]+\]"],
        evidence=[r"SIGBUS", r"/dev/shm is a tmpfs of 64(\.0)? MiB", r"share_memory_"],
        remedies=["shm.larger_dev_shm", "torch.file_system_sharing"],
        framework="torch",
    ),
    Failure(
        name="pytorch_dataloader_worker_bus_error",
        interpreter="debian",
        container_shm="64m",
        cells=[TORCH_IMPORT,
               "from torch.utils.data import DataLoader, Dataset\n"
               "class Images(Dataset):\n"
               "    def __len__(self):\n"
               "        return 16\n"
               "    def __getitem__(self, i):\n"
               "        return torch.ones(6 * 1024 * 1024)  # 24 MiB a sample\n",
               "for batch in DataLoader(Images(), batch_size=4, num_workers=2):\n"
               "    pass\n"],
        dies=False,
        cause="shared_memory_full",
        headline=[r"DataLoader worker", r"/dev/shm", r"64(\.0)? MiB"],
        evidence=[r"DataLoader worker \(pid [0-9]+\) is killed by signal: Bus error"],
        remedies=["shm.larger_dev_shm", "torch.file_system_sharing"],
        framework="torch",
    ),
    Failure(
        name="pytorch_dataloader_worker_oom_killed",
        interpreter="debian",
        cells=[TORCH_IMPORT,
               "import numpy as np\n"
               "from torch.utils.data import DataLoader, Dataset\n"
               "class Cache(Dataset):\n"
               "    kept = []\n"
               "    def __len__(self):\n"
               "        return 1000\n"
               "    def __getitem__(self, i):\n"
               "        self.kept.append(np.ones(16 * 1024 * 1024 // 8))  # a worker's cache\n"
               "        return i\n",
               "for batch in DataLoader(Cache(), batch_size=1, num_workers=1):\n"
               "    pass\n"],
        dies=False,
        cause="worker_oom_killed",
        headline=[r"DataLoader worker", r"OOM killer"],
        evidence=[r"DataLoader worker", r"Killed process [0-9]+"],
        remedies=["torch.dataloader_worker_memory"],
        framework="torch",
        run_options=["--memory-limit=700M"],
        taken_second={
            "headline": [r"memory limit kernel-watchdog set",
                         r"after the OOM killer had taken its DataLoader worker \(pid [0-9]+\) "
                         r"first"],
            "evidence": [r"took the kernel's process [0-9]+ \(\S+\) first, then the kernel",
                         r"Killed process [0-9]+"],
            "remedies": ["torch.dataloader_worker_memory", "oom.raise_watchdog_limit"]},
    ),
    Failure(
        name="jax_allocation_larger_than_the_machine",
        interpreter="venv",
        cells=["import jax.numpy as jnp",
               "x = jnp.zeros((2**40,), dtype=jnp.float32)\nx.block_until_ready()"],
        dies=False,
        cause="framework_out_of_memory",
        headline=[r"JAX \(XLA\) could not allocate", r"4\.0+ TiB"],
        evidence=[r"RESOURCE_EXHAUSTED: Out of memory allocating 4398046511104 bytes"],
        remedies=["framework_oom.smaller_allocation"],
        framework="jax",
    ),
    Failure(
        name="two_openmp_runtimes_in_one_process",
        interpreter="venv",
        cells=["import ctypes, pathlib, shutil, sys, tempfile\n"
               "ours = pathlib.Path(sys.prefix) / 'lib' / 'libiomp5.so'\n"
               "# a second package that bundles its own copy, as conda and pip builds do\n"
               "bundled = pathlib.Path(tempfile.mkdtemp()) / 'libiomp5.so'\n"
               "shutil.copy(ours, bundled)",
               "ctypes.CDLL(str(ours)).omp_get_max_threads()\n"
               "ctypes.CDLL(str(bundled)).omp_get_max_threads()"],
        dies=True,
        cause="abort",
        headline=[r"OMP: Error #15", r"cell \[[0-9]+\]"],
        evidence=[r"openmp\.duplicate_runtime", r"killed by SIGABRT"],
        remedies=["signature.openmp.duplicate_runtime"],
        framework="Intel OpenMP",
    ),
    Failure(
        name="numpy_1_module_under_numpy_2",
        interpreter="venv",
        cells=["import sys\n"
               f"sys.path.insert(0, {str(NUMPY1_MODULES)!r})",
               "import numexpr"],
        dies=False,
        cause="numpy_abi_mismatch",
        # Both versions: NumPy's from its own message, numexpr's from the live fingerprint.
        headline=[r"NumPy 1\.x", r"NumPy 2\.[0-9]+\.[0-9]+", r"numexpr 2\.8\.4 was built for"],
        evidence=[r"A module that was compiled using NumPy 1\.x cannot be run in"],
        remedies=["numpy.rebuild_or_pin"],
        framework="numpy",
    ),
]
