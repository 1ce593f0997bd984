"""The normalization rules, in the order the engine applies them.

Each rule module holds one family of faults (``cases/faults.md``) and exposes a :class:`Rule`.
Rules are pure functions of a message and a context; see :mod:`proxy.rules.base`.
"""

from __future__ import annotations

from . import empty_structured, envelope, error_problem, nullable, text_mirror
from .base import Mode, ResultContext, Rewrite, Rule, RuleSettings, ToolContext
from .null_values import NULL_ARRAY_TO_EMPTY, NULL_OPTIONAL_MEMBER

#: Every rule, in application order: envelope first, then error results, then success-result
#: conformance repairs (kept only if together they make the result conform), then presentation.
RULES: tuple[Rule, ...] = (
    envelope.RULE,
    error_problem.RULE,
    nullable.RULE,
    NULL_OPTIONAL_MEMBER,
    NULL_ARRAY_TO_EMPTY,
    empty_structured.RULE,
    text_mirror.RULE,
)
RULES_BY_NAME: dict[str, Rule] = {rule.name: rule for rule in RULES}

__all__ = ["RULES", "RULES_BY_NAME", "Mode", "ResultContext", "Rewrite", "Rule", "RuleSettings", "ToolContext"]
