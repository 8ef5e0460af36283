"""TensorBoard entry point of tb_hwprof: the plugin class and its loader.

Imports only TensorBoard's base_plugin, tb_hwprof.logdir.metadata and the route list; everything heavy
(pandas, werkzeug wrappers, the analyses) is imported by `service` on the first request.
"""
import threading

from tensorboard.plugins import base_plugin

from ..logdir import metadata
from .routes import ROUTES


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
            return self._get_service()(route, environ, start_response)
        return app

    def get_plugin_apps(self):
        return {route: self._app(route) for route in ROUTES}

    def is_active(self):
        # TensorBoard 2.21 enables the tab from data_plugin_names() (runs carrying tb_hwprof
        # summaries); nothing else can make it useful, so no file-system scan here.
        return False

    def data_plugin_names(self):
        return (metadata.PLUGIN_NAME,)

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path="/static/index.js", tab_name="HW Profile")


class HwprofPluginLoader(base_plugin.TBLoader):
    """Named by the `tensorboard_plugins` entry point in setup.py."""

    def load(self, context):
        return HwprofPlugin(context)
