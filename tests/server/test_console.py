"""The console page in a real browser (Debian's headless Chromium, driven by Selenium): a
tenant signs in with its key, sees its live session, the pending approval of a dangerous
call and the audit stream, presses Approve, and the waiting call completes; an operator pages
through 50 sessions and 1,000 events, filters, closes, and sees a killed session's reason."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.server.harness import Api
from tests.server.test_api import DANGEROUS, call_in_thread, open_session

# Refreshed only when asked, so a test run leaves the checkout as it was.
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    driver_path = shutil.which("chromedriver")
    assert driver_path, "chromedriver is missing: scripts/setup.sh installs Debian's chromium-driver"
    options = webdriver.ChromeOptions()
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(flag)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_approve_from_the_console(sqlite_api: Api, browser: webdriver.Chrome, tmp_path: Path) -> None:
    t = sqlite_api.tenant("console")
    with t.client() as c:
        sid = open_session(c)
        c.post(f"/sessions/{sid}/calls", json={"tool": "bash", "args": {"command": "ls /workspace"}})
        waiting, box = call_in_thread(t, sid, {"command": DANGEROUS})

        browser.get(f"{sqlite_api.url}/console")
        browser.find_element(By.ID, "key").send_keys(t.token)
        browser.find_element(By.ID, "connect").click()
        # The page redraws its tables every second: an element found may be gone when read,
        # so each look is retried, and a row is read in the same script that finds it.
        wait = WebDriverWait(browser, 20, ignored_exceptions=(StaleElementReferenceException,))
        row: str = wait.until(lambda d: d.execute_script(
            "const r = document.querySelector('#approvals tr[data-approval]'); return r ? r.textContent : null"))
        assert DANGEROUS in row and sid in row
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#sessions tr[data-session="{sid}"]')))
        wait.until(lambda d: "ls /workspace" in d.find_element(By.ID, "audit").text)
        shot = SCREENSHOT if os.environ.get("CAISSON_UPDATE_SCREENSHOT") else tmp_path / "console.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        assert waiting.is_alive()                      # still waiting for the person at the page

        # Found and pressed in one script: the page redraws its tables every second.
        browser.execute_script("""document.querySelector('#approvals tr[data-approval] button[data-decision="allow_once"]').click()""")
        waiting.join(30)
        assert box["result"]["ok"] is True and box["result"]["text"].strip() == "42"
        assert box["result"]["decision"] == "approved"
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#approvals tr[data-approval]"))
        wait.until(lambda d: "approved" in d.find_element(By.ID, "audit").text)
        assert c.get("/approvals", params={"state": "allow_once"}).json()[0]["approver"] == t.key_id
        c.delete(f"/sessions/{sid}")


def test_an_operator_filters_pages_and_closes_from_the_console(
    sqlite_api: Api, browser: webdriver.Chrome, docker_engine: docker.DockerClient
) -> None:
    """An admin key at the page: 50 sessions of two tenants paged 20 at a time, then one
    tenant's (filter), the audit of one session, 1,000 events paged 50 at a time (older,
    newer), a session closed with its Close button, and one whose container was killed from
    outside shown closed with its reason."""
    a = sqlite_api.tenant("console-a", calls_per_minute=100_000, max_sessions=60)
    b = sqlite_api.tenant("console-b")
    with a.client() as ca, b.client() as cb, sqlite_api.admin as admin:
        # The engine's container starts bound the opening: the 1,000 events go to the first
        # three sessions while the rest (b's two too) still open.
        with ThreadPoolExecutor(4) as pool:
            opening = [pool.submit(open_session, ca) for _ in range(48)] + [pool.submit(open_session, cb) for _ in range(2)]
            first = [f.result() for f in opening[:3]]
            for n in range(1000):
                sid = first[n % 3]
                assert ca.post(f"/v1/sessions/{sid}/calls", json={"tool": "calculate", "args": {"expression": f"{n} + 1"}}).json()["ok"]
            a_sids = [f.result() for f in opening[:48]]
            b_sids = [f.result() for f in opening[48:]]
        assert cb.post(f"/v1/sessions/{b_sids[0]}/calls", json={"tool": "calculate", "args": {"expression": "1"}}).json()["ok"]

        browser.get(f"{sqlite_api.url}/console")
        browser.find_element(By.ID, "key").send_keys(sqlite_api.admin_token)
        browser.find_element(By.ID, "connect").click()
        wait = WebDriverWait(browser, 30, ignored_exceptions=(StaleElementReferenceException,))

        # Read in one script: the page redraws its tables every second.
        def shown(table: str, attribute: str = "session") -> list[str]:
            found: list[str] = browser.execute_script(
                f"return [...document.querySelectorAll('#{table} tbody tr')].map(r => r.dataset.{attribute} || '')"
            )
            return found

        def text(table: str) -> str:
            found: str = browser.execute_script(f"return document.querySelector('#{table} tbody').textContent")
            return found

        # Every tenant's 50 sessions (the server's other tests may have more open), 20 a page.
        pages: list[list[str]] = []
        wait.until(lambda d: len(shown("sessions")) == 20)
        while True:
            pages.append(shown("sessions"))
            if browser.find_element(By.ID, "s-next").get_property("disabled"):
                break
            browser.find_element(By.ID, "s-next").click()
            wait.until(lambda d, before=pages[-1]: shown("sessions") and shown("sessions")[0] not in before)
        seen = [sid for page in pages for sid in page]
        assert len(seen) == len(set(seen)) and len(pages) >= 3
        # A session missing from the pages may only be one that ended by itself meanwhile (a
        # loaded engine stops a container now and then), and then the API says so.
        ended = {sid: admin.get(f"/v1/sessions/{sid}").json() for sid in set(a_sids + b_sids) - set(seen)}
        assert all(info["state"] == "closed" and info["closed_reason"] for info in ended.values()), ended
        assert len(ended) < 5, ended
        browser.find_element(By.ID, "s-prev").click()
        wait.until(lambda d: shown("sessions") == pages[-2])
        # The live pages are checked: a's sessions close from here, behind the rest (each close
        # waits on the engine), all but the three whose audit is paged below. What follows shows
        # b's tenant only, or one of those three sessions' audit.
        with ThreadPoolExecutor(4) as closer:
            closes = [closer.submit(ca.delete, f"/v1/sessions/{sid}") for sid in a_sids[3:]]

            browser.find_element(By.ID, "f-tenant").send_keys(b.tenant_id)
            browser.find_element(By.ID, "apply").click()
            wait.until(lambda d: set(shown("sessions")) == set(b_sids))
            wait.until(lambda d: shown("audit", "tenant") == [b.tenant_id])

            browser.find_element(By.ID, "f-tenant").clear()
            browser.find_element(By.ID, "f-session").send_keys(a_sids[1])
            browser.find_element(By.ID, "apply").click()
            wait.until(lambda d: len(shown("audit")) == 50 and set(shown("audit")) == {a_sids[1]})
            first_page = text("audit")
            browser.find_element(By.ID, "older").click()
            wait.until(lambda d: text("audit") != first_page and len(shown("audit")) == 50)
            assert set(shown("audit")) == {a_sids[1]}
            browser.find_element(By.ID, "newer").click()
            wait.until(lambda d: text("audit") == first_page)

            browser.find_element(By.ID, "f-session").clear()
            browser.find_element(By.ID, "f-tenant").send_keys(b.tenant_id)
            browser.find_element(By.ID, "apply").click()
            wait.until(lambda d: set(shown("sessions")) == set(b_sids))
            browser.execute_script(f"document.querySelector('button[data-close=\"{b_sids[1]}\"]').click()")
            browser.switch_to.alert.accept()
            wait.until(lambda d: b_sids[1] not in shown("sessions") and b_sids[1] in shown("closed"))
            assert cb.get(f"/v1/sessions/{b_sids[1]}").json()["state"] == "closed"
            assert "closed on request" in text("closed")

            # A container killed from outside: the page shows its session closed, and why.
            [container] = docker_engine.containers.list(filters={"label": f"caisson.session={b_sids[0]}"})
            container.kill()
            wait.until(lambda d: b_sids[0] not in shown("sessions") and b_sids[0] in shown("closed"))
            row = browser.execute_script(f"return document.querySelector('#closed tr[data-session=\"{b_sids[0]}\"]').textContent")
            reason = cb.get(f"/v1/sessions/{b_sids[0]}").json()["closed_reason"]
            assert reason and reason != "closed on request" and reason in row
            print(f"console as admin: {len(seen)} sessions in {len(pages)} pages, filtered by tenant and session, "
                  f"1,000 events paged, 1 closed, 1 killed shown as: {reason!r}; ended by themselves meanwhile: {len(ended)}")
            closes += [closer.submit(ca.delete, f"/v1/sessions/{sid}") for sid in a_sids[:3]]
        assert [f.result().status_code for f in closes] == [204] * len(a_sids)
