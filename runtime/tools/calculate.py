"""calculate: arithmetic evaluated by walking a Python AST, never by eval.

Accepts numbers, + - * / // % and powers (``**`` or the calculator's ``^``), parentheses,
a fixed set of math functions and constants. Anything else (names, attributes,
subscripts, calls of unknown functions) is refused before evaluation.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING

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


FUNCTIONS: dict[str, Callable[..., Number]] = {
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


BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}

UNARY: dict[type[ast.unaryop], Callable[[Number], Number]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"unsupported literal {node.value!r}")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        return BINARY[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise ValueError(f"unknown name '{node.id}'")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise ValueError(f"unknown function '{name}'")
        if node.keywords:
            raise ValueError("keyword arguments are not supported")
        return FUNCTIONS[node.func.id](*(_eval(arg) for arg in node.args))
    raise ValueError(f"unsupported syntax '{ast.unparse(node)}'")


def evaluate(expression: str) -> Number:
    """The value of ``expression``; ValueError (or ArithmeticError) with a reason otherwise."""
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"expression too long (at most {MAX_EXPRESSION} characters)")
    # `^` is the power operator in calculator notation; Python's XOR has no use here.
    source = expression.replace("^", "**").strip()
    if not source:
        raise ValueError("empty expression")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise ValueError("invalid syntax") from None
    try:
        return _eval(tree)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    except RecursionError:
        raise ValueError("expression too deeply nested") from None


def format_number(value: Number) -> str:
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
