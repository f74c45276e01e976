"""Holdings, fills and the action log: the serialisable state of a trading day, and the bounds on what a
portfolio can hold."""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, Field, ValidationError
from pydantic_core import PydanticCustomError

MAX_CASH = 1e12
"""The most cash a portfolio can hold, CNY: more than any fund's whole book, and cents stay exact in a float."""
MAX_SHARES = 10**12
"""The most shares of one stock a portfolio can hold (and the largest order): more than any listed company has
(ICBC: 3.6e11)."""
IMPOSSIBLE = "impossible_number"
"""The validation error type of a number outside these bounds (a reward scores it ``invalid_outcome``)."""

Number = TypeVar("Number", int, float)


def _within(limit: float, unit: str) -> AfterValidator:
    """A validator keeping a value in ``0..limit`` (NaN fails too): numbers beyond it are typos or attacks, and
    a score computed from them (cash of 1e308) would top every honest one."""

    def check(value: Number) -> Number:
        if not 0 <= value <= limit:
            shown = f"about 2^{value.bit_length()}" if isinstance(value, int) and value.bit_length() > 64 else value
            raise PydanticCustomError(IMPOSSIBLE, f"{shown} is not between 0 and {limit:,.0f} {unit}")
        return value

    return AfterValidator(check)


Cash = Annotated[float, _within(MAX_CASH, "CNY (trade_tools.portfolio.MAX_CASH)")]
Shares = Annotated[int, _within(MAX_SHARES, "shares (trade_tools.portfolio.MAX_SHARES)")]


def impossible(error: ValidationError) -> bool:
    """Whether a record was refused for a number (beyond these bounds, or not finite) rather than its shape."""
    return any(item["type"] in (IMPOSSIBLE, "finite_number") for item in error.errors())


class Position(BaseModel):
    """Shares of one stock; ``sellable`` excludes shares bought today (T+1)."""

    symbol: str
    shares: Shares
    sellable: Shares
    cost: float = Field(ge=0, description="average cost per share, CNY")


class Fill(BaseModel):
    """An executed order at the T0 close and everything it cost."""

    side: Literal["buy", "sell"]
    symbol: str
    shares: int
    close: float = Field(description="raw T0 close, CNY")
    price: float = Field(description="execution price after slippage")
    gross: float = Field(description="shares x price, CNY")
    commission: float
    stamp_duty: float
    transfer_fee: float
    slippage_cost: float = Field(description="|price - close| x shares")

    @property
    def fees(self) -> float:
        """Commission, stamp duty and transfer fee: what the broker and exchange charge."""
        return self.commission + self.stamp_duty + self.transfer_fee

    @property
    def costs(self) -> float:
        """What the fill lost against valuing the shares at the close."""
        return self.fees + self.slippage_cost

    @property
    def cash_change(self) -> float:
        return -(self.gross + self.fees) if self.side == "buy" else self.gross - self.fees


class ActionRecord(BaseModel):
    """One TakeAction call, accepted or refused, with the reason a person or model can read."""

    type: Literal["buy", "sell", "stop"]
    symbol: str | None = None
    amount: int | None = None
    reasoning: str = ""
    accepted: bool
    reason: str = Field("", description="why it was refused (empty when accepted)")
    fill: Fill | None = None
