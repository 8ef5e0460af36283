"""Request handling of the plugin (imported when TensorBoard loads the plugin, not with its entry point).

Every route is wrapped: a known problem answers its status with {"error": "..."}; anything
unexpected is logged and answers 422 with a one-line JSON error, never a bare 500 that would
leave the tab blank.
"""
from __future__ import annotations

import functools
import importlib
import logging
from typing import Callable, Dict, Set

from tensorboard import plugin_util
from tensorboard.backend import http_util
from werkzeug import wrappers

from ..core.errors import HwprofError
from ..logdir import metadata
from . import encode, routes, static, views
from .routes import RESTART
from .store import HttpError, RunEntry, RunStore, run_param, check_summary_name, missing_files

logger = logging.getLogger("tb_hwprof")
JSON = "application/json"
GZIP = "application/gzip"


# Modules the views import on use, imported once with the service (so with the plugin's load).
SERVED_WITH = ("tb_hwprof.analysis.trace_views", "tb_hwprof.analysis.cpu_hotspots", "tb_hwprof.logdir.tables",
               "tb_hwprof.logdir.trace")


class Service:
    def __init__(self, data_provider, logdir):
        for module in SERVED_WITH:
            importlib.import_module(module)
        self._provider = data_provider
        self.store = RunStore(logdir)
        self.routes: Dict[str, Callable] = {route: self._handler(route) for route in routes.ROUTES}

    def _handler(self, route: str) -> Callable:
        """A run document's route builds views.<name>(entry) once per run and files; the others
        have a method named after them."""
        name = routes.route_name(route)
        if route in routes.RUN_DOCUMENTS:
            return functools.partial(self._run_document, name=name)
        return getattr(self, name)

    def __call__(self, route: str, environ, start_response):
        request = wrappers.Request(environ)
        try:
            response = self.routes[route](request)
        except HttpError as e:
            response = error_response(request, e.code, e.message)
        except HwprofError as e:  # a damaged file read outside a cached view: "file: problem -- fix"
            response = error_response(request, 422, " ".join(str(e).split()))
        except ImportError as e:  # a module imported on use went away: the package changed under TensorBoard
            logger.exception("tb_hwprof: %s failed", request.full_path)
            response = error_response(request, 500, " ".join(
                f"tb_hwprof could not serve {route}: {type(e).__name__}: {e}; {RESTART}".split()))
        except Exception as e:  # noqa: BLE001 - the tab must get JSON, whatever broke
            logger.exception("tb_hwprof: %s failed", request.full_path)
            response = error_response(request, 422, f"tb_hwprof could not serve {route}: "
                                                    f"{type(e).__name__}: {e} (details in the TensorBoard log)")
        return response(environ, start_response)

    # -- runs ---------------------------------------------------------------------------
    def _listing(self, request) -> dict:
        """{run: {tag: its blob sequence}} of the runs TensorBoard knows that carry tb_hwprof data."""
        if self._provider is None:
            raise HttpError(422, "TensorBoard gave tb_hwprof no data provider")
        listing = self._provider.list_blob_sequences(
            plugin_util.context(request.environ), experiment_id=plugin_util.experiment_id(request.environ),
            plugin_name=metadata.PLUGIN_NAME)
        return {run: tags for run, tags in listing.items() if tags}

    def _listed(self, request) -> Set[str]:
        """Runs TensorBoard knows that carry tb_hwprof data (the only names accepted)."""
        return set(self._listing(request))

    def _listed_steps(self, request) -> Dict[str, int]:
        """{run: the step of its tb_hwprof data} of the listed runs (an export writes all of a run's
        events at one step)."""
        return {run: max(series.max_step for series in tags.values()) for run, tags in self._listing(request).items()}

    def _entry(self, request, param: str = "run", listed=None) -> RunEntry:
        """The requested run's entry (listed: the runs TensorBoard lists, when already asked)."""
        run = run_param(request.args.get(param))
        if run not in (self._listed(request) if listed is None else listed):
            raise HttpError(404, f"unknown run {run!r}: not a tb_hwprof run of this TensorBoard (see /runs)")
        return self.store.entry(run, self.store.run_dir(run))

    def _run_row(self, run: str, series_step: bool = False) -> dict:
        try:
            run_dir = self.store.run_dir(run)
            sig, manifest = self.store.manifest(run, run_dir)
        except HttpError as e:
            return views.run_info(run, None, e.message)
        missing = missing_files(sig, manifest)
        error = (f"{self.store.where(run, run_dir)}: missing {', '.join(missing)} -- re-export the run with --overwrite" if missing
                 else self.store.known_error(run, sig))
        return views.run_info(run, manifest, error, series_step)

    # -- series: which folders hold one (the nav's Series and /series ask the same) -------------
    def series_groups(self, listed) -> Set[str]:
        """The folders of the `listed` runs that hold an optimisation series (is_series_group)."""
        groups = {run.rpartition("/")[0] for run in listed} - {""}
        return {group for group in groups if self.is_series_group(group, listed)}

    def is_series_group(self, group: str, listed) -> bool:
        """Whether folder `group` holds a series, its listed runs the steps: the series' own event file
        is there (logdir/writer.write_series_events) and the folder is no job's run.  A job's folder
        holds its ranks' runs beside its own (app/jobs.py: <job>/rank_N); a series file there is
        left from an earlier export under the same name, and the ranks are no steps."""
        try:
            holds = bool(group) and self.store.holds_series_events(group)
        except HttpError:  # a folder outside the logdir (a symlink) holds no series of it
            return False
        return holds and not self._is_job(group, listed)

    def _is_job(self, group: str, listed) -> bool:
        if group not in listed:
            return False
        try:
            return routes.is_job(self.store.manifest(group, self.store.run_dir(group))[1])
        except HttpError:  # an unreadable run: its own row says so; its folder is no job we know of
            return False

    # -- routes ---------------------------------------------------------------------------
    def runs(self, request):
        """The runs, each with the views it has data for, and the views' titles and routes (the nav)."""
        listed = self._listed(request)
        series = self.series_groups(listed)
        rows = [self._run_row(r, r.rpartition("/")[0] in series) for r in sorted(listed)]
        return json_response(request, encode.response({"views": routes.nav(), "runs": rows}))

    def kernels(self, request):
        return json_response(request, self._entry(request).kernels_response())

    def _run_document(self, request, *, name: str):
        """views.<name>(entry) of the requested run, encoded once per run and version of its files."""
        entry = self._entry(request)
        build = getattr(views, name)
        return json_response(request, entry.memo(name, lambda: encode.response(build(entry))))

    def kernel(self, request):
        entry = self._entry(request)
        return json_response(request, encode.response(views.kernel(entry, request.args.get("launch"))))

    def compare(self, request):
        """Two runs' kernels paired (and the user's pair=BASE:RUN choices: 400 for one naming no kernel)."""
        base, run = self._entry(request, "base"), self._entry(request, "run")
        choices = views.pair_choices(base, run, request.args.getlist("pair"))
        build = lambda: encode.response(views.compare_runs(base, run, choices))  # noqa: E731
        if choices:  # the user's pairings are not cached: their combinations are unbounded
            return json_response(request, build())
        key = ("compare", base.run, base.signature)  # cached in `run`'s entry, valid while base is unchanged
        return json_response(request, run.memo(key, build))

    def compare_pair(self, request):
        """One pair of /compare in detail (base_key, run_key: the keys /compare lists)."""
        base, run = self._entry(request, "base"), self._entry(request, "run")
        doc = views.compare_pair(base, run, request.args.get("base_key"), request.args.get("run_key"))
        return json_response(request, encode.response(doc))

    def series(self, request):
        """The optimisation series the run is a step of: the runs TensorBoard lists in its folder,
        each at the step its tb_hwprof events were written at, when the folder holds a series
        (is_series_group; local and object-storage logdirs alike).  Kept until any of those runs changes."""
        listed = self._listed_steps(request)
        entry = self._entry(request, listed=listed)
        group = entry.run.rpartition("/")[0]
        steps = {run: step for run, step in listed.items() if group and run.rpartition("/")[0] == group}
        if not self.is_series_group(group, listed):
            raise HttpError(404, f"run {entry.run!r} is not a step of a series (export several files under one --run: "
                                 f"tb-hwprof export v1.ncu-rep v2.ncu-rep --run NAME)")
        members = [(step, entry if run == entry.run else self.store.entry(run, self.store.run_dir(run)))
                   for run, step in steps.items()]
        key = ("series",) + tuple(sorted((member.run, member.signature) for _, member in members))
        return json_response(request, entry.memo(key, lambda: encode.response(views.series(entry, members))))

    def summary(self, request):
        entry = self._entry(request)
        return json_response(request, entry.summary_response(check_summary_name(request.args.get("name"))))

    def timeline(self, request):
        entry = self._entry(request)
        start, end, max_events = views.timeline_args(request.args)
        build = lambda: encode.response(views.timeline(entry, start, end, max_events))  # noqa: E731
        # The whole capture at the default budget (every first visit) is cached; any other budget is
        # built per request (one cached response per distinct max_events grew the cache without bound).
        from ..analysis.trace_views import DEFAULT_MAX_EVENTS
        if start is None and end is None and max_events == DEFAULT_MAX_EVENTS:
            return json_response(request, entry.memo(("timeline", max_events), build))
        return json_response(request, build())

    def trace(self, request):
        """The trace as a download: the run's file when written (already gzip: sent as is, never
        re-encoded), else rendered from its timeline index while it streams."""
        entry = self._entry(request)
        headers = [("Content-Disposition", f'attachment; filename="{views.trace_filename(entry.run)}"')]
        path = views.trace_file(entry)
        if path is None:
            return stream_response(request, views.trace_stream(entry), GZIP, headers)
        with open(path, "rb") as f:
            data = f.read()
        return http_util.Respond(request, data, GZIP, headers=headers)

    def static(self, request):
        prefix = f"/data/plugin/{metadata.PLUGIN_NAME}/static/"
        path = request.path
        name = path[path.find(prefix) + len(prefix):] if prefix in path else ""
        found = static.find(name)
        if found is None:
            raise HttpError(404, f"no frontend file {name!r}")
        with open(found[0], "rb") as f:
            return http_util.Respond(request, f.read(), found[1])


def json_response(request, gz: bytes, code: int = 200):
    return http_util.Respond(request, gz, JSON, code=code, content_encoding="gzip")


def stream_response(request, chunks, content_type: str, headers: list):
    """A body sent as `chunks` yields it (no Content-Length), with the headers http_util.Respond
    gives a download: nosniff, not cached."""
    headers = headers + [("X-Content-Type-Options", "nosniff"), ("Expires", "0"),
                         ("Cache-Control", "no-cache, must-revalidate")]
    return wrappers.Response(response=None if request.method == "HEAD" else chunks, status=200,
                             headers=headers, content_type=content_type, direct_passthrough=True)


def error_response(request, code: int, message: str):
    return http_util.Respond(request, encode.dumps({"error": message}), JSON, code=code)
