"""A secured test ZooKeeper: certificates (devcluster/certs.py: a CA and leaf certificates for
127.0.0.1/localhost, with the PEM combinations and stores ZooKeeper and kazoo take), TLS on a
`secureClientPort` (Netty server factory, client certificates required: ZooKeeper's default), SASL
DIGEST-MD5 users with authentication enforced, and the JVM flags the bookies and the Java tools need to
reach it (security.md §1, §2, §6 of the shared spec). `Cluster(..., zk_security=ZkTestSecurity(...))`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster.certs import STORE_PASSWORD, CertAuthority

__all__ = ["STORE_PASSWORD", "Leaf", "Pki", "ZkTestSecurity"]


@dataclass
class Leaf:
    name: str
    crt: Path  # certificate (PEM)
    key: Path  # private key (PKCS#8 PEM)
    combined: Path  # key + certificate: ZooKeeper's PEM keystore, kazoo's certfile+keyfile
    p12: Path  # PKCS12 store (key, certificate, CA), password STORE_PASSWORD


@dataclass
class Pki:
    """A CA (devcluster/certs.py) and leaf certificates in `directory`; SANs localhost and 127.0.0.1."""

    directory: Path
    ca_crt: Path = field(init=False)
    ca_p12: Path = field(init=False)  # a PKCS12 truststore holding the CA
    leaves: dict[str, Leaf] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.ca = CertAuthority(self.directory, "bk-auditor-test-ca")
        self.ca_crt = self.ca.cert_file
        self.ca_p12 = self.ca.truststore("PKCS12")

    def leaf(self, name: str) -> Leaf:
        issued = self.ca.issue(name, ["localhost", "127.0.0.1"])
        combined = self.directory / f"{name}-combined.pem"
        combined.write_bytes(issued.key_file.read_bytes() + issued.cert_file.read_bytes())
        leaf = Leaf(name, issued.cert_file, issued.key_file, combined, issued.pkcs12())
        self.leaves[name] = leaf
        return leaf


@dataclass
class ZkTestSecurity:
    """How the test ZooKeeper is secured, and how its Java clients (bookies, shell, tools) reach it.

    tls: serve clients on `secure_port` only over TLS with client certificates required (the plaintext
    `clientPort` stays for the harness's four-letter words, as a Pulsar chart's ZooKeeper keeps 2181).
    sasl_users: DIGEST-MD5 users; with `require_sasl`, a session that did not authenticate is refused.
    java_user: the SASL user the bookies and tools log in as; `secure_acls` gives them zkEnableSecurity.
    """

    workdir: Path
    tls: bool = False
    secure_port: int | None = None
    sasl_users: dict[str, str] = field(default_factory=dict)
    require_sasl: bool = False
    java_user: str | None = None
    secure_acls: bool = False
    pki: Pki | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.tls:
            if self.secure_port is None:
                raise ValueError("a TLS ZooKeeper needs secure_port")
            self.pki = Pki(self.workdir / "pki")
            for name in ("zk", "bookie", "client"):
                self.pki.leaf(name)
        if self.sasl_users:
            self.server_jaas = self.workdir / "zk-server-jaas.conf"
            users = "\n".join(f'  user_{u}="{p}"' for u, p in self.sasl_users.items())
            self.server_jaas.write_text(
                f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n{users};\n}};\n"
            )
        if self.java_user is not None:
            self.client_jaas = self.write_client_jaas("java-client-jaas.conf", self.java_user)

    def write_client_jaas(self, name: str, user: str, password: str | None = None) -> Path:
        path = self.workdir / name
        pw = self.sasl_users[user] if password is None else password
        path.write_text(
            "Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
            f'  username="{user}"\n  password="{pw}";\n}};\n'
        )
        return path

    # ---------------------------------------------------------------- ZooKeeper server
    def zoo_cfg(self) -> list[str]:
        lines: list[str] = []
        if self.tls:
            lines += [
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
                f"secureClientPort={self.secure_port}",
            ]
        if self.sasl_users:
            lines.append("authProvider.1=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
        return lines

    def server_jvm(self) -> list[str]:
        # As system properties, the way the Pulsar chart passes them to its ZooKeeper.
        flags: list[str] = []
        if self.tls:
            assert self.pki is not None
            flags += [
                f"-Dzookeeper.ssl.keyStore.location={self.pki.leaves['zk'].combined}",
                "-Dzookeeper.ssl.keyStore.type=PEM",
                f"-Dzookeeper.ssl.trustStore.location={self.pki.ca_crt}",
                "-Dzookeeper.ssl.trustStore.type=PEM",
                # no ssl.clientAuth: ZooKeeper then requires a client certificate (as the Pulsar chart)
            ]
        if self.sasl_users:
            flags.append(f"-Djava.security.auth.login.config={self.server_jaas}")
            if self.require_sasl:
                flags.append("-Dzookeeper.sessionRequireClientSASLAuth=true")
        return flags

    # ---------------------------------------------------------------- Java clients (bookies, tools)
    def client_jvm(self) -> list[str]:
        flags: list[str] = []
        if self.tls:
            assert self.pki is not None
            flags += [
                "-Dzookeeper.client.secure=true",
                "-Dzookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty",
                f"-Dzookeeper.ssl.keyStore.location={self.pki.leaves['bookie'].combined}",
                "-Dzookeeper.ssl.keyStore.type=PEM",
                f"-Dzookeeper.ssl.trustStore.location={self.pki.ca_crt}",
                "-Dzookeeper.ssl.trustStore.type=PEM",
                # Debian's ZooKeeper 3.8.0 server accepts only TLSv1.2 (also with ssl.protocol set), and
                # BookKeeper 4.17.3's ZooKeeper 3.9.3 client offers only TLSv1.3 by default
                # (docs/spec-differences.md). kazoo negotiates either.
                "-Dzookeeper.ssl.protocol=TLSv1.2",
            ]
        if self.java_user is not None:
            flags.append(f"-Djava.security.auth.login.config={self.client_jaas}")
        return flags

    def client_conf(self) -> list[str]:
        """Lines for bookie and shell configurations."""
        return ["zkEnableSecurity=true"] if self.secure_acls else []

    # ---------------------------------------------------------------- the harness's own kazoo client
    def harness_kazoo_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        if self.tls:
            assert self.pki is not None
            client = self.pki.leaves["client"]
            kwargs.update(use_ssl=True, ca=str(self.pki.ca_crt), certfile=str(client.crt), keyfile=str(client.key))
        if self.java_user is not None:
            kwargs["sasl_options"] = {
                "mechanism": "DIGEST-MD5",
                "username": self.java_user,
                "password": self.sasl_users[self.java_user],
            }
        return kwargs
