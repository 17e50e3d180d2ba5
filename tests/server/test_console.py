"""The console page in a real browser (Debian's headless Chromium, driven by Selenium): a
tenant signs in with its key, sees its live session, the pending approval of a dangerous
call and the audit stream, presses Approve, and the waiting call completes."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
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
        wait = WebDriverWait(browser, 20)
        row = wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "#approvals tr[data-approval]")))
        assert DANGEROUS in row.text and sid in row.text
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, f'#sessions tr[data-session="{sid}"]')))
        wait.until(lambda d: "ls /workspace" in d.find_element(By.ID, "audit").text)
        shot = SCREENSHOT if os.environ.get("CAISSON_UPDATE_SCREENSHOT") else tmp_path / "console.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        assert waiting.is_alive()                      # still waiting for the person at the page

        row.find_element(By.CSS_SELECTOR, 'button[data-decision="allow_once"]').click()
        waiting.join(30)
        assert box["result"]["ok"] is True and box["result"]["text"].strip() == "42"
        assert box["result"]["decision"] == "approved"
        wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#approvals tr[data-approval]"))
        wait.until(lambda d: "approved" in d.find_element(By.ID, "audit").text)
        assert c.get("/approvals", params={"state": "allow_once"}).json()[0]["approver"] == t.key_id
        c.delete(f"/sessions/{sid}")
