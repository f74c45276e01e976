"""Holdings, fills and the action log: the serialisable state of a trading day."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Position(BaseModel):
    """Shares of one stock; ``sellable`` excludes shares bought today (T+1)."""

    symbol: str
    shares: int = Field(ge=0)
    sellable: int = Field(ge=0)
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
