"""Prometheus exposition shared by the daemon and the repair role (`exposition`); each role's own metrics
live with the role (auditor/daemon/metrics.py, auditor/repair/metrics.py)."""
