"""The plugin's caches stay bounded under ordinary requests (issue 30, item 1): a failing request
repeated, summary names that do not exist, and timeline budgets one after another.  Measured on a
real Nsight Systems run as the entry's cache and a cached failure's traceback, not as process memory
(which the allocator keeps)."""
import pytest

from tb_hwprof.app.cli import main

from conftest import sample
from support_plugin import P, App, body

NSYS = "nsys/annikola_gtx1050_2024.5.1.sqlite"


@pytest.fixture(scope="module")
def app(samples_dir, tmp_path_factory):
    logdir = tmp_path_factory.mktemp("memory") / "logs"
    assert main(["export", str(sample(samples_dir, NSYS)), "--logdir", str(logdir), "--run", "n", "--quiet"]) == 0
    return App(logdir)


def status(app, route, **params) -> int:
    response = app.get(P + route, **params)
    body(response)
    return response.status_code


def entry(app, run="n"):
    """The run's cache entry in the plugin's store (after a request has loaded it)."""
    store = app.store
    return store.entry(run, store.run_dir(run))


def test_a_failing_request_repeated_leaves_nothing_behind(app):
    for _ in range(200):
        assert status(app, "/summary", run="n", name="no_such_table") == 404
    for i in range(200):
        assert status(app, "/summary", run="n", name=f"no_such_table_{i}") == 404
    assert not any(isinstance(key, tuple) and "no_such_table" in str(key) for key in entry(app)._cache)


def test_a_cached_failure_is_raised_afresh_each_time(app):
    from tb_hwprof.plugin.store import HttpError
    run = entry(app)

    def fail():
        raise HttpError(422, "a damaged table")
    depths = []
    for _ in range(50):
        try:
            run.memo("failing", fail)
        except HttpError as e:
            depth, tb = 0, e.__traceback__
            while tb is not None:
                depth, tb = depth + 1, tb.tb_next
            depths.append(depth)
    assert max(depths) == min(depths) <= 3  # the same short traceback, never one grown by earlier raises


def test_only_the_default_timeline_budget_is_cached(app):
    for budget in (100, 200, 300, 5000):
        assert status(app, "/timeline", run="n", max_events=str(budget)) == 200
    keys = [key for key in entry(app)._cache if isinstance(key, tuple) and key[0] == "timeline"]
    assert keys == [("timeline", 5000)]


def test_launch_details_kept_are_bounded(samples_dir, tmp_path, monkeypatch):
    """The drawer's per-launch details (raw metrics, rules) are cached for the most recent launches
    only (BOUNDED_KEYS); older ones are read again when asked, equal to what they were."""
    from tb_hwprof.plugin import store
    monkeypatch.setitem(store.BOUNDED_KEYS, "details", 2)
    logdir = tmp_path / "logs"
    report = sample(samples_dir, "ncu/kprattis_gtx1650_basic_2022.4.1.ncu-rep")
    assert main(["export", str(report), "--logdir", str(logdir), "--run", "k", "--quiet"]) == 0
    app = App(logdir)
    first = app.json("/kernel", run="k", launch="0")
    for launch in range(6):
        app.json("/kernel", run="k", launch=str(launch))
    run = entry(app, "k")
    kept = [key for key in run._cache if isinstance(key, tuple) and key[0] == "details"]
    assert kept == [("details", 4), ("details", 5)]
    assert app.json("/kernel", run="k", launch="0") == first
