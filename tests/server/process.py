"""``caisson serve`` as deployed: its own process, started from the command line, stopped by
signals (SIGTERM, SIGINT, SIGKILL) as systemd, Docker or Kubernetes would."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import sqlalchemy as sa

from caisson.server.store import database_url
from tests.server.harness import TenantKey, admin_client, make_tenant

START_TIMEOUT = 180.0


def fresh_database(postgres_url: str) -> str:
    """A new, empty database on the test PostgreSQL: a server's first start there makes its
    admin key, whatever other tests left in theirs."""
    name = f"caisson_{secrets.token_hex(4)}"
    engine = sa.create_engine(database_url(postgres_url, ""), isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as c:
            c.execute(sa.text(f"CREATE DATABASE {name}"))
    finally:
        engine.dispose()
    return postgres_url.rsplit("/", 1)[0] + "/" + name


class ServeProcess:
    """``caisson serve --port 0`` on ``state_dir`` (and ``db``); its URL and the admin key it
    printed (only at the store's first start). Its stderr goes to ``stderr.log``."""

    def __init__(self, state_dir: Path, *args: str, db: str | None = None, admin_token: str | None = None) -> None:
        self.state_dir = state_dir
        self.stderr_path = state_dir / "stderr.log"
        cmd = [sys.executable, "-m", "caisson.interfaces.cli", "serve", "--port", "0", "--state-dir", str(state_dir), *args]
        if db:
            cmd += ["--db", db]
        self._stderr = self.stderr_path.open("ab")
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env={**os.environ, "CAISSON_STATE_DIR": str(state_dir)},
        )
        self.url = ""
        self.admin_token = admin_token or ""
        found = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if "listening on " in line:
                    self.url = line.split("listening on ", 1)[1].split()[0]
                elif "admin API key" in line:
                    self.admin_token = line.rsplit(" ", 1)[1].strip()
                if self.url and self.admin_token:
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        if not found.wait(START_TIMEOUT) or not self.url:
            self.proc.kill()
            raise AssertionError(f"caisson serve did not start: {self.stderr()[-3000:]}")

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            self._stderr.close()

    def kill(self) -> None:
        """``kill -9``: no clean-up of any kind."""
        self.proc.kill()
        self.proc.wait(30)
        self._stderr.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.kill()
        self._stderr.close()

    @property
    def admin(self) -> httpx.Client:
        return admin_client(self.url, self.admin_token)

    def tenant(self, name: str, **quotas: object) -> TenantKey:
        return make_tenant(self.url, self.admin_token, name, name, quotas)
