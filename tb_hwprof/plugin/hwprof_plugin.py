"""TensorBoard entry point of tb_hwprof: the plugin class and its loader.

Imports only TensorBoard's base_plugin, tb_hwprof.logdir.metadata and the route list; everything heavy
(pandas, werkzeug wrappers, the analyses) is imported by `service` when TensorBoard loads the plugin
(get_plugin_apps), not when it merely imports the entry point (every `tensorboard` command does).
"""
import logging
import threading

from tensorboard.plugins import base_plugin

from ..logdir import metadata
from .routes import RESTART, ROUTES

logger = logging.getLogger("tb_hwprof")


class HwprofPlugin(base_plugin.TBPlugin):
    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context):
        self._provider = context.data_provider
        self._logdir = context.logdir
        self._service = None
        self._lock = threading.Lock()

    def _get_service(self):
        with self._lock:
            if self._service is None:
                from .service import Service
                self._service = Service(self._provider, self._logdir)
            return self._service

    def _app(self, route):
        def app(environ, start_response):
            try:
                service = self._get_service()
            except ImportError as e:  # the package changed under a running TensorBoard
                return unavailable(e, start_response)
            return service(route, environ, start_response)
        return app

    def get_plugin_apps(self):
        # What the routes serve with is imported now, while TensorBoard loads the plugin: a reinstall
        # of the package while TensorBoard runs cannot then leave the first request without its modules.
        try:
            self._get_service()
        except ImportError:
            logger.exception("tb_hwprof: cannot import what the plugin serves with; its requests answer 500")
        return {route: self._app(route) for route in ROUTES}

    def is_active(self):
        # TensorBoard 2.21 enables the tab from data_plugin_names() (runs carrying tb_hwprof
        # summaries); nothing else can make it useful, so no file-system scan here.
        return False

    def data_plugin_names(self):
        return (metadata.PLUGIN_NAME,)

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/static/index.js", tab_name="HW Profile")


def unavailable(error: ImportError, start_response):
    """A 500 with one line of text (never a blank tab): what could not be imported and what to do.
    Plain WSGI: the modules that build responses may be what is missing."""
    text = " ".join(f"tb_hwprof cannot serve this request: {type(error).__name__}: {error}; {RESTART}".split())
    data = (text + "\n").encode("utf-8")
    start_response("500 Internal Server Error", [("Content-Type", "text/plain; charset=utf-8"),
                                                 ("Content-Length", str(len(data))),
                                                 ("X-Content-Type-Options", "nosniff")])
    return [data]


class HwprofPluginLoader(base_plugin.TBLoader):
    """Named by the `tensorboard_plugins` entry point in setup.py."""

    def load(self, context):
        return HwprofPlugin(context)
