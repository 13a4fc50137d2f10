"""Deployment secrets: a CA, the SuperLink's TLS certificate, and one SuperNode auth key pair per institution.

Usage (from the repository root; everything lands in ``certs/``, which ``.gitignore`` keeps out of git)::

    python docker/make_certs.py create hospital-a lab-b agency-c        # CA, server cert, institution keys
    python docker/make_certs.py register hospital-a lab-b agency-c \\
        --superlink fedprint-tls                                       # once the SuperLink runs

Layout written by ``create`` (``--out``, default ``certs``)::

    certs/ca.crt, certs/ca.key                 CA (ECDSA P-384, 10 years); keep ca.key offline
    certs/superlink/ca.crt, server.pem, server.key
                                               SuperLink TLS: SANs = superlink, localhost, 127.0.0.1 (+ --san)
    certs/<institution>/ca.crt                 what the institution needs to verify the SuperLink
    certs/<institution>/auth.key, auth.pub     SuperNode auth key pair (ECDSA P-384, OpenSSH format)
    certs/superlink/superexec.secret           SuperExec shared secret of the SuperLink and the ServerApp SuperExec
    certs/<institution>/superexec.secret       SuperExec shared secret of the institution's SuperNode and ClientApp
                                               SuperExec (256 random bits each, from the OS CSPRNG)

``register`` calls ``flwr supernode register certs/<institution>/auth.pub <superlink> --name <institution>`` for
each institution, so the SuperLink (started with ``--enable-supernode-auth``) accepts exactly these keys. In a
real consortium every institution runs ``create-key`` itself and sends only ``auth.pub`` to the consortium.
Existing files are never overwritten (``--force`` to replace them).
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import re
import secrets
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: Names the SuperLink certificate is valid for: the compose service name and loopback.
DEFAULT_SANS = ("superlink", "localhost", "127.0.0.1")

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"institution {name!r}: expected lower-case letters, digits, '-' or '_' (max 63)")
    return name


def _write(path: Path, data: bytes, *, private: bool, force: bool) -> None:
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_ca(days: int = 3650) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed ECDSA P-384 CA certificate valid for ``days`` days."""
    key = ec.generate_private_key(ec.SECP384R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "FedPrint consortium CA")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA384()))
    return key, cert


def make_server_cert(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, sans: list[str],
                     days: int = 825) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A server certificate for the SuperLink, signed by the CA, valid for the names / IPs in ``sans``."""
    if not sans:
        raise ValueError("sans: expected at least one DNS name or IP address")
    key = ec.generate_private_key(ec.SECP384R1())
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, sans[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([_san(s) for s in sans]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA384()))
    return key, cert


def make_auth_key(out_dir: Path, *, force: bool = False) -> Path:
    """ECDSA P-384 SuperNode auth key pair in OpenSSH format: ``auth.key`` (private) and ``auth.pub``."""
    key = ec.generate_private_key(ec.SECP384R1())
    _write(out_dir / "auth.key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                   serialization.NoEncryption()), private=True, force=force)
    pub = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    _write(out_dir / "auth.pub", pub + f" {out_dir.name}\n".encode(), private=False, force=force)
    return out_dir / "auth.pub"


def create(out: Path, institutions: list[str], *, sans: list[str], force: bool = False) -> None:
    """CA + SuperLink certificate + one key pair and CA copy per institution under ``out``."""
    institutions = [_check_name(i) for i in institutions]
    ca_key, ca_cert = make_ca()
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    _write(out / "ca.key", _pem_key(ca_key), private=True, force=force)
    _write(out / "ca.crt", ca_pem, private=False, force=force)
    srv_key, srv_cert = make_server_cert(ca_key, ca_cert, sans)
    _write(out / "superlink" / "server.key", _pem_key(srv_key), private=True, force=force)
    _write(out / "superlink" / "server.pem", srv_cert.public_bytes(serialization.Encoding.PEM), private=False,
           force=force)
    _write(out / "superlink" / "ca.crt", ca_pem, private=False, force=force)
    _write(out / "superlink" / "superexec.secret", secrets.token_bytes(32), private=True, force=force)
    for inst in institutions:
        _write(out / inst / "ca.crt", ca_pem, private=False, force=force)
        make_auth_key(out / inst, force=force)
        _write(out / inst / "superexec.secret", secrets.token_bytes(32), private=True, force=force)


def register(out: Path, institutions: list[str], *, superlink: str, flwr: str = "flwr") -> None:
    """``flwr supernode register`` every institution's public key with the SuperLink connection ``superlink``."""
    for inst in (_check_name(i) for i in institutions):
        pub = out / inst / "auth.pub"
        if not pub.is_file():
            raise FileNotFoundError(f"{pub}: no public key for institution {inst!r}; run 'create' first")
        subprocess.run([flwr, "supernode", "register", str(pub), superlink, "--name", inst], check=True,
                       timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_create = sub.add_parser("create", help="CA, SuperLink certificate and institution key pairs")
    p_create.add_argument("institutions", nargs="+")
    p_create.add_argument("--san", action="append", default=[], help="extra DNS name / IP of the SuperLink")
    p_key = sub.add_parser("create-key", help="only a SuperNode auth key pair (run at the institution)")
    p_key.add_argument("institutions", nargs="+")
    p_reg = sub.add_parser("register", help="register the institutions' public keys with a running SuperLink")
    p_reg.add_argument("institutions", nargs="+")
    p_reg.add_argument("--superlink", required=True, help="SuperLink connection name in $FLWR_HOME/config.toml")
    p_reg.add_argument("--flwr", default="flwr", help="flwr executable")
    for p in (p_create, p_key, p_reg):
        p.add_argument("--out", type=Path, default=Path("certs"))
        p.add_argument("--force", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "create":
            create(args.out, args.institutions, sans=[*DEFAULT_SANS, *args.san], force=args.force)
        elif args.cmd == "create-key":
            for inst in args.institutions:
                make_auth_key(args.out / _check_name(inst), force=args.force)
        else:
            register(args.out, args.institutions, superlink=args.superlink, flwr=args.flwr)
    except (ValueError, FileExistsError, FileNotFoundError, subprocess.CalledProcessError) as exc:
        print(f"make_certs: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
