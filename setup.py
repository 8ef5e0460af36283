from setuptools import find_packages, setup

setup(
    name="tb-hwprof",
    version="0.1.0",
    description="Nsight Compute / Nsight Systems / rocprof / VTune results in TensorBoard",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tb_hwprof", "tb_hwprof.*"]),
    python_requires=">=3.9",
    install_requires=[
        "tensorboard>=2.12",
        "protobuf>=3.20",
        "werkzeug>=2.0",
        "pandas>=1.5",
    ],
    extras_require={
        # NVIDIA's own reader of .ncu-rep (proprietary licence): optional, never vendored.
        "ncu": ["ncu-report"],
        "test": ["pytest>=7", "ncu-report", "playwright>=1.40"],
    },
    entry_points={
        "console_scripts": ["tb-hwprof=tb_hwprof.cli:main"],
    },
    include_package_data=True,
)
