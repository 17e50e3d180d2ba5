"""Names are shown escaped in every listing and search result: a name with a newline, a
terminal escape or a right-to-left override cannot make ls, glob or grep show a path that is
not there, or one that reads differently from what it is."""

from __future__ import annotations

import json

import pytest

from caisson import Runtime
from caisson.tools.text import shown_json

pytestmark = pytest.mark.anyio

W = "/workspace/names"
# Each would show as something else if printed raw: a second path on its own line, coloured or
# cleared text, a name read backwards ("exe.txt" shown as "txt.exe"), an invisible character.
NAMES = ["real\nfake.txt", "innocent\x1b[2K\rrm -rf ~", "report\u202etxt.exe", "zero\u200bwidth",
         "bell\x07", "line\u2028break", "tab\there", "back\\slash", "iso\u2066late\u2069d", "first\u2067rtl\u2068",
         "csi\x9b2Jc1", "del\x7f", "joiner\u200d\ufeff"]
UNSAFE = ["\nfake.txt", "\x1b", "\u202e", "\u200b", "\x07", "\u2028", "\t", "\u2066", "\u2067", "\u2068", "\u2069",
          "\x9b", "\x7f", "\u200d", "\ufeff"]


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_listings_and_searches_escape_names(rt: Runtime, gvisor: bool) -> None:
    async with rt.session(gvisor=gvisor) as s:
        for name in NAMES:
            await s.write_file(f"{W}/{name}", "needle\n", owner=s.config.agent_user)
        await s.exec(f"ln -s 'report\u202etxt.exe' {W}/link", user=s.config.agent_user)
        calls = [
            ("ls", {"path": W}), ("ls", {"path": W, "long_format": True}), ("glob", {"pattern": "*", "path": W}),
            ("grep", {"pattern": "needle", "path": W}), ("grep", {"pattern": "needle", "path": W, "output_mode": "count"}),
            ("grep", {"pattern": "needle", "path": W, "output_mode": "content"}),
        ]
        landed = []
        for tool, args in calls:
            result = await s.call(tool, args)
            assert result.ok, result.text
            shown = [u for u in UNSAFE if u in result.text]
            if shown or "\\u202e" not in result.text:
                landed.append((tool, args, shown))
        # The data keeps the real names for programs.
        listing = await s.call("ls", {"path": W})
    tried = len(calls)
    print(f"unsafe names in listings ({'gvisor' if gvisor else 'runc'}): tried {tried}, landed {len(landed)}: {landed}")
    assert landed == []
    assert set(NAMES) <= {e["name"] for e in listing.data["entries"]}
    assert "back\\\\slash" in listing.text and "real\\nfake.txt" in listing.text


PROFILE_LISTINGS = {
    "aar": [("list_directory", {"path": "names"}), ("find_files", {"glob_pattern": "names/*"}),
            ("grep", {"regex": "needle", "include_pattern": "names/*"})],
    "agentloop": [("code-search", {"pattern": "*", "mode": "glob", "path": "names"}),
                  ("code-search", {"pattern": "needle", "path": "names"}), ("file-list", {"path": "names"})],
    "agent-air": [("ls", {"path": W}), ("ls", {"path": W, "long_format": True}), ("glob", {"pattern": "*", "path": W}),
                  ("grep", {"pattern": "needle", "path": W}),
                  ("grep", {"pattern": "needle", "path": W, "output_mode": "count"}),
                  ("grep", {"pattern": "needle", "path": W, "output_mode": "content"})],
    "amp": [("glob", {"filePattern": "names/*"}), ("Grep", {"pattern": "needle", "path": "names"})],
    "grida": [("list_files", {}), ("grep_files", {"pattern": "needle"})],
}


@pytest.mark.parametrize("profile", sorted(PROFILE_LISTINGS))
async def test_profile_listings_escape_names(rt: Runtime, profile: str) -> None:
    """Profiles' own listings: Aar's and Agent Air's plain text, AgentLoop's, Amp's and Grida's JSON
    (where JSON itself escapes newlines and C0 controls, but not bidi, C1 or invisible characters)."""
    async with rt.session(profile=profile) as s:
        for name in NAMES:
            await s.write_file(f"{W}/{name}", "needle\n", owner=s.config.agent_user)
        calls = PROFILE_LISTINGS[profile]
        landed = []
        for tool, args in calls:
            result = await s.call(tool, args)
            assert result.ok, result.text
            if [u for u in UNSAFE if u in result.text] or "\\u202e" not in result.text:
                landed.append((tool, result.text[:200]))
    print(f"unsafe names in {profile}'s listings: tried {len(calls)}, landed {len(landed)}: {landed}")
    assert landed == []


# Text inside files, shown in JSON results: every profile whose results are JSON objects shows a
# matching line, and the listing of a repository's status, with the same characters escaped.
CONTENT = "payload " + "".join(c for c in UNSAFE if len(c) == 1 and c != "\t") + " end\n"
JSON_RESULTS = {
    "agentloop": [("code-search", {"pattern": "payload", "path": "names"}),
                  ("code-search", {"pattern": "pay.oad", "mode": "regex", "path": "names"}),
                  ("git-status", {"cwd": "names"})],
    "grida": [("grep_files", {"pattern": "payload"})],
    "caisson": [("git_status", {"cwd": W}), ("read_file", {"path": W})],
}


@pytest.mark.parametrize("profile", sorted(JSON_RESULTS))
async def test_json_results_escape_text(rt: Runtime, profile: str) -> None:
    async with rt.session(profile=profile) as s:
        for name in NAMES:
            await s.write_file(f"{W}/{name}", "needle\n", owner=s.config.agent_user)
        await s.write_file(f"{W}/content.txt", CONTENT, owner=s.config.agent_user)
        await s.exec(f"cd {W} && git init -q", user=s.config.agent_user)
        landed = []
        calls = JSON_RESULTS[profile]
        for tool, args in calls:
            result = await s.call(tool, args)
            assert result.ok, result.text
            raw = [u for u in UNSAFE if u in result.text]
            if raw or "\\u202e" not in result.text:
                landed.append((tool, raw, result.text[:300]))
            if result.text.startswith(("{", "[")):
                # The escapes are JSON's own: a program parsing the text gets the real names back.
                assert json.loads(result.text) == result.data
    print(f"raw text in {profile}'s JSON results: tried {len(calls)}, landed {len(landed)}: {landed}")
    assert landed == []


def test_shown_json_is_json_of_the_same_value() -> None:
    value = {"names": NAMES + ["astral\U000e0041tag", "undecodable\udcff"], "n": 1}
    text = shown_json(value, indent=2)
    assert json.loads(text) == value
    assert not [u for u in UNSAFE + ["\U000e0041", "\udcff"] if u in text]
    assert "\\udb40\\udc41" in text


async def test_content_search_shows_only_names_that_are_there(rt: Runtime) -> None:
    """A name with a newline must not show in a content search as another path ("fake.txt"),
    nor hide the file ripgrep printed before it (its hits taken for a binary-file note)."""
    async with rt.session() as s:
        for name in NAMES:
            await s.write_file(f"{W}/{name}", "needle\n", owner=s.config.agent_user)
        result = await s.call("grep", {"pattern": "needle", "path": W, "output_mode": "content"})
    shown = {m["path"].rsplit("/", 1)[1] for m in result.data["matches"]}
    print(f"content search: {len(NAMES)} files, shown {len(shown & set(NAMES))}, not there {shown - set(NAMES)}")
    assert shown == set(NAMES)
