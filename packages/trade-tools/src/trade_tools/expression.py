"""A whitelist parser for the Qlib-style factor expressions a model writes.

Qlib turns expression text into objects with regex rewrites and ``eval``, so model-written
text must never reach it (see shared/docs/qlib-0.9.7.md §1). Here the text is checked character by
character, parsed with :func:`ast.parse` (which only builds a tree and runs nothing), and every
tree node is checked against a whitelist before it becomes a small :data:`Node` of our own.
Every window or shift must be a plain whole number from 1 to 250, so no accepted expression
can read a row after T0 (§2), and size limits keep each evaluation cheap.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from trade_core.errors import TradeError

FIELDS = ("open", "high", "low", "close", "volume")
MAX_LENGTH = 300
MAX_NODES = 60
MAX_WINDOW = 250
MAX_EXPONENT = 10.0
MAX_WORK = 300_000
"""Window cells one symbol may need (sum of rows x window over the windowed operators)."""
EMA_TAIL_WEIGHT = 1e-6
"""EMA rows older than this share of the total weight are dropped (Qlib's own cut for EMA(x, alpha))."""

UNARY = frozenset({"Abs", "Sign", "Log", "Not"})
BINARY = frozenset(
    {"Add", "Sub", "Mul", "Div", "Power", "Greater", "Less", "And", "Or", "Gt", "Ge", "Lt", "Le", "Eq", "Ne"}
)
WINDOWED = frozenset(
    {"Ref", "Mean", "Sum", "Std", "Var", "Skew", "Kurt", "Max", "Min", "Med", "Mad", "Slope", "Rsquare", "Resi",
     "Rank", "Count", "EMA", "WMA", "Delta", "IdxMax", "IdxMin"}
)  # fmt: skip
PAIR_WINDOWED = frozenset({"Corr", "Cov"})
OPERATORS = UNARY | BINARY | WINDOWED | PAIR_WINDOWED | {"Quantile", "If"}
COMPARISONS = frozenset({"Gt", "Ge", "Lt", "Le", "Eq", "Ne"})
BOOLEAN = COMPARISONS | {"And", "Or", "Not"}
SHIFTS = frozenset({"Ref", "Delta"})
_MIN_WINDOW = {"Skew": 3, "Kurt": 4}  # Qlib raises for shorter ones

_ALLOWED = re.compile(r"[A-Za-z0-9_$.,()+\-*/<>=!&| ]*")
_BINOPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div", ast.Pow: "Power", ast.BitAnd: "And",
           ast.BitOr: "Or"}  # fmt: skip
_CMPOPS = {ast.Gt: "Gt", ast.GtE: "Ge", ast.Lt: "Lt", ast.LtE: "Le", ast.Eq: "Eq", ast.NotEq: "Ne"}
_USAGE = {
    **dict.fromkeys(UNARY, "{}(x)"),
    **dict.fromkeys(BINARY, "{}(x, y)"),
    **dict.fromkeys(WINDOWED, "{}(x, N)"),
    **dict.fromkeys(PAIR_WINDOWED, "{}(x, y, N)"),
    "Quantile": "Quantile(x, N, q)",
    "If": "If(condition, x, y)",
}
_EXAMPLE = "e.g. Mean($close, 5)/$close or ($close-$open)/$open"


class ExpressionError(TradeError):
    """An expression was refused before anything ran; the message says what to change."""


@dataclass(frozen=True, slots=True)
class Field:
    """``$name``: one of :data:`FIELDS`."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


@dataclass(frozen=True, slots=True)
class Const:
    value: float

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True)
class Op:
    """A Qlib operator applied to ``args``; ``params`` holds the window N (and Quantile's q)."""

    name: str
    args: tuple[Node, ...]
    params: tuple[float, ...] = ()

    def __str__(self) -> str:
        return f"{self.name}({', '.join([*map(str, self.args), *map(str, self.params)])})"

    @property
    def window(self) -> int:
        return int(self.params[0])


Node = Field | Const | Op


def parse_expression(text: str) -> Node:
    """Parse and check ``text``; :class:`ExpressionError` for anything outside the whitelist."""
    tree = _syntax_tree(_mapped_source(text))
    size = sum(isinstance(n, ast.expr) for n in ast.walk(tree))
    if size > MAX_NODES:
        raise ExpressionError(f"expression too large ({size} parts, at most {MAX_NODES})", hint="split it up")
    node = _build(tree.body)
    if not _uses_field(node):
        raise ExpressionError(
            "the expression uses no field", hint=f"use $open $high $low $close or $volume, {_EXAMPLE}"
        )
    work = _work(node, 1)
    if work > MAX_WORK:
        raise ExpressionError(
            f"expression too expensive: its nested windows need {work} cells per stock (at most {MAX_WORK})",
            hint="use shorter or fewer nested windows",
        )
    return node


def lookback(node: Node) -> int:
    """Trading days before T0 whose rows the value at T0 reads.

    Equals Qlib's left window extension (``get_extended_window_size()[0]``) except for Delta
    (Qlib counts N-1 but reads N) and EMA, whose value depends on the whole history: EMA counts
    :func:`ema_tail` rows, after which the older rows weigh less than ``EMA_TAIL_WEIGHT``.
    """
    if not isinstance(node, Op):
        return 0
    return max(lookback(arg) for arg in node.args) + reach(node)


def reach(op: Op) -> int:
    """Rows before each output row that ``op`` itself reads from its arguments."""
    if not op.params:
        return 0
    if op.name in SHIFTS:
        return op.window
    return ema_tail(op.window) if op.name == "EMA" else op.window - 1


def ema_tail(n: int) -> int:
    """Rows before T0 an EMA of span ``n`` keeps: older rows hold under ``EMA_TAIL_WEIGHT`` of its weight."""
    decay = 1 - 2 / (n + 1)
    return 0 if decay <= 0 else math.ceil(math.log(EMA_TAIL_WEIGHT) / math.log(decay))


def _work(node: Node, rows: int) -> int:
    """Window cells per symbol that evaluating ``rows`` trailing rows of ``node`` touches."""
    if not isinstance(node, Op):
        return 0
    extra = reach(node)
    cells = 0 if not node.params else rows + extra if node.name in SHIFTS | {"EMA"} else rows * (extra + 1)
    return cells + sum(_work(arg, rows + extra) for arg in node.args)


def _uses_field(node: Node) -> bool:
    return isinstance(node, Field) or (isinstance(node, Op) and any(map(_uses_field, node.args)))


def _mapped_source(text: str) -> str:
    """Check length and characters, then write ``$close`` as the Python name ``_close``."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError("empty expression", hint=_EXAMPLE)
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"expression too long ({len(text)} characters, at most {MAX_LENGTH})")
    if not _ALLOWED.fullmatch(text):
        shown = " ".join(repr(c) for c in _bad_characters(text))
        raise ExpressionError(
            f"character(s) not allowed: {shown}",
            hint="use only letters, digits, $ _ . , ( ) + - * / < > = ! & | and spaces; no strings",
        )
    if "$$" in text:
        raise ExpressionError("$$ (point-in-time financial) fields are not available", hint="use $close etc.")
    if re.search(r"\$(?![A-Za-z])", text):
        raise ExpressionError("$ must be followed by a field name", hint="e.g. $close")
    if re.search(r"(?<![\w$])_", text):
        raise ExpressionError("names cannot start with _", hint="fields are written $close, operators Mean(...)")
    return text.replace("$", "_")


def _bad_characters(text: str) -> list[str]:
    return sorted({c for c in text if not _ALLOWED.fullmatch(c)})


def _syntax_tree(source: str) -> ast.Expression:
    try:
        return ast.parse(source.strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or type(exc).__name__
        raise ExpressionError(f"not a valid expression ({reason})", hint=_EXAMPLE) from None


def _build(node: ast.expr) -> Node:
    """One checked :data:`Node` from one ``ast`` node; anything not handled here is refused."""
    if isinstance(node, ast.Name):
        return _name(node.id)
    if isinstance(node, ast.Constant):
        return Const(_number(node))
    if isinstance(node, ast.UnaryOp):
        return Const(_signed_number(node))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _binary(_BINOPS[type(node.op)], _build(node.left), _build(node.right))
    if isinstance(node, ast.Compare):
        if len(node.ops) != 1 or type(node.ops[0]) not in _CMPOPS:
            raise ExpressionError(
                "one comparison (> >= < <= == !=) at a time", hint="combine with &, e.g. (a>b) & (c>d)"
            )
        return _binary(_CMPOPS[type(node.ops[0])], _build(node.left), _build(node.comparators[0]))
    if isinstance(node, ast.Call):
        return _call(node)
    raise ExpressionError(
        f"'{_shown(node)}' is not allowed ({_describe(node)})", hint=f"only operators, numbers and fields, {_EXAMPLE}"
    )


def _describe(node: ast.expr) -> str:
    names = {
        ast.Attribute: "attribute access",
        ast.BoolOp: "and/or: use & and |",
        ast.BinOp: "operator not supported",
        ast.IfExp: "if/else: use If(cond, x, y)",
        ast.GeneratorExp: "comprehension",
        ast.Starred: "unpacking",
    }
    return names.get(type(node), type(node).__name__)


def _shown(node: ast.AST) -> str:
    """The source of ``node`` as the model wrote it (``_close`` back to ``$close``), shortened."""
    text = re.sub(r"(?<!\w)_(?=[A-Za-z])", "$", ast.unparse(node))
    return text if len(text) <= 40 else text[:37] + "..."


def _name(identifier: str) -> Field:
    if identifier.startswith("_"):
        field = identifier[1:]
        if field in FIELDS:
            return Field(field)
        raise ExpressionError(f"unknown field ${field}", hint="fields: $open $high $low $close $volume")
    if identifier in OPERATORS:
        raise ExpressionError(f"{identifier} must be called", hint="e.g. " + _USAGE[identifier].format(identifier))
    raise ExpressionError(f"unknown name '{identifier}'", hint="fields need a $, e.g. $close")


def _number(node: ast.Constant) -> float:
    if type(node.value) not in (int, float):
        raise ExpressionError(f"'{_shown(node)}' is not allowed (only plain numbers)")
    try:
        value = float(node.value)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ExpressionError(f"number out of range: {_shown(node)}")
    return value


def _signed_number(node: ast.UnaryOp) -> float:
    if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -_number(node.operand)
    if isinstance(node.op, ast.Not):
        raise ExpressionError(f"'{_shown(node)}' is not allowed", hint="use Not(comparison), e.g. Not($close>$open)")
    raise ExpressionError(
        f"'{_shown(node)}' is not allowed: a minus sign may only stand before a number", hint="write -1*x or 0-x"
    )


def _binary(name: str, left: Node, right: Node) -> Node:
    if isinstance(left, Const) and isinstance(right, Const) and name in ("Add", "Sub", "Mul", "Div", "Power"):
        return Const(_fold(name, left.value, right.value))
    if not (_uses_field(left) or _uses_field(right)):
        raise ExpressionError(f"{name} needs a field on at least one side", hint=_EXAMPLE)
    if name in ("And", "Or") and not (_is_boolean(left) and _is_boolean(right)):
        raise ExpressionError(
            f"{name} (& |) combines comparisons", hint="e.g. ($close>$open) & ($volume>Ref($volume, 1))"
        )
    if name == "Power" and not (isinstance(right, Const) and abs(right.value) <= MAX_EXPONENT):
        raise ExpressionError(
            f"the exponent must be a number from -{MAX_EXPONENT:g} to {MAX_EXPONENT:g}", hint="e.g. $close**2"
        )
    return Op(name, (left, right))


def _fold(name: str, left: float, right: float) -> float:
    """Arithmetic on two numbers, the way Python would do it inside Qlib's eval (floats only)."""
    if name == "Power" and abs(right) > MAX_EXPONENT:
        raise ExpressionError(f"the exponent must be a number from -{MAX_EXPONENT:g} to {MAX_EXPONENT:g}")
    try:
        value = {"Add": left + right, "Sub": left - right, "Mul": left * right}.get(name)
        if value is None:
            value = left / right if name == "Div" else left**right
    except (ZeroDivisionError, OverflowError) as exc:
        raise ExpressionError(f"arithmetic on numbers failed ({exc})") from None
    if not (isinstance(value, float) and math.isfinite(value)):
        raise ExpressionError("arithmetic on numbers gives no finite real number")
    return value


def _is_boolean(node: Node) -> bool:
    return isinstance(node, Op) and node.name in BOOLEAN


def _call(node: ast.Call) -> Node:
    if not isinstance(node.func, ast.Name):
        raise ExpressionError(f"'{_shown(node.func)}' cannot be called", hint="only operators such as Mean(...)")
    if node.func.id not in OPERATORS:
        raise ExpressionError(f"unknown operator '{_shown(node.func)}'", hint=_operator_hint(node.func))
    name = node.func.id
    usage = "use " + _USAGE[name].format(name)
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise ExpressionError(f"{name} takes positional arguments only", hint=usage)
    args = node.args
    arity = 3 if name in PAIR_WINDOWED | {"Quantile", "If"} else 1 if name in UNARY else 2
    if len(args) != arity:
        raise ExpressionError(f"{name} takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}", hint=usage)
    if name in UNARY:
        return _unary(name, _build(args[0]))
    if name in BINARY:
        return _binary(name, _build(args[0]), _build(args[1]))
    if name == "If":
        condition = _series(name, args[0])
        return Op(name, (condition, _build(args[1]), _build(args[2])))
    if name in PAIR_WINDOWED:
        return Op(name, (_series(name, args[0]), _series(name, args[1])), (_window(name, args[2]),))
    params = (_window(name, args[1]),) if name != "Quantile" else (_window(name, args[1]), _quantile(args[2]))
    return Op(name, (_series(name, args[0]),), params)


def _operator_hint(func: ast.Name) -> str:
    name = func.id
    close = [op for op in OPERATORS if op.lower() == name.lower()]
    if close:
        return f"did you mean {close[0]}? (operator names are case-sensitive)"
    return "allowed: " + " ".join(sorted(OPERATORS))


def _unary(name: str, arg: Node) -> Op:
    if not _uses_field(arg):
        raise ExpressionError(f"{name} needs a field inside", hint=f"e.g. {name}($close-$open)")
    if name == "Not" and not _is_boolean(arg):
        raise ExpressionError("Not takes a comparison", hint="e.g. Not($close>$open)")
    return Op(name, (arg,))


def _series(name: str, node: ast.expr) -> Node:
    built = _build(node)
    if not _uses_field(built):
        raise ExpressionError(
            f"{name} needs a series built from a field, not a number", hint="use " + _USAGE[name].format(name)
        )
    return built


def _window(name: str, node: ast.expr) -> int:
    """N: a plain int literal in [1, 250]; a shift that is zero, negative or computed could read after T0."""
    value = _literal(node)
    shift = name in SHIFTS
    lowest = _MIN_WINDOW.get(name, 1)
    if type(value) is int and lowest <= value <= MAX_WINDOW:
        return value
    if shift and (type(value) is not int or value <= 0):
        raise ExpressionError(
            f"{name}'s shift '{_shown(node)}' could read after T0: "
            f"it must be a plain whole number from 1 to {MAX_WINDOW}",
            hint=f"e.g. {name}($close, 1) for one trading day back",
        )
    raise ExpressionError(
        f"{name}'s window '{_shown(node)}' must be a plain whole number from {lowest} to {MAX_WINDOW}",
        hint="use " + _USAGE[name].format(name).replace("N", "20"),
    )


def _literal(node: ast.expr) -> object:
    """The number a literal (or -literal) spells; None for anything computed."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if type(value) in (int, float) else None
    return None


def _quantile(node: ast.expr) -> float:
    value = _literal(node)
    if type(value) in (int, float) and 0 < value < 1:  # type: ignore[operator]
        return float(value)  # type: ignore[arg-type]
    raise ExpressionError(
        f"Quantile's q '{_shown(node)}' must be a number between 0 and 1", hint="e.g. Quantile($close, 20, 0.8)"
    )
