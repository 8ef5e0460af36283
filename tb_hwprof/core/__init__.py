"""The core every layer stands on: the model (Profile, Analysis, Finding and the tables' columns),
the errors, and the array algorithms several layers share (columnar, slices).  It imports nothing
else of tb_hwprof."""

__version__ = "0.1.0"
