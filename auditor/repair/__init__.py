"""The repair role: the only part of bk-auditor that writes to bookies (docs/repair.md)."""
