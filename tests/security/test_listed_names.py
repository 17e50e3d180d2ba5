"""Names are shown escaped in every listing and search result: a name with a newline, a
terminal escape or a right-to-left override cannot make ls, glob or grep show a path that is
not there, or one that reads differently from what it is."""

from __future__ import annotations

import pytest

from caisson import Runtime

pytestmark = pytest.mark.anyio

W = "/workspace/names"
# Each would show as something else if printed raw: a second path on its own line, coloured or
# cleared text, a name read backwards ("exe.txt" shown as "txt.exe"), an invisible character.
NAMES = ["real\nfake.txt", "innocent\x1b[2K\rrm -rf ~", "report\u202etxt.exe", "zero\u200bwidth",
         "bell\x07", "line\u2028break", "tab\there", "back\\slash"]
UNSAFE = ["\nfake.txt", "\x1b", "\u202e", "\u200b", "\x07", "\u2028", "\t"]


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
    "amp": [("glob", {"filePattern": "names/*"}), ("Grep", {"pattern": "needle", "path": "names"})],
    "grida": [("list_files", {}), ("grep_files", {"pattern": "needle"})],
}


@pytest.mark.parametrize("profile", sorted(PROFILE_LISTINGS))
async def test_profile_listings_escape_names(rt: Runtime, profile: str) -> None:
    """Profiles' own listings: Aar's plain text, AgentLoop's, Amp's and Grida's JSON (where JSON itself
    escapes newlines and controls, but not bidi or invisible characters)."""
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
