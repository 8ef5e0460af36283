"""Put first on PYTHONPATH by `tb-hwprof profile` (tb_hwprof/profile_env.py): starts the capture the
environment asks for as the interpreter starts, then hands over to the sitecustomize this one hides
(the distribution's or the environment's), so that one still runs."""
import importlib
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _chain_to_the_hidden_sitecustomize() -> None:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    del sys.modules["sitecustomize"]
    try:  # children the program starts find this one again through PYTHONPATH
        importlib.import_module("sitecustomize")
    except ImportError:
        pass


_chain_to_the_hidden_sitecustomize()
try:
    from tb_hwprof.profile_env import start_from_environment
    start_from_environment()
except Exception as e:  # the program must run even when the capture cannot start
    print(f"tb-hwprof: the profile capture did not start ({type(e).__name__}: {e})", file=sys.stderr)
