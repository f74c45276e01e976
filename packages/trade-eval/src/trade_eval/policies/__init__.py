"""The built-in policies: the LLM served or run in-process, and the baselines every run is compared with."""

from __future__ import annotations

from trade_eval.policies.baselines import BASELINES
from trade_eval.policies.llm import LLMPolicy
from trade_eval.policies.local import LocalPolicy

BUILTIN_POLICIES = (LLMPolicy, LocalPolicy, *BASELINES)
