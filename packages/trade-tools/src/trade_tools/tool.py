"""The tool interface and the tool registry.

A tool declares its arguments as a pydantic model: the model validates what the LLM sent (unknown
keys refused) and produces the OpenAI function schema that vLLM and verl accept.

A tool speaks Chinese; one that also speaks English (:attr:`Tool.languages`) gives its English description in
:attr:`Tool.description_en`, each argument's beside its Chinese one (``Field(description="中文",
json_schema_extra={"en": "English"})``), and writes its answers and errors with :func:`~trade_tools.text.say`.
"""

from __future__ import annotations

import functools
import json
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from trade_core.errors import TradeError
from trade_core.registry import Registry
from trade_tools import hookspecs

if TYPE_CHECKING:
    from trade_tools.episode import Episode
    from trade_tools.text import Language


EXAMPLE_SYMBOL = "SH600519"
"""The code argument descriptions show as an example; an anonymized episode shows one of its pool's aliases."""


class ToolError(TradeError):
    """A call the tool cannot answer; the message goes back to the model as the tool's text."""


class Arguments(BaseModel):
    """Base of every tool's argument model: unknown keys are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class Tool(ABC):
    """One function the agent can call; implementations keep no state between calls."""

    name: ClassVar[str]
    description: ClassVar[str]
    description_en: ClassVar[str] = ""
    languages: ClassVar[tuple[Language, ...]] = ("zh",)
    """The languages the tool's schema and texts are written in: a tool written before English existed speaks
    Chinese only, and an English episode refuses to offer it."""
    arguments: ClassVar[type[Arguments]]
    budget: ClassVar[int] = 2000
    """Default character budget of the tool's text (the Episode's settings can override it)."""

    @abstractmethod
    def run(self, episode: Episode, args: Any) -> str:
        """Answer a validated call; raise :class:`ToolError` for answers that are errors."""

    @functools.cached_property
    def _schema_texts(self) -> dict[Language, str]:
        return {}

    def schema_text(self, language: Language = "zh") -> str:
        """The schema as JSON text: decoding it is the caller's own copy at a tenth of ``copy.deepcopy``'s CPU
        (every episode asks for its tools' schemas)."""
        if language not in self._schema_texts:
            self._schema_texts[language] = json.dumps(self._build_schema(language), ensure_ascii=False)
        return self._schema_texts[language]

    def schema(self, language: Language = "zh") -> dict[str, Any]:
        """OpenAI function schema; properties keep only type, description and enum (what verl keeps)."""
        return json.loads(self.schema_text(language))

    def _build_schema(self, language: Language = "zh") -> dict[str, Any]:
        source = self.arguments.model_json_schema()
        properties = {}
        for key, spec in source.get("properties", {}).items():
            if language == "en" and "description" in spec:
                spec["description"] = spec.get("en", "")
            kept = {k: spec[k] for k in ("type", "description", "enum") if k in spec}
            if "type" not in kept and "anyOf" in spec:  # Optional[...] fields: take the non-null branch
                branch = next(s for s in spec["anyOf"] if s.get("type") != "null")
                kept.update({k: branch[k] for k in ("type", "enum") if k in branch})
            if kept.get("type") == "array":
                kept["items"] = {"type": spec.get("items", {}).get("type", "string")}
            properties[key] = kept
        parameters = {"type": "object", "properties": properties, "required": source.get("required", [])}
        description = self.description_en if language == "en" else self.description
        return {
            "type": "function",
            "function": {"name": self.name, "description": description, "parameters": parameters},
        }


TOOLS = Registry(hookspecs.trade_register_tools, "tool", Tool)
"""Every tool the agent can call, by name, in the order the plugins registered them."""
