"""TLS for the admission webhook: a private CA and a serving certificate, made with ``cryptography``.

The kube-apiserver calls a webhook only over HTTPS and verifies the server certificate against the
``caBundle`` of the webhook configuration, by subject alternative name (the common name is ignored).
So the operator needs a CA (whose certificate becomes the ``caBundle``) and a serving certificate
signed by it, with the address the apiserver dials as a SAN: ``IP:127.0.0.1`` for the local cluster,
a DNS name such as ``<service>.<namespace>.svc`` in a real cluster.

kopf can make a self-signed certificate itself, but only through ``certbuilder``/``oscrypto``, which
does not import with OpenSSL 3; this module does the same with ``cryptography`` and keeps CA and
serving certificate apart (the CA key is never written: a new serving certificate means a new CA).

Files use the names of a Kubernetes TLS Secret as cert-manager writes it (``tls.crt``, ``tls.key``,
``ca.crt``), so a mounted Secret and a generated directory look the same to :func:`ensure_serving_files`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"

CA_DAYS = 3650
SERVING_DAYS = 365
#: Backdating of ``notBefore``, for clocks of the apiserver and the operator that differ a little.
CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True)
class CertKey:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        """The certificate, PEM-encoded."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        """The private key, PEM-encoded PKCS#8, unencrypted (the file is written mode 0600)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


@dataclass(frozen=True)
class ServingFiles:
    """Where the webhook server's certificate, key and CA bundle are (see :func:`ensure_serving_files`).

    ``cafile`` is None when the directory holds only ``tls.crt``/``tls.key`` (a certificate from
    elsewhere without its CA): the server certificate itself is then the bundle the apiserver trusts.
    ``generated`` is True when this process wrote the files.
    """

    certfile: Path
    keyfile: Path
    cafile: Path | None
    generated: bool


def san_entry(host: str) -> x509.GeneralName:
    """``IPAddress`` for an IPv4/IPv6 literal, ``DNSName`` for anything else."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pdd-operator"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64]),
    ])


def generate_ca(common_name: str = "pdd-operator webhook CA", *, days: int = CA_DAYS,
                now: datetime | None = None) -> CertKey:
    """A new self-signed CA (ECDSA P-256) that may sign leaf certificates only (path length 0).

    ``now`` fixes the validity start (tests); the certificate is valid from ``now - CLOCK_SKEW`` for
    ``days`` days.
    """
    key = _new_key()
    now = now or datetime.now(UTC)
    name = _name(common_name)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertKey(cert=cert, key=key)


def issue_serving_cert(ca: CertKey, hosts: Sequence[str], *, days: int = SERVING_DAYS,
                       now: datetime | None = None) -> CertKey:
    """A TLS server certificate for ``hosts``, signed by ``ca``.

    Every host becomes a SAN (IP literals as ``IPAddress``, names as ``DNSName``); the first is also
    the common name. Raises ``ValueError`` when ``hosts`` is empty. The validity never ends after the
    CA's.
    """
    hosts = list(dict.fromkeys(h for h in hosts if h))
    if not hosts:
        raise ValueError("a serving certificate needs at least one host (SAN)")
    key = _new_key()
    now = now or datetime.now(UTC)
    not_after = min(now + timedelta(days=days), ca.cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([san_entry(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=False, crl_sign=False, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return CertKey(cert=cert, key=key)


def write_pem(path: Path, data: bytes, *, private: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + rename); mode 0600 when ``private``.

    Atomic, because kopf's webhook server re-reads the files when they change: it must never see a
    half-written certificate.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def covers(cert: x509.Certificate, host: str) -> bool:
    """Whether ``host`` (an IP literal or a DNS name, no wildcards matched) is among the SANs."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    entry = san_entry(host)
    if isinstance(entry, x509.IPAddress):
        return entry.value in sans.get_values_for_type(x509.IPAddress)
    return host.lower() in (n.lower() for n in sans.get_values_for_type(x509.DNSName))


def ensure_serving_files(cert_dir: Path, hosts: Sequence[str]) -> ServingFiles:
    """Use ``tls.crt``/``tls.key`` (and ``ca.crt`` if present) from ``cert_dir``, or generate them.

    When both ``tls.crt`` and ``tls.key`` exist (e.g. a mounted cert-manager Secret) they are used as
    they are, and nothing is written. Otherwise a new CA and a serving certificate for ``hosts`` are
    generated and written as ``ca.crt``, ``tls.crt`` and ``tls.key`` (key mode 0600); the CA key is
    discarded. ``cert_dir`` is created if missing.
    """
    cert_dir = Path(cert_dir)
    certfile, keyfile, cafile = cert_dir / CERT_FILE, cert_dir / KEY_FILE, cert_dir / CA_FILE
    if certfile.exists() and keyfile.exists():
        return ServingFiles(certfile, keyfile, cafile if cafile.exists() else None, generated=False)
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca = generate_ca()
    serving = issue_serving_cert(ca, hosts)
    write_pem(cafile, ca.cert_pem())
    write_pem(keyfile, serving.key_pem(), private=True)
    write_pem(certfile, serving.cert_pem())
    return ServingFiles(certfile, keyfile, cafile, generated=True)


def load_cert(path: Path) -> x509.Certificate:
    """The first certificate of a PEM file."""
    return x509.load_pem_x509_certificate(Path(path).read_bytes())


# --- certificates kept in a Secret ------------------------------------------------------------------

#: Keys of the webhook Secret: the CA (its key too, so the serving certificate can be renewed under the
#: same CA and ``caBundle`` never changes) and the serving certificate, as cert-manager names them.
CA_KEY_FILE = "ca.key"
SECRET_KEYS = (CA_FILE, CA_KEY_FILE, CERT_FILE, KEY_FILE)
#: Renew the serving certificate when less than this part of its lifetime is left (cert-manager's
#: default is a third as well), and the CA when less than this part of its lifetime is left.
RENEW_FRACTION = 1 / 3


def load_cert_key(cert_pem: bytes, key_pem: bytes) -> CertKey:
    """A :class:`CertKey` from PEM. Raises ``ValueError`` when either does not parse, is not ECDSA, or
    the key does not belong to the certificate."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the private key is not an ECDSA key")
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        raise ValueError("the private key does not belong to the certificate")
    return CertKey(cert=cert, key=key)


def _fresh(cert: x509.Certificate, now: datetime) -> bool:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start <= now and (end - now) > (end - start) * RENEW_FRACTION


def plan_certificates(data: dict[str, bytes], hosts: Sequence[str], *, now: datetime | None = None,
                      serving_days: int = SERVING_DAYS, ca_days: int = CA_DAYS) -> tuple[dict[str, bytes], list[str]]:
    """What the webhook Secret should hold, given what it holds (``data``: key -> PEM bytes).

    Returns ``(data, changes)``; ``changes`` is empty when ``data`` is already right. Rules:

    - the CA is kept while it parses, matches its key and has more than :data:`RENEW_FRACTION` of its
      lifetime left; else a new one is made (then ``caBundle`` changes once);
    - the serving certificate is kept while it parses, matches its key, was signed by that CA, names
      every one of ``hosts`` and has more than :data:`RENEW_FRACTION` of its lifetime left; else a new
      one is issued under the (same) CA.
    """
    now = now or datetime.now(UTC)
    changes: list[str] = []
    try:
        ca = load_cert_key(data[CA_FILE], data[CA_KEY_FILE])
        if not _fresh(ca.cert, now):
            raise ValueError("the CA is close to expiry")
    except (KeyError, ValueError) as exc:
        ca = generate_ca(days=ca_days, now=now)
        changes.append(f"new CA ({'missing' if isinstance(exc, KeyError) else exc})")
    serving = None
    if not changes:
        try:
            serving = load_cert_key(data[CERT_FILE], data[KEY_FILE])
            serving.cert.verify_directly_issued_by(ca.cert)
            missing = [h for h in hosts if not covers(serving.cert, h)]
            if missing:
                raise ValueError(f"it does not name {', '.join(missing)}")
            if not _fresh(serving.cert, now):
                raise ValueError(f"it expires at {serving.cert.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}")
        except KeyError:
            serving, reason = None, "missing"
        except Exception as exc:  # noqa: BLE001  (ValueError, InvalidSignature, TypeError from verify)
            serving, reason = None, str(exc) or type(exc).__name__
        if serving is None:
            changes.append(f"new serving certificate ({reason})")
    if serving is None:
        serving = issue_serving_cert(ca, hosts, days=serving_days, now=now)
        if not changes:
            changes.append("new serving certificate")
    if not changes:
        return dict(data), []
    return {CA_FILE: ca.cert_pem(), CA_KEY_FILE: ca.key_pem(), CERT_FILE: serving.cert_pem(),
            KEY_FILE: serving.key_pem()}, changes


def write_serving_files(cert_dir: Path, data: dict[str, bytes]) -> ServingFiles:
    """Write ``ca.crt``, ``tls.key`` and ``tls.crt`` of ``data`` into ``cert_dir`` (atomically, the key
    mode 0600; only files whose content changed), never the CA key. Returns the files."""
    cert_dir = Path(cert_dir)
    cert_dir.mkdir(parents=True, exist_ok=True)
    for name, private in ((CA_FILE, False), (KEY_FILE, True), (CERT_FILE, False)):
        path = cert_dir / name
        if not path.exists() or path.read_bytes() != data[name]:
            write_pem(path, data[name], private=private)
    return ServingFiles(cert_dir / CERT_FILE, cert_dir / KEY_FILE, cert_dir / CA_FILE, generated=False)
