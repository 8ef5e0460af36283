"""The application layer: what reads, analyses and writes (export, the Dask jobs, `profile`'s
capture, compare and the CLI's subcommands).  The only layer that uses readers, analysis and
logdir together; nothing below imports it."""
