"""The review server's answer to malformed requests that carry the token (issue #56): a 4xx and a one-line
JSON error, never a dropped reply or a traceback; and a connection left silent is closed."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from offline_eval.review.server import ReviewServer
from offline_eval.review.session import Review, ReviewError

from tests.review.test_review import _request, hostile_run


@contextmanager
def serving(folder: Path, **options: Any) -> Iterator[ReviewServer]:
    server = ReviewServer(Review(folder, ["faithfulness"]), **options)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def server(tmp_path):
    with serving(hostile_run(tmp_path)) as server:
        yield server


def _refused(server: ReviewServer, capsys, method: str, route: str, body: Any = None, *,
             headers: dict[str, str] | None = None) -> tuple[int, str]:
    """The status and error of a request the server must refuse: a 4xx with one line of JSON, and no
    traceback on stderr. ``body``: bytes as they are, anything else as JSON."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    sent = {"Host": f"127.0.0.1:{server.port}", **({"Content-Type": "application/json"} if data else {}),
            **(headers or {})}
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        connection.request(method, f"/{server.token}/{route}", body=data, headers=sent)
        reply = connection.getresponse()
        status, content_type, text = reply.status, reply.getheader("Content-Type", ""), reply.read()
    finally:
        connection.close()
    assert 400 <= status < 500, (status, text[:200])
    assert content_type.startswith("application/json") and b"\n" not in text
    assert "Traceback" not in capsys.readouterr().err
    return status, json.loads(text)["error"]


def _label(server: ReviewServer, **fields: Any) -> dict[str, Any]:
    sample = json.loads(_request(server, "GET", f"/{server.token}/api/sample?pos=0&annotator=a")[2])
    return {"annotator": "a", "id": sample["id"], "labels": {"faithfulness": "yes"}, **fields}


def test_a_position_of_digits_int_refuses_is_400(server, capsys):
    for pos in ("%C2%B2", "%D9%A3", "1" * 5000):  # "²" and an Arabic-Indic 3 pass str.isdigit; 5,000 digits
        status, error = _refused(server, capsys, "GET", f"api/sample?pos={pos}&annotator=a")
        assert status == 400 and "no sample at position" in error


def test_a_label_that_is_a_list_is_400_and_writes_nothing(server, capsys):
    for word in (["yes"], {"yes": 1}):
        status, error = _refused(server, capsys, "POST", "api/label", _label(server, labels={"faithfulness": word}))
        assert status == 400 and "expected yes, no or unsure" in error
    assert not server.review.labels_path.exists()


def test_an_annotator_with_a_lone_surrogate_is_400_and_writes_nothing(server, capsys):
    status, error = _refused(server, capsys, "POST", "api/label", _label(server, annotator="a\ud800"))
    assert status == 400 and "annotator" in error
    assert not server.review.labels_path.exists()


@pytest.mark.parametrize("body", [b"[" * 1_000 + b"]" * 1_000, b"[" * 60_000, b'{"a":' * 12_000])
def test_json_nested_deeper_than_the_parser_is_400(server, capsys, body):
    status, error = _refused(server, capsys, "POST", "api/label", body)
    assert status == 400 and "nested too deep" in error


def test_a_content_length_of_odd_digits_is_413(server, capsys):
    for length in ("\u00b2", "9" * 5000):
        status, error = _refused(server, capsys, "POST", "api/label", _label(server),
                                 headers={"Content-Length": length})
        assert status == 413 and "at most" in error


def test_a_malformed_request_line_is_one_line_json(server, capsys):
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as client:
        client.sendall(b"GET /%s/ extra HTTP/1.0\r\n\r\n" % server.token.encode())
        reply = client.makefile("rb").read()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 400") and b"\n" not in body and "error" in json.loads(body)


def test_a_silent_connection_is_closed_after_the_idle_timeout(tmp_path):
    with serving(hostile_run(tmp_path), idle_timeout=0.3) as server:
        partial = (f"POST /{server.token}/api/label HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                   "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"annot").encode()
        for sent in (b"", partial):  # no request at all; a body that stops short of its length
            with socket.create_connection(("127.0.0.1", server.port), timeout=20) as client:
                client.sendall(sent)
                assert client.recv(1024) == b""  # closed by the server, long before the client's 20 s


def test_an_unknown_metric_is_echoed_with_its_control_characters_escaped(tmp_path):
    with pytest.raises(ReviewError) as refused:
        Review(hostile_run(tmp_path), ["faithfulnes\x1b[2J\n"])
    assert str(refused.value).startswith("--metrics: faithfulnes\\x1b[2J\\n is not a metric of this run")
