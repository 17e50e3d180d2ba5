"""A tenant's snapshots and forks count against its ``snapshot_disk`` quota, through a real
server: a snapshot that would take them past it is refused with a problem document naming the
quota and the usage, and the engine holds nothing more for it."""

from __future__ import annotations

import re
import threading

import docker

from tests.server.harness import Api
from tests.server.test_api import open_session

MB = 10**6


def _snapshot_images(engine: docker.DockerClient, sid: str) -> set[str]:
    """The snapshot images of one session (other tests may take snapshots meanwhile)."""
    return {image.id for image in engine.images.list(name="caisson/snapshot", filters={"label": f"caisson.snapshot_of={sid}"})}


def test_a_snapshot_past_the_tenants_disk_quota_is_refused(sqlite_api: Api, docker_engine: docker.DockerClient) -> None:
    t = sqlite_api.tenant("snapdisk", snapshot_disk="100m")
    with t.client() as c:
        sid = open_session(c)
        wrote = c.post(f"/sessions/{sid}/exec", json={"command": f"head -c {60 * MB} /dev/urandom > /workspace/a"})
        assert wrote.json()["exit_code"] == 0, wrote.text
        first = c.post(f"/sessions/{sid}/snapshot")
        assert first.status_code == 201, first.text
        before = _snapshot_images(docker_engine, sid)

        refused = {"snapshot": c.post(f"/sessions/{sid}/snapshot"), "fork": c.post(f"/sessions/{sid}/fork", json={"n": 2})}
        for what, r in refused.items():
            body = r.json()
            print(f"{what}: {r.status_code} {body.get('detail')}")
            assert r.status_code == 429, r.text
            assert r.headers["content-type"] == "application/problem+json"
            assert "snapshot_disk" in body["detail"] and "100m" in body["detail"]
            # The usage: the first snapshot's 60 MB (57 MiB) held, the session's to add (its
            # layer's allocated blocks: the 60 MB and a little metadata).
            usage = re.search(r"hold (\d+) MiB and this snapshot would add (\d+) MiB", body["detail"])
            assert usage is not None and all(57 <= int(n) <= 60 for n in usage.groups()), body["detail"]
        assert _snapshot_images(docker_engine, sid) == before, "a refused snapshot left an image"
        assert [s["id"] for s in c.get("/snapshots").json()] == [first.json()["id"]]

        # Under the quota (the session's files removed), a snapshot is taken again.
        # Through the file route: a tenant's `rm` is decided as bash's and waits for approval.
        removed = c.delete(f"/v1/sessions/{sid}/files", params={"path": "/workspace/a"})
        assert removed.status_code == 200, removed.text
        again = c.post(f"/sessions/{sid}/snapshot")
        assert again.status_code == 201, again.text
        assert c.delete(f"/sessions/{sid}").status_code == 204


def test_parallel_snapshots_do_not_all_pass_the_check(sqlite_api: Api, docker_engine: docker.DockerClient) -> None:
    """Six snapshots asked at once, room for one: the checks must not all see the same usage."""
    t = sqlite_api.tenant("snaprace", snapshot_disk="100m")
    with t.client() as c:
        sids = [open_session(c) for _ in range(3)]
        for sid in sids:
            wrote = c.post(f"/sessions/{sid}/exec", json={"command": f"head -c {60 * MB} /dev/urandom > /workspace/a"})
            assert wrote.json()["exit_code"] == 0, wrote.text
        statuses: list[int] = []

        def snap(sid: str) -> None:
            with t.client() as own:
                statuses.append(own.post(f"/sessions/{sid}/snapshot").status_code)

        threads = [threading.Thread(target=snap, args=(sid,)) for sid in sids * 2]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        landed = statuses.count(201)
        print(f"parallel snapshots past the quota: tried {len(statuses)}, taken {landed} (room for 1), "
              f"refused {statuses.count(429)}; landed past the quota {max(0, landed - 1)}")
        assert landed == 1 and statuses.count(429) == len(statuses) - 1, statuses
        for sid in sids:
            assert c.delete(f"/sessions/{sid}").status_code == 204
