"""The dashboard's aiohttp application: server-rendered pages (Jinja2, autoescaped: model text may hold
anything) and two small JSON endpoints the pages poll (a run's file sizes; a play's conversation so far).

Runs are addressed by ``?run=NAME`` where NAME is one the listing of ``--runs`` gave (:mod:`.folders`); any
other name is a 404, so no request reaches a path the listing did not find.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from aiohttp import web
from aiohttp.typedefs import Handler

from trade_core.errors import TradeError
from trade_eval.dashboard import views
from trade_eval.dashboard.folders import RunFolder, discover
from trade_eval.dashboard.play import Plays
from trade_eval.dashboard.state import RunState, States
from trade_eval.report.charts import nav_chart
from trade_eval.report.page import chart_lines, cny, count, num, pct, sign, state
from trade_eval.report.runs import Run, finite
from trade_records.runfolder import DAYS, EPISODES, BacktestSummary, DayRecord

ROOT, STATES, PLAYS = web.AppKey("root", Path), web.AppKey("states", States), web.AppKey("plays", Plays)
HOSTS = web.AppKey("hosts", frozenset)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Names a browser on this machine reaches a loopback or all-interfaces bind under."""

_ENV = jinja2.Environment(
    loader=jinja2.ChoiceLoader(
        [
            jinja2.PackageLoader("trade_eval.dashboard", "templates"),
            jinja2.PackageLoader("trade_eval.report", "templates"),
        ]
    ),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(cny=cny, pct=pct, num=num, count=count, sign=sign, state=state)


def page(name: str, status: int = 200, **context: Any) -> web.Response:
    return web.Response(text=_ENV.get_template(name).render(**context), content_type="text/html", status=status)


def run_of(request: web.Request, key: str = "run", *, read: bool = True) -> RunState:
    """The listed run a request names (404 for any other name); unless ``read`` is False, a page saying the run
    is still being read (and reloading) while its first read is under way."""
    name = request.query.get(key, "")
    found: RunFolder | None = discover(request.app[ROOT]).get(name)
    if found is None:
        raise web.HTTPNotFound(text=f"no run named {name!r} under --runs")
    state = request.app[STATES].get(found)
    if read and not state.ready:
        size = sum(size for size, _ in state.files_state().values()) / 2**20
        text = _ENV.get_template("reading.html.j2").render(run=state.run, size=size)
        raise web.HTTPOk(text=text, content_type="text/html", headers={"Cache-Control": "no-store"})
    return state


def number(request: web.Request, key: str, default: int | None = None) -> int:
    text = request.query.get(key)
    if text is None and default is not None:
        return default
    try:
        return int(text or "")
    except ValueError:
        raise web.HTTPBadRequest(text=f"{key} must be a whole number") from None


async def index(request: web.Request) -> web.Response:
    states = request.app[STATES]
    runs = [views.headline(states.get(run)) for run in discover(request.app[ROOT]).values()]
    return page("index.html.j2", runs=runs, root=request.app[ROOT].name, can_play=request.app[PLAYS].data is not None)


async def run_page(request: web.Request) -> web.Response:
    state = run_of(request)
    if state.run.kind == "training":
        return page(
            "training.html.j2",
            run=state.run,
            steps=views.training_rows(state),
            problems=[line.problem for line in state.metrics() if line.problem],
        )
    show = request.query.get("show", "all")
    reason, symbol = request.query.get("reason", ""), request.query.get("symbol", "")
    manifest = state.manifest()
    if state.run.kind == "backtest":
        rows = views.backtest_rows(state, finite((manifest.value or {}).get("initial_cash")))
    else:
        rows = [views.row_of(line) for line in state.records()]
    kept = views.select(rows, show, reason, symbol, state)
    start = max(0, number(request, "page", 0)) * views.PAGE
    summary = state.summary()
    problems = [p for p in (manifest.problem, summary.problem) if p] + [r["problem"] for r in rows if r["problem"]]
    if state.partial(DAYS) or state.partial(EPISODES):
        problems.append("the last line is not finished yet (a run still being written?)")
    return page(
        "run.html.j2",
        run=state.run,
        rows=kept[start : start + views.PAGE],
        total=len(rows),
        kept=len(kept),
        start=start,
        page_size=views.PAGE,
        show=show,
        reason=reason,
        symbol=symbol,
        filters=views.FILTERS,
        reasons=views.reasons(rows),
        problems=problems,
        summary=views.summary_view(state) if isinstance(summary.value, BacktestSummary) else None,
        manifest=manifest.value or {},
        others=[n for n, r in discover(request.app[ROOT]).items() if r.kind == state.run.kind and n != state.run.name],
    )


async def day_page(request: web.Request) -> web.Response:
    """A day's page; one the run has no line for is a 404 (the page still says why)."""
    state = run_of(request)
    record, problem, step, n = None, "", None, number(request, "n")
    if state.run.kind == "training":
        step = number(request, "step")
        trajectory, problem = state.trajectory(step=step, line=n)
        index = state.trajectory_index(step)
        lines = len(index) if index is not None else 0
    else:
        record, problem = views.record_of(state, n)
        trajectory, lines = None, len(state.records())
        if record is not None:
            trajectory, problem = state.trajectory(record["trajectory_id"])
    return page(
        "day.html.j2",
        status=200 if 0 <= n < lines else 404,
        run=state.run,
        n=n,
        step=step,
        record=record,
        problem=problem,
        day=views.trajectory_view(trajectory) if trajectory else None,
    )


async def step_page(request: web.Request) -> web.Response:
    state = run_of(request)
    step = number(request, "step")
    return page("step.html.j2", run=state.run, step=step, rows=views.step_rows(state, step))


async def compare_page(request: web.Request) -> web.Response:
    a, b = run_of(request, "run"), run_of(request, "other")
    return page("compare.html.j2", kind=a.run.kind, same=a.run.kind == b.run.kind, **views.side_by_side(a, b))


async def nav_png(request: web.Request) -> web.Response:
    """The backtest's NAV against the baselines and the CSI300, drawn by the report's chart code."""
    state = run_of(request)
    days = []
    for line in state.records():
        try:
            days.append(DayRecord.model_validate(line.value)) if line.value else None
        except ValueError:
            continue
    run = Run(state.run.path, manifest=state.manifest().value or {}, days=days, summary=state.summary().value)
    lines, _ = chart_lines([run])
    if not lines:
        raise web.HTTPNotFound(text="no NAV yet")
    return web.Response(body=nav_chart(lines), content_type="image/png", headers={"Cache-Control": "no-store"})


async def files_state(request: web.Request) -> web.Response:
    return web.json_response(run_of(request, read=False).files_state())


async def play_form(request: web.Request) -> web.Response:
    from trade_eval.policy import POLICIES

    return page("play.html.j2", policies=sorted(POLICIES.all()), can_play=request.app[PLAYS].data is not None, error="")


def same_site(request: web.Request) -> bool:
    """Whether a form post comes from the dashboard's own pages: a page of another site open in the same browser
    could otherwise start plays (browsers send ``Origin`` / ``Sec-Fetch-Site`` on such posts)."""
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc != request.host:
        return False
    return request.headers.get("Sec-Fetch-Site", "same-origin") in ("same-origin", "none")


async def play_start(request: web.Request) -> web.Response:
    from trade_eval.policy import POLICIES

    if not same_site(request):
        raise web.HTTPForbidden(text="plays start only from the dashboard's own page")
    form = await request.post()
    try:
        date = dt.date.fromisoformat(str(form.get("date", "")))
    except ValueError:
        return page("play.html.j2", policies=sorted(POLICIES.all()), can_play=True, error="date: YYYY-MM-DD")
    try:
        play = await request.app[PLAYS].start(
            date,
            str(form.get("policy", "hold")),
            str(form.get("base_url", "")).strip(),
            str(form.get("model", "")).strip(),
        )
    except TradeError as error:
        return page("play.html.j2", policies=sorted(POLICIES.all()), can_play=True, error=error.one_line())
    raise web.HTTPSeeOther(f"/play/watch?id={play.number}")


async def play_watch(request: web.Request) -> web.Response:
    play = request.app[PLAYS].by_number.get(number(request, "id"))
    if play is None:
        raise web.HTTPNotFound(text="no such play")
    return page("watch.html.j2", play=play)


async def play_live(request: web.Request) -> web.Response:
    play = request.app[PLAYS].by_number.get(number(request, "id"))
    if play is None:
        raise web.HTTPNotFound(text="no such play")
    return web.json_response(play.live())


def allowed_hosts(host: str, allow: Sequence[str] = ()) -> frozenset[str]:
    """The host names requests may carry: the bound address, the loopback names when it is a loopback or
    all-interfaces address, and the names ``allow`` adds (``--allow-host``)."""
    bound = host.strip("[]").lower()
    names = {bound, *(name.lower() for name in allow)}
    try:
        local = ipaddress.ip_address(bound).is_loopback or ipaddress.ip_address(bound).is_unspecified
    except ValueError:
        local = bound in ("", "localhost")
    return frozenset(names | set(LOOPBACK) if local else names)


LOOPBACK_HOSTS = allowed_hosts("127.0.0.1")


@web.middleware
async def known_host(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a Host header that is not one of the dashboard's own names. A page of another site can make its
    name resolve to this machine (DNS rebinding): its requests are then same-origin to the browser, and only
    the name they carry tells them apart."""
    header = request.headers.get("Host")
    if not header:
        raise web.HTTPBadRequest(text="a request needs a Host header")
    try:
        name = urlsplit(f"//{header}").hostname or ""
    except ValueError:
        raise web.HTTPBadRequest(text=f"bad Host header {header!r}") from None
    if name not in request.app[HOSTS]:
        known = ", ".join(sorted(request.app[HOSTS]))
        refusal = f"Host {name!r} is not this dashboard's address ({known}); to serve that name: --allow-host {name}"
        raise web.HTTPForbidden(text=refusal)
    return await handler(request)


async def stop_reading(app: web.Application) -> None:
    app[STATES].reader.shutdown(wait=False, cancel_futures=True)


def make_app(
    root: Path, data: Path | None = None, hosts: frozenset[str] = LOOPBACK_HOSTS, reader: Executor | None = None
) -> web.Application:
    """The dashboard over the run folders under ``root`` (plays need ``data``, a dataset folder), answering
    requests addressed to ``hosts`` (:func:`allowed_hosts`) only; runs are first read on ``reader``
    (:class:`States`)."""
    app = web.Application(middlewares=[known_host])
    app[HOSTS] = hosts
    app[ROOT] = Path(root).resolve()
    app[STATES] = States(app[ROOT], reader)
    app[PLAYS] = Plays(app[ROOT], data)
    app.on_cleanup.append(stop_reading)
    app.router.add_get("/", index)
    app.router.add_get("/run", run_page)
    app.router.add_get("/day", day_page)
    app.router.add_get("/step", step_page)
    app.router.add_get("/compare", compare_page)
    app.router.add_get("/nav.png", nav_png)
    app.router.add_get("/state", files_state)
    app.router.add_get("/play", play_form)
    app.router.add_post("/play", play_start)
    app.router.add_get("/play/watch", play_watch)
    app.router.add_get("/play/live", play_live)
    return app


def started(host: str, port: int) -> str:
    return f"dashboard on http://{host}:{port}/ (Ctrl-C stops it) at {time.strftime('%H:%M:%S')}"
