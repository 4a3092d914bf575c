"""`strandline chaos`: Jepsen-style fault-injection runs, their histories and checker."""
