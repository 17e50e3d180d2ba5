"""A client generated from the ``/v1`` OpenAPI document by a maintained generator
(openapi-python-client), with nothing added by hand: it authenticates through the document's
bearer security scheme alone and drives a real ``caisson serve`` process: open a session, run
a command, make a tool call, page through a list, close."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.server.process import ServeProcess


def generate(doc: dict[str, Any], where: Path) -> Any:
    """The client package the generator makes of ``doc``, imported."""
    (where / "openapi.json").write_text(json.dumps(doc))
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", str(where / "openapi.json"),
         "--output-path", str(where / "caisson_client"), "--meta", "none"],
        cwd=where, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # Every operation became a function: nothing of the document was skipped.
    assert "Unable to" not in done.stdout + done.stderr, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    try:
        return importlib.import_module("caisson_client")
    finally:
        sys.path.remove(str(where))


def test_a_generated_client_needs_only_the_documents_security_scheme(sandbox_image: str, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    server = ServeProcess(tmp_path / "state")
    try:
        t = server.tenant("generated")
        doc = httpx.get(server.url + "/openapi.json", timeout=60).json()
        client_pkg = generate(doc, tmp_path)
        from caisson_client.api.calls import call, exec_command
        from caisson_client.api.sessions import create_session, delete_session, get_session, list_sessions
        from caisson_client.models import CallBody, CallBodyArgs, ExecBody, Problem, SessionBody

        # The key goes where the document's scheme says (a bearer token), by the generated code.
        client = client_pkg.AuthenticatedClient(
            base_url=server.url, token=t.token, raise_on_unexpected_status=True, timeout=httpx.Timeout(120)
        )
        opened = [create_session.sync(client=client, body=SessionBody()) for _ in range(3)]
        sid = opened[0].id
        ran = exec_command.sync(sid, client=client, body=ExecBody(command="echo generated; exit 3"))
        assert (ran.stdout, ran.exit_code) == ("generated\n", 3)
        result = call.sync(sid, client=client, body=CallBody(tool="calculate", args=CallBodyArgs.from_dict({"expression": "6 * 7"})))
        assert result.ok and "42" in result.text

        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = list_sessions.sync(client=client, limit=2, **({"cursor": cursor} if cursor else {}))
            seen += [s.id for s in page.items]
            pages += 1
            cursor = page.next_cursor if isinstance(page.next_cursor, str) else None
            if cursor is None:
                break
        assert seen == [s.id for s in opened] and pages == 2

        for s in opened:
            assert delete_session.sync_detailed(s.id, client=client).status_code == 204
        assert get_session.sync(sid, client=client).state == "closed"

        # Without the scheme's token the same generated call is refused, with a problem body.
        refused = list_sessions.sync_detailed(client=client_pkg.Client(base_url=server.url, timeout=httpx.Timeout(120)))
        assert refused.status_code == 401 and isinstance(refused.parsed, Problem) and refused.parsed.error == "unauthorized"
        print(f"generated client: {len(doc['paths'])} paths; opened 3, ran a command and a call, paged 2, closed 3")
    finally:
        server.stop()
