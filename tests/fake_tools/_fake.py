"""Shared body of the fake profilers (tests only: they test tb-hwprof profile's process handling,
never the join's correctness).  Each records its argv and the capture environment it was given as
one JSON line in $FAKE_TOOL_LOG, prints a line as the real tool does, runs the program after `--`
with its environment, then copies the REAL sample named by $FAKE_REPORT (a file the test copied
into its tmp folder) to where the real tool would write its report (a folder is copied whole)."""
import json
import os
import shutil
import subprocess
import sys


def run(tool: str, report_path_of) -> int:
    argv = sys.argv[1:]
    with open(os.environ["FAKE_TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "argv": argv,
                              "mode": os.environ.get("TB_HWPROF_PROFILE"),
                              "steps": os.environ.get("TB_HWPROF_PROFILE_STEPS")}) + "\n")
    print(f"=={tool.upper()}== fake {tool}: connected", flush=True)
    program = argv[argv.index("--") + 1:]
    status = subprocess.call(program)
    if status:
        return status
    if os.environ.get("FAKE_TOOL_EXIT"):
        print(f"=={tool.upper()}== ERROR: failing as asked", flush=True)
        return int(os.environ["FAKE_TOOL_EXIT"])
    target = report_path_of(argv)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(os.environ["FAKE_REPORT"]):  # a workload folder (rocprof-compute)
        shutil.copytree(os.environ["FAKE_REPORT"], target)
    else:
        shutil.copyfile(os.environ["FAKE_REPORT"], target)
    print(f"=={tool.upper()}== report written", flush=True)
    return 0
