"""git: global options, read-only subcommands, workspace writes, and what is dangerous."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...levels import Level
from ..argv import getopt
from ..lexer import Word
from .registry import register
from .search import search

if TYPE_CHECKING:
    from ..analysis import Analyzer, Seg

_S, _C, _D = Level.SAFE, Level.CAUTIOUS, Level.DANGEROUS


_GIT_READ = frozenset(
    ["status", "log", "diff", "show", "blame", "annotate", "ls-files", "ls-tree", "rev-parse", "rev-list", "describe", "shortlog", "cat-file", "name-rev", "merge-base", "count-objects", "show-ref", "for-each-ref", "var", "whatchanged", "check-ignore", "check-attr", "version", "help", "show-branch", "diff-tree", "diff-files", "diff-index", "cherry", "range-diff", "verify-commit", "verify-tag", "fsck"]
)
_GIT_WRITE = frozenset(
    ["add", "commit", "checkout", "switch", "restore", "merge", "cherry-pick", "revert", "mv", "apply", "am", "init", "notes", "gc", "rerere", "pack-refs", "repack", "prune-packed", "maintenance"]
)
_GIT_DANGER = {
    "push": "publishes commits to a remote",
    "pull": "fetches from the network and merges",
    "fetch": "fetches from the network",
    "clone": "fetches from the network",
    "clean": "deletes untracked files",
    "rm": "deletes files",
    "submodule": "fetches and runs submodule commands",
    "config": "changes git configuration (hooks, pager, fsmonitor)",
    "filter-branch": "rewrites history by running commands",
    "bisect": "may run commands",
    "difftool": "runs a diff tool",
    "mergetool": "runs a merge tool",
    "send-email": "sends mail",
    "ls-remote": "contacts a remote",
    "archive": "may contact a remote",
    "daemon": "serves repositories",
    "credential": "handles credentials",
}
_GIT_GLOBAL_SAFE = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs", "--no-replace-objects"})


@register("git")
def _h_git(a: Analyzer, seg: Seg, name: str, args: list[Word]) -> None:
    i = 0
    repo = Word(".", ".")
    while i < len(args):
        w = args[i]
        if not w.static:
            a.note(seg, _D, "git: an argument computed at run time could be an option or alias")
            return
        v = w.value or ""
        if v == "-C":
            a.note(seg, _D, "git -C: the repository found in that directory (a bare one the agent made, say) may run code")
            return
        if v in _GIT_GLOBAL_SAFE:
            i += 1
            continue
        if v in ("--version", "--help", "-h"):
            a.note(seg, _S, "git: read-only")
            return
        if v.startswith("-"):
            a.note(seg, _D, f"git {v}: global option can change configuration or what runs")
            return
        break
    if i >= len(args):
        a.note(seg, _S, "git: prints usage")
        return
    sub = args[i].value or ""
    rest = args[i + 1 :]
    if a.places.moved and sub not in ("version", "help"):
        a.note(seg, _D, f"git {sub} after a cd: the repository found there (a bare one the agent made, say) may run code")
        return
    if any(not w.static for w in rest):
        # Pathspecs and messages may be variables; options could hide behind them.
        if sub in _GIT_READ and sub not in ("diff", "log", "show", "grep", "whatchanged", "cat-file", "blame", "annotate"):
            a.note(seg, _S, f"git {sub}: read-only")
            return
        a.note(seg, _D, f"git {sub}: an argument computed at run time could be an option")
        return
    values = [w.value or "" for w in rest]
    level, why = _git_subcommand(sub, values)
    if level is _C:
        a.write(seg, repo, f"git {sub} modifies the repository in")
        if sub == "init":
            for w in rest:
                if not (w.value or "").startswith("-"):
                    a.write(seg, w, "git init creates a repository in")
    else:
        a.note(seg, level, f"git {sub}: {why}")
    for v in values:
        if v.startswith("--output="):
            a.write(seg, Word(v[9:], v[9:]), f"git {sub} --output writes")
    _history_reads(a, seg, sub, rest)


_SHOWS_CONTENT = frozenset({"show", "cat-file", "diff", "log", "whatchanged", "blame", "annotate", "grep"})


def _history_reads(a: Analyzer, seg: Seg, sub: str, rest: list[Word]) -> None:
    """Objects and paths whose content a read-only subcommand prints: ``REV:path`` blobs,
    pathspecs (a committed .env is still a secret), and git grep's matches."""
    if sub not in _SHOWS_CONTENT:
        return
    if sub == "grep":
        argv = getopt(rest, "efABCm", ("--regexp", "--file", "--max-count", "--after-context",
                                       "--before-context", "--context", "--max-depth", "--threads"))
        patterns = argv.values("-e", "--regexp") or argv.operands[:1]
        search(a, seg, "git grep", argv, patterns, [], recursive=True)
        return
    if sub == "cat-file" or (sub == "show" and any(":" in (w.value or "") for w in rest)):
        a.note(seg, _C, f"git {sub}: prints objects from history, which may hold secrets")
    for w in rest:
        v = w.value or ""
        if v.startswith("-"):
            continue
        path = v.split(":", 1)[1] if ":" in v else v
        if path:
            a.read(seg, Word(path, path))


def _git_subcommand(sub: str, values: list[str]) -> tuple[Level, str]:
    def has(*flags: str) -> bool:
        return any(v == f or v.startswith(f + "=") for v in values for f in flags)

    positional = [v for v in values if not v.startswith("-")]
    if sub in _GIT_DANGER:
        if sub == "config" and values and all(
            v.startswith("-") and v in ("--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin",
                                         "--show-scope", "--global", "--local", "--system", "--null", "-z",
                                         "--name-only", "--type=bool", "--type=int", "--bool", "--int")
            for v in values[: len(values) - len(positional)]
        ) and has("--get", "--get-all", "--get-regexp", "--list", "-l"):
            return _S, "reads configuration"
        return _D, _GIT_DANGER[sub]
    if sub == "init" and has("--bare", "--template", "--separate-git-dir"):
        return _D, "creates a repository whose hooks or directory the agent chooses"
    if sub == "grep":
        if any(v.startswith(("-O", "--open-files-in-pager")) for v in values):
            return _D, "opens matches in a pager program"
        return _S, "read-only"
    if sub in ("diff", "log", "show", "whatchanged"):
        if has("--ext-diff", "--textconv"):
            return _D, "runs an external diff or textconv program"
        if "--output" in values:
            return _D, "writes its output to a file"
        return _S, "read-only"
    if sub in _GIT_READ:
        return _S, "read-only"
    if sub == "branch":
        if has("-d", "-D", "--delete"):
            return _D, "deletes a branch"
        if has("--edit-description"):
            return _D, "runs an editor"
        if has("-m", "-M", "-c", "-C", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream", "-f", "--force", "-t", "--track"):
            return _C, "changes branches"
        if positional and not has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
            return _C, "creates a branch"
        return _S, "lists branches"
    if sub == "tag":
        if has("-d", "--delete"):
            return _D, "deletes a tag"
        if positional and not has("-l", "--list", "--contains", "--no-contains", "--merged", "--no-merged", "--points-at"):
            return _C, "creates a tag"
        return _S, "lists tags"
    if sub == "remote":
        if not positional or positional[0] == "get-url":
            return _S, "lists remotes"
        if positional[0] in ("add", "rename", "remove", "rm", "set-url", "set-head", "set-branches"):
            return _C, "changes remotes"
        return _D, "contacts a remote"
    if sub == "stash":
        action = positional[0] if positional else "push"
        if action in ("list", "show"):
            return _S, "reads stashes"
        if action in ("drop", "clear"):
            return _D, "deletes stashed changes"
        return _C, "stashes changes"
    if sub == "reflog":
        action = positional[0] if positional else "show"
        return (_S, "reads the reflog") if action in ("show", "exists") else (_D, "expires reflog entries")
    if sub == "worktree":
        return (_S, "lists worktrees") if positional[:1] == ["list"] else (_D, "manages worktrees")
    if sub == "reset":
        if has("--hard", "--merge", "--keep"):
            return _D, "discards uncommitted work"
        return _C, "moves HEAD"
    if sub == "rebase":
        if has("-i", "--interactive", "-x", "--exec", "--edit-todo"):
            return _D, "interactive rebase or --exec runs commands"
        return _C, "rewrites commits"
    if sub == "apply" and has("--unsafe-paths"):
        return _D, "applies a patch outside the repository"
    if sub in _GIT_WRITE:
        return _C, "modifies the repository"
    return _D, "unknown subcommand or alias"
