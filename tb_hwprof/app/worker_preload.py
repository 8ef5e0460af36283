"""Imported last by our local Dask cluster's fork server (jobs.FORKSERVER_PRELOAD), after Dask,
pandas and our own modules: every object the server then holds is frozen out of the garbage
collector (gc.freeze), so a collection in a worker forked from it never writes to, and so copies,
the pages the workers share with it and with one another."""
import gc

gc.collect()
gc.freeze()
