"""calculate: mathjs's expression syntax (operators, factorial, implicit multiplication,
functions, constants, matrices), evaluated without eval."""

from __future__ import annotations

import pytest

from caisson.tools.base import ToolError
from caisson.tools.calculate import CalculateInput, calculate, evaluate, format_number

pytestmark = pytest.mark.anyio


async def run(expression: str) -> str:
    # calculate never touches the sandbox, so it needs no session.
    try:
        return (await calculate(None, CalculateInput(expression=expression))).text  # type: ignore[arg-type]
    except ToolError as exc:
        return f"{exc.code}: {exc.message}"


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("2 + 3 * 4", "14"),
        ("(3^2 + 4^2) ^ 0.5", "5"),
        ("2^10", "1024"),
        ("-2^2", "-4"),
        ("1/3", "0.3333333333333333"),
        ("floor(7 / 2)", "3"),
        ("10 % 3", "1"),
        ("sqrt(16) + abs(-2)", "6"),
        ("sin(pi / 2)", "1"),
        ("log(8, 2)", "3"),
        ("ln(e)", "1"),
        ("log10(1000)", "3"),
        ("factorial(10)", "3628800"),
        ("max(1, 7, 3) - min(4, 2)", "5"),
        ("round(2.567, 2)", "2.57"),
        ("floor(-1.5) + ceil(1.2)", "0"),
        ("1e3 * 2", "2000"),
        ("0.1 + 0.2", "0.30000000000000004"),
        ("2 ^ 64", "18446744073709551616"),
        ("1e308 * 10", "Infinity"),
        ("hypot(3, 4)", "5"),
        ("5! + sqrt(16)", "124"),
        ("2^3!", "64"),
        ("2^3^2", "512"),
        ("10 mod 3", "1"),
        ("3(4 + 5)", "27"),
        ("2pi", "6.283185307179586"),
        ("5 > 3 and 2 < 1", "false"),
        ("not (1 == 2)", "true"),
        ("[1, 2; 3, 4] * [5; 6]", "[[17], [39]]"),
        ("[1, 2, 3] + 1", "[2, 3, 4]"),
        ("det([1, 2; 3, 4])", "-2"),
        ("transpose([1, 2; 3, 4])", "[[1, 3], [2, 4]]"),
    ],
)
async def test_results(expression: str, shown: str) -> None:
    assert await run(expression) == f"Result of {expression}: {shown}"


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("1 / 0", "division by zero"),
        ("", "empty expression"),
        ("2 +", "unexpected end of expression"),
        ("x + 1", "undefined symbol 'x'"),
        ("__import__('os').system('id')", "unexpected character"),
        ("__import__('os')", "unknown function '__import__'"),
        ("(1).__class__", "unexpected character '.'"),
        ("[1, 2] * [1, 2, 3]", "dimension mismatch"),
        ("'a' * 3", "unexpected"),
        ("2 ** 3", "unexpected '*'"),
        ("sqrt(-1)", "math domain error"),
        ("(-8) ^ 0.5", "not a real number"),
        ("10 ^ 100000", "result too large"),
        ("factorial(5000)", "factorial argument too large"),
        ("factorial(2.5)", "non-negative integers"),
        ("round(x=1)", "unexpected character '='"),
        ("1" + "+1" * 600, "expression too long"),
        ("True + 1", "undefined symbol 'True'"),
    ],
)
async def test_errors(expression: str, reason: str) -> None:
    text = await run(expression)
    assert text.startswith(f"invalid_expression: Error evaluating {expression}: ")
    assert reason in text


def test_deep_nesting_is_refused_not_crashed() -> None:
    with pytest.raises(ValueError):
        evaluate("(" * 400 + "1" + ")" * 400)


def test_format_number() -> None:
    assert format_number(5.0) == "5"
    assert format_number(float("nan")) == "NaN"
    assert format_number(-float("inf")) == "-Infinity"
    assert format_number(1e20) == "1e+20"
