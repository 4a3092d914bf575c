"""Starting clusters on this machine: ZooKeeper and broker processes, their data
directories, TLS/SASL material and host-shaped layouts in network namespaces. Used by
`strandline cluster`, the chaos runner, the console, the tests and the benchmarks."""
