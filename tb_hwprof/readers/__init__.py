"""One reader module per profiler; `read()` in tb_hwprof.detect picks one by content."""
