"""A-share execution rules at the T0 close, as one configurable model with market defaults.

Fills happen at the T0 close (raw price) plus slippage; the prompts say the same. Defaults follow
the exchanges' rules and a typical retail broker: 100-share lots (STAR: 200 minimum, then 1-share
steps), T+1 for shares bought today, board price limits (trade-data's dated table, the one the
store's limit flags read), commission with a 5 CNY minimum, stamp duty on sells only (0.1%, 0.05%
from 2023-08-28), transfer fee on both sides, and a cap on how much of the portfolio one stock may take.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from trade_data.symbols import PRICE_LIMITS, Board, PriceLimit, board_limits
from trade_tools.text import say

BOARD_NAMES = {
    Board.MAIN: ("主板", "Main board"),
    Board.CHINEXT: ("创业板(SZ300/301)", "ChiNext (SZ300/301)"),
    Board.STAR: ("科创板(SH688)", "STAR (SH688)"),
    Board.BEIJING: ("北交所(BJ)", "Beijing SE (BJ)"),
}
"""How the prompt names each board that has a price limit (Chinese, English)."""


class ExecutionRules(BaseModel):
    """Everything that decides whether an order fills and what it costs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lot_size: int = Field(100, ge=1, description="buy orders are whole lots of this many shares")
    star_min_shares: int = Field(200, ge=1, description="STAR (SH688) minimum order; above it 1-share steps")
    commission_rate: float = Field(0.00025, ge=0, description="broker commission, both sides")
    min_commission: float = Field(5.0, ge=0, description="CNY minimum commission per fill")
    stamp_duty: tuple[tuple[dt.date, float], ...] = Field(
        ((dt.date(1990, 1, 1), 0.001), (dt.date(2023, 8, 28), 0.0005)),
        description="(effective date, rate) on sells; the latest entry on or before T0 applies",
    )
    price_limits: tuple[PriceLimit, ...] = Field(
        PRICE_LIMITS,
        description="(board, effective date, fraction of the last close); the latest entry on or before T0",
    )
    transfer_fee_rate: float = Field(0.00001, ge=0, description="exchange transfer fee, both sides")
    slippage: float = Field(0.0005, ge=0, lt=0.1, description="buys pay close x (1+s), sells get close x (1-s)")
    max_position_weight: float | None = Field(
        0.4, gt=0, le=1, description="largest share of the T0 portfolio value one stock may reach by buying"
    )
    max_actions: int = Field(20, ge=1, description="buy/sell orders an episode may submit (refused ones count)")

    def stamp_duty_rate(self, day: dt.date) -> float:
        rate = 0.0
        for start, value in sorted(self.stamp_duty):
            if start <= day:
                rate = value
        return rate

    def commission(self, gross: float) -> float:
        return round(max(self.min_commission, gross * self.commission_rate), 2)

    def describe(self, day: dt.date, *, anonymized: bool = False) -> str:
        """The rules as the prompt states them (one line each, in the language spoken: :func:`~trade_tools.text.say`).
        Anonymized (Chinese only), they read the same on every day: a rate or limit that changed on a known date
        would date T0, so each lists every value it has had, and quantities read in units
        (:mod:`trade_tools.anonymize`)."""
        weight = self.max_position_weight
        cap = (
            say(
                f"- 单只股票买入后市值不得超过组合总值的{weight:.0%}\n",
                f"- A buy may not take one stock above {weight:.0%} of the portfolio value\n",
            )
            if weight is not None
            else ""
        )
        if anonymized:
            ever: dict[Board, list[float]] = {}
            for limit in sorted(self.price_limits, key=lambda entry: entry.since):
                ever.setdefault(limit.board, []).append(limit.fraction)
            limits = "，".join(
                f"{BOARD_NAMES[b][0]}±{'或±'.join(f'{f * 100:g}%' for f in dict.fromkeys(fs))}"
                for b, fs in ever.items()
            )
            stamp = "或".join(f"{rate:.2%}" for rate in dict.fromkeys(rate for _, rate in sorted(self.stamp_duty)))
            stamp += "（以T0适用者为准）"
            lots = (
                "- 本局价格与数量：每只股票的价格按各自的比例显示（T0收盘价映射为一个随机价位），数量以“单位”计，"
                "单位数×显示价格=金额（元，真实人民币）；涨跌幅、比率、排名与真实行情一致；成交量按各自比例显示\n"
                f"- 下单数量为单位数（正整数）；成交时折算为真实股数并向下取整到{self.lot_size}股整数倍"
                f"（科创板至少{self.star_min_shares}股，超出部分按1股递增），一手对应的单位数不公开，"
                "故成交单位数可能少于下单数，不足一手的订单被拒绝\n"
                "- 卖出单位数不小于可卖单位数的整数部分即全部卖出；T+1：当日买入的股票当日不能卖出\n"
            )
        else:
            in_force = board_limits(day, self.price_limits).items()
            limits = say("，", ", ").join(f"{say(*BOARD_NAMES[b])}{say('', ' ')}±{f * 100:g}%" for b, f in in_force)
            stamp = f"{self.stamp_duty_rate(day):.2%}"
            lot, star = self.lot_size, self.star_min_shares
            lots = say(
                f"- 买入须为{lot}股整数倍；科创板(SH688)至少{star}股，超出部分可按1股递增\n"
                f"- 卖出须为{lot}股整数倍，零股可一次性全部卖出；T+1：当日买入的股票当日不能卖出\n",
                f"- Buys: whole lots of {lot} shares; STAR (SH688): at least {star} shares, then 1-share steps\n"
                f"- Sells: whole lots of {lot} shares, or an odd lot all at once; T+1: shares bought today "
                "cannot be sold today\n",
            )
        slippage, commission, transfer = self.slippage, self.commission_rate, self.transfer_fee_rate
        return say(
            f"- 所有订单以T0收盘价成交（买入加{slippage:.2%}滑点，卖出减{slippage:.2%}滑点），不是开盘前\n"
            f"{lots}"
            f"- 涨跌停：{limits}；收盘涨停不能买入，收盘跌停不能卖出；停牌股票不能交易\n"
            f"- 费用：佣金{commission:.3%}（最低{self.min_commission:g}元），"
            f"卖出印花税{stamp}，过户费{transfer:.3%}\n"
            f"{cap}"
            f"- 数量必须是正整数；每个交易日最多提交{self.max_actions}笔买卖；"
            '调用 TakeAction(type="stop") 后不再执行任何操作',
            f"- Every order fills at the T0 close (buys +{slippage:.2%} slippage, sells -{slippage:.2%}), "
            "not at the open\n"
            f"{lots}"
            f"- Price limits: {limits}; no buying at a limit-up close, no selling at a limit-down close; "
            "suspended stocks cannot trade\n"
            f"- Fees: commission {commission:.3%} (min {self.min_commission:g} CNY), "
            f"stamp duty on sells {stamp}, transfer fee {transfer:.3%}\n"
            f"{cap}"
            f"- Amounts are positive integers; at most {self.max_actions} buy/sell orders a day; "
            'nothing executes after TakeAction(type="stop")',
        )
