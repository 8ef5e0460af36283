"""Exports every real sample and compares two such exports file by file (a refactor's safety net).

    python scripts/export_all_samples.py export OUT_DIR      # every sample -> OUT_DIR/<sample path>
    python scripts/export_all_samples.py diff BEFORE AFTER   # JSON content compared, volatile keys ignored

Each sample file (and rocprof-compute / Omniperf workload folder) under TB_HWPROF_SAMPLES becomes a
run named after its path; a sample tb-hwprof refuses is recorded with its one-line error in
OUT_DIR/errors.json, so a change of verdict shows up too.  `diff` decompresses every .json.gz,
parses it and compares values (export time, writer version and the event file's name left out),
and compares .npz members array by array.  Exit status 1 when anything differs.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SAMPLES = Path(os.environ.get("TB_HWPROF_SAMPLES", REPO.parent / "shared" / "samples"))
VOLATILE = {"export_time", "writer", "source_path"}


def _inputs(root: Path):
    """Every report under `root`: workload folders as one input, the files in them skipped."""
    from tb_hwprof.readers.detect import sniff
    from tb_hwprof.core.errors import HwprofError

    def is_workload(folder: Path) -> bool:
        try:
            return sniff(folder) == "rocprof-compute"
        except HwprofError:
            return False
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here != root and is_workload(here):
            out.append(here)
            dirnames[:] = []
            continue
        dirnames.sort()
        out += [here / f for f in sorted(filenames) if not f.startswith("PROVENANCE")]
    return out


def export_all(out_dir: Path) -> None:
    import tb_hwprof
    from tb_hwprof.core.errors import HwprofError
    errors = {}
    inputs = _inputs(SAMPLES)
    if not inputs:
        sys.exit(f"no samples under {SAMPLES}: set TB_HWPROF_SAMPLES")
    out_dir.mkdir(parents=True, exist_ok=True)
    for i, path in enumerate(inputs, 1):
        rel = path.relative_to(SAMPLES).as_posix()
        run = rel.replace(".", "_")
        try:
            tb_hwprof.export(path, out_dir, run)
            verdict = "exported"
        except HwprofError as e:
            errors[rel] = str(e).replace(str(SAMPLES), "$SAMPLES")
            verdict = "refused"
        except Exception as e:  # a crash is a verdict too (a refactor must not add any)
            errors[rel] = f"crash: {type(e).__name__}: {e}".replace(str(SAMPLES), "$SAMPLES")
            verdict = "crashed"
        print(f"[{i}/{len(inputs)}] {rel}: {verdict}", file=sys.stderr)
    (out_dir / "errors.json").write_text(json.dumps(errors, indent=1, sort_keys=True))


def _load(path: Path):
    if path.name.endswith(".json.gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return _scrub(json.load(f))
    if path.suffix == ".json":
        return _scrub(json.loads(path.read_text(encoding="utf-8")))
    if path.suffix == ".npz":
        import numpy as np
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k].tolist() for k in sorted(z.files)}
    if path.name.startswith("events.out.tfevents"):
        return "<events>"
    return path.read_bytes()


def _scrub(doc):
    if isinstance(doc, dict):
        return {k: _scrub(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_scrub(v) for v in doc]
    return doc


def _files(root: Path):
    return {p.relative_to(root).as_posix() if not p.name.startswith("events.out") else
            p.parent.relative_to(root).as_posix() + "/<events>": p
            for p in root.rglob("*") if p.is_file()}


def diff(before: Path, after: Path) -> int:
    a, b = _files(before), _files(after)
    bad = 0
    for name in sorted(set(a) | set(b)):
        if name not in b or name not in a:
            print(f"{'only before' if name in a else 'only after'}: {name}")
            bad += 1
            continue
        if _load(a[name]) != _load(b[name]):
            print(f"differs: {name}")
            bad += 1
    print(f"{len(set(a) | set(b))} files compared, {bad} differ")
    return 1 if bad else 0


def main(argv) -> int:
    if len(argv) == 2 and argv[0] == "export":
        export_all(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        return diff(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
