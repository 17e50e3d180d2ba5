"""Metadata at cautious outside the roots, through the whole policy (deny-all approvals).

The roots are narrowed to a project directory, so the agent owns files outside them. Each
attack is a command the classifier places inside the root: symbolic links made in one call
(by git apply, as a checkout or a clone makes them), then chmod, touch, chgrp or setfattr
through them in the next (the classifier cannot see where a link made earlier leads). gVisor's read-only views refuse every one. On runc nothing in
the kernel does: Landlock (ABI 7 here) has no right for mode, owner, times or extended
attributes, and a seccomp filter sees a path argument only as a pointer. The runc case is
an expected failure until the kernel offers a way (README, Known limits).
"""

from __future__ import annotations

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest, Policy

pytestmark = pytest.mark.anyio

ROOT = "/workspace/proj"
OUTSIDE = ("/workspace/f", "/workspace/g", "/workspace")
# ln with a target is dangerous; git apply of a patch that adds links is ordinary work (cautious).
LINKS = {"lf": "/workspace/f", "up": "/workspace", "rel": ".."}
PATCH = "".join(
    f"diff --git a/{name} b/{name}\nnew file mode 120000\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n"
    f"+{target}\n\\ No newline at end of file\n"
    for name, target in LINKS.items()
)
ATTACKS = [
    "chmod 777 lf", "chmod 0 up/g", "chmod 700 up", "chmod 751 rel/f", "touch lf",
    "touch -d 2000-01-01 up/g", "touch -m -t 200001010000 rel/g", "chgrp agent lf",
    "command -v setfattr >/dev/null && setfattr -n user.pwn -v 1 lf", "chmod -R 777 up/",
]


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


@pytest.mark.parametrize(
    "gvisor",
    [pytest.param(False, marks=pytest.mark.xfail(strict=True, reason="runc: no kernel rule sees metadata by path")),
     True],
    ids=["runc", "gvisor"],
)
async def test_cautious_changes_no_metadata_outside_the_roots(rt: Runtime, gvisor: bool) -> None:
    policy = Policy(workspace_roots=[ROOT, "/tmp"])
    async with rt.session(gvisor=gvisor, approval_handler=deny, policy=policy) as s:
        agent = s.config.agent_user
        for path in ("/workspace/f", "/workspace/g", f"{ROOT}/keep"):
            await s.write_file(path, "x\n", owner=agent)
        look = "stat -c '%n %a %u %g %x %y %z' " + " ".join(OUTSIDE) + "; getfattr -d /workspace/f 2>/dev/null"
        await s.call("write_file", {"path": f"{ROOT}/links.diff", "content": PATCH})
        made = await s.call("bash", {"command": "git init -q && git apply links.diff && ls -l", "working_dir": ROOT})
        assert made.ok and made.level is not None and made.level.value == "cautious", made.text
        before = (await s.exec(look, user="root")).stdout
        landed, allowed = [], 0
        for command in ATTACKS:
            result = await s.call("bash", {"command": command, "working_dir": ROOT})
            allowed += result.decision in ("allow", "warn")
            after = (await s.exec(look, user="root")).stdout
            if after != before:
                landed.append(command)
                before = after
        # A control inside the root: cautious work there keeps its metadata rights.
        control = await s.call("bash", {"command": "chmod 600 keep && find keep -perm 600", "working_dir": ROOT})
    kind = "gvisor" if gvisor else "runc"
    print(f"metadata at cautious outside the roots ({kind}): tried {len(ATTACKS)}, allowed {allowed}, "
          f"landed {len(landed)}: {landed}")
    assert control.ok and control.text.strip().endswith("keep"), control.text
    assert landed == []
