"""copy_out_to through RemoteRuntime and caisson serve's copy-out route, attacked as
``tests/security/test_copy_out.py`` attacks the library's: the archive is unpacked on the
client's machine by the same containment."""

from __future__ import annotations

from pathlib import Path

import pytest

from caisson import RemoteRuntime
from tests.security.test_copy_out import RACER, WORKSPACE_ATTACK, Arena, attack_copies
from tests.server.harness import Api, approving

pytestmark = pytest.mark.anyio


async def test_remote_copy_out_to_lands_nothing(sqlite_api: Api, tmp_path: Path) -> None:
    arena = Arena(tmp_path)
    t = sqlite_api.tenant("copy-out-attack")
    try:
        async with RemoteRuntime(sqlite_api.url, t.token) as rt, rt.session() as s:
            # The tenant's commands are decided as bash's: the agent's set-up and racer are
            # dangerous, so the tenant approves them.
            with approving(t):
                made = await s.exec(WORKSPACE_ATTACK.format(abs=arena.abs), timeout=120)
                assert made.exit_code == 0, made.stderr
                racer = await s.spawn(RACER.format(abs=arena.abs))
            tried, landed = await attack_copies(arena, 6, lambda i: s.copy_out_to("/workspace/out", arena.dest / str(i)))
            await s.task_signal(racer.task_id)
        # A tenant's copy follows the secret policy: files with other names (sub/file and its hard
        # link) are left out, since one may be a secret's; the rest arrives.
        assert (arena.dest / "0" / "run.sh").read_text() == "#!/bin/sh\necho hi\n"
        assert not (arena.dest / "0" / "sub" / "file").exists() and not (arena.dest / "0" / "hardlink").exists()
        print(f"RemoteRuntime.copy_out_to through caisson serve: tried {tried}, landed {landed}")
        assert landed == 0
    finally:
        arena.close()
