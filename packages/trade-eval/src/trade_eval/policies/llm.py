"""``llm``: a model behind an OpenAI-compatible server (vLLM) plays the day through tool calls.

Each request is the day's conversation so far with the Episode's tool schemas and ``tool_choice="auto"``, as in
training; each reply is played as one turn of the :class:`~trade_tools.day.TradingDay`, so turn limits, tool
errors and the record are the Episode's own. The server is outside the model: its failures (5xx, timeouts,
connections dropped) are retried with backoff and then raise :class:`PolicyUnavailable`; a request it refuses
(4xx) after the model has replied ends the day as truncated (the conversation outgrew what the server takes),
while a refused first request is the server's setup and also raises :class:`PolicyUnavailable`. A run first
checks the server answers at all (:meth:`LLMPolicy.check`): a wrong URL would fail every day, retries and all.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import http.client
import json
import random
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import structlog

from trade_core.errors import TradeError, error_line
from trade_eval.policy import DayUsage, Policy, PolicyUnavailable, RunSettings
from trade_tools.day import TradingDay
from trade_tools.toolcalls import CALL_BLOCK, MARKUP
from trade_tools.trajectory import Message

log = structlog.get_logger("trade.eval.llm")

RETRIED_STATUSES = frozenset({408, 409, 429})
"""4xx statuses that say "try again" (with every 5xx)."""
BACKOFF = 1.0
"""Seconds before the first retry (``--set backoff=S``), doubled each retry, jittered to 50-100%, at most
BACKOFF_CAP; the jitter is seeded by the run's seed, the day and the turn."""
BACKOFF_CAP = 30.0
PROBE_TIMEOUT = 10.0
"""Seconds the check before the first day waits for the server's model list (at most --request-timeout)."""
SERVE_HINT = "start one (`trade eval serve MODEL_DIR --run`) and pass its URL, e.g. http://127.0.0.1:8001/v1"


class LLMPolicy(Policy):
    name = "llm"
    description = "a model served behind an OpenAI-compatible API (vLLM), trading through tool calls"
    needs_server = True

    def check(self, settings: RunSettings) -> None:
        """Refuse a server that does not answer, before the first day: ``GET <base_url>/models``, which every
        OpenAI-compatible server (vLLM, transformers serve, ms-swift) serves; a 4xx answer (a wrong API root or
        key) is refused too, a 5xx one is a server that is up."""
        if settings.base_url is not None:
            probe(settings.base_url, settings.api_key, min(settings.request_timeout, PROBE_TIMEOUT))

    async def play(self, day: TradingDay, settings: RunSettings) -> DayUsage:
        usage = DayUsage()
        backoff = _backoff(settings)
        async with _client(settings) as client:
            request = EncodedRequest(day, settings)
            while day.is_open:
                answer = await _complete(client, day, request.next(), settings, usage, backoff)
                if answer is not None:
                    play_reply(day, answer, usage)
        return usage


Session = aiohttp.ClientSession
_SHARED: contextvars.ContextVar[dict[tuple[Any, ...], Session] | None] = contextvars.ContextVar(
    "llm_sessions", default=None
)
_POOL_SIZE: contextvars.ContextVar[int] = contextvars.ContextVar("llm_pool_size", default=0)
JSON = {"Content-Type": "application/json"}


@contextlib.asynccontextmanager
async def shared_clients(connections: int) -> AsyncIterator[None]:
    """Within the block (and the tasks it starts), every day played shares one HTTP session per server and
    settings, keeping up to ``connections`` connections open: a session and a connection per day cost more
    harness CPU than the day's own work when hundreds are in flight. The sessions close when the block ends."""
    sessions: dict[tuple[Any, ...], Session] = {}
    tokens = _SHARED.set(sessions), _POOL_SIZE.set(connections)
    try:
        yield
    finally:
        _SHARED.reset(tokens[0])
        _POOL_SIZE.reset(tokens[1])
        for session in sessions.values():
            await session.close()


@contextlib.asynccontextmanager
async def _client(settings: RunSettings) -> AsyncIterator[Session]:
    """The block's shared session for these settings (see :func:`shared_clients`), else one for this day.
    Plain aiohttp: the OpenAI SDK's typed requests and answers cost about 1 ms of CPU a request over it,
    which with hundreds of days in flight was most of the harness's time. The server is reached directly:
    proxy settings in the environment are not read (aiohttp would read them, and ~/.netrc, on every request)."""
    shared = _SHARED.get()
    key = (settings.base_url, settings.api_key, settings.request_timeout)
    if shared is not None and key in shared:
        yield shared[key]
        return
    tls = _tls() if str(settings.base_url).lower().startswith("https:") else True  # http: no context to build
    auth = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max(_POOL_SIZE.get(), 100), ssl=tls),
        headers={**auth, **JSON},  # every request posts JSON: the session's headers, not merged per request
        timeout=aiohttp.ClientTimeout(total=settings.request_timeout),
    )
    if shared is not None:
        shared[key] = session
        yield session
        return
    async with session:
        yield session


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context every day's client of an https server shares: building one loads the CA store (~0.2 s,
    more than the harness's own work for a day), so a plain http server's never builds it. The system store;
    OpenSSL honours SSL_CERT_FILE and SSL_CERT_DIR."""
    return ssl.create_default_context()


def probe(base_url: str, api_key: str, timeout: float) -> None:
    """A TradeError in one line (what failed, how to start a server) unless a server answers at ``base_url``.
    Like the days' requests it reaches the server directly, whatever proxy the environment names."""
    url = base_url.rstrip("/")
    try:
        parts = urllib.parse.urlsplit(url)
        web = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:  # a bracket left open
        web = False
    if not web:
        raise TradeError(f"--base-url {base_url!r} is not an http(s) URL", hint=SERVE_HINT)
    request = urllib.request.Request(f"{url}/models", headers={"Authorization": f"Bearer {api_key}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=_tls()))
    try:
        with opener.open(request, timeout=timeout) as reply:
            reply.read()
    except urllib.error.HTTPError as error:
        if error.code >= 500:  # a server answers (transformers serve fails its model list for a local folder)
            return
        root = " (is --base-url the API root, ending in /v1?)" if error.code == 404 else ""
        problem = f"the server at {url} answered GET /models with HTTP {error.code}{root}"
        raise TradeError(problem, hint=SERVE_HINT) from None
    except (OSError, ValueError, http.client.HTTPException) as error:  # refused, timed out, not HTTP, a bad port
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise TradeError(f"no server answers at {url} ({error_line(Exception(reason))})", hint=SERVE_HINT) from None


def openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The conversation as OpenAI message dicts. An assistant's reasoning goes back as the leading
    ``<think>`` block of its content, where the Qwen3 chat template also reads it; not every server passes a
    ``reasoning_content`` field on to the template (vLLM reads ``reasoning`` or ``reasoning_content``,
    depending on its version)."""
    converted = []
    for message in messages:
        entry = message.model_dump(exclude_none=True, exclude={"reasoning_content"})
        if message.reasoning_content is not None:
            entry["content"] = f"<think>\n{message.reasoning_content}\n</think>\n\n{message.content}"
        converted.append(entry)
    return converted


def chat_request(day: TradingDay, settings: RunSettings, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat-completion arguments of the day's next reply. The seed is derived from the run's seed, the
    task and the reply, so every request (a resumed run's too) samples the same way whatever else is in flight,
    and two tasks of one day (``trade data tasks --per-day``) are sampled apart."""
    return {
        "model": settings.model,
        "messages": openai_messages(day.messages),
        "tools": tools,
        **_sampling(day, settings),
    }


def _sampling(day: TradingDay, settings: RunSettings) -> dict[str, Any]:
    """The request's keys after ``tools``, in their order."""
    sampling: dict[str, Any] = {
        "tool_choice": "auto",
        "temperature": settings.temperature,
        "seed": zlib.crc32(f"{settings.seed}/{day.episode.task.task_id}/{day.replies}".encode()),
    }
    if settings.top_p is not None:
        sampling["top_p"] = settings.top_p
    if settings.max_tokens is not None:
        sampling["max_tokens"] = settings.max_tokens
    return sampling


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=64)
def _utf8(text: str) -> bytes:
    """``text`` encoded, once for each of the few texts every day sends alike (the tool schemas)."""
    return text.encode()


class EncodedRequest:
    """A day's chat-completion requests as the JSON bytes sent, byte for byte ``json.dumps(chat_request(day,
    settings, day.episode.tool_schemas()), ensure_ascii=False).encode()``, with what does not change between a
    day's requests encoded once: each message when it first goes out (a later request repeats the
    conversation so far), the tool schemas once a process for every day that offers the same tools
    (:meth:`~trade_tools.episode.Episode.tool_schemas_json`). Messages are never changed once the day holds
    them, only appended."""

    def __init__(self, day: TradingDay, settings: RunSettings) -> None:
        self.day, self.settings = day, settings
        self.head = f'{{"model": {_dumps(settings.model)}, "messages": ['.encode()
        self.tools = _utf8(day.episode.tool_schemas_json())
        self.messages: list[bytes] = []

    def next(self) -> bytes:
        """The request of the day's next reply."""
        day, sent = self.day, len(self.messages)
        if sent < len(day.messages):
            self.messages += [_dumps(m).encode() for m in openai_messages(day.messages[sent:])]
        sampling = _dumps(_sampling(day, self.settings)).encode()  # b'{"tool_choice": ...}': keys after tools
        return b"".join((self.head, b", ".join(self.messages), b'], "tools": ', self.tools, b", ", sampling[1:]))


def _backoff(settings: RunSettings) -> float:
    value = settings.options.get("backoff", BACKOFF)
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 <= seconds <= BACKOFF_CAP:
        raise TradeError(f"backoff {value!r} is not a number of seconds", hint=f"e.g. --set backoff={BACKOFF:g}")
    return seconds


async def _complete(
    session: Session,
    day: TradingDay,
    data: bytes,
    settings: RunSettings,
    usage: DayUsage,
    backoff: float,
) -> dict[str, Any] | None:
    """The server's answer to the request ``data`` (JSON: :class:`EncodedRequest`; the chat.completion JSON,
    with at least one choice), retried on server failures; None when the server refused a later request and
    the day ended."""
    where = {"day": str(day.episode.task.date), "turn": day.replies + 1}
    url = f"{str(settings.base_url).rstrip('/')}/chat/completions"
    jitter = None  # seeded only when a request fails: most never do
    for attempt in range(settings.retries + 1):
        usage.requests += 1
        started = time.perf_counter()
        try:
            async with session.post(url, data=data) as reply:
                status, reason, body = reply.status, reply.reason, await reply.read()
        except TimeoutError:  # aiohttp's socket timeouts are TimeoutErrors too
            problem = f"no answer within {settings.request_timeout:g} s"
        except aiohttp.ClientError as error:
            problem = f"connection failed ({error_line(error)})"
        else:
            answer = _json(body)
            if status >= 400:
                problem = f"HTTP {status} ({_server_message(answer) or reason or 'no message'})"
                if status < 500 and status not in RETRIED_STATUSES:
                    return _refused(day, problem, usage, where)
            elif _choice(answer):
                _log_reply(answer, where, attempt, time.perf_counter() - started)
                return answer
            else:
                problem = "an answer without choices"
        log.warning("llm.request_failed", **where, attempt=attempt + 1, problem=problem)
        if attempt < settings.retries:
            usage.retries += 1
            jitter = jitter or random.Random(f"{settings.seed}/{where['day']}/{where['turn']}")
            await asyncio.sleep(min(BACKOFF_CAP, backoff * 2**attempt) * jitter.uniform(0.5, 1.0))
    raise PolicyUnavailable(f"turn {where['turn']}: {problem} after {settings.retries + 1} attempts", usage)


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:  # not JSON (a proxy's error page): no choices, no message
        return None


def _server_message(answer: Any) -> str:
    """The server's own message of an error answer, on one line: OpenAI's ``{"error": {"message"}}`` or
    vLLM's ``{"message"}``; '' when it has none."""
    error = answer.get("error", answer) if isinstance(answer, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return error_line(RuntimeError(message)) if isinstance(message, str) and message else ""


def _refused(day: TradingDay, problem: str, usage: DayUsage, where: dict[str, Any]) -> None:
    """A request the server will not take: on the first turn its setup is wrong (unavailable); later the
    conversation grew past what it takes (the context length), and the day ends truncated."""
    if day.replies == 0:
        raise PolicyUnavailable(f"the server refused the day's first request: {problem}", usage)
    day.episode.end("truncated", f"服务器拒绝了第{where['turn']}轮的请求")
    usage.warnings.append(f"turn {where['turn']}: the server refused the request, {problem}; the day ends truncated")
    log.warning("llm.request_refused", **where, problem=problem)


def _choice(answer: object) -> dict[str, Any]:
    """The answer's first choice ({} when it has none)."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def _tokens(answer: dict[str, Any]) -> dict[str, Any]:
    tokens = answer.get("usage")
    return tokens if isinstance(tokens, dict) else {}


def _log_reply(answer: dict[str, Any], where: dict[str, Any], attempt: int, seconds: float) -> None:
    """A reply's ``llm.reply`` event, at debug level (``trade --log-level debug``): with hundreds of days in
    flight a line per request was hundreds of lines a second beside the progress bar, and rendering them was
    a tenth of the harness's CPU. Failed requests and odd replies log warnings."""
    tokens = _tokens(answer)
    log.debug(
        "llm.reply",
        **where,
        attempt=attempt + 1,
        latency_s=round(seconds, 3),
        prompt_tokens=tokens.get("prompt_tokens"),
        completion_tokens=tokens.get("completion_tokens"),
        finish_reason=_choice(answer).get("finish_reason"),
    )


def play_reply(day: TradingDay, answer: dict[str, Any], usage: DayUsage) -> None:
    """Count the reply's tokens and play it as the day's next turn."""
    tokens = _tokens(answer)
    usage.prompt_tokens += tokens.get("prompt_tokens") or 0
    usage.completion_tokens += tokens.get("completion_tokens") or 0
    message = _choice(answer).get("message")
    message = message if isinstance(message, dict) else {}
    turn = day.replies + 1
    calls = tool_calls(message.get("tool_calls"), usage, turn)
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    if calls:  # the text without its calls: some servers (transformers serve) leave the parsed markup in it too
        content = CALL_BLOCK.sub("", content)
    elif markup := [m for m in MARKUP if m in content or m in _reasoning(message)]:  # vLLM's qwen3 reasoning
        usage.warnings.append(  # parser reads a reply without <think> or <tool_call> as reasoning, to its end
            f"turn {turn}: the reply holds tool-call markup {markup[0]} as text and the server parsed no call: "
            "the server's tool-call parser does not match the model's format (see `trade eval serve`), "
            "or the call is malformed"
        )
        log.warning("llm.tool_markup_as_text", day=str(day.episode.task.date), turn=turn, markup=markup[0])
    elif not content and not _reasoning(message) and (written := tokens.get("completion_tokens") or 0) > 1:
        usage.warnings.append(
            f"turn {turn}: the reply is empty though the model wrote {written} tokens: the server's tool-call parser "
            "dropped a call it could not read (vLLM's qwen3_coder drops hermes JSON calls; see `trade eval serve`)"
        )
        log.warning("llm.reply_dropped", day=str(day.episode.task.date), turn=turn, completion_tokens=written)
    day.turn(_with_reasoning(content, message), calls)


def tool_calls(found: object, usage: DayUsage, turn: int) -> list[tuple[str, str]]:
    """The reply's function calls as ``(name, arguments text)``. OpenAI's shape is a list of ``{"type":
    "function", "function": {"name": str, "arguments": JSON text}}``. A call in another shape (arguments as an
    object, a bare name for the list) is a broken call, not a broken day: it is kept as a call the Episode
    refuses, so the model reads the Episode's error, the Episode counts it and the day goes on. Without a
    name it is an unknown tool named by its JSON; arguments that are not text go as a JSON string, the text
    of a value where an object's text belongs. The day's warnings say what the server sent."""
    entries = found if isinstance(found, list) else [] if found is None else [found]
    calls = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("type", "function") != "function":
            continue
        function = entry.get("function") if isinstance(entry, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(name, str) and (arguments is None or isinstance(arguments, str)):
            calls.append((name, arguments or ""))
            continue
        sent = json.dumps(entry, ensure_ascii=False)
        if isinstance(name, str):
            calls.append((name, json.dumps(json.dumps(arguments, ensure_ascii=False), ensure_ascii=False)))
        else:
            calls.append((sent, ""))
        usage.warnings.append(
            f"turn {turn}: tool call {index} is not in OpenAI's shape ({{'function': {{'name': str, 'arguments': "
            f"JSON text}}}}) but {sent[:100]}: answered as a broken call"
        )
        log.warning("llm.broken_tool_call", turn=turn, index=index, call=sent[:100])
    return calls


def _with_reasoning(content: str, message: dict[str, Any]) -> str:
    """The reply's text with its reasoning as a leading ``<think>`` block, which the TradingDay keeps apart:
    a reasoning parser returns it as a field (``reasoning_content``, or ``reasoning`` in newer vLLM); without
    one it stays in the text, where a template that opens the think block itself leaves only ``</think>``."""
    if reasoning := _reasoning(message):
        return f"<think>\n{reasoning}\n</think>\n\n{content}"
    if "</think>" in content and "<think>" not in content:
        return "<think>" + content
    return content


def _reasoning(message: dict[str, Any]) -> str:
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return reasoning if isinstance(reasoning, str) else ""
