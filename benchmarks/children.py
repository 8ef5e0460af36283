"""What the benchmarks share: a measured step run in a child process of its own (its peak RSS is
its own, not the parent's), reporting one JSON line."""
from __future__ import annotations

import json
import subprocess
import sys


def run_child(code: str, *args) -> dict:
    """Run `code` with `args` in a fresh interpreter; its last stdout line, as JSON."""
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"child failed:\n{done.stdout}\n{done.stderr}")
    sys.stderr.write(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])
