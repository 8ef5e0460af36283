"""Put first on PYTHONPATH by `tb-hwprof profile` (tb_hwprof/profile_env.py): starts the capture the
environment asks for as the interpreter starts, after running the sitecustomize this one hides (the
distribution's or the environment's), so that one still runs.

profile_env.py is loaded from its file, as module _tb_hwprof_profile_env: the program need not be
able to import tb_hwprof itself (its sys.path is its own), and nothing is added to that path."""
import importlib
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _run_the_hidden_sitecustomize() -> None:
    me = sys.modules["sitecustomize"]
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    del sys.modules["sitecustomize"]
    try:  # children the program starts find this one again through PYTHONPATH
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        sys.modules["sitecustomize"] = me  # the import system expects to find the module it is running


def _start_capture() -> None:
    spec = importlib.util.spec_from_file_location("_tb_hwprof_profile_env",
                                                  os.path.join(os.path.dirname(_here), "profile_env.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.start_from_environment()


_run_the_hidden_sitecustomize()
try:
    _start_capture()
except Exception as e:  # the program must run even when the capture cannot start
    print(f"tb-hwprof: the profile capture did not start ({type(e).__name__}: {e})", file=sys.stderr)
