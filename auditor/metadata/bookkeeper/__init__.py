"""BookKeeper's own znodes, each read (and, where Java writes it, written) exactly as Java does: LAYOUT,
bookie registrations and cookies, ledger metadata, under-replication markers, the repair lock protocol,
ensemble and recovery metadata updates, the operator's switches, the auditor election and racks."""
