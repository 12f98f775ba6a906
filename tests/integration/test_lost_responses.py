"""Responses lost after DynamoDB applied the write: what botocore raises then, and what the
single-attempt admission and release make of it.

The first tests put botocore in front of stand-in servers on this machine and show that SSLError
and ProxyConnectionError are raised after the whole request arrived, so neither proves that a
write was not applied (while a refused connection does). The others run the admission and the
release against DynamoDB Local with those errors injected after the request was applied
(tests/faults.py: the request is forwarded for real, then the error is raised).
"""

from __future__ import annotations

import datetime
import os
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import EndpointConnectionError, ProxyConnectionError, SSLError
from cryptography import x509  # installed with moto
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from hybrid_counter.aws import SINGLE_ATTEMPT, Effect, effect_of
from hybrid_counter.errors import LimitExceeded
from tests.faults import injected

pytestmark = pytest.mark.integration

UPDATE = {
    "TableName": "t",
    "Key": {"pk": {"S": "ACCOUNT#a"}, "sk": {"S": "COUNTER"}},
    "UpdateExpression": "ADD best_effort :one",
    "ExpressionAttributeValues": {":one": {"N": "1"}},
}


@dataclass
class StandIn:
    """A server that reads one whole HTTP request, keeps its body, then fails the response with
    ``then`` (given the connection): the request has arrived, the client never learns the outcome."""

    then: Callable[[socket.socket], None]
    tls: ssl.SSLContext | None = None
    received: list[bytes] = field(default_factory=list)
    listener: socket.socket = field(default_factory=socket.socket)

    def __post_init__(self) -> None:
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.listener.settimeout(10)
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https://localhost' if self.tls else 'http://127.0.0.1'}:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        connection, _ = self.listener.accept()
        connection.settimeout(10)
        if self.tls is not None:
            connection = self.tls.wrap_socket(connection, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data:
            data += connection.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            int(line.partition(b":")[2])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        while len(body) < length:
            body += connection.recv(65536)
        self.received.append(body)
        self.then(connection)
        connection.close()
        self.listener.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost: (certificate, key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return folder / "cert.pem", folder / "key.pem"


def corrupt_record(connection: socket.socket) -> None:
    """Answer with a TLS application-data record that cannot be decrypted (as a corrupted or
    tampered response would be): the client's TLS layer fails while reading the response."""
    os.write(connection.fileno(), b"\x17\x03\x03\x00\x20" + b"\x00" * 32)
    select.select([connection], [], [], 5)  # until the client hangs up, so it reads the record first


def hang_up(connection: socket.socket) -> None:
    connection.shutdown(socket.SHUT_RDWR)


def single_attempt_client(endpoint_url: str, *, verify: str | None = None, proxy: str | None = None):
    """The admission's and the release's client configuration, pointed at a stand-in."""
    config = SINGLE_ATTEMPT.merge(Config(proxies={"http": proxy})) if proxy else SINGLE_ATTEMPT
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    return session.client("dynamodb", endpoint_url=endpoint_url, verify=verify, config=config)


def failure_of(dynamodb) -> Exception:
    with pytest.raises(Exception) as raised:  # which exception it is, is what the tests look at
        dynamodb.update_item(**UPDATE)
    return raised.value


def test_tls_failing_while_the_response_is_read_is_an_ssl_error_raised_after_the_request_arrived(
    certificate,
):
    # Given an HTTPS endpoint that reads the whole request, then sends a record that cannot be decrypted
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = StandIn(corrupt_record, tls=tls)
    # When the single-attempt client sends a write to it
    error = failure_of(single_attempt_client(server.url, verify=str(cert)))
    # Then botocore raises SSLError although the whole request had arrived: its outcome is unknown
    assert type(error) is SSLError, repr(error)
    assert len(server.received) == 1
    assert b"ADD best_effort :one" in server.received[0]
    assert effect_of(error) is Effect.UNKNOWN


def test_a_proxy_connection_dropped_after_the_request_went_through_is_a_proxy_connection_error():
    # Given a forwarding proxy that reads the whole request, then drops the connection unanswered
    proxy = StandIn(hang_up)
    # When the single-attempt client sends a write through it
    error = failure_of(single_attempt_client("http://dynamodb.invalid:8000", proxy=proxy.url))
    # Then botocore says it could not connect to the proxy (urllib3 wraps the dropped connection as
    # ProxyError once http.client has closed it), though the request was sent: outcome unknown
    assert type(error) is ProxyConnectionError, repr(error)
    assert len(proxy.received) == 1
    assert b"ADD best_effort :one" in proxy.received[0]
    assert effect_of(error) is Effect.UNKNOWN


def test_a_refused_connection_is_an_endpoint_connection_error_with_nothing_sent():
    # Given a port bound but not listening: the connection is refused, so no byte can be sent
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        # When the single-attempt client sends a write to it
        error = failure_of(single_attempt_client(f"http://127.0.0.1:{closed.getsockname()[1]}"))
    # Then botocore raises EndpointConnectionError, which proves the write was not applied
    assert type(error) is EndpointConnectionError, repr(error)
    assert effect_of(error) is Effect.NOT_APPLIED


@pytest.mark.parametrize("lost", ["ssl", "proxy", "closed"])
def test_an_admission_whose_response_is_lost_after_it_applied_counts_the_resource_once(
    service, account, clients, drain, live_count, lost
):
    # Given the admission reaches DynamoDB and applies, and its response is then lost (TLS fails,
    # the proxy's connection drops, or the connection closes while the response is read)
    with injected(clients.dynamodb_single_attempt, "UpdateItem", when="after", lost=lost) as fault:
        # When a resource is created
        resource, created = service.create(account, "a", {})
    # Then the create succeeds and counts it once: the admission was not sent again
    assert created is True
    assert service.usage(account).best_effort == 1
    assert (fault.fired, fault.calls) == (1, 1)
    drain(account)
    usage = service.usage(account)
    assert (usage.best_effort, usage.eventual, live_count(account)) == (1, 1, 1)
    assert service.get(account, resource.resource_id) == resource


def test_a_release_whose_response_is_lost_to_tls_releases_once_and_the_limit_holds(
    service, account, clients, drain, live_count
):
    # Given a limit of 2 and two resources the stream path has counted
    service.set_limit(account, 2)
    for rid in ("a", "b"):
        service.create(account, rid, {}, resource_id=rid)
    drain(account)
    # When the delete of one has its release applied and the release's response lost to TLS
    with injected(clients.dynamodb_single_attempt, "UpdateItem", when="after", lost="ssl") as fault:
        service.delete(account, "a")
    usage = service.usage(account)
    after_delete = (usage.best_effort, usage.eventual, live_count(account))
    # and two creates follow
    admitted = []
    for rid in ("c", "d"):
        try:
            service.create(account, rid, {}, resource_id=rid)
            admitted.append(rid)
        except LimitExceeded:
            pass
    drain(account)
    usage = service.usage(account)
    # Then the release applied once, leaving one slot, so only one of them was admitted: 2 live
    # against the limit of 2 (a release sent again frees two slots: 3 live)
    final = (usage.best_effort, usage.eventual, live_count(account))
    assert (after_delete, admitted, final) == ((1, 1, 1), ["c"], (2, 2, 2))
    assert (fault.fired, fault.calls) == (1, 1)
