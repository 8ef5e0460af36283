"""The tb_hwprof TensorBoard plugin (entry point: hwprof_plugin.HwprofPluginLoader).

Kept import-light: TensorBoard imports the entry-point module on every start, and an import
failure there breaks every `tensorboard` command, so pandas and the readers load on the
first request (service.py), never at import.
"""
