"""Network faults for local clusters: one Linux network namespace per node, joined by a
bridge in the root namespace, and nftables rules inside each namespace to cut links.

`netns` builds and tears down the plumbing; `partition` turns a fault description into
per-namespace nftables rulesets (a pure function) and applies them.
"""
