"""The dashboard: the site's files, and its pages in a real headless Chromium (no console errors,
the overview lists the cases, a case page draws its series with the steps marked and shows the
run in its hover), served by `history serve` too. One screenshot is kept as an artifact."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest

from benchcore.cli.commands import main
from benchcore.history.store import HistoryStore
from opbench.backends.mxnet.suite import SUITE as OPBENCH
from rnnbench.suite import SUITE as RNNBENCH

from .support import ROOT, Page, Step, derive_history, env

STEP_RUN = 7


@pytest.fixture(scope="module")
def history_db(reports, tmp_path_factory):
    """12 opbench nights (broadcast_add twice as slow from night 7) and 6 rnnbench nights (jit
    1.5x slower from night 3), in one SQLite store."""
    folder = tmp_path_factory.mktemp("dashboard")
    db = str(folder / "history.db")
    nights = (
        (OPBENCH, "opbench", 12, Step(lambda key: "/broadcast_add/" in key, STEP_RUN, 2.0)),
        (RNNBENCH, "rnnbench", 6, Step(lambda key: "/jit/" in key, 3, 1.5)),
    )
    for suite, name, runs, step in nights:
        for k, path in enumerate(derive_history(reports[name], folder / name, runs, [step])):
            assert main(suite, ["history", "add", str(path), "--db", db, "--label", f"nightly-{k}"]) == 0
    return db


@pytest.fixture(scope="module")
def sites(history_db, tmp_path_factory):
    folder = tmp_path_factory.mktemp("sites")
    for suite in (OPBENCH, RNNBENCH):
        assert main(suite, ["history", "dashboard", "--db", history_db, "-o", str(folder / suite.name)]) == 0
    return {suite: folder / suite for suite in ("opbench", "rnnbench")}


def history_of(db, suite):
    with HistoryStore.open(db) as store:
        return store.history(suite)


def latest_labels(db, suite):
    history = history_of(db, suite)
    return sorted(c.label for c in history.cases if c.run_id == history.runs[-1].id)


def test_the_site_works_offline_and_has_a_page_per_case(sites, history_db, capsys):
    site = sites["opbench"]
    assert (site / "index.html").is_file() and (site / "plotly.min.js").stat().st_size > 1_000_000
    pages = sorted((site / "cases").glob("*.html"))
    assert len(pages) == len({c.key for c in history_of(history_db, "opbench").cases})
    for page in [site / "index.html", *pages]:
        text = page.read_text()
        sources = re.findall(r"<script[^>]*src='([^']*)'", text) + re.findall(r'<script[^>]*src="([^"]*)"', text)
        assert all(not s.startswith(("http:", "https:", "//")) for s in sources), (page, sources)
        assert "cdn" not in text.lower()
    assert all("src='../plotly.min.js'" in p.read_text() for p in pages)


def test_writing_again_replaces_the_site_and_other_folders_are_refused(history_db, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(OPBENCH, ["history", "dashboard", "--db", history_db, "-o", str(site)]) == 0
    (site / "cases" / "stale.html").write_text("a case no longer in the history")
    capsys.readouterr()
    assert main(OPBENCH, ["history", "dashboard", "--db", history_db, "--site", str(site)]) == 2
    one_line = capsys.readouterr().err
    assert one_line.count("\n") == 1 and "holds a dashboard already; pass --overwrite to replace it" in one_line
    assert (site / "cases" / "stale.html").exists()
    assert main(OPBENCH, ["history", "dashboard", "--db", history_db, "-o", str(site), "--overwrite"]) == 0
    assert not (site / "cases" / "stale.html").exists() and (site / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["site"]  # no temporary folder left behind
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    capsys.readouterr()
    assert main(OPBENCH, ["history", "dashboard", "--db", history_db, "-o", str(foreign)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a dashboard" in err
    assert [p.name for p in foreign.iterdir()] == ["todo.txt"]


def test_the_overview_lists_the_latest_run_by_category_without_errors(browser, sites, history_db):
    page = Page(browser, (sites["opbench"] / "index.html").as_uri())
    try:
        assert page.errors == []
        links = page.page.locator("a.case")
        assert sorted(links.all_inner_texts()) == latest_labels(history_db, "opbench")
        text = page.page.inner_text("body")
        assert "binary_broadcast" in text and "rounding" in text and "Latest run: nightly-11" in text
        steps = [t for t in page.page.locator("td .slower").all_inner_texts() if t.startswith("+")]
        stepped = [label for label in latest_labels(history_db, "opbench") if label.startswith("broadcast_add")]
        assert len(steps) == len(stepped)
        first = links.first.get_attribute("href")
        assert (sites["opbench"] / first).is_file()
    finally:
        page.close()


def test_a_case_page_draws_its_series_with_the_step_marked(browser, sites, history_db, tmp_path):
    page_path = sorted((sites["opbench"] / "cases").glob("broadcast-add-*.html"))[0]
    page = Page(browser, page_path.as_uri())
    try:
        p = page.page
        p.wait_for_selector("#series .main-svg")
        assert page.errors == []
        traces = p.evaluate("() => document.getElementById('series').data.map("
                            "t => ({name: t.name, n: t.x.length, x: t.x, fill: t.fill || null}))")
        names = [t["name"] for t in traces]
        assert names.count("median of round medians") == 2  # forward and backward
        assert names.count("rounds' spread") == 2 and names.count("fitted level") == 2
        assert all(t["n"] == 12 for t in traces if t["name"] == "median of round medians")
        steps = [t for t in traces if t["name"] == "slower step"]
        assert len(steps) == 2 and all(t["x"][0].startswith("2026-11-08") for t in steps)  # night 7
        # what the browser drew: one SVG trace per data trace, lines with a path, 12 markers each
        assert p.locator("#series .scatterlayer .trace").count() == len(traces)
        assert all(d and len(d) > 20 for d in p.locator("#series .scatterlayer .trace .js-line").evaluate_all(
            "paths => paths.map(p => p.getAttribute('d'))"))
        assert p.locator("#series .scatterlayer .trace .points path").count() >= 2 * 12 + 2
        _check_hover(p)
        shot = tmp_path / "dashboard-case.png"
        p.mouse.move(0, 0)  # the picture without the hover label
        p.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if os.environ.get("HISTORY_SCREENSHOT"):  # refresh the README's picture on purpose only
            shutil.copyfile(shot, os.environ["HISTORY_SCREENSHOT"])
    finally:
        page.close()


def _check_hover(p):
    """Hovering the step's point shows its run, label, commit and environment."""
    point = p.locator("#series .scatterlayer .trace").nth(1).locator(".points path").nth(STEP_RUN)
    box = point.bounding_box()
    p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    label = p.wait_for_selector("#series .hoverlayer .hovertext", timeout=5000)
    text = label.text_content()
    assert f"nightly-{STEP_RUN}" in text and "commit c07" in text and "MXNet 1.9.1" in text and "rounds" in text


def test_the_rnnbench_dashboard_lists_its_runners(browser, sites, history_db):
    page = Page(browser, (sites["rnnbench"] / "index.html").as_uri())
    try:
        assert page.errors == []
        assert sorted(page.page.locator("a.case").all_inner_texts()) == latest_labels(history_db, "rnnbench") == [
            "cudnn", "jit"]
        page.page.click("text=jit")
        page.page.wait_for_selector("#series .main-svg")
        names = page.page.evaluate("() => document.getElementById('series').data.map(t => t.name)")
        assert "slower step" in names and "rounds' spread" not in names  # one round per run: no band
    finally:
        page.close()


def test_serve_serves_the_site(browser, sites):
    proc = subprocess.Popen([sys.executable, "-m", "opbench", "history", "serve", "-d", str(sites["opbench"]),
                             "--port", "0"], cwd=ROOT, env=env(), stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        url = re.search(r"http://[\d.]+:\d+/", line).group(0)
        page = Page(browser, url)
        try:
            assert page.errors == []  # over HTTP too: no favicon 404
            case = page.page.locator("a.case").first.get_attribute("href")
        finally:
            page.close()
        for path, size in ((case, 10_000), ("plotly.min.js", 1_000_000)):
            with urllib.request.urlopen(url + path, timeout=10) as answer:
                assert answer.status == 200 and len(answer.read()) > size
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        proc.stderr.close()
    assert proc.returncode == 0


def test_serve_without_a_site_is_a_usage_error(tmp_path, capsys):
    assert main(OPBENCH, ["history", "serve", "-d", str(tmp_path / "none")]) == 2
    assert "holds no dashboard" in capsys.readouterr().err


def test_dashboard_of_an_empty_store_is_a_usage_error(tmp_path, reports, capsys):
    db = str(tmp_path / "h.db")
    assert main(RNNBENCH, ["history", "add", str(reports["rnnbench"]), "--db", db]) == 0
    capsys.readouterr()
    assert main(OPBENCH, ["history", "dashboard", "--db", db, "-o", str(tmp_path / "site")]) == 2
    assert "holds no opbench run" in capsys.readouterr().err
    assert not (tmp_path / "site").exists()
