"""``TakeAction``: buy, sell or stop, executed at the T0 close under the episode's rules (and plugins' vetoes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from trade_core.plugins import PluginFailure
from trade_tools import hookspecs
from trade_tools.execution import Refused, apply_fill, plan_order
from trade_tools.portfolio import MAX_SHARES, ActionRecord
from trade_tools.text import say, shown
from trade_tools.tool import Arguments, Tool, ToolError

if TYPE_CHECKING:
    from trade_tools.episode import Episode


class ActionArgs(Arguments):
    type: Literal["buy", "sell", "stop"] = Field(
        description="buy 买入 / sell 卖出 / stop 结束今日交易",
        json_schema_extra={"en": "buy / sell / stop: end today's trading"},
    )
    symbol: str | None = Field(
        None, description="股票代码（buy/sell 必填）", json_schema_extra={"en": "stock code (buy/sell: required)"}
    )
    amount: int | None = Field(
        None,
        description="股数，正整数（buy/sell 必填）",
        json_schema_extra={"en": "shares, a positive integer (buy/sell: required)"},
    )
    reasoning: str = Field(
        "",
        max_length=2000,
        description="决策理由（stop 时总结全天决策）",
        json_schema_extra={"en": "why (at stop: sum up the day's decisions)"},
    )

    @field_validator("amount", mode="before")
    @classmethod
    def _whole_shares(cls, value: object) -> object:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(say("股数必须是整数", "shares must be a whole number"))
        return value


class TakeAction(Tool):
    name = "TakeAction"
    description = (
        "执行交易动作：type=buy/sell 以T0收盘价（含滑点）买入或卖出 amount 股；"
        "type=stop 结束今日交易（必须调用，reasoning 写明理由），之后不再执行任何操作。"
    )
    description_en = (
        "Trade: type=buy/sell buys or sells amount shares at the T0 close (plus slippage); "
        "type=stop ends today's trading (required; give your reasons in reasoning), after which nothing executes."
    )
    languages = ("zh", "en")
    arguments = ActionArgs
    budget = 400

    def run(self, episode: Episode, args: ActionArgs) -> str:
        if args.type == "stop":
            episode.actions.append(ActionRecord(type="stop", reasoning=args.reasoning, accepted=True))
            episode.end("stopped", "TakeAction(stop)")
            return say("已结束今日交易。", "Trading ended for today. ") + _account(episode)
        record = ActionRecord(
            type=args.type, symbol=args.symbol, amount=args.amount, reasoning=args.reasoning, accepted=False
        )
        episode.actions.append(record)
        try:
            record.fill = self._fill(episode, args)
        except Refused as refusal:
            record.reason = str(refusal)
            return say(f"订单被拒绝：{refusal}。", f"Order refused: {refusal}. ") + _account(episode)
        vetoes = [
            say(f"{origin.name}检查失败", f"the check of {origin.name} failed")
            if isinstance(reason, PluginFailure)
            else str(reason)
            for origin, reason in episode.manager.notify(hookspecs.trade_veto_order, episode=episode, order=record.fill)
        ]
        if vetoes:  # as if the order had never been placed: the model reads why, as an error
            episode.actions.remove(record)
            raise ToolError(say("订单被否决：", "order vetoed: ") + say("；", "; ").join(vetoes))
        record.accepted = True
        episode.cash = apply_fill(record.fill, episode.cash, episode.positions)
        fill = record.fill
        scale = episode.price_scale(fill.symbol)
        side = say("买入" if fill.side == "buy" else "卖出", "Bought" if fill.side == "buy" else "Sold")
        shares, price, close = episode.count(fill.symbol, fill.shares), fill.price * scale, fill.close * scale
        return say(
            f"成交：{side}{fill.symbol} {shares}{episode.unit}，成交价{price:.3f}（收盘{close:.2f}），"
            f"金额{fill.gross:,.2f}元，费用{fill.fees:,.2f}元。",
            f"Filled: {side} {fill.symbol} {shares}{episode.unit} at {price:.3f} (close {close:.2f}), "
            f"amount {fill.gross:,.2f} CNY, fees {fill.fees:,.2f} CNY. ",
        ) + _account(episode)

    @staticmethod
    def _fill(episode: Episode, args: ActionArgs):  # type: ignore[no-untyped-def]
        trades = sum(1 for a in episode.actions if a.type != "stop")
        if trades > episode.rules.max_actions:
            limit = episode.rules.max_actions
            raise Refused(say(f"今日买卖次数已达上限{limit}笔", f"today's limit of {limit} buy/sell orders is reached"))
        if not args.symbol or args.amount is None:
            raise Refused(say(f"{args.type} 需要 symbol 和 amount", f"{args.type} needs symbol and amount"))
        symbol = args.symbol.strip().upper()
        if not episode.in_pool(symbol):
            raise Refused(say(f"{shown(symbol)} 不在股票池中", f"{shown(symbol)} is not in the pool"))
        amount = args.amount
        if episode.aliases and 0 < amount <= MAX_SHARES:  # units: the real shares they trade
            amount = episode.shares_for(args.type, symbol, amount)
            if amount == 0:
                raise Refused(f"{args.amount}单位不足一手（成交按真实整手折算）")
            if amount > MAX_SHARES:
                raise Refused(f"{args.amount:,}单位超过单笔数量上限")
        return plan_order(
            args.type,
            symbol,
            amount,
            view=episode.view,
            cash=episode.cash,
            positions=episode.positions,
            rules=episode.rules,
            value_before=episode.value_before,
            quantity=lambda shares: f"{episode.count(symbol, shares)}{episode.unit}",
            lots_shown=episode.aliases is None,
        )


def _account(episode: Episode) -> str:
    positions = episode.positions
    shown = episode.shown_order(sorted(positions))
    holdings = say("，", ", ").join(
        say(f"{s} {shares}{episode.unit}(可卖{sellable})", f"{s} {shares}{episode.unit} ({sellable} sellable)")
        for s in shown
        for shares, sellable in [(episode.count(s, positions[s].shares), episode.count(s, positions[s].sellable))]
    ) or say("空仓", "none")
    return say(f"现金{episode.cash:,.2f}元；持仓：{holdings}", f"Cash {episode.cash:,.2f} CNY; holdings: {holdings}")
