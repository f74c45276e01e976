"""The built-in policies: the served LLM and the baselines every run is compared with."""

from __future__ import annotations

from trade_eval.policies.baselines import BASELINES
from trade_eval.policies.llm import LLMPolicy

BUILTIN_POLICIES = (LLMPolicy, *BASELINES)
