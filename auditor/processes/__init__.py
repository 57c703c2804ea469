"""The checks on local worker processes, without Spark: the engine of `bk-auditor check --processes N`,
of the daemon's scans (`schedule.scan_processes`) and of `bk-auditor sweep --master processes[N]`, and
what runs one partition of the ledger-id space (on a worker process or a Spark executor alike).

Nothing here imports pyspark or `auditor.spark` (import-linter): the daemon image has no pyspark.
"""
