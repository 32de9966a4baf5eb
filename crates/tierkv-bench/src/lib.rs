//! tierkv-bench: workloads, key distributions, the runner and reports.
