"""The repair role's side of BookKeeper's metadata, recipes on the whole store: Java's under-replication
lock protocol and its lock guard (`lock`), the version-checked ensemble update of one segment
(`ensemble`), and ledger recovery's two compare-and-set writes (`recovery`). Only the repair role uses them."""
