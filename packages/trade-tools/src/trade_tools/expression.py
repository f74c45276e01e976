"""A whitelist parser for the Qlib-style factor expressions a model writes.

Qlib turns expression text into objects with regex rewrites and ``eval``, so model-written
text must never reach it (see shared/docs/qlib-0.9.7.md §1). Here the text is checked character by
character, parsed with :func:`ast.parse` (which only builds a tree and runs nothing), and every
tree node is checked against a whitelist before it becomes a small :data:`Node` of our own.
Every window or shift must be a plain whole number from 1 to 250, so no accepted expression
can read a row after T0 (§2), and a work estimate keeps each call cheap (:func:`check_work`).
Refusals are in the language spoken (:func:`~trade_tools.text.say`): they go back to the model as the tool's answer.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass

from trade_tools.text import say, shown
from trade_tools.tool import ToolError

FIELDS = ("open", "high", "low", "close", "volume")
MAX_LENGTH = 300
MAX_NODES = 60
MAX_WINDOW = 250
MAX_EXPONENT = 10.0
MAX_WORK = 6_000_000
"""Work units one call may take, all its stocks together (:func:`work`). A unit is about 10 ns and 10 bytes
of numpy work on a 2-core x86-64 machine: the costliest calls admitted take up to about 60 ms and 50 MB
(``benchmarks/bench_alpha.py --cap`` measures them per operator, cold and warm, over 30 and 300 stocks)."""
EMA_TAIL_WEIGHT = 1e-6
"""EMA rows older than this share of the total weight are dropped (Qlib's own cut for EMA(x, alpha))."""

UNARY = frozenset({"Abs", "Sign", "Log", "Not"})
BINARY = frozenset(
    {"Add", "Sub", "Mul", "Div", "Power", "Greater", "Less", "And", "Or", "Gt", "Ge", "Lt", "Le", "Eq", "Ne"}
)
WINDOWED = frozenset(
    {
        "Ref",
        "Mean",
        "Sum",
        "Std",
        "Var",
        "Skew",
        "Kurt",
        "Max",
        "Min",
        "Med",
        "Mad",
        "Slope",
        "Rsquare",
        "Resi",
        "Rank",
        "Count",
        "EMA",
        "WMA",
        "Delta",
        "IdxMax",
        "IdxMin",
    }
)
PAIR_WINDOWED = frozenset({"Corr", "Cov"})
OPERATORS = UNARY | BINARY | WINDOWED | PAIR_WINDOWED | {"Quantile", "If"}
COMPARISONS = frozenset({"Gt", "Ge", "Lt", "Le", "Eq", "Ne"})
BOOLEAN = COMPARISONS | {"And", "Or", "Not"}
SHIFTS = frozenset({"Ref", "Delta"})
_MIN_WINDOW = {"Skew": 3, "Kurt": 4}  # Qlib raises for shorter ones
_COST = {
    "Count": 1,
    **dict.fromkeys(("Mean", "Sum", "Max", "Min", "Rank", "Ref"), 2),
    **dict.fromkeys(("Mad", "Med", "Quantile", "Delta"), 3),
    **dict.fromkeys(("Std", "Var", "IdxMax", "IdxMin", "WMA"), 4),
    "Resi": 5,
    **dict.fromkeys(("Slope", "EMA"), 6),
    "Rsquare": 8,
    "Cov": 10,
    **dict.fromkeys(("Skew", "Kurt", "Corr"), 17),
}
"""Work units per window cell of each windowed operator (per row for Ref, Delta and EMA): the larger of its
time and its peak memory per cell, over windows of 12 and 250, in units of 10 ns and 10 bytes."""
_ROW_COST = 2  # a field or an element-wise operator, per row
_READ_COST = 5  # the five fields read for one row

_ALLOWED = re.compile(r"[A-Za-z0-9_$.,()+\-*/<>=!&| ]*")
_BINOPS = {
    ast.Add: "Add",
    ast.Sub: "Sub",
    ast.Mult: "Mul",
    ast.Div: "Div",
    ast.Pow: "Power",
    ast.BitAnd: "And",
    ast.BitOr: "Or",
}
_CMPOPS = {ast.Gt: "Gt", ast.GtE: "Ge", ast.Lt: "Lt", ast.LtE: "Le", ast.Eq: "Eq", ast.NotEq: "Ne"}
_USAGE = {
    **dict.fromkeys(UNARY, "{}(x)"),
    **dict.fromkeys(BINARY, "{}(x, y)"),
    **dict.fromkeys(WINDOWED, "{}(x, N)"),
    **dict.fromkeys(PAIR_WINDOWED, "{}(x, y, N)"),
    "Quantile": "Quantile(x, N, q)",
    "If": "If(条件, x, y)",
}
_EXPONENT = (
    f"指数须是 -{MAX_EXPONENT:g} 到 {MAX_EXPONENT:g} 之间的数字",
    f"the exponent must be a number from -{MAX_EXPONENT:g} to {MAX_EXPONENT:g}",
)
_EXAMPLE = (
    "例如 Mean($close, 5)/$close 或 ($close-$open)/$open",
    "e.g. Mean($close, 5)/$close or ($close-$open)/$open",
)
_SYNTAX = {
    ast.Attribute: ("属性访问", "attribute access"),
    ast.BoolOp: ("请用 & 和 | 代替 'and' 'or'", "use & and | instead of 'and' 'or'"),
    ast.BinOp: ("不支持的运算符", "unsupported operator"),
    ast.IfExp: ("请用 If(条件, x, y) 代替 'if' 'else'", "use If(cond, x, y) instead of 'if' 'else'"),
    ast.Subscript: ("下标", "subscript"),
    ast.Starred: ("解包", "unpacking"),
    ast.Lambda: ("函数定义", "function definition"),
    **dict.fromkeys((ast.List, ast.Tuple, ast.Set, ast.Dict), ("容器", "container")),
    **dict.fromkeys((ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp), ("推导式", "comprehension")),
}
"""Texts as (Chinese, English) pairs: they are read when a refusal is written (:func:`~trade_tools.text.say`)."""


def _form(name: str) -> str:
    """How the operator ``name`` is called: ``Mean(x, N)``."""
    form = _USAGE[name].format(name)
    return say(form, form.replace("条件", "cond"))


def _usage(name: str) -> str:
    return say("用法：", "usage: ") + _form(name)


class ExpressionError(ToolError):
    """An expression was refused before anything ran; the message says what to change.

    A :class:`ToolError`, so a refusal anywhere on a tool's path goes back to the model as its answer.
    """


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
        raise ExpressionError(
            say(
                f"表达式过大（{size}个部分，最多{MAX_NODES}个）",
                f"expression too large ({size} parts, at most {MAX_NODES})",
            ),
            hint=say("请拆成几个较短的表达式", "split it into shorter ones"),
        )
    node = _build(tree.body)
    if not _uses_field(node):
        raise ExpressionError(
            say("表达式没有用到任何字段", "the expression uses no field"),
            hint=say("请使用 $open $high $low $close 或 $volume，", "use $open $high $low $close or $volume, ")
            + say(*_EXAMPLE),
        )
    check_work(node)
    return node


def check_work(node: Node, stocks: int = 1) -> None:
    """Refuse ``node`` over ``stocks`` stocks when its :func:`work` exceeds :data:`MAX_WORK`.

    The cap is per call, not per stock, so a large pool cannot multiply it; being an estimate rather
    than a timer, it refuses the same calls on every machine, before anything is computed.
    """
    each = work(node)
    if each * stocks > MAX_WORK:
        fewer = (
            say("请减少股票数量，或缩短、减少嵌套的窗口", "use fewer stocks, or shorter or fewer nested windows")
            if stocks > 1
            else say("请缩短或减少嵌套的窗口", "use shorter or fewer nested windows")
        )
        total = each * stocks
        raise ExpressionError(
            say(
                f"计算量过大：{stocks}只股票约需{total:,}个计算单元（每只{each:,}个），每次调用最多{MAX_WORK:,}个",
                f"too much work: {stocks} stocks need about {total:,} units ({each:,} each); "
                f"a call may take {MAX_WORK:,}",
            ),
            hint=fewer,
        )


def work(node: Node) -> int:
    """Work units of one stock's value at T0: reading ``lookback + 1`` rows, then every operator's cells."""
    return _READ_COST * (lookback(node) + 1) + _work(node, 1)


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
    """Work units of the last ``rows`` rows of ``node`` for one stock: its rows or window cells x its cost."""
    if not isinstance(node, Op):
        return _ROW_COST * rows if isinstance(node, Field) else 0
    extra = reach(node)
    if not node.params:
        own = _ROW_COST * rows
    elif node.name in SHIFTS | {"EMA"}:
        own = _COST[node.name] * (rows + extra)
    else:
        own = _COST[node.name] * rows * (extra + 1)
    return own + sum(_work(arg, rows + extra) for arg in node.args)


def _uses_field(node: Node) -> bool:
    return isinstance(node, Field) or (isinstance(node, Op) and any(map(_uses_field, node.args)))


def _mapped_source(text: str) -> str:
    """Check length and characters, then write ``$close`` as the Python name ``_close``."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(say("表达式为空", "empty expression"), hint=say(*_EXAMPLE))
    if len(text) > MAX_LENGTH:
        raise ExpressionError(
            say(
                f"表达式过长（{len(text)}个字符，最多{MAX_LENGTH}个）",
                f"expression too long ({len(text)} characters, at most {MAX_LENGTH})",
            )
        )
    if not _ALLOWED.fullmatch(text):
        bad = shown(" ".join(repr(c) for c in _bad_characters(text)))
        raise ExpressionError(
            say(f"含有不允许的字符：{bad}", f"characters not allowed: {bad}"),
            hint=say(
                "只能使用字母、数字、$ _ . , ( ) + - * / < > = ! & | 和空格，不能写字符串",
                "use only letters, digits, $ _ . , ( ) + - * / < > = ! & | and spaces; no strings",
            ),
        )
    if "$$" in text:
        raise ExpressionError(
            say("不支持 $$ 开头的财务字段", "$$ financial fields are not supported"),
            hint=say("请使用 $close 等行情字段", "use price fields such as $close"),
        )
    if re.search(r"\$(?![A-Za-z])", text):
        raise ExpressionError(
            say("$ 后面必须紧跟字段名", "$ must be followed by a field name"), hint=say("例如 $close", "e.g. $close")
        )
    if re.search(r"(?<![\w$])_", text):
        raise ExpressionError(
            say("名称不能以 _ 开头", "names cannot start with _"),
            hint=say("字段写作 $close，算子写作 Mean(...)", "write fields as $close, operators as Mean(...)"),
        )
    return text.replace("$", "_")


def _bad_characters(text: str) -> list[str]:
    return sorted({c for c in text if not _ALLOWED.fullmatch(c)})


def _syntax_tree(source: str) -> ast.Expression:
    try:
        return ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        near = say(f"（第{exc.offset}个字符附近）", f" (near character {exc.offset})") if exc.offset else ""
        raise ExpressionError(say("不是合法的表达式", "not a valid expression") + near, hint=say(*_EXAMPLE)) from None
    except (ValueError, MemoryError, RecursionError):
        raise ExpressionError(
            say("不是合法的表达式（嵌套过深）", "not a valid expression (nested too deep)"), hint=say(*_EXAMPLE)
        ) from None


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
                say("一次只能有一个比较（> >= < <= == !=）", "one comparison at a time (> >= < <= == !=)"),
                hint=say("多个比较请用 & 连接，例如 (a>b) & (c>d)", "join comparisons with &, e.g. (a>b) & (c>d)"),
            )
        return _binary(_CMPOPS[type(node.ops[0])], _build(node.left), _build(node.comparators[0]))
    if isinstance(node, ast.Call):
        return _call(node)
    why = say(*_SYNTAX.get(type(node), ("不支持的写法", "unsupported syntax")))
    raise ExpressionError(
        say(f"不允许 '{_shown(node)}'（{why}）", f"'{_shown(node)}' is not allowed ({why})"),
        hint=say("只能使用算子、数字和字段，", "use only operators, numbers and fields, ") + say(*_EXAMPLE),
    )


def _shown(node: ast.AST) -> str:
    """The source of ``node`` as the model wrote it (``_close`` back to ``$close``), shortened."""
    return shown(re.sub(r"(?<!\w)_(?=[A-Za-z])", "$", ast.unparse(node)))


def _name(identifier: str) -> Field:
    if identifier.startswith("_"):
        field = identifier[1:]
        if field in FIELDS:
            return Field(field)
        raise ExpressionError(
            say(f"未知字段 '${shown(field)}'", f"unknown field '${shown(field)}'"),
            hint=say("可用字段：", "fields: ") + "$open $high $low $close $volume",
        )
    if identifier in OPERATORS:
        raise ExpressionError(
            say(f"{identifier} 是算子，须带参数调用", f"{identifier} is an operator: call it with arguments"),
            hint=say("例如 ", "e.g. ") + _form(identifier),
        )
    raise ExpressionError(
        say(f"未知名称 '{shown(identifier)}'", f"unknown name '{shown(identifier)}'"),
        hint=say("字段前要加 $，例如 $close", "fields start with $, e.g. $close"),
    )


def _number(node: ast.Constant) -> float:
    if type(node.value) not in (int, float):
        raise ExpressionError(
            say(f"不允许 '{_shown(node)}'（只能用普通数字）", f"'{_shown(node)}' is not allowed (plain numbers only)")
        )
    try:
        value = float(node.value)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        raise ExpressionError(say(f"数字超出范围：'{_shown(node)}'", f"number out of range: '{_shown(node)}'"))
    return value


def _signed_number(node: ast.UnaryOp) -> float:
    if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -_number(node.operand)
    if isinstance(node.op, ast.Not):
        raise ExpressionError(
            say(f"不允许 '{_shown(node)}'", f"'{_shown(node)}' is not allowed"),
            hint=say("请用 Not(比较)，例如 Not($close>$open)", "use Not(comparison), e.g. Not($close>$open)"),
        )
    raise ExpressionError(
        say(
            f"不允许 '{_shown(node)}'：负号只能直接写在数字前",
            f"'{_shown(node)}' is not allowed: a minus sign goes only before a number",
        ),
        hint=say("请写成 -1*x 或 0-x", "write -1*x or 0-x"),
    )


def _binary(name: str, left: Node, right: Node) -> Node:
    if isinstance(left, Const) and isinstance(right, Const) and name in ("Add", "Sub", "Mul", "Div", "Power"):
        return Const(_fold(name, left.value, right.value))
    if not (_uses_field(left) or _uses_field(right)):
        raise ExpressionError(
            say(f"{name} 至少一边要用到字段", f"{name}: at least one side must use a field"), hint=say(*_EXAMPLE)
        )
    if name in ("And", "Or") and not (_is_boolean(left) and _is_boolean(right)):
        raise ExpressionError(
            say(f"{name}（& |）只能连接比较", f"{name} (& |) joins only comparisons"),
            hint=say("例如 ", "e.g. ") + "($close>$open) & ($volume>Ref($volume, 1))",
        )
    if name == "Power" and not (isinstance(right, Const) and abs(right.value) <= MAX_EXPONENT):
        raise ExpressionError(say(*_EXPONENT), hint=say("例如 $close**2", "e.g. $close**2"))
    return Op(name, (left, right))


def _fold(name: str, left: float, right: float) -> float:
    """Arithmetic on two numbers, the way Python would do it inside Qlib's eval (floats only)."""
    if name == "Power" and abs(right) > MAX_EXPONENT:
        raise ExpressionError(say(*_EXPONENT))
    try:
        value = {"Add": left + right, "Sub": left - right, "Mul": left * right}.get(name)
        if value is None:
            value = left / right if name == "Div" else left**right
    except ZeroDivisionError:
        raise ExpressionError(say("数字运算除以零", "division by zero")) from None
    except OverflowError:
        raise ExpressionError(say("数字运算结果溢出", "arithmetic overflow")) from None
    if not (isinstance(value, float) and math.isfinite(value)):
        raise ExpressionError(say("数字运算的结果不是有限实数", "arithmetic result is not a finite real number"))
    return value


def _is_boolean(node: Node) -> bool:
    return isinstance(node, Op) and node.name in BOOLEAN


def _call(node: ast.Call) -> Node:
    if not isinstance(node.func, ast.Name):
        raise ExpressionError(
            say(f"不能调用 '{_shown(node.func)}'", f"cannot call '{_shown(node.func)}'"),
            hint=say("只能调用 Mean(...) 这样的算子", "call only operators such as Mean(...)"),
        )
    if node.func.id not in OPERATORS:
        raise ExpressionError(
            say(f"未知算子 '{_shown(node.func)}'", f"unknown operator '{_shown(node.func)}'"),
            hint=_operator_hint(node.func),
        )
    name = node.func.id
    usage = _usage(name)
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise ExpressionError(
            say(f"{name} 只接受按位置写的参数", f"{name} takes positional arguments only"), hint=usage
        )
    args = node.args
    arity = 3 if name in PAIR_WINDOWED | {"Quantile", "If"} else 1 if name in UNARY else 2
    if len(args) != arity:
        raise ExpressionError(
            say(f"{name} 需要{arity}个参数，收到{len(args)}个", f"{name} takes {arity} arguments, got {len(args)}"),
            hint=usage,
        )
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
        return say(
            f"是否想用 {close[0]}？算子名区分大小写", f"did you mean {close[0]}? operator names are case-sensitive"
        )
    return say("可用算子：", "operators: ") + " ".join(sorted(OPERATORS))


def _unary(name: str, arg: Node) -> Op:
    if not _uses_field(arg):
        raise ExpressionError(
            say(f"{name} 的参数要用到字段", f"{name}'s argument must use a field"),
            hint=say("例如 ", "e.g. ") + f"{name}($close-$open)",
        )
    if name == "Not" and not _is_boolean(arg):
        raise ExpressionError(
            say("Not 只能作用于比较", "Not applies only to a comparison"),
            hint=say("例如 ", "e.g. ") + "Not($close>$open)",
        )
    return Op(name, (arg,))


def _series(name: str, node: ast.expr) -> Node:
    built = _build(node)
    if not _uses_field(built):
        raise ExpressionError(
            say(
                f"{name} 需要由字段算出的序列，不能是数字", f"{name} needs a series computed from fields, not a number"
            ),
            hint=_usage(name),
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
            say(
                f"{name} 的位移 '{_shown(node)}' 可能读到T0之后的数据：须是1到{MAX_WINDOW}之间的整数",
                f"{name}'s shift '{_shown(node)}' could read data after T0: "
                f"it must be an integer from 1 to {MAX_WINDOW}",
            ),
            hint=say(f"例如 {name}($close, 1) 表示前一个交易日", f"e.g. {name}($close, 1) is the previous trading day"),
        )
    raise ExpressionError(
        say(
            f"{name} 的窗口 '{_shown(node)}' 须是{lowest}到{MAX_WINDOW}之间的整数",
            f"{name}'s window '{_shown(node)}' must be an integer from {lowest} to {MAX_WINDOW}",
        ),
        hint=_usage(name).replace("N", "20"),
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
        say(
            f"Quantile 的分位数 '{_shown(node)}' 须在0和1之间", f"Quantile's q '{_shown(node)}' must be between 0 and 1"
        ),
        hint=say("例如 ", "e.g. ") + "Quantile($close, 20, 0.8)",
    )
