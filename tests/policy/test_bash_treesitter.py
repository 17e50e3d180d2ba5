"""Differential test: the hand-written bash lexer/parser against tree-sitter-bash.

The question it answers is whether tree-sitter should replace the hand-written front end.
For every corpus command (bypasses and ordinary commands), tree-sitter's syntax tree names the
commands it sees run; the classifier must see each of them (or call the line dangerous).
The other direction shows what a syntax tree alone cannot: commands that bash runs from inside
quoted array subscripts, arithmetic and the like, which tree-sitter leaves as plain strings.
Result (printed): the classifier misses nothing tree-sitter sees, and sees commands in rows
where tree-sitter sees none; so the hand-written front end stays, and this test keeps it honest.
"""

from __future__ import annotations

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from caisson.policy import Level, classify_bash

from .bash_corpus import BENIGN, all_bypasses

PARSER = Parser(Language(tree_sitter_bash.language()))
COMMANDS = [c for _, c, _ in all_bypasses()] + [c for c, _ in BENIGN]


def tree_sitter_names(command: str) -> tuple[set[str], bool]:
    """Names of the commands in tree-sitter's tree (static names only), and whether it parsed."""
    tree = PARSER.parse(command.encode())
    names: set[str] = set()
    stack: list[Node] = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "command_name" and node.text is not None:
            text = node.text.decode()
            if text.isprintable() and not any(ch in text for ch in "$`'\"\\*?["):
                names.add(text)
        stack.extend(node.children)
    return names, not tree.root_node.has_error


def classifier_names(command: str) -> tuple[set[str], Level]:
    result = classify_bash(command)
    return {s.text.split(" ", 1)[0] for s in result.segments if s.text}, result.level


def test_classifier_sees_every_command_tree_sitter_sees() -> None:
    missed, ts_errors, only_ours = [], 0, 0
    for command in COMMANDS:
        theirs, parsed = tree_sitter_names(command)
        ours, level = classifier_names(command)
        ts_errors += not parsed
        # Keywords and assignments are not commands for the classifier; a dangerous line needs
        # approval whatever it runs.
        unseen = theirs - ours - {"[[", "]]", "(("}
        if unseen and level is not Level.DANGEROUS:
            missed.append((command, sorted(unseen)))
        only_ours += bool(ours - theirs)
    print(
        f"{len(COMMANDS)} commands: tree-sitter could not parse {ts_errors}; the classifier missed "
        f"{len(missed)} command(s) tree-sitter sees; in {only_ours} the classifier sees commands "
        f"tree-sitter's tree does not show"
    )
    assert missed == []
    assert only_ours > 0
