from setuptools import Extension, find_packages, setup

# Optional accelerator: reads SQLite integer columns into numpy arrays in C (Nsight Systems
# exports).  Needs a C compiler and sqlite3.h (Debian: libsqlite3-dev); where either is missing
# the build skips it and the pure-Python path gives the same results, slower.
SQLITE_SCAN = Extension("tb_hwprof.readers.common._sqlite_scan", ["tb_hwprof/readers/common/_sqlite_scan.c"],
                        libraries=["sqlite3"], optional=True)
# Optional accelerator: PyTorch profiler (Kineto) trace JSON to columns in one C pass (decode.py's
# native scanner); without a compiler decode.py's msgspec path gives the same columns, 25-90x slower
# on the samples.
KINETO_SCAN = Extension("tb_hwprof.readers.torch._kineto_scan", ["tb_hwprof/readers/torch/_kineto_scan.c"],
                        optional=True)
# Optional accelerator: operator nesting by a per-thread stack (core/nesting.py's numpy
# path gives the same parents in ~21 vectorised passes: ~1.3 s more for a 4M-event PyTorch trace).
NESTING = Extension("tb_hwprof.core._nesting", ["tb_hwprof/core/_nesting.c"], optional=True)
# Optional accelerator: the walk of each .ncu-rep launch record that checks its metric results
# (ncu_rep.metric_name_ids; its Python path gives the same answers, ~12 ms more for 30k metrics).
NCU_REP_SCAN = Extension("tb_hwprof.readers.nvidia._ncu_rep_scan", ["tb_hwprof/readers/nvidia/_ncu_rep_scan.c"],
                         optional=True)

# The frontend's folders, named as packages so setuptools does not warn that it would ignore them.
FRONTEND = ("tb_hwprof.frontend", "tb_hwprof.frontend.views")
FRONTEND_FILES = [f"*.{e}" for e in ("js", "css", "html", "svg")]

setup(
    name="tb-hwprof",
    version="0.1.0",
    description="Nsight Compute / Nsight Systems / rocprof / VTune results in TensorBoard",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    # Every folder of tb_hwprof is a package (an __init__.py each: find_packages skips a folder without
    # one, and tests/test_install.py checks a built wheel holds every file).
    packages=find_packages(include=["tb_hwprof", "tb_hwprof.*"]) + list(FRONTEND),
    # The plugin's frontend (plain ES modules, no build step) lives at the top of the repo and is
    # installed as package data of tb_hwprof.frontend (and .views), where the plugin finds it by import.
    package_dir={"tb_hwprof.frontend": "frontend"},
    package_data={package: FRONTEND_FILES for package in FRONTEND},
    ext_modules=[SQLITE_SCAN, KINETO_SCAN, NESTING, NCU_REP_SCAN],
    python_requires=">=3.9",
    install_requires=[
        "tensorboard>=2.12",
        "protobuf>=3.20",
        "werkzeug>=2.0",
        "pandas>=1.5",
        # Not optional: the exports and the plugin encode and parse every table with it (the
        # json-module fallback made a 1M-kernel export ~2x slower than the figures we quote).
        "orjson>=3.8",
        # Reads PyTorch profiler traces (decode.py's reference path, and a few values the native
        # scanner hands back to it).
        "msgspec>=0.18",
    ],
    extras_require={
        # NVIDIA's own reader of .ncu-rep (proprietary licence): optional, never vendored.
        "ncu": ["ncu-report"],
        # PyTorch's own profiler, for tb_hwprof.torch.trace_handler (reading traces needs no torch).
        # CI pins the local CPU build (torch==2.13.0); a range here lets users keep theirs.
        "torch": ["torch>=1.10"],
        # torch-tb-profiler 0.4.3: the oracle of the step breakdown tests.
        # Multi-rank job exports (tb_hwprof/app/jobs.py) run on Dask: a local cluster or an existing one.
        "distributed": ["dask[distributed]>=2023.1"],
        # Logdirs on object storage (s3://, gs://; any other fsspec URL with its fsspec filesystem).
        # s3fs from 2025.1: unbounded, pip met boto3's newest botocore against aiobotocore's pin by
        # backtracking 3 minutes down to s3fs 0.4.2 (2020); bounded it resolves at once.
        "s3": ["s3fs>=2025.1"],
        "gcs": ["gcsfs"],
        "test": ["pytest>=7", "pytest-xdist>=3", "ncu-report", "playwright>=1.40", "hypothesis>=6", "torch-tb-profiler==0.4.3",
                 "dask[distributed]>=2023.1", "s3fs>=2025.1", "boto3", "moto[server]>=5"],
    },
    entry_points={
        "console_scripts": ["tb-hwprof=tb_hwprof.app.cli:main"],
        # The module named here must import nothing heavy: TensorBoard imports it on every start.
        "tensorboard_plugins": ["tb_hwprof = tb_hwprof.plugin.hwprof_plugin:HwprofPluginLoader"],
    },
    include_package_data=True,
)
