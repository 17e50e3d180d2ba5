"""Seed 004 (AgentLoop tools): every example call, the JSON result shapes, the permission
levels and the workspace-relative paths, in a real `agentloop` session."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from caisson import Runtime, Session
from caisson.policy import Level
from caisson.profiles import get_profile
from caisson.profiles.hooks import register_hook
from caisson.tools.web.settings import configure_web
from tests.conformance.conftest import as_json, profile_session, sh

pytestmark = pytest.mark.anyio
W = "/workspace"

# Seed 004: the permission level of each tool.
LEVELS = {
    "calculate": "safe", "search": "safe", "code-search": "safe", "code_run": "dangerous", "shell": "dangerous",
    "file-list": "safe", "file-read": "safe", "file-write": "cautious", "file-edit": "cautious",
    "file-delete": "dangerous", "diff": "safe", "patch": "cautious", "git-status": "safe", "git-log": "safe",
    "git-diff": "safe", "git-commit": "cautious", "git-branch": "cautious", "git-checkout": "cautious",
    "git-push": "dangerous", "plan": "safe", "run": "dangerous", "plan-and-run": "dangerous", "web_fetch": "cautious",
}


@pytest.fixture(scope="module")
async def s(rt: Runtime, engine: str) -> AsyncIterator[Session]:
    async with profile_session(rt, "agentloop", engine) as session:
        await sh(session, f"mkdir -p {W}/src/tools && printf 'export interface ToolDefinition {{}}\\n' > "
                          f"{W}/src/tools/registry.ts && printf 'const x = 1;\\n' > {W}/src/tools/calculate.ts && "
                          f"printf '{{\\n  \"name\": \"agentloop\"\\n}}\\n' > {W}/package.json")
        yield session


def test_levels() -> None:
    """004: safe / cautious / dangerous, as each tool's "Permission:" line says."""
    profile = get_profile("agentloop")
    assert {name: str(t.effective_level) for name, t in profile.tools.items()} == LEVELS
    assert profile.tools["git-push"].effective_level is Level.DANGEROUS


async def test_calculate_example(s: Session) -> None:
    """004 calculate: calculate({ expression: "(3^2 + 4^2) ^ 0.5" }) -> "Result of (3^2 + 4^2) ^ 0.5: 5"."""
    r = await s.call("calculate", {"expression": "(3^2 + 4^2) ^ 0.5"})
    assert r.ok and r.text == "Result of (3^2 + 4^2) ^ 0.5: 5"
    bad = await s.call("calculate", {"expression": "1 +"})
    assert not bad.ok and bad.text


async def test_search(s: Session) -> None:
    """004 search: a JSON array of {title, link, snippet}; the provider `none` returns []."""
    r = await s.call("search", {"query": "agentloop"})
    assert r.ok and as_json(r) == []


async def test_code_search_example(s: Session) -> None:
    """004 code-search: code-search({ pattern: "ToolDefinition", mode: "literal", fileGlob: "**/*.ts" })
    -> {matches: [{file, line, column, content, context}], truncated}."""
    r = await s.call("code-search", {"pattern": "ToolDefinition", "mode": "literal", "fileGlob": "**/*.ts"})
    value = as_json(r)
    assert value == {"matches": [{"file": "src/tools/registry.ts", "line": 1, "column": 18,
                                  "content": "export interface ToolDefinition {}", "context": []}],
                     "truncated": False}
    await sh(s, f"printf 'a\\nb\\nhit\\nc\\nd\\n' > {W}/src/ctx.txt")
    ctx = as_json(await s.call("code-search", {"pattern": "h.t", "mode": "regex", "path": "src", "contextLines": 1}))
    assert ctx["matches"] == [{"file": "ctx.txt", "line": 3, "column": 1, "content": "hit", "context": ["b", "c"]}]
    files = as_json(await s.call("code-search", {"pattern": "*.ts", "mode": "glob"}))
    assert sorted(m["file"] for m in files["matches"]) == ["src/tools/calculate.ts", "src/tools/registry.ts"]
    assert all(m["line"] == 0 and m["content"] == "" for m in files["matches"])
    capped = as_json(await s.call("code-search", {"pattern": "*.ts", "mode": "glob", "maxResults": 1}))
    assert len(capped["matches"]) == 1 and capped["truncated"] is True


async def test_code_run_example(s: Session) -> None:
    """004 code_run: code_run({ mode: "command", command: "node --version" }) -> {stdout, stderr,
    exitCode} (the image has python3, not node); mode file infers the interpreter."""
    r = await s.call("code_run", {"mode": "command", "command": "python3 --version"})
    value = as_json(r)
    assert value["stdout"].startswith("Python 3.") and value["stderr"] == "" and value["exitCode"] == 0
    await sh(s, f"printf 'import sys\\nprint(\"hi\")\\nsys.exit(4)\\n' > {W}/script.py")
    script = as_json(await s.call("code_run", {"mode": "file", "file": f"{W}/script.py"}))
    assert script == {"stdout": "hi\n", "stderr": "", "exitCode": 4}
    slow = as_json(await s.call("code_run", {"mode": "command", "command": "sleep 5", "timeout": 1000}))
    assert slow["exitCode"] == -1 and "timed out after 1000ms" in slow["stderr"]


async def test_shell_example(s: Session) -> None:
    """004 shell: shell({ command: "npm test", cwd: "." }) -> {stdout, stderr, exitCode}; shell
    metacharacters and the blocklist are rejected before execution; cwd stays in the workspace."""
    r = await s.call("shell", {"command": "ls src", "cwd": "."})
    assert as_json(r) == {"stdout": "ctx.txt\ntools\n", "stderr": "", "exitCode": 0}
    for command in ("ls; rm -rf x", "ls && ls", "ls | wc", "echo `id`", "echo $(id)", "rm -rf /"):
        rejected = await s.call("shell", {"command": command})
        value = as_json(rejected)
        assert not rejected.ok and value["exitCode"] == -1 and value["stdout"] == "" and value["stderr"], command
    outside = await s.call("shell", {"command": "ls", "cwd": "../etc"})
    assert not outside.ok


async def test_file_list_example(s: Session) -> None:
    """004 file-list: file-list({ path: "src/tools", glob: "*.ts" }) -> [{path, type, sizeBytes}]."""
    r = await s.call("file-list", {"path": "src/tools", "glob": "*.ts"})
    assert as_json(r) == [{"path": "calculate.ts", "type": "file", "sizeBytes": 13},
                          {"path": "registry.ts", "type": "file", "sizeBytes": 35}]
    deep = as_json(await s.call("file-list", {"path": "src", "recursive": True}))
    assert {"path": "tools", "type": "directory"} in deep
    assert {"path": "tools/registry.ts", "type": "file", "sizeBytes": 35} in deep


async def test_file_read_example(s: Session) -> None:
    """004 file-read: file-read({ path: "package.json" }) -> {content, encoding: "utf-8", sizeBytes};
    binary files come back base64 without an explicit encoding."""
    r = await s.call("file-read", {"path": "package.json"})
    assert as_json(r) == {"content": '{\n  "name": "agentloop"\n}\n', "encoding": "utf-8", "sizeBytes": 26}
    await sh(s, f"printf '\\377\\376\\000x' > {W}/bin.dat")
    binary = as_json(await s.call("file-read", {"path": "bin.dat"}))
    assert binary == {"content": "//4AeA==", "encoding": "base64", "sizeBytes": 4}
    forced = as_json(await s.call("file-read", {"path": "package.json", "encoding": "base64"}))
    assert forced["encoding"] == "base64"
    outside = await s.call("file-read", {"path": "../etc/passwd"})
    assert not outside.ok and "outside the workspace root" in outside.text


async def test_file_write_example(s: Session) -> None:
    """004 file-write: file-write({ path: "output/result.txt", content: "Hello, world!\\n" })
    -> { success: true, path: "output/result.txt" }; parent directories created; base64 content."""
    r = await s.call("file-write", {"path": "output/result.txt", "content": "Hello, world!\n"})
    assert as_json(r) == {"success": True, "path": "output/result.txt"}
    assert await sh(s, f"cat {W}/output/result.txt") == "Hello, world!\n"
    b64 = await s.call("file-write", {"path": "output/b.txt", "content": "aGk=", "encoding": "base64"})
    assert b64.ok and await sh(s, f"cat {W}/output/b.txt") == "hi"


async def test_file_edit_examples(s: Session) -> None:
    """004 file-edit: file-edit({ path: "src/config.ts", search: "old text", replace: "new text" })
    -> { success: true, path }; the line-range mode; { success: false, error } on failure."""
    await sh(s, f"printf 'old text and old text\\nline 2\\nline 3\\n' > {W}/src/config.ts")
    r = await s.call("file-edit", {"path": "src/config.ts", "search": "old text", "replace": "new text"})
    assert as_json(r) == {"success": True, "path": "src/config.ts"}
    ranged = await s.call("file-edit", {"path": "src/config.ts", "startLine": 2, "endLine": 3, "newContent": "L2"})
    assert ranged.ok
    assert await sh(s, f"cat {W}/src/config.ts") == "new text and old text\nL2\n"
    missing = await s.call("file-edit", {"path": "src/config.ts", "search": "absent", "replace": "x"})
    assert as_json(missing) == {"success": False, "error": 'Search string not found in "src/config.ts"'}
    neither = await s.call("file-edit", {"path": "src/config.ts"})
    assert not neither.ok and "Provide either" in neither.text


async def test_file_delete(s: Session) -> None:
    """004 file-delete: { success: true, path }."""
    await sh(s, f"touch {W}/gone.txt")
    r = await s.call("file-delete", {"path": "gone.txt"})
    assert as_json(r) == {"success": True, "path": "gone.txt"}


async def test_diff_example(s: Session) -> None:
    """004 diff: diff({ original: "foo\\nbar\\n", modified: "foo\\nbaz\\n" })
    -> "--- original\\n+++ modified\\n@@ -1,2 +1,2 @@\\n foo\\n-bar\\n+baz\\n"."""
    r = await s.call("diff", {"original": "foo\nbar\n", "modified": "foo\nbaz\n"})
    assert r.text == "--- original\n+++ modified\n@@ -1,2 +1,2 @@\n foo\n-bar\n+baz\n"
    await sh(s, f"printf 'a\\n' > {W}/d1.txt && printf 'b\\n' > {W}/d2.txt")
    files = await s.call("diff", {"original": "d1.txt", "modified": "d2.txt", "mode": "files",
                                  "modifiedLabel": "after"})
    assert files.text.startswith("--- d1.txt\n+++ after\n")


async def test_patch(s: Session) -> None:
    """004 patch: applies a unified diff produced by diff; { success: true } or { success: false, error }."""
    await sh(s, f"printf 'foo\\nbar\\n' > {W}/p.txt")
    made = await s.call("diff", {"original": "foo\nbar\n", "modified": "foo\nbaz\n"})
    r = await s.call("patch", {"path": "p.txt", "patch": made.text})
    assert as_json(r) == {"success": True}
    assert await sh(s, f"cat {W}/p.txt") == "foo\nbaz\n"
    again = await s.call("patch", {"path": "p.txt", "patch": made.text})
    value = as_json(again)
    assert value["success"] is False and value["error"]


@pytest.fixture(scope="module")
async def repo(s: Session) -> str:
    await sh(s, f"mkdir -p {W}/repo && cd {W}/repo && git init -q -b main && git config user.name Ada && "
                "git config user.email ada@example.com && echo one > a.txt && git add a.txt && git commit -qm init && "
                f"git init -q --bare {W}/remote.git && git remote add origin {W}/remote.git")
    return "repo"


async def test_git_status_log_diff(s: Session, repo: str) -> None:
    """004 git-status -> {entries: [{status, path}], isClean}; git-log -> {commits: [{hash, date,
    message, author_name, author_email}]}; git-diff -> {diff}."""
    clean = as_json(await s.call("git-status", {"cwd": repo}))
    assert clean == {"entries": [], "isClean": True}
    await sh(s, f"cd {W}/repo && echo two >> a.txt && echo new > b.txt")
    dirty = as_json(await s.call("git-status", {"cwd": repo}))
    assert dirty == {"entries": [{"status": " M", "path": "a.txt"}, {"status": "??", "path": "b.txt"}],
                     "isClean": False}
    log = as_json(await s.call("git-log", {"cwd": repo, "maxCount": 5}))
    (commit,) = log["commits"]
    assert set(commit) == {"hash", "date", "message", "author_name", "author_email"}
    assert commit["message"] == "init" and commit["author_email"] == "ada@example.com"
    diff = as_json(await s.call("git-diff", {"cwd": repo}))
    assert "+two" in diff["diff"]
    staged = as_json(await s.call("git-diff", {"cwd": repo, "staged": True}))
    assert staged == {"diff": ""}
    not_repo = as_json(await s.call("git-status", {"cwd": "src"}))
    assert not_repo["isClean"] is False and not_repo["entries"] == [] and not_repo["error"]


async def test_git_commit_example(s: Session, repo: str) -> None:
    """004 git-commit: git-commit({ message: "fix: correct calculation", files: [...] })
    -> { success: true, commitHash: "a1b2c3d", branch: "main" }."""
    r = await s.call("git-commit", {"message": "fix: correct calculation", "files": ["a.txt"], "cwd": repo})
    value = as_json(r)
    assert value["success"] is True and value["branch"] == "main" and len(value["commitHash"]) == 7
    everything = as_json(await s.call("git-commit", {"message": "add b", "cwd": repo}))
    assert everything["success"] is True
    nothing = as_json(await s.call("git-commit", {"message": "empty", "cwd": repo}))
    assert nothing["success"] is False and nothing["error"]


async def test_git_branch_examples(s: Session, repo: str) -> None:
    """004 git-branch: create -> { success: true }; list -> { success: true, branches: [{ name,
    current, commit }], current: "main" }."""
    created = await s.call("git-branch", {"action": "create", "branch": "feature/my-feature"})
    assert not created.ok  # the workspace root is not a repository: cwd names it
    created = await s.call("git-branch", {"action": "create", "branch": "feature/my-feature", "cwd": repo})
    assert as_json(created) == {"success": True}
    listed = as_json(await s.call("git-branch", {"action": "list", "cwd": repo}))
    assert listed["success"] is True and listed["current"] == "main"
    assert {b["name"] for b in listed["branches"]} == {"main", "feature/my-feature"}
    assert set(listed["branches"][0]) == {"name", "current", "commit"}
    needs_name = await s.call("git-branch", {"action": "delete", "cwd": repo})
    assert not needs_name.ok and "'branch' is required for action 'delete'" in needs_name.text


async def test_git_checkout_examples(s: Session, repo: str) -> None:
    """004 git-checkout: git-checkout({ branch: "main" }) -> { success: true, branch: "main" };
    with newBranch -> { success: true, branch: "feature/my-feature" } (here feature/other)."""
    new = await s.call("git-checkout", {"branch": "main", "newBranch": "feature/other", "cwd": repo})
    assert as_json(new) == {"success": True, "branch": "feature/other"}
    back = await s.call("git-checkout", {"branch": "main", "cwd": repo})
    assert as_json(back) == {"success": True, "branch": "main"}
    unknown = as_json(await s.call("git-checkout", {"branch": "no-such-branch", "cwd": repo}))
    assert unknown["success"] is False and unknown["error"]


async def test_git_push_example(s: Session, repo: str) -> None:
    """004 git-push: git-push({ remote: "origin", branch: "feature/my-feature", setUpstream: true })
    -> { success: true, remote: "origin", branch: "feature/my-feature" }."""
    r = await s.call("git-push", {"remote": "origin", "branch": "feature/my-feature", "setUpstream": True,
                                  "cwd": repo})
    assert as_json(r) == {"success": True, "remote": "origin", "branch": "feature/my-feature"}
    current = as_json(await s.call("git-push", {"cwd": repo}))
    assert current == {"success": True, "remote": "origin", "branch": "main"}


async def test_plan_run_hooks(s: Session) -> None:
    """004 plan, run, plan-and-run: they need a planner model. Without a hook: not served; with
    one, plan returns the plan object as JSON and run its text summary."""
    unserved = await s.call("plan-and-run", {"goal": "Add a CONTRIBUTING.md"})
    assert not unserved.ok and unserved.error is not None and unserved.error.code == "not_served"
    plan = {"steps": [{"description": "Read calculate.ts", "toolsNeeded": ["file-read"], "estimatedComplexity": "low"}]}

    async def planner(session: Session, args: dict[str, Any]) -> dict[str, Any]:
        return plan

    def runner(session: Session, args: dict[str, Any]) -> str:
        return "✓ Step 1: Read calculate.ts\n\nCompleted successfully."

    register_hook("agentloop", "plan", planner, session=s)
    register_hook("agentloop", "run", runner, session=s)
    planned = await s.call("plan", {"goal": "Add unit tests for src/tools/calculate.ts"})
    assert planned.ok and json.loads(planned.text) == plan
    ran = await s.call("run", {"plan": plan, "onStepFailure": "skip"})
    assert ran.ok and ran.text.endswith("Completed successfully.")


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = (b"<html><head><title>Example Article</title></head><body><nav>menu</nav>"
                b"<article><h1>Example Article</h1><p>Content here.</p></article></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/article?utm_source=x"
    server.shutdown()


async def test_web_fetch_example(s: Session, page_url: str) -> None:
    """004 web_fetch: web_fetch({ url: "https://example.com/article" }) -> { url, title, markdown,
    truncated, originalLength } (tracking parameters stripped); refused URLs -> { error, url }.
    The page is served by a local server this test allows explicitly."""
    refused = as_json(await s.call("web_fetch", {"url": page_url}))
    assert set(refused) == {"error", "url"}
    configure_web(s, allow_http=True, allow_private_hosts=["127.0.0.1"])
    value = as_json(await s.call("web_fetch", {"url": page_url}))
    assert value["url"] == page_url.split("?")[0]
    assert value["title"] == "Example Article" and "Content here." in value["markdown"]
    assert value["truncated"] is False and value["originalLength"] == len(value["markdown"])
    assert set(value) <= {"url", "title", "markdown", "byline", "excerpt", "originalLength", "truncated"}


async def test_declared_levels_are_a_floor(rt: Runtime) -> None:
    """004 code_run and shell: "Permission: dangerous"; "dangerous | Requires interactive
    confirmation unless AUTO_APPROVE_ALL=true". However harmless the command, a call of them is
    dangerous: without an approver (and without AUTO_APPROVE_ALL) it is not run."""
    async with rt.session(profile="agentloop") as session:
        calls = [("shell", {"command": "echo hi"}), ("code_run", {"mode": "command", "command": "echo hi"}),
                 ("code_run", {"mode": "command", "command": "ls"}), ("shell", {"command": "pwd"})]
        results = [await session.call(name, args) for name, args in calls]
        # A declared level the classifier can raise: a safe tool's protected write still asks.
        protected = await session.call("file-write", {"path": ".git/hooks/pre-commit", "content": "x"})
    for result in results:
        assert result.level is Level.DANGEROUS and result.decision == "denied", result
        assert "hi\\n" not in result.text
    assert protected.level is Level.DANGEROUS and protected.decision == "denied"


@pytest.mark.parametrize(
    ("expression", "shown"),
    [("5! + sqrt(16)", "124"), ("2^3!", "64"), ("10 mod 4", "2"), ("2 pi", "6.283185307179586"),
     ("[1, 2; 3, 4] * [1; 1]", "[[3], [7]]"), ("det([2, 0; 0, 3])", "6"), ("3 > 2 and not false", "true"),
     ("sqrt(16) + abs(-2) * 2^2", "12"), ("e^0 + cos(0)", "2")],
)
async def test_calculate_mathjs_syntax(s: Session, expression: str, shown: str) -> None:
    """004 calculate: "Evaluates a mathematical expression using mathjs. Safe — does not use eval."
    mathjs's syntax: factorial, ^, mod, implicit multiplication, functions, constants, matrices."""
    r = await s.call("calculate", {"expression": expression})
    assert r.ok and r.text == f"Result of {expression}: {shown}", r.text
