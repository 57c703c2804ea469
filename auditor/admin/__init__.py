"""The admin API: a gRPC service beside the standard health service (and reflection, for grpcurl).

* `errors`  - what a backend raises on purpose, and the one table that turns an error into a gRPC status;
* `models`  - the plain answers a backend gives, and the `AdminBackend` protocol the daemon implements;
* `convert` - those answers as protobuf messages;
* `questions` - the operator questions' reports as messages and back (the CLI's `--admin` form);
* `access`  - who may call what: health open, reads and mutations by the caller's verified client certificate;
* `server`  - the grpc.aio server: the servicer, health (liveness, readiness, leader), reflection, TLS;
* `client`  - `AdminClient`, what the CLI uses; it imports nothing of the server.

Nothing is imported here, so `auditor.admin.client` stays light.
"""
