"""The transaction coordinator (KIP-98) as a pure core: transaction metadata and its
state machine, the `__transaction_state` record formats and partitioning. The I/O shell
is `strandline.server.txn_service`."""
