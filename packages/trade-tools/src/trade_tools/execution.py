"""Order checks and fills at the T0 close under :class:`~trade_tools.rules.ExecutionRules`.

Checks run in a fixed order and the first failure is the reason given back: amount, pool,
trading status (suspended, the rules' price limit), lot rules, T+1, cash or shares, position cap, the bounds
of what a portfolio can hold (:data:`~trade_tools.portfolio.MAX_SHARES`, :data:`~trade_tools.portfolio.MAX_CASH`,
so every state a day reaches reads back). No fill leaves cash below zero, not even a sale whose fees exceed its
proceeds. Nothing here mutates state: :func:`plan_order` returns a fill or a refusal reason, and the Episode
applies fills.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from trade_data.symbols import Board, board_of
from trade_tools.portfolio import MAX_CASH, MAX_SHARES, Fill, Position
from trade_tools.rules import ExecutionRules
from trade_tools.text import say, shown

if TYPE_CHECKING:
    from trade_data.store import PointInTimeView


class Refused(Exception):
    """An order that cannot execute; the message is the reason shown to the model (in the language spoken)."""


def _check_lot(side: str, symbol: str, amount: int, sellable: int, rules: ExecutionRules) -> None:
    if board_of(symbol) is Board.STAR:
        if amount < rules.star_min_shares and not (side == "sell" and amount == sellable):
            raise Refused(
                say(
                    f"科创板每笔至少{rules.star_min_shares}股（剩余不足时可一次全部卖出）",
                    f"STAR orders are at least {rules.star_min_shares} shares (a smaller rest may be sold at once)",
                )
            )
        return
    if amount % rules.lot_size and not (side == "sell" and amount == sellable):
        if side == "buy":
            raise Refused(
                say(
                    f"买入数量须为{rules.lot_size}股的整数倍，收到{amount}股",
                    f"buys must be a multiple of {rules.lot_size} shares, got {amount}",
                )
            )
        raise Refused(
            say(
                f"卖出（零股须一次全部卖出）数量须为{rules.lot_size}股的整数倍，收到{amount}股",
                f"sells must be a multiple of {rules.lot_size} shares (an odd lot all at once), got {amount}",
            )
        )


def portfolio_value(view: PointInTimeView, cash: float, positions: dict[str, Position]) -> float:
    """Cash plus holdings at their last raw close up to T0 (suspended stocks keep their last close)."""
    return cash + sum(p.shares * view.last_close(s) for s, p in positions.items() if p.shares)


def plan_order(
    side: str,
    symbol: str,
    amount: int,
    *,
    view: PointInTimeView,
    cash: float,
    positions: dict[str, Position],
    rules: ExecutionRules,
    value_before: float,
    quantity: Callable[[float], str] = "{}股".format,
    lots_shown: bool = True,
) -> Fill:
    """The fill ``side amount symbol`` would get at the close, or :class:`Refused` with the reason; a reason
    names shares as ``quantity`` writes them (an anonymized episode: in the model's units), and names what cash
    affords in whole lots only where ``lots_shown`` (anonymized, the units a lot is worth would be the real
    price: it names the shares the cash is worth, which the model can work out itself)."""
    if not 0 < amount <= MAX_SHARES:
        raise Refused(
            say(
                f"数量必须是正整数（最多{MAX_SHARES:,}股），收到{shown(amount)}",
                f"amount must be a positive integer (at most {MAX_SHARES:,} shares), got {shown(amount)}",
            )
        )
    if view.is_suspended(symbol):
        raise Refused(say(f"{symbol}今日停牌，不能交易", f"{symbol} is suspended today and cannot trade"))
    held = positions.get(symbol)
    sellable = held.sellable if held else 0
    if side == "buy" and view.at_limit_up(symbol, rules.price_limits):
        raise Refused(say(f"{symbol}收盘涨停，无法买入", f"{symbol} closed limit-up: cannot buy"))
    if side == "sell" and view.at_limit_down(symbol, rules.price_limits):
        raise Refused(say(f"{symbol}收盘跌停，无法卖出", f"{symbol} closed limit-down: cannot sell"))
    _check_lot(side, symbol, amount, sellable, rules)
    close = view.last_close(symbol)
    if side == "sell":
        if held is None or held.shares == 0:
            raise Refused(say(f"未持有{symbol}，不能卖出", f"{symbol} is not held: cannot sell"))
        if amount > sellable:
            bought_today = held.shares - held.sellable
            note = (
                say(
                    f"（其中{quantity(bought_today)}为今日买入，T+1不可卖）",
                    f" ({quantity(bought_today)} bought today: T+1, not sellable)",
                )
                if bought_today
                else ""
            )
            raise Refused(
                say(
                    f"可卖{symbol}仅{quantity(sellable)}{note}，收到{quantity(amount)}",
                    f"only {quantity(sellable)} of {symbol} sellable{note}, got {quantity(amount)}",
                )
            )
        price = close * (1 - rules.slippage)
    else:
        price = close * (1 + rules.slippage)
    gross = round(amount * price, 2)
    commission = rules.commission(gross)
    transfer = round(gross * rules.transfer_fee_rate, 2)
    stamp = round(gross * rules.stamp_duty_rate(view.date), 2) if side == "sell" else 0.0
    fill = Fill(
        side=side,  # type: ignore[arg-type]
        symbol=symbol,
        shares=amount,
        close=close,
        price=price,
        gross=gross,
        commission=commission,
        stamp_duty=stamp,
        transfer_fee=transfer,
        slippage_cost=abs(gross - amount * close),
    )
    if cash + fill.cash_change < 0:  # the sum apply_fill makes, so cash never ends below zero
        if side == "sell":
            raise Refused(
                say(
                    f"卖出所得{gross:,.2f}元不够支付费用{fill.fees:,.2f}元（佣金最低{rules.min_commission:g}元），"
                    f"现金{cash:,.2f}元也不足以补足",
                    f"proceeds {gross:,.2f} CNY do not cover fees {fill.fees:,.2f} CNY (min commission "
                    f"{rules.min_commission:g} CNY), nor does cash {cash:,.2f} CNY",
                )
            )
        affordable = cash / (price * (1 + rules.commission_rate + rules.transfer_fee_rate))
        lots = int(affordable / rules.lot_size + 1e-9)
        can = quantity(lots * rules.lot_size if lots_shown else affordable)
        need, have = -fill.cash_change, cash
        raise Refused(
            say(
                f"现金不足：需要{need:,.2f}元，可用{have:,.2f}元（约可买{can}）",
                f"not enough cash: need {need:,.2f} CNY, have {have:,.2f} CNY (about {can} affordable)",
            )
        )
    if side == "buy" and rules.max_position_weight is not None:
        after = ((held.shares if held else 0) + amount) * close
        if after > rules.max_position_weight * value_before + 1e-6:
            limit = rules.max_position_weight * value_before
            weight = rules.max_position_weight
            raise Refused(
                say(
                    f"买入后{symbol}市值{after:,.0f}元将超过组合总值{weight:.0%}上限（{limit:,.0f}元）",
                    f"after the buy {symbol} would be worth {after:,.0f} CNY, over the cap of {weight:.0%} "
                    f"of the portfolio value ({limit:,.0f} CNY)",
                )
            )
    if side == "buy" and (held.shares if held else 0) + amount > MAX_SHARES:
        raise Refused(
            say(
                f"买入后持有{symbol}将超过{MAX_SHARES:,}股的持仓上限",
                f"after the buy {symbol} would exceed the holding cap of {MAX_SHARES:,} shares",
            )
        )
    if cash + fill.cash_change > MAX_CASH:
        raise Refused(
            say(
                f"卖出后现金将超过{MAX_CASH:,.0f}元的上限",
                f"after the sell cash would exceed the cap of {MAX_CASH:,.0f} CNY",
            )
        )
    return fill


def apply_fill(fill: Fill, cash: float, positions: dict[str, Position]) -> float:
    """Update ``positions`` in place for a fill and return the new cash."""
    held = positions.get(fill.symbol) or Position(symbol=fill.symbol, shares=0, sellable=0, cost=0.0)
    if fill.side == "buy":
        total_cost = held.cost * held.shares - fill.cash_change
        shares = held.shares + fill.shares
        positions[fill.symbol] = held.model_copy(update={"shares": shares, "cost": total_cost / shares})
    else:
        shares = held.shares - fill.shares
        positions[fill.symbol] = held.model_copy(update={"shares": shares, "sellable": held.sellable - fill.shares})
        if shares == 0:
            del positions[fill.symbol]
    return cash + fill.cash_change
