"""Secrets stay unread at level safe, however the agent spells or reaches them."""

from __future__ import annotations

import uuid

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest

pytestmark = pytest.mark.anyio

TOKEN = f"tok-{uuid.uuid4().hex}"
FILES = [".env", ".ENV", ".env.local", "Secrets.YAML", "config/service-account-prod.json", "deploy/id_ed25519",
         "certs/server.KEY", "credentials.json", "prod.env"]


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


async def test_secret_names_searches_and_spellings(rt: Runtime) -> None:
    async with rt.session(approval_handler=deny) as s:
        for name in FILES:
            await s.write_file(f"/workspace/{name}", f"KEY={TOKEN}\n")
        await s.write_file("/workspace/.env.example", "KEY=\n")
        await s.write_file("/workspace/notes.txt", "KEY=visible\n")
        attempts = [("read_file", {"path": f"/workspace/{name}"}) for name in FILES] + [
            ("grep", {"pattern": TOKEN, "path": "/workspace", "include_hidden": True, "output_mode": "content"}),
            ("grep", {"pattern": "KEY", "path": "/workspace", "include_hidden": True, "no_ignore": True,
                      "output_mode": "content"}),
            ("bash", {"command": "cat .en?"}),
            ("bash", {"command": "F=.env; cat $F"}),
            ("bash", {"command": "cat $(echo .env)"}),
            ("bash", {"command": "grep -r KEY ."}),
            ("bash", {"command": "rg KEY"}),
            ("bash", {"command": "cat .ENV"}),
            ("bash", {"command": "cat Secrets.*"}),
            ("bash", {"command": "git show HEAD:.env"}),
        ]
        leaked = [(tool, args) for tool, args in attempts if TOKEN in (await s.call(tool, args)).text]
        print(f"{len(attempts)} attempts to read {len(FILES)} secret files, {len(leaked)} leaked: {leaked}")
        assert leaked == []
        # The searches work; they just leave the secret files out. Templates stay readable.
        found = await s.call("grep", {"pattern": "KEY", "path": "/workspace", "include_hidden": True})
        assert "notes.txt" in found.text and ".env.example" in found.text and ".env\n" not in found.text
        assert (await s.call("read_file", {"path": "/workspace/.env.example"})).ok


async def test_a_hard_link_to_a_secret_is_not_an_ordinary_file(rt: Runtime) -> None:
    """A hard link made to a secret (by the agent, or before) reads like any file by its name:
    a file with more than one name needs approval to be read, and a deny-all approver refuses."""
    async with rt.session(approval_handler=deny) as s:
        await s.write_file("/workspace/.env", f"KEY={TOKEN}\n")
        await s.exec("ln /workspace/.env /workspace/notes.txt", user=s.config.agent_user)
        await s.write_file("/workspace/plain.txt", "ordinary\n")
        linked = await s.call("read_file", {"path": "/workspace/notes.txt"})
        searched = await s.call("grep", {"pattern": "KEY=", "path": "/workspace", "output_mode": "content"})
        plain = await s.call("read_file", {"path": "/workspace/plain.txt"})
    print(f"hard link to a secret: read {linked.decision}, level {linked.level}; grep shows it: {TOKEN in searched.text}")
    assert TOKEN not in linked.text and linked.decision == "denied"
    assert searched.ok and TOKEN not in searched.text
    assert plain.ok and "ordinary" in plain.text


# Every profile's content search, as an agent would aim it at the secret files: by the token,
# by a word the secrets share, and with each tool's widest options.
PROFILE_SEARCHES = {
    "caisson": [("grep", {"pattern": "KEY", "include_hidden": True, "no_ignore": True, "output_mode": "content"}),
                ("grep", {"pattern": "KEY", "include_hidden": True, "output_mode": "count"})],
    "aar": [("grep", {"regex": TOKEN}), ("grep", {"regex": "key", "include_pattern": "**/*"})],
    "agent-air": [("grep", {"pattern": "KEY", "output_mode": "content"}), ("grep", {"pattern": TOKEN})],
    "agentloop": [("code-search", {"pattern": "KEY"}), ("code-search", {"pattern": TOKEN, "fileGlob": "**/*"})],
    "amp": [("Grep", {"pattern": "KEY"}), ("Grep", {"pattern": TOKEN, "literal": True})],
    "grida": [("grep_files", {"pattern": "KEY"}), ("grep_files", {"pattern": TOKEN})],
}


@pytest.mark.parametrize("profile", sorted(PROFILE_SEARCHES))
async def test_no_profile_search_shows_a_secret(rt: Runtime, profile: str) -> None:
    """Each profile's search leaves out the secret files and a hard link to one, and still
    finds the ordinary file (the searches ran)."""
    async with rt.session(profile=profile, approval_handler=deny) as s:
        for name in FILES:
            await s.write_file(f"/workspace/{name}", f"KEY={TOKEN}\n")
        await s.exec(f"ln /workspace/.env /workspace/linked-{TOKEN}.txt", user=s.config.agent_user)
        await s.write_file("/workspace/notes.txt", "KEY=visible\n")
        results = [(tool, args, await s.call(tool, args)) for tool, args in PROFILE_SEARCHES[profile]]
    leaked = [(tool, args) for tool, args, r in results if TOKEN in r.text]
    print(f"{profile}: {len(results)} searches for {len(FILES)} secret files and a hard link, {len(leaked)} leaked")
    assert leaked == []
    assert all(r.ok for _, _, r in results), [r.text for _, _, r in results]
    assert any("notes.txt" in r.text or "visible" in r.text for _, _, r in results)


async def test_git_diffs_leave_secret_files_out(rt: Runtime) -> None:
    """A diff shows contents: every way to aim git_diff at a tracked secret (unstaged, staged,
    against a commit, by its path, from a subdirectory), or at a hard link to one staged under
    a harmless name, shows the other files' changes only."""
    async with rt.session(approval_handler=deny) as s:
        setup = (
            "cd /workspace && git init -q && git config user.email a@b && git config user.name a && "
            "mkdir -p sub/deep && echo 'KEY=old' > .env && echo 'KEY=old' > sub/deep/id_rsa && echo one > notes.txt && "
            "git add -A && git commit -qm first && "
            f"echo 'KEY={TOKEN}' > .env && echo 'KEY={TOKEN}' > sub/deep/id_rsa && echo two > notes.txt && "
            f"echo 'KEY={TOKEN}' > staged.pem && ln .env notes-link.txt && "
            "git add staged.pem sub/deep/id_rsa notes-link.txt"
        )
        assert (await s.exec(setup, user=s.config.agent_user, timeout=30)).exit_code == 0
        attempts = [
            {"cwd": "/workspace"},
            {"cwd": "/workspace", "staged": True},
            {"cwd": "/workspace", "ref": "HEAD"},
            {"cwd": "/workspace", "path": ".env"},
            {"cwd": "/workspace", "path": "*"},
            {"cwd": "/workspace/sub", "ref": "HEAD"},
            {"cwd": "/workspace/sub/deep", "path": "id_rsa", "staged": True},
            {"cwd": "/workspace", "path": "notes-link.txt", "staged": True},
        ]
        results = [await s.call("git_diff", args) for args in attempts]
    leaked = [args for args, r in zip(attempts, results, strict=True) if TOKEN in r.text]
    print(f"{len(attempts)} git diffs aimed at 3 changed secret files and a hard link, {len(leaked)} leaked: {leaked}")
    assert leaked == []
    assert all(r.ok for r in results), [r.text for r in results]
    # The diffs still work for the ordinary file.
    assert "+two" in results[0].text and "+two" in results[2].text and "+two" in results[5].text


async def test_git_diffs_show_no_secret_left_in_git_under_another_name(rt: Runtime) -> None:
    """A hard link made to a secret and staged (or committed), then removed, leaves the
    secret's content in git under a harmless name with no other name in the working tree.
    git_diff compares contents with the secret files: every diff that would show one leaves
    that file out, also when a secret-named file the agent cannot read comes first."""
    async with rt.session(approval_handler=deny) as s:
        setup = (
            "cd /workspace && git init -q && git config user.email a@b && git config user.name a && "
            "printf '.env\\n.env.*\\n' > .gitignore && echo one > notes.txt && git add -A && git commit -qm first && "
            f"echo 'KEY={TOKEN}' > .env && echo decoy > .env.aaa && chmod 000 .env.aaa && "
            "ln .env committed.txt && git add committed.txt && git commit -qm second && rm committed.txt && "
            "ln .env harmless.txt && git add harmless.txt && rm harmless.txt && echo two > notes.txt"
        )
        result = await s.exec(setup, user=s.config.agent_user, timeout=30)
        assert result.exit_code == 0, result.stderr
        attempts = [
            {"cwd": "/workspace"},
            {"cwd": "/workspace", "staged": True},
            {"cwd": "/workspace", "ref": "HEAD"},
            {"cwd": "/workspace", "ref": "HEAD~1"},
            {"cwd": "/workspace", "path": "harmless.txt", "staged": True},
            {"cwd": "/workspace", "path": "committed.txt"},
            {"cwd": "/workspace", "path": "*.txt", "ref": "HEAD~1", "staged": True},
        ]
        results = [await s.call("git_diff", args) for args in attempts]
    leaked = [args for args, r in zip(attempts, results, strict=True) if TOKEN in r.text]
    print(f"{len(attempts)} git diffs of a secret staged and committed through removed hard links, {len(leaked)} leaked")
    assert leaked == []
    assert all(r.ok for r in results), [r.text for r in results]
    assert "+two" in results[0].text and "+two" in results[3].text  # ordinary changes still show


async def test_edits_are_no_oracle_for_a_secret(rt: Runtime) -> None:
    """An edit reads the file to match its text: were it allowed, "found" against "not found"
    (and any diff shown) would spell the secret out guess by guess. Right and wrong guesses,
    through each editing tool and through a hard link, are refused alike, and the file stays."""
    async with rt.session(approval_handler=deny) as s:
        await s.write_file("/workspace/.env", f"KEY={TOKEN}\n")
        await s.exec("ln /workspace/.env /workspace/linked.txt", user=s.config.agent_user)
        attempts = []
        for target in ("/workspace/.env", "/workspace/linked.txt"):
            for guess in (f"KEY={TOKEN[:6]}", "KEY=wrong"):
                attempts += [
                    ("edit_file", {"path": target, "old_string": guess, "new_string": "X"}),
                    ("multi_edit", {"path": target, "edits": [{"old_string": guess, "new_string": "X"}], "dry_run": True}),
                    ("apply_patch", {"path": target, "patch": f"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-{guess}\n+X\n"}),
                ]
        results = [await s.call(tool, args) for tool, args in attempts]
        content = (await s.exec(["cat", "/workspace/.env"], user="root")).stdout
    answered = [(tool, args) for (tool, args), r in zip(attempts, results, strict=True) if r.decision != "denied"]
    print(f"{len(attempts)} edits guessing at a secret, {len(answered)} not refused: {answered}")
    assert answered == []
    assert content == f"KEY={TOKEN}\n"
