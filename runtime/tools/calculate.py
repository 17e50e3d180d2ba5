"""calculate: mathjs's expression syntax (AgentLoop's calculate "evaluates a mathematical
expression using mathjs"), parsed and evaluated here, never by eval.

No maintained Python library reads mathjs's syntax (factorial ``!``, ``^`` for powers,
``mod``, implicit multiplication, ``[1, 2; 3, 4]`` matrices, ``and``/``or``/``not``), and
Python-syntax evaluators read ``^`` as XOR; so a small precedence-climbing parser follows
mathjs's operator table. Units, assignments, ranges and bitwise operators are not served.
A fixed set of functions and constants; anything else is refused.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import Field

from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

Number = int | float

MAX_EXPRESSION = 1000
# Bounds that keep one call from burning CPU or memory: int results above ~10^4000 digits
# and factorials above 1000! are refused rather than computed.
MAX_INT_BITS = 13_300
MAX_FACTORIAL = 1000

CONSTANTS: dict[str, Number] = {
    "pi": math.pi,
    "e": math.e,
    "tau": math.tau,
    "phi": (1 + math.sqrt(5)) / 2,
    "inf": math.inf,
    "Infinity": math.inf,
}


def _factorial(x: Number) -> int:
    if isinstance(x, float):
        if not x.is_integer():
            raise ValueError("factorial is only defined for non-negative integers")
        x = int(x)
    if x < 0:
        raise ValueError("factorial is only defined for non-negative integers")
    if x > MAX_FACTORIAL:
        raise ValueError(f"factorial argument too large (at most {MAX_FACTORIAL})")
    return math.factorial(x)


def _log(x: Number, base: Number | None = None) -> float:
    return math.log(x) if base is None else math.log(x, base)


def _round(x: Number, digits: int = 0) -> Number:
    return round(x, int(digits)) if digits else round(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "cbrt": lambda x: math.copysign(abs(x) ** (1 / 3), x),
    "exp": math.exp,
    "log": _log,
    "ln": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "atan2": math.atan2,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "abs": abs,
    "floor": math.floor,
    "ceil": math.ceil,
    "round": _round,
    "trunc": math.trunc,
    "min": min,
    "max": max,
    "pow": lambda x, y: _power(x, y),
    "hypot": math.hypot,
    "factorial": _factorial,
    "gcd": math.gcd,
    "lcm": math.lcm,
    "degrees": math.degrees,
    "radians": math.radians,
    "mod": lambda x, y: operator.mod(x, y),
}


def _power(base: Number, exp: Number) -> Number:
    big = isinstance(base, int) and isinstance(exp, int) and exp > 0 and base not in (0, 1, -1)
    if big and int(base).bit_length() * exp > MAX_INT_BITS:
        raise ValueError("result too large")
    result: Number | complex = operator.pow(base, exp)
    if isinstance(result, complex):
        raise ValueError("result is not a real number")
    return result


Value = Number | bool | list[Any]

# mathjs's binary operators, loosest first (its precedence table, units and bitwise ones aside).
BINARY: list[dict[str, Callable[[Any, Any], Any]]] = [
    {"or": lambda a, b: bool(a) or bool(b)},
    {"xor": lambda a, b: bool(a) != bool(b)},
    {"and": lambda a, b: bool(a) and bool(b)},
    {"==": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge},
    {"+": lambda a, b: _elementwise(operator.add, a, b), "-": lambda a, b: _elementwise(operator.sub, a, b)},
    {"*": lambda a, b: _multiply(a, b), "/": lambda a, b: _elementwise(operator.truediv, a, b),
     "%": lambda a, b: _elementwise(operator.mod, a, b), "mod": lambda a, b: _elementwise(operator.mod, a, b),
     ".*": lambda a, b: _elementwise(operator.mul, a, b), "./": lambda a, b: _elementwise(operator.truediv, a, b)},
]
_IMPLICIT = len(BINARY) - 1  # implicit multiplication (2pi, 3(4+5)) binds as `*` does
_WORDS = frozenset({"and", "or", "xor", "mod", "not"})
_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z_0-9]*)|"
    r"(?P<op>==|!=|<=|>=|\.\*|\./|\.\^|[-+*/%^!(),;\[\]<>']))"
)


def _elementwise(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise ValueError(f"dimension mismatch ({len(a)} != {len(b)})")
        return [_elementwise(op, x, y) for x, y in zip(a, b, strict=True)]
    if isinstance(a, list):
        return [_elementwise(op, x, b) for x in a]
    if isinstance(b, list):
        return [_elementwise(op, a, y) for y in b]
    return op(_number(a), _number(b))


def _matrix(a: Any) -> list[list[Number]]:
    rows = a if a and isinstance(a[0], list) else [a]
    if any(not isinstance(row, list) or len(row) != len(rows[0]) for row in rows):
        raise ValueError("not a rectangular matrix")
    return rows


def _multiply(a: Any, b: Any) -> Any:
    """mathjs's `*`: scalars and matrices by scalars element-wise, matrices by matrix product."""
    if not (isinstance(a, list) and isinstance(b, list)):
        return _elementwise(operator.mul, a, b)
    left, right = _matrix(a), (_matrix(b) if isinstance(b[0], list) else [[x] for x in b])
    if len(left[0]) != len(right):
        raise ValueError(f"dimension mismatch in multiplication ({len(left[0])} != {len(right)})")
    product = [[math.fsum(x * y for x, y in zip(row, col, strict=True)) for col in zip(*right, strict=True)] for row in left]
    if not isinstance(b[0], list):
        product = [[row[0]] for row in product]
        flat: list[Any] = [row[0] for row in product]
        return flat[0] if not isinstance(a[0], list) else flat
    return product[0] if not isinstance(a[0], list) else product


def _det(a: Any) -> Number:
    m = [[float(x) for x in row] for row in _matrix(a)]
    n = len(m)
    if n != len(m[0]):
        raise ValueError("det needs a square matrix")
    det = 1.0
    for i in range(n):
        pivot = max(range(i, n), key=lambda r: abs(m[r][i]))
        if m[pivot][i] == 0:
            return 0
        if pivot != i:
            m[i], m[pivot] = m[pivot], m[i]
            det = -det
        det *= m[i][i]
        for r in range(i + 1, n):
            f = m[r][i] / m[i][i]
            m[r] = [x - f * y for x, y in zip(m[r], m[i], strict=True)]
    return round(det, 10) if abs(det - round(det)) < 1e-9 else det


def _flat(args: tuple[Any, ...]) -> list[Number]:
    out: list[Number] = []
    for arg in args:
        out.extend(_flat(tuple(arg)) if isinstance(arg, list) else [_number(arg)])
    return out


def _number(value: Any) -> Number:
    if isinstance(value, list):
        raise ValueError("a matrix where a number is expected")
    return int(value) if isinstance(value, bool) else value


FUNCTIONS.update({
    "sum": lambda *a: math.fsum(_flat(a)),
    "mean": lambda *a: math.fsum(_flat(a)) / len(_flat(a)),
    "min": lambda *a: min(_flat(a)),
    "max": lambda *a: max(_flat(a)),
    "det": _det,
    "transpose": lambda a: [list(col) for col in zip(*_matrix(a), strict=True)],
    "size": lambda a: [len(_matrix(a)), len(_matrix(a)[0])] if isinstance(a[0], list) else [len(a)],
    "sign": lambda x: (x > 0) - (x < 0),
    "nthRoot": lambda x, n=2: math.copysign(abs(x) ** (1 / n), x),
    "log1p": math.log1p,
    "expm1": math.expm1,
    "sec": lambda x: 1 / math.cos(x),
    "csc": lambda x: 1 / math.sin(x),
    "cot": lambda x: 1 / math.tan(x),
    "isPrime": lambda n: n > 1 and all(n % k for k in range(2, math.isqrt(int(n)) + 1)),
    "combinations": lambda n, k: math.comb(int(n), int(k)),
    "permutations": lambda n, k=None: math.perm(int(n), None if k is None else int(k)),
    "fix": math.trunc,
    "square": lambda x: _power(x, 2),
    "cube": lambda x: _power(x, 3),
})
CONSTANTS.update({"PI": math.pi, "E": math.e, "LN2": math.log(2), "LN10": math.log(10), "SQRT2": math.sqrt(2),
                  "NaN": math.nan, "true": True, "false": False})


class _Parser:
    """mathjs's expression syntax, evaluated as it is parsed (no tree, no eval)."""

    def __init__(self, text: str) -> None:
        self.tokens: list[str] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if m is None or m.end() == pos:
                raise ValueError(f"unexpected character '{text[pos:].strip()[:1]}'")
            self.tokens.append(m.group("num") or m.group("name") or m.group("op"))
            pos = m.end()
        self.i = 0
        self.depth = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected '{expected}'" if expected else "unexpected end of expression")
        self.i += 1
        return token

    def parse(self) -> Value:
        value = self.binary(0)
        if self.peek() is not None:
            raise ValueError(f"unexpected '{self.peek()}'")
        return value

    def binary(self, level: int) -> Value:
        if level == len(BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while True:
            token = self.peek()
            if token in BINARY[level]:
                self.take()
                left = BINARY[level][token](left, self.binary(level + 1))
            elif level == _IMPLICIT and token is not None and token not in _WORDS and (
                token in ("(", "[") or token[0].isalnum() or token[0] in "._"
            ):
                left = _multiply(left, self.binary(level + 1))
            else:
                return left

    def unary(self) -> Value:
        token = self.peek()
        if token in ("-", "+", "not"):
            self.take()
            value = self.unary()
            if token == "not":
                return not value
            if token == "-":
                return _elementwise(lambda x, _: -x, value, 0) if isinstance(value, list) else -_number(value)
            return value
        return self.power()

    def power(self) -> Value:
        base = self.postfix()
        if self.peek() in ("^", ".^"):
            self.take()
            exponent = self.unary()  # right-associative; 2^-1 allowed
            return _elementwise(_power, base, exponent)
        return base

    def postfix(self) -> Value:
        value = self.primary()
        while self.peek() in ("!", "'"):
            value = _factorial(_number(value)) if self.take() == "!" else FUNCTIONS["transpose"](value)
        return value

    def primary(self) -> Value:
        self.depth += 1
        if self.depth > 200:
            raise ValueError("expression too deeply nested")
        try:
            token = self.take()
            if token == "(":
                value = self.binary(0)
                self.take(")")
                return value
            if token == "[":
                return self.matrix()
            if token[0].isdigit() or token[0] == ".":
                return float(token) if any(c in token for c in ".eE") else int(token)
            if token[0].isalpha() or token[0] == "_":
                if self.peek() == "(":
                    if token not in FUNCTIONS:
                        raise ValueError(f"unknown function '{token}'")
                    self.take("(")
                    args = [] if self.peek() == ")" else self.arguments()
                    self.take(")")
                    return FUNCTIONS[token](*args)
                if token in CONSTANTS:
                    return CONSTANTS[token]
                raise ValueError(f"undefined symbol '{token}'")
            raise ValueError(f"unexpected '{token}'")
        finally:
            self.depth -= 1

    def arguments(self) -> list[Value]:
        args = [self.binary(0)]
        while self.peek() == ",":
            self.take()
            args.append(self.binary(0))
        return args

    def matrix(self) -> list[Any]:
        """``[1, 2, 3]``, ``[[1, 2], [3, 4]]`` or mathjs's rows ``[1, 2; 3, 4]``."""
        rows: list[list[Value]] = [[]]
        if self.peek() != "]":
            rows[-1].append(self.binary(0))
            while self.peek() in (",", ";"):
                if self.take() == ";":
                    rows.append([])
                rows[-1].append(self.binary(0))
        self.take("]")
        if len(rows) > 1 and len({len(r) for r in rows}) != 1:
            raise ValueError("matrix rows differ in length")
        return rows if len(rows) > 1 else rows[0]


def evaluate(expression: str) -> Value:
    """The value of ``expression`` in mathjs's syntax; ValueError (or ArithmeticError) with a
    reason otherwise."""
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"expression too long (at most {MAX_EXPRESSION} characters)")
    if not expression.strip():
        raise ValueError("empty expression")
    try:
        return _Parser(expression).parse()
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("expression too deeply nested") from None


def format_number(value: Value) -> str:
    """As mathjs prints results: true/false, matrices as nested brackets, 14 significant digits."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(format_number(v) for v in value) + "]"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return str(value)


class CalculateInput(ToolInput):
    expression: str = Field(description='Mathematical expression to evaluate, e.g. "2 + 3 * 4" or "(3^2 + 4^2) ^ 0.5"')


@tool(
    "calculate",
    CalculateInput,
    level=Level.SAFE,
    access="none",
    snippet="Evaluate an arithmetic expression (powers, functions like sqrt/sin/log, constants pi/e)",
)
async def calculate(ctx: ToolContext, args: CalculateInput) -> ToolResult:
    try:
        value = evaluate(args.expression)
    except ZeroDivisionError:
        raise ToolError("invalid_expression", f"Error evaluating {args.expression}: division by zero") from None
    except (ValueError, ArithmeticError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ToolError("invalid_expression", f"Error evaluating {args.expression}: {reason}") from None
    result = format_number(value)
    data = {"expression": args.expression, "result": result}
    return ToolResult.success(f"Result of {args.expression}: {result}", data)
