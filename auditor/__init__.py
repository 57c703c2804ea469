"""bk-auditor: durability auditing for Apache BookKeeper clusters."""

import os

# grpcio >= 1.81 restarts its poller thread in a forked child when fork support is on (its C core's
# default), and a child that closes inherited descriptors before exec (subprocess with preexec_fn, as
# pyspark starts its JVM) then dies of EBADF before exec: grpc/grpc#43055. The auditor never relies on
# gRPC across a fork (worker processes are spawned), so it is off unless the operator sets it. It is
# read when grpc is first imported, hence here, before any module of ours imports it.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
