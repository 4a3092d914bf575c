"""`strandline console`: a small web console for a running cluster.

One idea per module:

- `sources`: where the cluster is (bootstrap, ZooKeeper, metrics endpoints, state-change
  logs), from the command line or a `strandline cluster` data dir's cluster.json;
- `metrics`: scraping the brokers' Prometheus endpoints for per-replica LEO and HW;
- `gather`: asking the cluster (Kafka protocol, ZooKeeper, metrics, log files) and
  returning plain dataclasses, the same ones the JSON endpoints serve;
- `render`: those dataclasses as server-rendered HTML;
- `app`: the Starlette routes (pages, live fragments, JSON).
"""
