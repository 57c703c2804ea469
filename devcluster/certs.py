"""Test certificates made in-process with `cryptography` (spec security.md §6.3): a CA, leaves signed by it,
written as PEM files, PKCS12 stores, and JKS stores (keytool, from the PKCS12 ones: spec §6.2)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STORE_PASSWORD = "changeit"


@dataclass(frozen=True)
class Issued:
    """A key and its certificate (and the CA that signed it), written under `dir` as `<name>.key/.crt`."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    ca: x509.Certificate | None
    dir: Path

    @property
    def key_file(self) -> Path:
        return self.dir / f"{self.name}.key"

    @property
    def cert_file(self) -> Path:
        return self.dir / f"{self.name}.crt"

    def pkcs12(self, password: str = STORE_PASSWORD) -> Path:
        """A PKCS12 key store with this key, its certificate and the CA."""
        out = self.dir / f"{self.name}.p12"
        out.write_bytes(
            pkcs12.serialize_key_and_certificates(
                self.name.encode(),
                self.key,
                self.cert,
                [self.ca] if self.ca is not None else None,
                serialization.BestAvailableEncryption(password.encode()),
            )
        )
        return out

    def jks(self, password: str = STORE_PASSWORD) -> Path:
        """A JKS key store converted from the PKCS12 one by the JDK's keytool."""
        out = self.dir / f"{self.name}.jks"
        keytool(
            "-importkeystore",
            "-srckeystore",
            str(self.pkcs12(password)),
            "-srcstoretype",
            "PKCS12",
            "-srcstorepass",
            password,
            "-destkeystore",
            str(out),
            "-deststoretype",
            "JKS",
            "-deststorepass",
            password,
        )
        return out


def keytool(*args: str) -> None:
    subprocess.run(["keytool", "-noprompt", *args], check=True, capture_output=True, timeout=120)


def _name(cn: str, ou: str | None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if ou:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    return x509.Name(attrs)


def _write(issued: Issued) -> Issued:
    issued.dir.mkdir(parents=True, exist_ok=True)
    issued.key_file.write_bytes(
        issued.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    issued.cert_file.write_bytes(issued.cert.public_bytes(serialization.Encoding.PEM))
    return issued


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, ca: bool
) -> x509.CertificateBuilder:
    """Valid from an hour ago for 30 days (clock skew between the JVMs and us does not matter)."""
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )


class CertAuthority:
    def __init__(self, dir: Path, name: str = "test-ca") -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            _builder(_name(name, None), _name(name, None), key, ca=True)
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
            .sign(key, hashes.SHA256())
        )
        self.authority = _write(Issued(name, key, cert, None, dir))

    @property
    def cert_file(self) -> Path:
        return self.authority.cert_file

    def truststore(self, kind: str, password: str = STORE_PASSWORD) -> Path:
        """The CA alone in a PKCS12 or JKS trust store, as keytool makes it (spec §6.2)."""
        out = self.authority.dir / f"{self.authority.name}-trust.{kind.lower()}"
        keytool(
            "-importcert",
            "-alias",
            "ca",
            "-file",
            str(self.cert_file),
            "-keystore",
            str(out),
            "-storetype",
            kind,
            "-storepass",
            password,
        )
        return out

    def issue(
        self,
        name: str,
        hosts: list[str],
        ou: str | None = None,
        *,
        sans: tuple[x509.GeneralName, ...] = (),
        stem: str | None = None,
    ) -> Issued:
        """A leaf for server and client use; `hosts` become SANs (IP addresses or DNS names), `sans` are
        further ones of any type (URI, email, ...); written as `<stem or name>.crt/.key`."""
        key = ec.generate_private_key(ec.SECP256R1())
        names: list[x509.GeneralName] = []
        for h in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(h)))
            except ValueError:
                names.append(x509.DNSName(h))
        names += sans
        ca = self.authority
        builder = _builder(_name(name, ou), ca.cert.subject, key, ca=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(ca.key, hashes.SHA256())
        return _write(Issued(stem or name, key, cert, ca.cert, ca.dir))
