"""The review page's server: Python's threaded ``http.server`` on 127.0.0.1, nothing else.

    GET  /TOKEN/                      the page (static; it fetches the rest)
    GET  /TOKEN/api/state?annotator=  progress, the next unanswered step, agreement
    GET  /TOKEN/api/sample?pos=&annotator=  one sample of the review's order
    POST /TOKEN/api/label             {"annotator", "id", "labels": {metric: "yes"|"no"|"unsure"}}

Every request must name the token made at start (a random 32-character string, the first part of the
path) and carry a Host header of 127.0.0.1:PORT or localhost:PORT, or it gets 403: another user of the
machine cannot read the samples without the token, and a web page elsewhere cannot reach the server by
pointing a name of its own at 127.0.0.1 (DNS rebinding). A POST must be JSON and, when it says where
it comes from (Origin), come from the page itself. A label is on disk (appended and fsynced) before
its request is answered.

A malformed request gets a 4xx and a one-line JSON error, and a connection silent for ``idle_timeout``
seconds (no request, or a body shorter than it said) is closed: a stalled client cannot hold a thread.
"""

from __future__ import annotations

import hmac
import json
import secrets
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from offline_eval.data.schema import DataError
from offline_eval.review import page
from offline_eval.review.session import Review, ReviewError, check_annotator

MAX_BODY = 64 * 1024
IDLE_TIMEOUT = 30.0  # seconds; a browser sends its request at once, so only a stalled client waits this long
HEADERS = {
    "Content-Security-Policy": page.CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin", "Cache-Control": "no-store",
}


class ReviewServer(ThreadingHTTPServer):
    """The server of one review; ``port`` 0 takes a free port. ``url`` is what the user opens."""

    daemon_threads = True

    def __init__(self, review: Review, port: int = 0, *, quiet: bool = True,
                 idle_timeout: float = IDLE_TIMEOUT) -> None:
        super().__init__(("127.0.0.1", port), ReviewHandler)
        self.review, self.quiet, self.idle_timeout = review, quiet, idle_timeout
        self.token = secrets.token_urlsafe(24)
        self.port = self.server_address[1]
        self.hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.token}/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback; a client that went away is no error of ours."""
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            print(f"offline-eval review: a request failed: {_one_line(exc)}", file=sys.stderr)


class ReviewHandler(BaseHTTPRequestHandler):
    server: ReviewServer
    server_version = "offline-eval-review"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.idle_timeout  # http.server closes the connection when a read times out
        super().setup()

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (a malformed request line or header) as one-line JSON, not its page."""
        self.log_error("code %d, message %s", code, message)
        self.close_connection = True
        self._send(code, {"error": message or self.responses.get(code, ("refused",))[0]})

    # -------------------------------------------------------------------------------------------
    def _answer(self, method: str) -> None:
        url = urlsplit(self.path)
        _, token, rest = (url.path + "/").split("/", 2) if url.path.startswith("/") else ("", "", "")
        if self.headers.get("Host", "").lower() not in self.server.hosts:
            return self._send(403, {"error": "this server answers requests to 127.0.0.1 only"})
        if not hmac.compare_digest(token.encode("utf-8", "replace"), self.server.token.encode()):
            return self._send(403, {"error": "wrong or missing token: open the URL the server printed"})
        route, query = rest.rstrip("/"), parse_qs(url.query)
        review = self.server.review
        try:
            if method == "GET" and route == "" and not url.path.endswith("/"):
                return self._send(301, None, location=f"/{token}/" + (f"?{url.query}" if url.query else ""))
            if method == "GET" and route == "":
                return self._send(200, page.HTML.encode("utf-8"), content_type="text/html; charset=utf-8")
            if method == "GET" and route == "api/state":
                name = _one(query, "annotator") or review.annotator
                return self._send(200, review.state(check_annotator(name) if name else None))
            if method == "GET" and route == "api/sample":
                pos = _one(query, "pos")
                return self._send(200, review.sample(_whole(pos, 9) if pos is not None else None,
                                                     check_annotator(_one(query, "annotator"))))
            if method == "POST" and route == "api/label":
                body = self._json_body()
                if not isinstance(body, dict):
                    raise ReviewError("expected a JSON object")
                return self._send(200, review.record(body.get("annotator"), body.get("id"), body.get("labels")))
        except ReviewError as exc:
            return self._send(400, {"error": str(exc)})
        except _Refused as exc:
            return self._send(exc.status, {"error": str(exc)})
        except TimeoutError:
            raise  # a body that stopped coming: http.server closes the connection
        except (OSError, DataError) as exc:  # a full disk, a labels file someone broke: said on the page
            print(f"offline-eval review: {_one_line(exc)}", file=sys.stderr)
            return self._send(500, {"error": str(exc)})
        except Exception as exc:  # a request no check above foresaw: a one-line 500, never a dropped reply
            print(f"offline-eval review: {method} /TOKEN/{route}: {_one_line(exc)}", file=sys.stderr)
            return self._send(500, {"error": f"the server could not answer: {type(exc).__name__}"})
        return self._send(404, {"error": "no such page"})

    def _json_body(self) -> Any:
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in {f"http://{h}" for h in self.server.hosts}:
            raise _Refused(403, "a request from another page")
        if self.headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/json":
            raise _Refused(415, "expected application/json")
        length = self.headers.get("Content-Length", "")
        size = _whole(length, 9)
        if not isinstance(size, int) or size > MAX_BODY:
            raise _Refused(413, f"expected a body of at most {MAX_BODY} bytes")
        try:
            return json.loads(self.rfile.read(size))
        except ValueError:
            raise ReviewError("the request is not valid JSON") from None
        except RecursionError:  # brackets nested deeper than the parser's stack
            raise ReviewError("the request's JSON is nested too deep") from None

    def _send(self, status: int, body: Any, *, content_type: str = "application/json; charset=utf-8",
              location: str | None = None) -> None:
        if not isinstance(body, bytes):
            # ASCII only (a lone surrogate from the data cannot fail the encoding), and "<", ">" and "&" as
            # \u escapes: the JSON stays inert even if something read it as HTML
            text = json.dumps(body) if body is not None else ""
            body = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode("utf-8")
        self.send_response(status)
        for name, value in HEADERS.items():
            self.send_header(name, value)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _whole(text: str, digits: int) -> int | str:
    """``text`` as a whole number when it is 1 to ``digits`` ASCII digits, else ``text`` itself: str.isdigit
    also takes "²", which int() refuses, and int() refuses more than 4,300 digits."""
    if text.isascii() and text.isdigit() and len(text) <= digits:
        return int(text)
    return text


def _one_line(exc: BaseException | None) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
