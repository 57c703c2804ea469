"""BookKeeper's own znodes, each read (and, where Java writes it, written) exactly as Java does: bookie
registrations and cookies, ledger metadata, under-replication markers, the operator's switches, the
auditor election and racks. (The repair role's writes, which take the whole store, are `metadata.repair`.)"""
