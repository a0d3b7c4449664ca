"""Transport fixture for the integration tests (tests/it/transports.rs): one small MCP server
(Python `mcp` 2.x SDK, `MCPServer`) served over the 2024-11-05 HTTP+SSE transport, or over
streamable HTTP behind TLS with a certificate authority made up on the spot.

usage: transport_server.py --sse PORT
       transport_server.py --https PORT --certs DIR [--require-client-cert]
       transport_server.py --make-certs DIR

  --sse    GET http://127.0.0.1:PORT/sse (the `endpoint` event names /messages/?session_id=...)
  --https  https://127.0.0.1:PORT/mcp; writes into DIR (if not there yet): ca.pem (the CA that
           signed the server's certificate for 127.0.0.1 / localhost), other-ca.pem (a CA that
           signed nothing), client.pem + client-key.pem (a client certificate of ca.pem). With
           --require-client-cert the TLS handshake needs a client certificate of ca.pem.
           --make-certs writes them and exits.

Tools: echo(message), slow(seconds, steps) with progress notifications, shout(message) which
sends the message as a log notification (info) before it answers. Binds 127.0.0.1 only and
prints `listening on URL` on stderr once it accepts connections.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import ssl
import sys

import anyio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("transport-server", version="1.0.0")


@server.tool()
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


@server.tool()
async def slow(seconds: float, steps: int, ctx: Context) -> str:
    """Sleep `seconds`, reporting progress `steps` times."""
    for i in range(1, steps + 1):
        await anyio.sleep(seconds / max(steps, 1))
        await ctx.report_progress(i, steps, f"step {i}/{steps}")
    return f"slept {seconds}s in {steps} steps"


@server.tool()
async def shout(message: str, ctx: Context) -> str:
    """Send `message` as a log notification, then answer."""
    await ctx.info(message)
    return f"shouted {message}"


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(path: str, key: ec.EllipticCurvePrivateKey | None, cert: x509.Certificate) -> None:
    with open(path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        key_path = path.replace(".pem", "-key.pem")
        with open(key_path, "wb") as f:
            f.write(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )


def _ca(cn: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(ca_key, ca_cert, cn: str, server: bool) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def make_certs(certs: str) -> None:
    if os.path.exists(os.path.join(certs, "server.pem")):
        return
    os.makedirs(certs, exist_ok=True)
    ca_key, ca_cert = _ca("mcp-budget test CA")
    _write(os.path.join(certs, "ca.pem"), None, ca_cert)
    _, other = _ca("an unrelated CA")
    _write(os.path.join(certs, "other-ca.pem"), None, other)
    key, cert = _leaf(ca_key, ca_cert, "127.0.0.1", server=True)
    _write(os.path.join(certs, "server.pem"), key, cert)
    key, cert = _leaf(ca_key, ca_cert, "mcp-budget test client", server=False)
    _write(os.path.join(certs, "client.pem"), key, cert)


async def serve(app, port: int, url: str, **tls) -> None:
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **tls)
    http = uvicorn.Server(config)

    async def announce() -> None:
        while not http.started:
            await anyio.sleep(0.02)
        print(f"listening on {url}", file=sys.stderr, flush=True)

    async with anyio.create_task_group() as tg:
        tg.start_soon(announce)
        await http.serve()
        tg.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse", type=int, metavar="PORT")
    parser.add_argument("--https", type=int, metavar="PORT")
    parser.add_argument("--certs", metavar="DIR")
    parser.add_argument("--require-client-cert", action="store_true")
    parser.add_argument("--make-certs", metavar="DIR")
    args = parser.parse_args()
    if args.make_certs is not None:
        make_certs(args.make_certs)
        return
    if args.sse is not None:
        app = server.sse_app(host="127.0.0.1")
        anyio.run(serve, app, args.sse, f"http://127.0.0.1:{args.sse}/sse")
        return
    make_certs(args.certs)
    tls = {
        "ssl_certfile": os.path.join(args.certs, "server.pem"),
        "ssl_keyfile": os.path.join(args.certs, "server-key.pem"),
    }
    if args.require_client_cert:
        tls["ssl_cert_reqs"] = ssl.CERT_REQUIRED
        tls["ssl_ca_certs"] = os.path.join(args.certs, "ca.pem")
    app = server.streamable_http_app(host="127.0.0.1")
    anyio.run(lambda: serve(app, args.https, f"https://127.0.0.1:{args.https}/mcp", **tls))


if __name__ == "__main__":
    main()
