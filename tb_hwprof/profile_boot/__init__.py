"""sitecustomize.py of `tb-hwprof profile` (this folder goes first on the program's PYTHONPATH)."""
