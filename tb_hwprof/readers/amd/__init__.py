"""AMD readers: rocprof v1/v2/v3 (CSV, rocpd databases), rocprof-compute / Omniperf workloads, and the
timeline and device helpers they share."""
