"""What a run gives its policy, apart from the policy: a module of its own, light enough for ``--help`` to read the
defaults of the run commands' options from it (:mod:`trade_eval.commands.runs`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RunSettings(BaseModel):
    """What a run gives every policy (a baseline reads ``seed`` and ``options`` only)."""

    model: str = Field("", description="the served model's name (OpenAI `model`)")
    base_url: str | None = Field(None, description="the OpenAI-compatible server, e.g. http://127.0.0.1:8001/v1")
    api_key: str = "EMPTY"
    temperature: float = Field(0.7, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(None, ge=1, description="completion tokens per request")
    seed: int = 0
    request_timeout: float = Field(120.0, gt=0, description="seconds before one request is abandoned")
    retries: int = Field(3, ge=0, description="retries of a failed request, with exponential backoff")
    options: dict[str, Any] = Field(default_factory=dict, description="policy-specific settings (--set key=value)")
