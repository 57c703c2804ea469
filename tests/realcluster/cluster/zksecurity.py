"""A secured test ZooKeeper: certificates generated here with `cryptography` (a CA and leaf certificates
for 127.0.0.1/localhost), TLS on a `secureClientPort` (Netty server factory, client certificates
required: ZooKeeper's default), SASL DIGEST-MD5 users with authentication enforced, and the JVM flags
the bookies and the Java tools need to reach it (security.md §1, §2, §6 of the shared spec).

`Cluster(..., zk_security=ZkTestSecurity(...))` uses it; tests build bk-auditor settings from the same
object (`auditor_settings`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STORE_PASSWORD = "changeit"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass
class Leaf:
    name: str
    crt: Path  # certificate (PEM)
    key: Path  # private key (PKCS#8 PEM)
    combined: Path  # key + certificate: ZooKeeper's PEM keystore, kazoo's certfile+keyfile
    p12: Path  # PKCS12 store (key, certificate, CA), password STORE_PASSWORD


@dataclass
class Pki:
    """A CA and leaf certificates in `directory`; SANs DNS:localhost and IP:127.0.0.1."""

    directory: Path
    ca_crt: Path = field(init=False)
    ca_p12: Path = field(init=False)  # a PKCS12 truststore holding the CA
    leaves: dict[str, Leaf] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.UTC)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca = (
            x509.CertificateBuilder()
            .subject_name(_name("bk-auditor-test-ca"))
            .issuer_name(_name("bk-auditor-test-ca"))
            .public_key(self._ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_crt = self.directory / "ca.crt"
        self.ca_crt.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))
        self.ca_p12 = self.directory / "truststore.p12"
        self.ca_p12.write_bytes(
            pkcs12.serialize_java_truststore(
                [pkcs12.PKCS12Certificate(self._ca, b"ca")],
                serialization.BestAvailableEncryption(STORE_PASSWORD.encode()),
            )
        )

    def leaf(self, name: str, *, signer: Pki | None = None) -> Leaf:
        """A leaf certificate for `name` (signed by this CA, or by `signer`'s for a wrong one)."""
        ca = signer or self
        now = dt.datetime.now(dt.UTC)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name))
            .issuer_name(ca._ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca._ca_key, hashes.SHA256())
        )
        d = self.directory
        crt, keyf, combined, p12 = d / f"{name}.crt", d / f"{name}.key", d / f"{name}-combined.pem", d / f"{name}.p12"
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        crt.write_bytes(cert_pem)
        keyf.write_bytes(_key_pem(key))
        combined.write_bytes(_key_pem(key) + cert_pem)
        p12.write_bytes(
            pkcs12.serialize_key_and_certificates(
                name.encode(), key, cert, [ca._ca], serialization.BestAvailableEncryption(STORE_PASSWORD.encode())
            )
        )
        leaf = Leaf(name, crt, keyf, combined, p12)
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
