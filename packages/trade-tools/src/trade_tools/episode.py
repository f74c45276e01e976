"""One trading day for one agent: the state, the tools, the rules and the prompts, in one object.

The same Episode runs inside verl's agent loop, the backtest, the single-day CLI and the
distillation export, so training and evaluation cannot drift apart; they play it turn by turn through
:class:`~trade_tools.day.TradingDay`. It is a pydantic model that serialises to JSON (for verl's
``extra_fields`` and trajectory files); the market data it reads is bound separately
(:meth:`Episode.bind`), as T0's point-in-time view only, and never serialised; so is the plugin manager
whose tools, prompt sets and event hooks it uses (the process-wide one unless the caller passes its own).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any, Literal

import numpy as np
import structlog
from pydantic import BaseModel, Field, PrivateAttr, ValidationError
from pydantic_core import ErrorDetails

from trade_core.errors import PluginError, TradeError
from trade_core.plugins import TradePluginManager, get_manager
from trade_data.store import Bars, MarketStore, PointInTimeView
from trade_data.symbols import Board, board_of
from trade_tools import hookspecs
from trade_tools.anonymize import Aliases, hide_schemas, noise, perturb
from trade_tools.execution import portfolio_value
from trade_tools.limits import MAX_TURNS
from trade_tools.portfolio import ActionRecord, Cash, Position
from trade_tools.records import NOISE_LIMIT, Task
from trade_tools.rules import ExecutionRules
from trade_tools.text import Language, day, say, shown, speaking
from trade_tools.tool import EXAMPLE_SYMBOL, TOOLS, Tool, ToolError

log = structlog.get_logger("trade.episode")

DEFAULT_TOOLS = ("get_price_data", "get_macro_indicators", "compute_alpha_factor", "TakeAction")
TOOL_TEXT_LIMIT = 4096
"""Characters of one tool text a trainer must let through (verl's ``max_tool_response_length``): room for
every tool's own budget."""
POOL_SHOWN = 8
"""Pool symbols a wrong-symbol error lists (with the pool's size), however large the pool."""
Status = Literal["open", "stopped", "truncated", "failed"]
STATUS_TEXT: dict[str, tuple[str, str]] = {
    "stopped": ("已停止", "stopped"),
    "truncated": ("已截断", "truncated"),
    "failed": ("已失败", "failed"),
}
"""How a closed status reads in the model's language (Chinese, English)."""


class EpisodeSettings(BaseModel):
    """How an episode is run (not what the market does: that is :class:`ExecutionRules`)."""

    tools: tuple[str, ...] = DEFAULT_TOOLS
    max_turns: int = Field(MAX_TURNS, ge=1, description="assistant turns before the episode is truncated")
    char_budgets: dict[str, int] = Field(default_factory=dict, description="per-tool text limit overrides")
    prompt_set: str = "default"
    inject_tool_descriptions: bool = True
    anonymize_noise: float = Field(
        0.0,
        ge=0,
        le=NOISE_LIMIT,
        description="anonymized episodes: sd of the per-day perturbation of the bars the model reads (0: none)",
    )


def task_settings(task: Task, settings: EpisodeSettings, manager: TradePluginManager) -> EpisodeSettings:
    """``settings`` with the tools and prompt set that ``task`` names (unknown names: a TradeError)."""
    update: dict[str, Any] = {}
    if task.tools is not None:
        known = TOOLS.all(manager)
        unknown = [name for name in task.tools if name not in known]
        if unknown or not task.tools:
            what = f"unknown tools {', '.join(unknown)}" if unknown else "no tool"
            raise TradeError(f"task {task.task_id} names {what}", hint=f"known: {', '.join(known)}")
        update["tools"] = tuple(task.tools)
    if task.prompt_set is not None:
        from trade_tools.prompts import PROMPT_SETS

        PROMPT_SETS.get(task.prompt_set, manager)  # an unknown set fails here, naming the known ones
        update["prompt_set"] = task.prompt_set
    if task.anonymize_noise is not None:
        update["anonymize_noise"] = task.anonymize_noise
    return settings.model_copy(update=update) if update else settings


class Episode(BaseModel):
    """State of one trading day; :meth:`call` is the only way tools change it."""

    version: Literal[1] = 1
    task: Task
    rules: ExecutionRules = Field(default_factory=ExecutionRules)
    settings: EpisodeSettings = Field(default_factory=EpisodeSettings)
    cash: Cash
    positions: dict[str, Position]
    value_before: float = Field(description="portfolio value at the T0 close before any trade")
    actions: list[ActionRecord] = Field(default_factory=list)
    tool_calls: int = 0
    tool_errors: int = 0
    internal_errors: int = 0
    turns: int = 0
    status: Status = "open"
    status_reason: str = ""
    aliases: Aliases | None = Field(
        None,
        description="set when the task is anonymized: what the model saw as what",
        exclude_if=lambda aliases: aliases is None,  # a plain episode serialises as it did before anonymized ones
    )
    _view: PointInTimeView | None = PrivateAttr(None)
    _manager: TradePluginManager | None = PrivateAttr(None)
    _calendar: np.ndarray | None = PrivateAttr(None)
    _calling: bool = PrivateAttr(False)
    """Inside :meth:`call`: an end there is announced after the call's own event."""
    _memo: dict[tuple[str, str], Any] = PrivateAttr(default_factory=dict)
    """What the perturbed view (``anonymize_noise``) computes once per symbol: its noise and its indicators."""

    @classmethod
    def start(
        cls,
        task: Task,
        store: MarketStore,
        *,
        rules: ExecutionRules | None = None,
        settings: EpisodeSettings | None = None,
        manager: TradePluginManager | None = None,
    ) -> Episode:
        """Open the episode for ``task`` on ``store``; a task the data cannot support is a TradeError. The task's
        own tools and prompt set, where it names them, replace those of ``settings``: every trainer, evaluation
        and replay of the task then offers the model the same day. ``manager``: see :meth:`bind`."""
        view = store.asof(task.date)
        manager = manager or get_manager()
        settings = task_settings(task, settings or EpisodeSettings(), manager)
        _check_language(task, settings, manager)
        for symbol in [*task.pool, *task.holdings]:
            if not view.knows(symbol) or board_of(symbol) is Board.INDEX:
                raise TradeError(f"task {task.task_id}: {symbol} is not a stock listed by {task.date}")
        aliases = Aliases.draw(task.task_id, [*task.pool, *task.holdings], view) if task.anonymized else None
        positions = {}
        for symbol, shares in task.holdings.items():
            if shares <= 0:
                raise TradeError(f"task {task.task_id}: holding {symbol} has {shares} shares", hint="use > 0")
            cost = task.cost_basis.get(symbol) or view.previous_close(symbol) or view.last_close(symbol)
            positions[symbol] = Position(symbol=symbol, shares=shares, sellable=shares, cost=cost)
        episode = cls(
            task=task,
            rules=rules or ExecutionRules(),
            settings=settings,
            cash=task.cash,
            positions=positions,
            value_before=portfolio_value(view, task.cash, positions),
            aliases=aliases,
        )
        return episode._attach(store, view, manager)

    def bind(self, store: MarketStore, manager: TradePluginManager | None = None) -> Episode:
        """Attach market data (after loading an Episode from JSON): T0's view only, never the store, so no
        tool can read a bar after T0; what needs later days (the ground truth) is computed outside. ``manager``
        supplies the tools, prompt sets and event hooks (:attr:`manager`)."""
        return self._attach(store, store.asof(self.task.date), manager)

    def _attach(self, store: MarketStore, view: PointInTimeView, manager: TradePluginManager | None) -> Episode:
        """:meth:`bind` with T0's view already at hand (:meth:`start` has it)."""
        self._manager = manager or self._manager
        self._view = view
        self._calendar = store.dates[: view.index + 1]
        self._memo = {}
        return self

    # The tools read these on every call: they read the private attributes' dict itself, where ``self._view``
    # goes through pydantic's ``__getattr__`` (a miss, then a lookup: about 1.5 us each, tens a call).

    @property
    def manager(self) -> TradePluginManager:
        """The manager the episode was started or bound with; else (one read from a file) the process-wide one."""
        return self.__pydantic_private__["_manager"] or get_manager()  # type: ignore[index]

    @property
    def view(self) -> PointInTimeView:
        view = self.__pydantic_private__["_view"]  # type: ignore[index]
        if view is None:
            raise TradeError("episode has no market data bound", hint="call episode.bind(store)")
        return view

    # -- tools -------------------------------------------------------------------------------

    @property
    def language(self) -> Language:
        """The language of every text the model reads in this episode: its prompt set's (:mod:`trade_tools.text`)."""
        from trade_tools.prompts import PROMPT_SETS

        return PROMPT_SETS.get(self.settings.prompt_set, self.manager).language

    def tool_schemas(self) -> list[dict[str, Any]]:
        tools, language = TOOLS.all(self.manager), self.language
        schemas = [tools[name].schema(language) for name in self.settings.tools if name in tools]
        return hide_schemas(schemas) if self.aliases else schemas

    def tool_schemas_json(self) -> str:
        """:meth:`tool_schemas` as JSON text (``json.dumps(..., ensure_ascii=False)``), one text a process for
        every episode that offers the same tools, plain or anonymized: a served model's every request sends it."""
        tools, language = TOOLS.all(self.manager), self.language
        return _schemas_text(
            tuple(tools[name].schema_text(language) for name in self.settings.tools if name in tools),
            bool(self.aliases),
        )

    @property
    def example_symbol(self) -> str:
        """The code texts show as an example: a pool member when anonymized (its alias is what the model reads)."""
        return self.task.pool[0] if self.aliases else EXAMPLE_SYMBOL

    def hide(self, text: str) -> str:
        """``text`` as the model may read it: unchanged, or anonymized (:meth:`Aliases.hide`)."""
        return self.aliases.hide(text, self._calendar) if self.aliases else text  # type: ignore[arg-type]

    def price_scale(self, symbol: str) -> float:
        """Shown price / real price of ``symbol``: 1, or its per-episode scale when anonymized."""
        return self.aliases.price(symbol) if self.aliases else 1.0

    def noise(self, symbol: str) -> np.ndarray | None:
        """[calendar day, field] multipliers of the symbol's bars as the model reads them (:func:`~trade_tools.
        anonymize.noise`), or None (no ``anonymize_noise``). Its last close is not perturbed: orders trade there,
        so units x shown price stays the CNY moved."""
        sd = self.settings.anonymize_noise if self.aliases else 0.0
        if not sd:
            return None
        if ("noise", symbol) not in self._memo:
            multipliers = noise(self.task.task_id, symbol, sd, len(self._calendar))  # type: ignore[arg-type]
            if (last := self.view.last_traded_index(symbol)) is not None:
                multipliers[last, 3] = 1.0
            self._memo["noise", symbol] = multipliers
        return self._memo["noise", symbol]

    def bars(self, symbol: str, n: int) -> Bars:
        """The symbol's last ``n`` adjusted bars as the model reads them: the view's, perturbed (:meth:`noise`)."""
        bars = self.view.window(symbol, n)
        multipliers = self.noise(symbol)
        if multipliers is None:
            return bars
        fields = {name: getattr(bars, name) for name in ("open", "high", "low", "close", "volume")}
        rows = np.searchsorted(self._calendar, bars.dates)  # type: ignore[arg-type]
        return dataclasses.replace(bars, **perturb(fields, multipliers[rows]))

    def indicators(self, symbol: str) -> dict[str, float]:
        """Every indicator at T0 as the model reads it: the stored row, or computed from the perturbed bars."""
        from trade_tools.indicators import latest, latest_of

        if self.noise(symbol) is None:
            return latest(self.view, symbol)
        if ("indicators", symbol) not in self._memo:
            self._memo["indicators", symbol] = latest_of(self.bars(symbol, self.view.index + 1))
        return self._memo["indicators", symbol]

    def shown_columns(self, symbols: list[str], columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Qlib's field columns ([day, symbol], ending at T0) as an anonymized model reads them: perturbed
        (:meth:`noise`), then on the shown scales (prices per unit, volumes per stock's scale)."""
        view, days = self.view, len(columns["close"])
        noises = [self.noise(s) for s in symbols]
        if all(n is not None for n in noises):
            columns = perturb(columns, np.stack([n[-days:] for n in noises], axis=1))  # type: ignore[index]
        prices = np.array([self.price_scale(s) / view.factor(s) for s in symbols])  # adjusted -> shown
        volumes = np.array([self.volume_scale(s) * view.factor(s) for s in symbols])  # Qlib's shares / factor
        scaled = {name: columns[name] * prices for name in ("open", "high", "low", "close")}
        return columns | scaled | {"volume": columns["volume"] * volumes}

    def volume_scale(self, symbol: str) -> float:
        """Shown volume / real volume of ``symbol`` (a stock or an index): 1 unless anonymized."""
        return self.aliases.volumes.get(symbol, 1.0) if self.aliases else 1.0

    @property
    def unit(self) -> str:
        """What a quantity counts: shares, or units of each stock's scale when anonymized (units x price = CNY)."""
        return "单位" if self.aliases else say("股", " shares")

    def count(self, symbol: str, shares: float) -> str:
        """``shares`` of ``symbol`` as the model reads them, in :attr:`unit`: ``1200``, or ``37.50`` units."""
        return f"{shares / self.price_scale(symbol):,.2f}" if self.aliases else str(shares)

    def units_for(self, symbol: str, shares: int) -> int:
        """The ``amount`` to type so an order trades ``shares`` real shares, for code that sizes orders in shares
        (baselines, demonstrations): ``shares``, or the fewest units worth them when anonymized
        (:meth:`Aliases.units`; :meth:`shares_for` says whether they trade exactly ``shares``)."""
        return self.aliases.units(shares, symbol) if self.aliases else shares

    def shares_for(self, side: str, symbol: str, amount: int) -> int:
        """The real shares an order of ``amount`` trades now: ``amount``, or the whole lots its units are worth
        when anonymized (:meth:`Aliases.shares`: a sell of all its sellable units sells every sellable share)."""
        if self.aliases is None:
            return amount
        held = self.positions.get(symbol)
        sellable = held.sellable if held and side == "sell" else 0
        return self.aliases.shares(amount, symbol, sellable=sellable, rules=self.rules)

    def shown_order(self, symbols: list[str]) -> list[str]:
        """``symbols`` in the order texts list them: as given, or by alias when anonymized (the order of the real
        codes would tell the exchanges apart)."""
        return sorted(symbols, key=self.aliases.symbols.__getitem__) if self.aliases else symbols

    def reveal(self, text: str) -> str:
        """A text the model read with the real symbols and dates back (unchanged for a plain episode): for reports."""
        return self.aliases.reveal(text) if self.aliases else text

    def short_day(self, value: np.datetime64) -> str:
        """A bar's date in a compact list: MM-DD, or its relative day when anonymized (MM-DD still dates it)."""
        if self.aliases is None:
            return day(value)[5:]
        return self.aliases.day(value.astype("datetime64[D]").astype(object), self._calendar)  # type: ignore[arg-type]

    def call(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        """Run one tool call and return the text the model sees, within the tool's character budget.

        Errors are texts too, never raised, and the budget holds for them as for any answer. Plugins hear the
        call and its answer (``trade_tool_called``), then the end of the day if the call ended it.
        """
        was_open, self._calling = self.status == "open", True
        try:
            text = self._answer(name, arguments)
        finally:
            self._calling = False
        if was_open and self.status != "open":
            self.manager.notify(hookspecs.trade_episode_finished, episode=self)
        return text

    def _answer(self, name: str, arguments: str | dict[str, Any] | None) -> str:
        self.tool_calls += 1
        name = written = name if isinstance(name, str) else repr(name)  # a parser may hand over anything
        if self.aliases:
            name = self.aliases.arguments(name)
        tool = TOOLS.all(self.manager).get(name) if name in self.settings.tools else None
        with speaking(self.language):
            try:
                text = self._dispatch(name, tool, arguments)
            except ToolError as error:
                self.tool_errors += 1
                text = say("错误：", "Error: ") + error.one_line()
            except PluginError:  # strict mode: a broken plugin ends the run, not the model's turn
                raise
            except (Exception, SystemExit) as error:  # a bug (sys.exit too) must not kill a rollout: counted, logged
                self.internal_errors += 1
                self.tool_errors += 1
                log.exception("tool.internal_error", tool=shown(name), task=self.task.task_id)
                text = say(
                    f"错误：工具内部错误（{type(error).__name__}），请换一种调用",
                    f"Error: internal tool error ({type(error).__name__}); try another call",
                )
            marker = say("\n…（已截断）", "\n… (truncated)")
        text = self.hide(text)
        budget = self.settings.char_budgets.get(name) or (tool.budget if tool else Tool.budget)
        text = text if len(text) <= budget else text[: budget - len(marker)] + marker
        self.manager.notify(hookspecs.trade_tool_called, episode=self, name=written, arguments=arguments, answer=text)
        return text

    def _dispatch(self, name: str, tool: Tool | None, arguments: str | dict[str, Any] | None) -> str:
        if self.status != "open":
            zh, en = STATUS_TEXT[self.status]
            raise ToolError(
                say(f"本交易日已结束（{zh}），不能再调用工具", f"the trading day is over ({en}); no more tool calls")
            )
        if tool is None:
            tools = ", ".join(self.settings.tools)
            raise ToolError(
                say(f"未知工具 {shown(name)!r}，可用工具：{tools}", f"unknown tool {shown(name)!r}; tools: {tools}")
            )
        if arguments is None or arguments == "":
            arguments = {}
        if isinstance(arguments, str):
            arguments = _parse_json(arguments)
        if not isinstance(arguments, dict):
            example = f'{{"symbol": "{self.example_symbol}"}}'
            raise ToolError(
                say(f"参数必须是JSON对象，例如 {example}", f"arguments must be a JSON object, e.g. {example}")
            )
        if self.aliases:
            arguments = self.aliases.arguments(arguments)
        try:
            args = tool.arguments.model_validate(arguments)
        except ValidationError as error:
            raise ToolError(say("；", "; ").join(map(_problem, error.errors(include_url=False)[:3]))) from None
        return tool.run(self, args)

    def in_pool(self, symbol: str) -> bool:
        """Whether tools may read or trade ``symbol`` (upper-case): it is in the pool, or held."""
        return symbol in self.task.pool or symbol in self.positions

    def check_symbol(self, symbol: str) -> str:
        """The symbol, upper-cased, if it is in the pool (or held); a ToolError otherwise."""
        symbol = symbol.strip().upper()
        if self.in_pool(symbol):
            return symbol
        pool = self.shown_order(self.task.pool)
        listed = ", ".join(pool[:POOL_SHOWN]) + (say(" 等", ", ...") if len(pool) > POOL_SHOWN else "")
        raise ToolError(
            say(
                f"{shown(symbol)} 不在股票池中；股票池共{len(pool)}只：{listed}",
                f"{shown(symbol)} is not in the pool; the pool's {len(pool)} stocks: {listed}",
            )
        )

    # -- the end -------------------------------------------------------------------------------

    def end(self, status: Status, reason: str) -> None:
        """Close an open episode: stopped by TakeAction, or ended by :class:`~trade_tools.day.TradingDay` or a
        policy; plugins hear it once (``trade_episode_finished``; after the call's event when a call ended it)."""
        if self.status == "open":
            self.status, self.status_reason = status, reason
            if not self._calling:
                self.manager.notify(hookspecs.trade_episode_finished, episode=self)

    # -- results -----------------------------------------------------------------------------

    def value(self) -> float:
        """Portfolio value at the T0 close now (cash + shares at their last close)."""
        return portfolio_value(self.view, self.cash, self.positions)

    def costs_paid(self) -> float:
        """Commission, stamp duty, transfer fees and slippage of every fill."""
        return sum(a.fill.costs for a in self.actions if a.fill is not None)

    def final_holdings(self) -> dict[str, int]:
        return {s: p.shares for s, p in sorted(self.positions.items()) if p.shares}

    def messages(self) -> list[dict[str, str]]:
        """The opening system and user messages, rendered by the episode's prompt set."""
        from trade_tools.prompts import PROMPT_SETS

        prompts = PROMPT_SETS.get(self.settings.prompt_set, self.manager)
        with speaking(prompts.language):
            return [
                {"role": "system", "content": self.hide(prompts.system(self))},
                {"role": "user", "content": self.hide(prompts.user(self))},
            ]


def _check_language(task: Task, settings: EpisodeSettings, manager: TradePluginManager) -> None:
    """Refuse an episode whose tools or anonymization cannot speak its prompt set's language."""
    from trade_tools.prompts import PROMPT_SETS

    language = PROMPT_SETS.get(settings.prompt_set, manager).language
    if language == "zh":
        return
    tools = TOOLS.all(manager)
    mute = [name for name in settings.tools if name in tools and language not in tools[name].languages]
    if mute:
        raise TradeError(
            f"task {task.task_id}: prompt set {settings.prompt_set} is in {language}, "
            f"but tools {', '.join(mute)} have no {language} texts",
            hint=f"drop them from the tools, or use a {language} prompt set only with tools whose languages name it",
        )
    if task.anonymized:
        raise TradeError(
            f"task {task.task_id}: prompt set {settings.prompt_set} is in {language}; anonymized days are Chinese only",
            hint="use a Chinese prompt set for anonymized tasks",
        )


@functools.lru_cache(maxsize=256)
def _schemas_text(schemas: tuple[str, ...], hidden: bool) -> str:
    """The JSON list of the tools' schema texts (:attr:`Tool._schema`), as anonymized episodes show it if
    ``hidden``: ``json.dumps`` separates a list's items with ", " as it does here."""
    text = f"[{', '.join(schemas)}]"
    return json.dumps(hide_schemas(json.loads(text)), ensure_ascii=False) if hidden else text


_JSON_PROBLEMS = {
    "Expecting value": ("此处缺少一个值", "a value is missing here"),
    "Expecting property name enclosed in double quotes": ("键名须用双引号括起", "keys must be in double quotes"),
    "Expecting ',' delimiter": ("缺少逗号", "a comma is missing"),
    "Expecting ':' delimiter": ("缺少冒号", "a colon is missing"),
    "Unterminated string": ("字符串缺少结尾的引号", "a string has no closing quote"),
    "Invalid control character": ("字符串里有控制字符", "a string holds a control character"),
    "Invalid \\": ("转义写法无效", "an invalid escape"),
    "Extra data": ("JSON对象之后还有多余内容", "extra text after the JSON object"),
}
"""The json module's messages as the model reads them (Chinese, English), by their start."""
_EXPECTED = {
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), ("应为整数", "must be an integer")),
    "int_parsing_size": ("数字位数过多", "too many digits"),
    **dict.fromkeys(("float_type", "float_parsing"), ("应为数字", "must be a number")),
    "finite_number": ("应为有限的数字", "must be a finite number"),
    **dict.fromkeys(("bool_type", "bool_parsing"), ("应为 true 或 false", "must be true or false")),
    **dict.fromkeys(("string_type", "string_unicode"), ("应为字符串", "must be a string")),
    "list_type": ('应为列表，例如 ["MA5", "RSI_14"]', 'must be a list, e.g. ["MA5", "RSI_14"]'),
    **dict.fromkeys(("dict_type", "model_type"), ("应为JSON对象", "must be a JSON object")),
    "string_too_long": ("过长，最多{max_length}个字符", "too long: at most {max_length} characters"),
    "too_long": ("过长，最多{max_length}项", "too long: at most {max_length} items"),
    "literal_error": ("应为 {expected} 之一", "must be one of {expected}"),
}
"""pydantic's error types as the model reads them (Chinese, English); {...} is filled from the error's context."""


def _parse_json(text: str) -> object:
    """The JSON value of a tool call's arguments, or a ToolError (deep nesting and huge numbers too)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        texts = next((texts for start, texts in _JSON_PROBLEMS.items() if error.msg.startswith(start)), None)
        problem = say(*texts) if texts else say("格式不对", "malformed")
        raise ToolError(
            say(
                f"参数不是合法的JSON：{problem}（第{error.pos}个字符）",
                f"arguments are not valid JSON: {problem} (at character {error.pos})",
            )
        ) from None
    except ValueError:  # an integer over Python's 4,300-digit limit
        raise ToolError(
            say("参数不是可用的JSON：数字位数过多", "arguments are not usable JSON: too many digits")
        ) from None
    except RecursionError:
        raise ToolError(
            say("参数不是可用的JSON：嵌套层数过多", "arguments are not usable JSON: nested too deep")
        ) from None


def _problem(item: ErrorDetails) -> str:
    """One pydantic validation error as the model reads it: which argument, and what it should be."""
    where = shown(".".join(str(p) for p in item["loc"])) or say("参数", "arguments")
    if item["type"] == "missing":
        return say(f"缺少参数 {where}", f"missing argument {where}")
    if item["type"] == "extra_forbidden":
        if "date" not in where.lower():
            return say(f"不支持的参数 '{where}'", f"unsupported argument '{where}'")
        return say(
            f"不支持的参数 '{where}'；工具只返回T0及之前的数据，不接受日期参数",
            f"unsupported argument '{where}'; tools return data up to T0 only and take no date",
        )
    # pydantic lists a literal's values as "'a', 'b' or 'c'"
    context = {key: str(value).replace(" or ", ", ") for key, value in item.get("ctx", {}).items()}
    if item["type"] == "value_error":  # our own validators' messages, already in the model's language
        return say(f"参数 {where} 无效：", f"invalid argument {where}: ") + context["error"]
    expected = _EXPECTED.get(item["type"], ("类型或取值不对", "wrong type or value"))
    return say(f"参数 {where} 无效：", f"invalid argument {where}: ") + say(*expected).format(**context)
