"""Prompt sets: how an Episode is put into words for the model.

As the tutorial lays it out: SYSTEM holds the role, the trading rules, the workflow, the market
state at T0 and (switchable) the tool descriptions again; USER holds the day's facts: T0,
holdings, cash and the stock pool. Prompt sets are plugins, so a user can swap in their own.

A prompt set has a language: every text the model reads in its episodes (prompts, tool schemas, tool texts and
errors) is in it. The renderers below write each line in both, side by side (:func:`~trade_tools.text.say`);
``compact-en`` is ``compact`` in English.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trade_core.registry import Registry
from trade_data.summary import market_summary
from trade_tools import hookspecs
from trade_tools.text import Language, say

if TYPE_CHECKING:
    from trade_tools.episode import Episode


@dataclass(frozen=True)
class PromptSet:
    """A named pair of renderers for the system and the user message, and the language of the episode."""

    name: str
    description: str
    system: Callable[[Episode], str]
    user: Callable[[Episode], str]
    language: Language = "zh"
    """What the model reads in an episode of this set is in this language; an English episode offers only tools
    that speak English (:attr:`~trade_tools.tool.Tool.languages`)."""


def _tool_lines(episode: Episode) -> str:
    lines = []
    for schema in episode.tool_schemas():
        function = schema["function"]
        params = ", ".join(
            f"{k}: {v.get('type', 'string')}" + ("" if k in function["parameters"]["required"] else "（可选）")
            for k, v in function["parameters"]["properties"].items()
        )
        lines.append(f"- {function['name']}({params})：{function['description']}")
    return "\n".join(lines)


def _turn_limit(turns: int) -> str:
    """The episode truncates itself after ``turns`` replies (a failure score): the model must know the limit."""
    return say(
        f'- 本交易日最多回复{turns}轮；第{turns}轮回复后仍未调用 TakeAction(type="stop") 的，'
        "当日被截断并记为失败（得分低于任何正常结束的结果）",
        f'- At most {turns} replies today; a day without TakeAction(type="stop") after reply {turns} is '
        "truncated and scored as a failure (below any normal finish)",
    )


def _rules(episode: Episode) -> str:
    rules = episode.rules.describe(episode.task.date, anonymized=episode.aliases is not None)
    if episode.aliases and (sd := episode.settings.anonymize_noise):
        rules += (
            f"\n- 行情扰动：显示的K线（开高低收、成交量）逐日含随机扰动（对数标准差{sd:.2%}），T0收盘价除外；"
            "指标与因子按扰动后的K线计算；成交、现金与持仓按真实价格"
        )
    return rules


ROLE = "你是一名A股量化交易分析师，负责在单个交易日T0对一个股票组合进行调仓，目标是让调仓后组合在未来三个交易日的收益超过不调仓。"  # noqa: E501
ROLE_EN = (
    "You are a China A-share quant analyst. On one trading day, T0, you rebalance a stock portfolio so that over "
    "the next three trading days it returns more than leaving it unchanged."
)


def default_system(episode: Episode) -> str:
    summary = market_summary(episode.view, index=episode.task.index, universe=episode.task.universe)
    summary = summary.to_text(coarse=episode.aliases is not None)
    parts = [
        ROLE,
        "## 交易规则\n" + _rules(episode) + "\n" + _turn_limit(episode.settings.max_turns),
        "## 工作流程\n1. 阅读账户：持仓、现金、股票池\n2. 观察市场：大盘趋势、波动、宽度、活跃度、风格\n"
        "3. 调用工具分析：价格走势、技术指标或Alpha因子（数据截至T0收盘）\n"
        "4. 用 TakeAction 买入或卖出（可多笔），每笔写明 reasoning\n"
        '5. 最后必须调用 TakeAction(type="stop")，在 reasoning 中总结决策',
        "## " + summary,
    ]
    if episode.settings.inject_tool_descriptions:
        parts.append("## 可用工具\n" + _tool_lines(episode))
    return "\n\n".join(parts)


def default_user(episode: Episode) -> str:
    """The day's facts. An anonymized day is named T0 alone (its date would read ``交易日T0：T0``). Anonymized
    days are Chinese only (:func:`~trade_tools.episode.Episode.start` refuses others)."""
    view, task = episode.view, episode.task
    rows = []
    for symbol in episode.shown_order(sorted(episode.positions)):
        position, close, scale = episode.positions[symbol], view.last_close(symbol), episode.price_scale(symbol)
        value = position.shares * close
        shares, sellable = episode.count(symbol, position.shares), episode.count(symbol, position.sellable)
        cost, shown_close, weight = position.cost * scale, close * scale, value / episode.value_before
        rows.append(
            say(
                f"- {symbol}：{shares}{episode.unit}（可卖{sellable}），成本{cost:.2f}，"
                f"T0收盘{shown_close:.2f}，市值{value:,.2f}元（{weight:.1%}）",
                f"- {symbol}: {shares}{episode.unit} ({sellable} sellable), cost {cost:.2f}, "
                f"T0 close {shown_close:.2f}, value {value:,.2f} CNY ({weight:.1%})",
            )
        )
    pool = ", ".join(episode.shown_order(task.pool))
    return "\n".join(
        [
            ("交易日：T0" if episode.aliases else say(f"交易日T0：{task.date}", f"Trading day T0: {task.date}"))
            + say("（所有订单以今日收盘价成交）", " (all orders fill at today's close)"),
            say(
                f"组合总值：{episode.value_before:,.2f}元；可用现金：{episode.cash:,.2f}元",
                f"Portfolio value: {episode.value_before:,.2f} CNY; cash: {episode.cash:,.2f} CNY",
            ),
            say("当前持仓：", "Holdings:") + ("\n" + "\n".join(rows) if rows else say("空仓", " none")),
            say(f"股票池（{len(task.pool)}只）：{pool}", f"Pool ({len(task.pool)} stocks): {pool}"),
            say(
                '请按工作流程分析并调仓，完成后调用 TakeAction(type="stop")。',
                'Analyse and rebalance per the workflow, then call TakeAction(type="stop").',
            ),
        ]
    )


DEFAULT = PromptSet(
    "default", "中文提示词：角色、规则、流程、市场状态、工具说明（教程格式）", default_system, default_user
)


def compact_system(episode: Episode) -> str:
    """Role, rules and a three-step workflow: no market state and no second copy of the tools (the chat
    template lists them), for small models and short rollouts on CPU."""
    return "\n\n".join(
        [
            (say("【合成数据】", "[Synthetic data] ") if episode.view.synthetic else "") + say(ROLE, ROLE_EN),
            say("## 交易规则\n", "## Rules\n") + _rules(episode) + "\n" + _turn_limit(episode.settings.max_turns),
            say(
                "## 工作流程\n1. 调用工具分析股票池（数据截至T0收盘）\n2. 用 TakeAction 买入或卖出\n"
                '3. 最后必须调用 TakeAction(type="stop")',
                "## Workflow\n1. Analyse the pool with the tools (data up to the T0 close)\n"
                '2. Buy or sell with TakeAction\n3. Finally, you must call TakeAction(type="stop")',
            ),
        ]
    )


COMPACT = PromptSet(
    "compact",
    "中文提示词精简版：角色、规则、三步流程（无市场状态，工具只在对话模板中列出一次）",
    compact_system,
    default_user,
)
COMPACT_EN = PromptSet(
    "compact-en",
    "compact in English: role, rules, three-step workflow (for English tokenizers; tools must speak English)",
    compact_system,
    default_user,
    language="en",
)


PROMPT_SETS = Registry(hookspecs.trade_register_prompt_sets, "prompt set", PromptSet)
"""Every prompt set by name (``EpisodeSettings.prompt_set``)."""


def tools_json(episode: Episode) -> str:
    """The tool schemas as one JSON string (ms-swift's agent format wants it that way)."""
    return json.dumps(episode.tool_schemas(), ensure_ascii=False)
