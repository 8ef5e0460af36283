"""The plugin's backend driven without a server: a real TensorBoard WSGI app (tests of the
plugin routes share it)."""
import gzip
import json
from pathlib import Path

from tb_hwprof.plugin import hwprof_plugin

P = "/data/plugin/tb_hwprof"


def body(response) -> bytes:
    """The response bytes, gunzipped when the server compressed them."""
    data = response.data
    return gzip.decompress(data) if response.headers.get("Content-Encoding") == "gzip" else data


class CapturingLoader(hwprof_plugin.HwprofPluginLoader):
    """The entry-point loader, keeping the plugin it made so tests can look at its cache."""

    def load(self, context):
        self.plugin = super().load(context)
        return self.plugin


class App:
    """A TensorBoard WSGI app as `tensorboard --load_fast=false` builds it, without a server."""

    def __init__(self, logdir: Path, extra_plugins=()):
        from tensorboard import program
        from tensorboard.backend import application
        from tensorboard.backend.event_processing.data_ingester import LocalDataIngester
        from tensorboard.plugins.core import core_plugin
        from werkzeug.test import Client
        self.loader = CapturingLoader()
        loaders = [core_plugin.CorePluginLoader(), self.loader, *extra_plugins]
        tb = program.TensorBoard(plugins=loaders)
        tb.configure(argv=["", f"--logdir={logdir}", "--load_fast=false", "--reload_interval=0",
                           "--reload_task=blocking"])
        ingester = LocalDataIngester(tb.flags)
        ingester.start()  # blocking: every run is loaded when this returns
        wsgi = application.TensorBoardWSGIApp(tb.flags, loaders, ingester.data_provider, None,
                                              ingester.deprecated_multiplexer)
        self.client = Client(wsgi)

    def get(self, path, **params):
        return self.client.get(path, query_string=params or None, headers={"Accept-Encoding": "gzip"})

    def json(self, route, expect=200, **params):
        response = self.get(P + route, **params)
        data = body(response)
        assert response.status_code == expect, data[:500]
        assert response.headers["Content-Type"].startswith("application/json")
        return json.loads(data)

    @property
    def store(self):
        return self.loader.plugin._get_service().store
