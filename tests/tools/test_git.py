"""Each git tool on a real repository created inside the session's container."""

from __future__ import annotations

import itertools

import pytest
from toolcall import call, code

from caisson import Session
from caisson.tools.base import REGISTRY
from caisson.tools.git import parse_branch_header, parse_log, parse_status

pytestmark = pytest.mark.anyio
_counter = itertools.count()


async def sh(session: Session, command: str) -> str:
    r = await session.exec(command)
    assert r.exit_code == 0, r.stderr
    return r.stdout


@pytest.fixture
async def repo(shared_session: Session) -> str:
    """A fresh repository with an identity and one commit (README.md) on main."""
    path = f"/workspace/repo{next(_counter)}"
    await sh(
        shared_session,
        f"git init -q -b main {path} && cd {path} && git config user.name 'Ada Agent' "
        "&& git config user.email ada@example.com && echo hello > README.md && git add -A "
        "&& git commit -q -m 'initial commit'",
    )
    return path


async def test_status_entries_and_clean(shared_session: Session, repo: str) -> None:
    r = await call(shared_session, "git_status", cwd=repo)
    assert r.ok and r.data["is_clean"] and r.data["entries"] == [] and r.data["branch"] == "main"
    assert "working tree clean" in r.text
    await sh(
        shared_session,
        f"cd {repo} && echo new > 'new file.txt' && echo changed >> README.md && echo s > staged.txt "
        "&& git add staged.txt && git mv README.md READ.md",
    )
    r = await call(shared_session, "git_status", cwd=repo)
    assert not r.data["is_clean"]
    entries = {e["path"]: e for e in r.data["entries"]}
    assert entries["new file.txt"]["status"] == "??"
    assert entries["staged.txt"]["status"] == "A "
    assert entries["READ.md"]["index"] == "R" and entries["READ.md"]["orig_path"] == "README.md"
    assert "?? new file.txt" in r.text


async def test_status_uses_the_session_cwd_by_default(shared_session: Session, repo: str) -> None:
    shared_session.cwd = repo
    try:
        r = await call(shared_session, "git_status")
        assert r.ok and r.data["branch"] == "main"
    finally:
        shared_session.cwd = "/workspace"


async def test_not_a_repository(shared_session: Session) -> None:
    await sh(shared_session, "mkdir -p /tmp/plain")
    for name in ("git_status", "git_log", "git_diff"):
        r = await call(shared_session, name, cwd="/tmp/plain")
        assert not r.ok and code(r) == "not_a_repository", r.text
        assert "/tmp/plain is not a git repository" in r.text
    r = await call(shared_session, "git_status", cwd="/tmp/missing-dir")
    assert code(r) == "not_found"


async def test_commit_all_then_log(shared_session: Session, repo: str) -> None:
    await sh(shared_session, f"cd {repo} && echo a > untracked.txt && echo more >> README.md")
    r = await call(shared_session, "git_commit", cwd=repo, message="add things\n\nwith a body")
    assert r.ok, r.text
    assert len(r.data["commit_hash"]) == 40 and r.data["branch"] == "main"
    assert (await call(shared_session, "git_status", cwd=repo)).data["is_clean"]
    log = await call(shared_session, "git_log", cwd=repo)
    commits = log.data["commits"]
    assert [c["message"] for c in commits] == ["add things", "initial commit"]
    assert commits[0]["hash"] == r.data["commit_hash"]
    assert commits[0]["author_name"] == "Ada Agent" and commits[0]["author_email"] == "ada@example.com"
    assert commits[0]["body"] == "with a body"
    assert commits[0]["date"][:2] == "20" and "T" in commits[0]["date"]
    one = await call(shared_session, "git_log", cwd=repo, max_count=1)
    assert len(one.data["commits"]) == 1
    by_path = await call(shared_session, "git_log", cwd=repo, path="untracked.txt")
    assert [c["message"] for c in by_path.data["commits"]] == ["add things"]


async def test_commit_selected_files_and_nothing_to_commit(shared_session: Session, repo: str) -> None:
    await sh(shared_session, f"cd {repo} && echo 1 > one.txt && echo 2 > two.txt")
    r = await call(shared_session, "git_commit", cwd=repo, message="only one", files=["one.txt"])
    assert r.ok
    status = await call(shared_session, "git_status", cwd=repo)
    assert [e["path"] for e in status.data["entries"]] == ["two.txt"]
    await call(shared_session, "git_commit", cwd=repo, message="the rest")
    r = await call(shared_session, "git_commit", cwd=repo, message="empty")
    assert not r.ok and code(r) == "nothing_to_commit"
    r = await call(shared_session, "git_commit", cwd=repo, message="x", files=["no-such-file"])
    assert not r.ok and code(r) == "unknown_path"


async def test_commit_without_identity_is_explained(shared_session: Session) -> None:
    await sh(shared_session, "git init -q /workspace/noident && echo x > /workspace/noident/f")
    r = await call(
        shared_session, "bash", command="git config --global --get user.email || echo none", working_dir="/workspace"
    )
    if r.data["stdout"].strip() != "none":
        pytest.fail("the image configures a global git identity; this test needs none")
    r = await call(shared_session, "git_commit", cwd="/workspace/noident", message="x")
    assert not r.ok and code(r) == "identity_missing"
    assert "user.email" in r.text


async def test_empty_repository_log(shared_session: Session) -> None:
    await sh(shared_session, "git init -q /workspace/empty")
    r = await call(shared_session, "git_log", cwd="/workspace/empty")
    assert r.ok and r.data["commits"] == [] and r.text == "No commits yet."


async def test_diff_unstaged_staged_and_path(shared_session: Session, repo: str) -> None:
    r = await call(shared_session, "git_diff", cwd=repo)
    assert r.ok and r.data["diff"] == "" and r.text == "No changes."
    await sh(shared_session, f"cd {repo} && echo world >> README.md && echo b > b.txt && git add b.txt")
    unstaged = await call(shared_session, "git_diff", cwd=repo)
    assert "+world" in unstaged.data["diff"] and "b.txt" not in unstaged.data["diff"]
    staged = await call(shared_session, "git_diff", cwd=repo, staged=True)
    assert "+b" in staged.data["diff"] and "README.md" not in staged.data["diff"]
    limited = await call(shared_session, "git_diff", cwd=repo, path="b.txt")
    assert limited.data["diff"] == ""
    against = await call(shared_session, "git_diff", cwd=repo, ref="HEAD")
    assert "README.md" in against.data["diff"] and "b.txt" in against.data["diff"]
    bad = await call(shared_session, "git_diff", cwd=repo, ref="no-such-ref")
    assert not bad.ok and code(bad) == "unknown_ref"


async def test_branch_list_create_delete(shared_session: Session, repo: str) -> None:
    r = await call(shared_session, "git_branch", cwd=repo, action="create", branch="feature")
    assert r.ok
    first = (await sh(shared_session, f"git -C {repo} rev-parse --short HEAD")).strip()
    await sh(shared_session, f"cd {repo} && echo 2 > f && git add f && git commit -qm second")
    r = await call(shared_session, "git_branch", cwd=repo, action="create", branch="old", start_point=first)
    assert r.ok
    listed = await call(shared_session, "git_branch", cwd=repo)
    branches = {b["name"]: b for b in listed.data["branches"]}
    assert set(branches) == {"main", "feature", "old"}
    assert listed.data["current"] == "main" and branches["main"]["current"]
    assert branches["old"]["commit"] == first
    assert "* main" in listed.text
    dup = await call(shared_session, "git_branch", cwd=repo, action="create", branch="feature")
    assert code(dup) == "branch_exists"
    bad = await call(shared_session, "git_branch", cwd=repo, action="create", branch="x", start_point="nope")
    assert code(bad) == "unknown_ref"
    # A branch with a commit main lacks is not merged: deleting it needs force.
    await sh(shared_session, f"cd {repo} && git checkout -q -b side && echo s > s && git add s && git commit -qm s "
             "&& git checkout -q main")
    r = await call(shared_session, "git_branch", cwd=repo, action="delete", branch="side")
    assert code(r) == "not_merged" and "force" in r.text
    r = await call(shared_session, "git_branch", cwd=repo, action="delete", branch="side", force=True)
    assert r.ok
    r = await call(shared_session, "git_branch", cwd=repo, action="delete", branch="feature")
    assert r.ok
    missing = await call(shared_session, "git_branch", cwd=repo, action="delete", branch="never")
    assert code(missing) == "unknown_ref"
    with pytest.raises(ValueError):
        REGISTRY["git_branch"].input_model.model_validate({"action": "create"})


async def test_checkout_branch_tag_commit_and_new_branch(shared_session: Session, repo: str) -> None:
    await sh(shared_session, f"cd {repo} && git tag v1 && git branch dev")
    r = await call(shared_session, "git_checkout", cwd=repo, branch="dev")
    assert r.ok and r.data["branch"] == "dev"
    r = await call(shared_session, "git_checkout", cwd=repo, branch="v1", new_branch="from-tag")
    assert r.ok and r.data["branch"] == "from-tag"
    head = (await sh(shared_session, f"git -C {repo} rev-parse HEAD")).strip()
    r = await call(shared_session, "git_checkout", cwd=repo, branch=head)
    assert r.ok and r.data["detached"] and head.startswith(r.data["commit"])
    # A file called like a branch is never "restored" instead of switching.
    await sh(shared_session, f"cd {repo} && echo x > main")
    r = await call(shared_session, "git_checkout", cwd=repo, branch="main")
    assert r.ok and r.data["branch"] == "main"
    r = await call(shared_session, "git_checkout", cwd=repo, branch="nope")
    assert not r.ok and code(r) == "unknown_ref"


async def test_push_to_a_local_remote(shared_session: Session, repo: str) -> None:
    remote = repo + "-remote.git"
    await sh(shared_session, f"git init -q --bare {remote} && git -C {repo} remote add origin {remote}")
    r = await call(shared_session, "git_push", cwd=repo, set_upstream=True)
    assert r.ok, r.text
    assert r.data["remote"] == "origin" and r.data["branch"] == "main"
    assert (await sh(shared_session, f"git -C {remote} rev-parse main")) == (
        await sh(shared_session, f"git -C {repo} rev-parse main")
    )
    status = await call(shared_session, "git_status", cwd=repo)
    assert status.data["upstream"] == "origin/main"
    # Rewrite local history: a plain push is rejected, a forced one goes through.
    await sh(shared_session, f"cd {repo} && git commit -q --amend -m rewritten")
    r = await call(shared_session, "git_push", cwd=repo)
    assert not r.ok and code(r) == "push_rejected"
    r = await call(shared_session, "git_push", cwd=repo, force=True)
    assert r.ok and r.data["forced"]
    r = await call(shared_session, "git_push", cwd=repo, remote="nowhere")
    assert not r.ok and code(r) == "unknown_remote"


async def test_push_needing_credentials_fails_fast(shared_session: Session, repo: str) -> None:
    await sh(shared_session, f"git -C {repo} remote add web https://git.example.invalid/repo.git")
    r = await call(shared_session, "git_push", cwd=repo, remote="web")
    assert not r.ok and code(r) in ("network_unavailable", "auth_required"), r.text


def test_parsers() -> None:
    assert parse_branch_header("## main...origin/main [ahead 2, behind 1]").__dict__ == {
        "branch": "main", "upstream": "origin/main", "ahead": 2, "behind": 1,
    }
    assert parse_branch_header("## No commits yet on trunk").branch == "trunk"
    assert parse_branch_header("## HEAD (no branch)").branch is None
    branch, entries = parse_status("## main\0R  new\0old\0 M a b\0?? c\0")
    assert branch is not None and branch.branch == "main"
    assert [(e["status"], e["path"], e["orig_path"]) for e in entries] == [
        ("R ", "new", "old"), (" M", "a b", None), ("??", "c", None),
    ]
    log = parse_log("h1\x1fs1\x1f2024-01-01T00:00:00+00:00\x1fA\x1fa@x\x1fsubj\x1fbody\n\0")
    assert log[0]["message"] == "subj" and log[0]["body"] == "body" and log[0]["author_email"] == "a@x"
