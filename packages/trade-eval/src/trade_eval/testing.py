"""A scripted OpenAI-protocol server for tests and benchmarks: a test double at a process boundary; and the
backtest that the tests of a served model (this server, vLLM, ``transformers serve``) play against it.

It answers ``POST /v1/chat/completions`` over HTTP on a real socket on 127.0.0.1, so the client's HTTP,
timeouts and the policy's retries run exactly as against vLLM; only the model is replaced, by a script that
decides what each request gets: a reply (text, tool calls as the server's parser would return them or in a
broken shape, reasoning as ``<think>`` text or as a field), an HTTP error, a slow answer, or a connection
dropped mid-answer. Requests are kept (``server.requests``, their headers in ``server.headers``) so a test can
read what the client sent; the most requests served at once (``server.peak``) and the connections clients
opened (``server.connections``) are counted for the benchmark.
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trade_core.testing import TradeRun

STOP_ARGUMENTS = json.dumps({"type": "stop", "reasoning": "观望"}, ensure_ascii=False)


@dataclass(frozen=True)
class Reply:
    """An answer; ``calls`` are ``(name, arguments text)`` as the server's tool parser returns them."""

    content: str = ""
    calls: tuple[tuple[str, str], ...] = ()
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    """Where ``reasoning`` goes: vLLM's ``reasoning_content`` (older) or ``reasoning`` (newer)."""
    delay: float = 0.0
    finish_reason: str | None = None
    """Default: ``tool_calls`` when there are calls, ``stop`` otherwise."""
    raw_calls: Any = None
    """The message's ``tool_calls`` exactly as given, in place of ``calls``: a shape no parser should return."""
    tokens: int | None = None
    """The completion tokens reported (default: about one a 4 characters of the reply, plus its end token)."""


@dataclass(frozen=True)
class Fail:
    """An HTTP error status with an OpenAI-style error body."""

    status: int = 500
    message: str = "internal server error"
    delay: float = 0.0


@dataclass(frozen=True)
class Drop:
    """The status line, headers and half the body of a reply, then the connection closes."""

    delay: float = 0.0


Behaviour = Reply | Fail | Drop
STOP = Reply(calls=(("TakeAction", STOP_ARGUMENTS),))
"""The day's one reply: stop without trading."""
LOOP = Reply(calls=(("get_macro_indicators", "{}"),))
"""A tool call that never stops the day."""


@dataclass(frozen=True)
class Request:
    """What a script sees of a request."""

    body: dict[str, Any]
    date: str
    """The first YYYY-MM-DD in the conversation's user message: the trading day played ('' if none)."""
    turn: int
    """Assistant replies already in the conversation."""
    nth: int
    """Earlier requests for the same date (retries included)."""


Script = Callable[[Request], Behaviour]
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def by_day(plan: Mapping[str, Sequence[Behaviour]], default: Behaviour = STOP) -> Script:
    """A script from each day's behaviours in request order (retries included); then ``default``."""

    def script(request: Request) -> Behaviour:
        steps = plan.get(request.date, ())
        return steps[request.nth] if request.nth < len(steps) else default

    return script


def in_order(steps: Sequence[Behaviour], default: Behaviour = STOP) -> Script:
    """A script that answers requests with ``steps`` in arrival order, then with ``default``."""
    counter = itertools.count()

    def script(request: Request) -> Behaviour:
        n = next(counter)
        return steps[n] if n < len(steps) else default

    return script


def stop_after(turns: int, delay: float = 0.0) -> Script:
    """A script for load tests: every conversation calls a tool ``turns - 1`` times, then stops; each reply after
    ``delay`` seconds (a served model's latency)."""
    tool, stop = Reply(calls=LOOP.calls, delay=delay), Reply(calls=STOP.calls, delay=delay)

    def script(request: Request) -> Behaviour:
        return stop if request.turn >= turns - 1 else tool

    return script


class FaultServer:
    """``with FaultServer(script) as server:`` serves on ``server.url`` (an OpenAI ``base_url``) until the
    block ends; ``script`` is a :data:`Script` or behaviours in arrival order (then ``default``)."""

    def __init__(self, script: Script | Sequence[Behaviour] = (), default: Behaviour = STOP) -> None:
        self.script = script if callable(script) else in_order(script, default)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.peak = 0
        self.connections = 0
        self._per_date: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._http = _Listener(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._http.serve_forever, name="fault-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # ends slow answers now
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def _receive(self, body: dict[str, Any], headers: dict[str, str]) -> Behaviour:
        messages = body.get("messages") or []
        users = [m.get("content") or "" for m in messages if m.get("role") == "user"]
        found = _DATE.search(users[0]) if users and isinstance(users[0], str) else None
        date = found.group() if found else ""
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            nth = self._per_date[date]
            self._per_date[date] += 1
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        turn = sum(m.get("role") == "assistant" for m in messages)
        return self.script(Request(body=body, date=date, turn=turn, nth=nth))

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1


class _Listener(ThreadingHTTPServer):
    """A thread per connection, with a listen backlog for hundreds of clients connecting at once: at the
    default 5 the kernel drops the rest of a burst of connections, which the clients retry a second later."""

    daemon_threads = True
    request_queue_size = 1024


def completion(body: Mapping[str, Any], reply: Reply, number: int) -> dict[str, Any]:
    """The chat.completion object vLLM returns for ``reply``."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or None}
    if reply.calls:
        message["tool_calls"] = [
            {"id": f"call_{number}_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(reply.calls)
        ]
    if reply.raw_calls is not None:
        message["tool_calls"] = reply.raw_calls
    if reply.reasoning is not None:
        message[reply.reasoning_field] = reply.reasoning
    prompt = len(json.dumps(body.get("messages", []), ensure_ascii=False)) // 4  # about 4 characters a token
    written = (
        reply.tokens or (len(reply.content) + len(reply.reasoning or "") + sum(len(a) for _, a in reply.calls)) // 4 + 1
    )
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason or ("tool_calls" if reply.calls else "stop"),
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": written, "total_tokens": prompt + written},
    }


def _handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall between them

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server.connections += 1

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read ``server.requests``."""

        def do_GET(self) -> None:
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            behaviour = server._receive(body, dict(self.headers))
            try:
                if server._closing.wait(behaviour.delay):
                    return
                if isinstance(behaviour, Fail):
                    error = {"message": behaviour.message, "type": "error", "code": behaviour.status}
                    self._send(behaviour.status, {"error": error})
                else:
                    answer = completion(body, behaviour if isinstance(behaviour, Reply) else STOP, len(server.requests))
                    self._send(200, answer, cut=isinstance(behaviour, Drop))
            except OSError:  # the client gave up (a timeout) before the answer
                self.close_connection = True
            finally:
                server._done()

        def _send(self, status: int, payload: dict[str, Any], *, cut: bool = False) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if cut:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
            else:
                self.wfile.write(data)

    return Handler


SERVED_START = "2025-06-20"
"""The first day of the served tests' backtests: a week both the real sample and its stand-in hold."""


def served_backtest(
    url: str,
    model: str,
    data: Path,
    out: Path,
    *,
    days: int,
    turns: int | None = None,
    options: Sequence[str] = (),
    timeout: float = 300,
) -> TradeRun:
    """`trade eval backtest` of ``model`` served at ``url``: ``days`` days from :data:`SERVED_START` on a pool of 5,
    at most ``turns`` replies a day (the CLI's default when None), into ``out``, with ``options`` after."""
    from trade_core.testing import run_trade

    limit = () if turns is None else ("--max-turns", str(turns))
    return run_trade(
        *("eval", "backtest", "--base-url", url, "--model", model, "--data", str(data), "--out", str(out)),
        *("--start-date", SERVED_START, "--num-days", str(days), "--pool-size", "5", *limit, *options),
        timeout=timeout,
    )
