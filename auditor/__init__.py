"""bk-auditor: durability auditing for Apache BookKeeper clusters."""

__version__ = "0.1.0"
