"""`offline-eval review` (issue #27): the labelling page, in a real browser.

The browser is Debian's chromium (/usr/bin/chromium) driven by Playwright's Python package with that
executable (no browser is downloaded); those tests are skipped when either is missing. The run folders
are the report's hostile fixture (tests/report/test_report_fixtures.py, with a run.json and more hostile text
in every field) and a real `offline-eval run` with the tiny models.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import urllib.parse
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

import offline_eval.metrics
from offline_eval.cli import main
from offline_eval.people.labels import (
    LABELS_FILE, Label, append_label, cohen_kappa, latest, questions_for_people, read_labels,
)
from offline_eval.metrics import Metric, register_metric
from offline_eval.metrics.criteria import criteria_from_tables, criterion_metric
from offline_eval.metrics.ragas import Faithfulness
from offline_eval.review.server import ReviewServer
from offline_eval.review.session import REVIEW_FILE, Review, ReviewError, seeded_order
from offline_eval.thresholds import MIN_SHARED_LABELS

from tests.report.test_report import CHROMIUM_FLAGS
from tests.report.test_report_fixtures import EVIL, build_run

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sample.jsonl"
CHROMIUM = "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else shutil.which("chromium")
# The report test's flags, less those Playwright sets itself (headless) or that would flood its pipe.
FLAGS = [f for f in CHROMIUM_FLAGS if f not in ("--headless", "--enable-logging=stderr", "--v=0")]
FINGERPRINT = "f00dfeed" * 5
BOTH = ["faithfulness", "answer_correctness"]

HOSTILE = {
    "script": "<script>window.__pwned=3</script>",
    "close": "</script><script>window.__pwned=4</script>",
    "entities": "&lt;b&gt;not bold&lt;/b&gt; &amp;amp; &#x3C;i&#x3E;",
    "rtl": "\u202egnp.exe\u202c and \u2067isolate\u2069",
    "url": "javascript:window.__pwned=5",
    "img": '<img src=x onerror="window.__pwned=6">',
}
HOSTILE_TEXT = " | ".join(HOSTILE.values())


def shown(text: str) -> str:
    """What the page shows of a text: bidirectional overrides and isolates written out."""
    return re.sub(r"[\u202a-\u202e\u2066-\u2069]", lambda m: f"[U+{ord(m.group()):X}]", text)


def hostile_run(root: Path, name: str = "run") -> Path:
    """The report's hostile run folder (EVIL in an answer, an id with HTML characters) with a run.json,
    hostile text added to every field a sample shows and a conversation history."""
    folder = build_run(root, name=name)
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    rows[0]["id"] = "q01" + HOSTILE["close"] + HOSTILE["rtl"]
    for row in rows:
        s = row["sample"]
        for field in ("question", "ground_truth"):
            s[field] += " " + HOSTILE_TEXT
        if s["answer"]:
            s["answer"] += " " + HOSTILE_TEXT
        s["contexts"].append(HOSTILE_TEXT)
        s["keypoints"].append(HOSTILE["img"])
        s["conversation"] = [{"role": "user" + HOSTILE["script"], "content": "an earlier turn " + HOSTILE_TEXT},
                             {"role": "assistant", "content": HOSTILE["close"]}, "a turn as a string " + HOSTILE["url"]]
        for score in row["scores"].values():
            score["explanation"] = (score.get("explanation") or "") + HOSTILE_TEXT
            for claim in score.get("metadata", {}).get("claims", []):
                claim["claim"] += " " + HOSTILE["img"]
    (folder / "results.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                          encoding="utf-8")
    (folder / "run.json").write_text(json.dumps({"fingerprint": FINGERPRINT, "metrics": []}), encoding="utf-8")
    return folder


def steps(review: Review) -> list[tuple[str, str]]:
    """Every (sample id, metric) the page asks about, in the order it asks."""
    return [(e.id, m) for e in review.queue for m in review.asked(e)]


@contextmanager
def serving(folder: Path, metrics: list[str] | None = None, **options: Any) -> Iterator[ReviewServer]:
    server = ReviewServer(Review(folder, metrics, **options))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


# ----------------------------------------------------------------------------- the browser

needs_browser = pytest.mark.skipif(CHROMIUM is None or sync_playwright is None,
                                   reason="needs /usr/bin/chromium (apt-get install chromium) and playwright "
                                          "(pip install playwright; no browser download)")


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


class Tab:
    """A browser tab on the review page, keeping every console message, script error and failed request."""

    def __init__(self, browser: Any, url: str) -> None:
        self.page = browser.new_context().new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.url}"))
        self.go(url)

    def go(self, url: str) -> None:
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready='1']")

    def reload(self) -> None:
        self.page.reload()
        self.page.wait_for_selector("body[data-ready='1']")

    def press(self, key: str) -> None:
        """Press a key and wait for the page it leads to (the server has answered by then)."""
        before = int(self.page.evaluate("document.body.dataset.shown"))
        self.page.keyboard.press(key)
        self.page.wait_for_function("n => Number(document.body.dataset.shown) > n", arg=before)

    def at(self) -> tuple[str, str] | None:
        """The (sample id, metric) asked now; None on the page that says all is labelled."""
        if self.page.evaluate("document.body.dataset.pos") == "done":
            return None
        return (self.page.text_content("#sid"), self.page.text_content(".ask.current .meta"))

    def text(self, selector: str) -> str:
        return self.page.text_content(selector)

    def assert_inert(self) -> None:
        """Nothing from the data became markup or ran: the page's one script, none of the data's."""
        page = self.page
        assert page.evaluate("window.__pwned") is None
        assert page.evaluate("document.scripts.length") == 1
        assert page.locator("img, iframe, object, embed, a, b, i, form").count() == 0
        assert page.is_hidden("#error"), self.text("#error")
        assert self.problems == [], self.problems


# ----------------------------------------------------------------------------- labelling and resuming

@needs_browser
def test_keyboard_labels_go_to_the_file_and_a_reload_or_a_restart_resumes(browser, tmp_path):
    folder = hostile_run(tmp_path)
    plan = steps(Review(folder, BOTH))
    recorded = json.loads((folder / REVIEW_FILE).read_text(encoding="utf-8"))
    with serving(folder, BOTH) as server:
        tab = Tab(browser, server.url + "?annotator=alice")
        for (key, word), step in zip([("y", "yes"), ("n", "no"), ("u", "unsure")], plan):
            assert tab.at() == step
            tab.press(key)
        labels = read_labels(folder / LABELS_FILE)
        assert [(l.id, l.metric, l.word) for l in labels] == [s + (w,) for s, w in zip(plan, ["yes", "no", "unsure"])]
        for label in labels:
            assert label.annotator == "alice" and label.run == FINGERPRINT
            assert label.question == questions_for_people()[label.metric]
            assert recorded["order"][label.order] == label.id  # its place in the seeded order
        faithful = sum(1 for l in labels if l.metric == "faithfulness")
        assert f"faithfulness: {faithful} of 11 labelled" in tab.text("#progress")

        tab.reload()  # resumes at the first step not answered
        assert tab.at() == plan[3]
        tab.press("b")  # back to the last label given, and change it: a new line, the later one wins
        assert tab.at() == plan[2]
        assert "your answer: unsure" in tab.text(".ask.current")
        tab.press("y")
        assert tab.at() == plan[3]
        labels = read_labels(folder / LABELS_FILE)
        assert len(labels) == 4 and latest(labels)[(plan[2][1], plan[2][0], "alice")].word == "yes"
        tab.assert_inert()

    with serving(folder, BOTH) as server:  # a new server, a new port and token: the same place
        tab = Tab(browser, server.url + "?annotator=alice")
        assert tab.at() == plan[3]
        sample = plan[3][0]
        rest = [m for key, m in plan[3:] if key == sample]
        tab.press("s")  # skip: unsure to each question of the sample not answered yet, then the next sample
        assert tab.at() == next(step for step in plan if step[0] != sample and step not in plan[:3])
        skipped = [(l.metric, l.word) for l in read_labels(folder / LABELS_FILE)[4:]]
        assert skipped == [(m, "unsure") for m in rest]
        tab.assert_inert()


@needs_browser
def test_the_annotator_is_asked_on_the_page_and_kept_in_the_url(browser, tmp_path):
    folder = hostile_run(tmp_path)
    with serving(folder, ["faithfulness"]) as server:
        tab = Tab(browser, server.url)
        assert tab.page.is_visible("#ask-name") and tab.page.is_hidden("#card")
        tab.page.fill("#name", "carol")
        tab.page.click("#start")
        tab.page.wait_for_selector("#card:not([hidden])")
        assert "annotator=carol" in tab.page.url
        tab.press("y")
        assert [l.annotator for l in read_labels(folder / LABELS_FILE)] == ["carol"]
        tab.reload()
        assert tab.text("#who") == "carol"
        tab.assert_inert()


@needs_browser
def test_two_annotators_see_their_kappa_on_the_page(browser, tmp_path):
    folder = hostile_run(tmp_path)
    bob = HOSTILE["img"] + "bob"  # a name is data too
    words = {"alice": "yynn", bob: "ynnn"}  # p_o 3/4, p_e 1/2: kappa 0.5, but on 4 shared labels only
    more = {"alice": "yyynnn", bob: "yyyynn"}  # on all 10: p_o 8/10, p_e 1/2: kappa 0.6
    with serving(folder, ["faithfulness"]) as server:
        tabs = {name: Tab(browser, server.url + "?annotator=" + urllib.parse.quote(name)) for name in words}
        for keys in (words, more):
            for name, tab in tabs.items():
                for key in keys[name]:
                    tab.press(key)
            tab = tabs["alice"]
            tab.reload()
            cells = tab.page.locator("#agreement td").all_text_contents()
            assert sorted(cells[1:3]) == sorted(["alice", bob]) and cells[0] == "faithfulness"
            assert cells[3:] == (["4", "too few shared labels (n 4, needs 10)"] if keys is words else ["10", "0.60"])
        by = {name: {l.id: l.value for l in read_labels(folder / LABELS_FILE) if l.annotator == name} for name in words}
        assert cohen_kappa(by["alice"], by[bob]) == pytest.approx(0.6)
        assert tab.page.is_visible("#agreement-box")
        tab.assert_inert()
        tabs[bob].assert_inert()


@needs_browser
def test_every_field_of_the_hostile_samples_stays_text(browser, tmp_path):
    folder = hostile_run(tmp_path)
    review = Review(folder, BOTH)
    with serving(folder, BOTH) as server:
        tab = Tab(browser, server.url + "?annotator=alice")
        while tab.at() is not None:
            tab.press("y")
        tab.press("b")
        tab.page.keyboard.press("v")  # the judge's verdicts, shown only on what was answered
        seen = set()
        for entry in reversed(review.queue):
            row = review.row(entry)
            sample = row["sample"]
            page = tab.page
            page.wait_for_function("id => document.getElementById('sid').textContent === id", arg=shown(entry.id))
            assert tab.text("#question") == shown(sample["question"])
            assert tab.text("#answer") == shown(sample["answer"])
            assert tab.text("#reference") == shown(sample["ground_truth"])
            assert page.locator("#contexts li").all_text_contents() == [shown(c) for c in sample["contexts"]]
            assert page.locator("#keypoints li").all_text_contents() == [shown(k) for k in sample["keypoints"]]
            turns = page.locator("#conversation li").all_text_contents()
            assert turns == [shown("user" + HOSTILE["script"] + "an earlier turn " + HOSTILE_TEXT),
                             "assistant" + HOSTILE["close"], shown("a turn as a string " + HOSTILE["url"])]
            claims = [c["claim"] for c in row["scores"]["faithfulness"]["metadata"]["claims"]]
            assert page.locator("#statements li").all_text_contents() == [shown(c) for c in claims]
            verdicts = page.locator(".verdict").all_text_contents()
            assert len(verdicts) == len(review.asked(entry))
            assert shown(HOSTILE_TEXT) in verdicts[0] and shown(claims[0]) in verdicts[0]
            html = page.inner_html("#question")
            assert "&lt;script&gt;window.__pwned=3&lt;/script&gt;" in html and "&amp;lt;b&amp;gt;" in html
            tab.assert_inert()
            seen.add(entry.id)
            if entry is not review.queue[0]:
                tab.press("b")
                if tab.at()[0] == entry.id:  # a second question of the same sample
                    tab.press("b")
        assert seen == {e.id for e in review.queue} and "q06<&>" in seen
        assert any(EVIL in review.row(e)["sample"]["answer"] for e in review.queue)


# ----------------------------------------------------------------------------- the server's doors

def _request(server: ReviewServer, method: str, path: str, *, host: str | None = None, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Host": f"127.0.0.1:{server.port}" if host is None else host, **({"Content-Type": "application/json"} if data else {}),
            **(headers or {})}
    connection.request(method, path, body=data, headers=sent)
    reply = connection.getresponse()
    out = reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
    connection.close()
    return out


def test_a_wrong_token_and_a_foreign_host_get_403(tmp_path):
    folder = hostile_run(tmp_path)
    with serving(folder, ["faithfulness"]) as server:
        token, port = server.token, server.port
        assert server.server_address[0] == "127.0.0.1"
        assert re.fullmatch(rf"http://127\.0\.0\.1:{port}/[A-Za-z0-9_-]{{32}}/", server.url)
        status, headers, html = _request(server, "GET", f"/{token}/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "'unsafe-inline'" not in csp
        assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"
        assert not re.search(rb"https?://|//cdn|@import|url\(|\ssrc=", html, re.IGNORECASE)
        assert _request(server, "GET", f"/{token}/", host=f"localhost:{port}")[0] == 200

        for path in ("/", "/favicon.ico", "/nottoken/", f"/{token[:-1]}/", f"/{token}x/api/state?annotator=a",
                     f"/api/state?token={token}"):
            assert _request(server, "GET", path)[0] == 403, path
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}", f"127.0.0.1.evil:{port}", ""):
            status, _, body = _request(server, "GET", f"/{token}/api/state?annotator=a", host=host)
            assert status == 403 and b"faithfulness" not in body, host

        sample = json.loads(_request(server, "GET", f"/{token}/api/sample?pos=0&annotator=a")[2])
        label = {"annotator": "a", "id": sample["id"], "labels": {"faithfulness": "yes"}}
        assert _request(server, "POST", "/nottoken/api/label", body=label)[0] == 403
        assert _request(server, "POST", f"/{token}/api/label", body=label, host=f"evil.example:{port}")[0] == 403
        assert _request(server, "POST", f"/{token}/api/label", body=label,
                        headers={"Origin": "http://evil.example"})[0] == 403
        assert _request(server, "POST", f"/{token}/api/label", body=label,
                        headers={"Content-Type": "text/plain"})[0] == 415
        assert not (folder / LABELS_FILE).exists()
        status, headers, body = _request(server, "POST", f"/{token}/api/label", body=label,
                                         headers={"Origin": f"http://127.0.0.1:{port}"})
        assert status == 200 and headers["content-type"].startswith("application/json")
        assert [l.word for l in read_labels(folder / LABELS_FILE)] == ["yes"]
        assert b"<" not in _request(server, "GET", f"/{token}/api/sample?pos=0&annotator=a")[2]  # as \u003c
        status, _, body = _request(server, "POST", f"/{token}/api/label",
                                   body={**label, "labels": {"faithfulness": "maybe"}})
        assert status == 400 and "expected yes, no or unsure" in json.loads(body)["error"]


# ----------------------------------------------------------------------------- a real run, killed

@pytest.fixture(scope="module")
def real_run(tiny_profile, tmp_path_factory) -> Path:
    """A folder written by `offline-eval run` with the tiny models (rouge_l has no question for people;
    answer_similarity leaves the sample without a reference unscored)."""
    out = tmp_path_factory.mktemp("review-run") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "offline_eval.cli", "run", "--dataset", str(EXAMPLES), "--profile", str(tiny_profile),
         "--metrics", "faithfulness,answer_similarity,rouge_l", "--quiet", "--no-cache", "--no-report",
         "--threads", "1", "--output", str(out)], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return out


def _review_process(folder: Path, *args: str) -> tuple[subprocess.Popen, str]:
    program = Path(sys.executable).with_name("offline-eval")
    command = [str(program)] if program.exists() else [sys.executable, "-m", "offline_eval.cli"]
    proc = subprocess.Popen([*command, "review", str(folder), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    line = proc.stdout.readline()
    assert line.startswith("open http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, line.split()[1]


@needs_browser
def test_kill_9_between_two_clicks_loses_no_label(real_run, browser, tmp_path):
    folder = shutil.copytree(real_run, tmp_path / "run")
    review = Review(folder)
    assert review.metrics == ["faithfulness", "answer_similarity"]  # the default: those with a question
    with pytest.raises(ReviewError, match="rouge_l has no question for people"):
        Review(folder, ["rouge_l"])
    plan = steps(review)
    proc, url = _review_process(folder, "--annotator", "alice")
    try:
        tab = Tab(browser, url)
        tab.press("y")
        tab.press("n")
        assert tab.at() == plan[2]
        os.kill(proc.pid, signal.SIGKILL)  # between two clicks
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
    labels = read_labels(folder / LABELS_FILE)
    assert [(l.id, l.metric, l.word) for l in labels] == [plan[0] + ("yes",), plan[1] + ("no",)]

    proc, url = _review_process(folder, "--annotator", "alice")
    try:
        tab.go(url)
        assert tab.at() == plan[2]  # the restarted server resumes where the killed one stopped
        tab.press("u")
        assert [l.word for l in read_labels(folder / LABELS_FILE)] == ["yes", "no", "unsure"]
        tab.assert_inert()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    assert "every label given is in" in proc.stderr.read()


# ----------------------------------------------------------------------------- the order, the refusals, kappa

def test_the_seeded_order_is_recorded_once_and_kept(tmp_path):
    folder = hostile_run(tmp_path)
    ids = [json.loads(line)["id"] for line in (folder / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    review = Review(folder, BOTH)
    recorded = json.loads((folder / REVIEW_FILE).read_text(encoding="utf-8"))
    assert recorded["seed"] == 0 and recorded["run"] == FINGERPRINT
    assert recorded["order"] == seeded_order(ids, 0) == seeded_order(reversed(ids), 0)
    assert sorted(recorded["order"]) == sorted(ids)
    # A metric's samples in the page's order: the seeded order, less those it did not score.
    assert [e.id for e in review.queue] == [k for k in recorded["order"] if review.row(review._by_id[k])["sample"]["answer"]]
    assert Review(folder, ["faithfulness"]).seed == 0 and Review(folder, seed=0).seed == 0
    with pytest.raises(ReviewError, match="seed 0; another seed would break its random sample"):
        Review(folder, seed=5)
    other = hostile_run(tmp_path, "other")
    assert Review(other, seed=5).entries[0].id == seeded_order(ids, 5)[0]
    (folder / "run.json").write_text(json.dumps({"fingerprint": "another"}), encoding="utf-8")
    with pytest.raises(ReviewError, match="made for another run"):
        Review(folder)


def test_folders_and_metrics_that_cannot_be_reviewed_are_one_line_exit_2(tmp_path, capsys):
    folder = hostile_run(tmp_path)
    for args, message in ((["--metrics", "rouge_l"], "rouge_l is not a metric of this run"),
                          (["--metrics", "eir"], "eir is not a metric of this run"),
                          (["--annotator", "\x1b[2Jbob"], "no control characters")):
        assert main(["review", str(folder), *args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert not (folder / REVIEW_FILE).exists()  # nothing is drawn for a review that cannot start
    (folder / "summary.json").unlink()
    assert main(["review", str(folder)]) == 2
    assert "the run has not finished (no summary.json)" in capsys.readouterr().err
    assert main(["review", str(tmp_path / "nothing")]) == 2
    assert "no results.jsonl" in capsys.readouterr().err


def test_a_metric_class_carries_its_question_for_people(monkeypatch):
    """A plugin's metric is asked about as the package's own are: by the question its class declares;
    one that declares none cannot be reviewed."""
    monkeypatch.setattr(offline_eval.metrics, "_REGISTERED", {})

    @register_metric
    class Polite(Metric):
        name = "plugin_polite"
        question_for_people = "Is the answer polite?"

    @register_metric
    class Unasked(Metric):
        name = "plugin_unasked"

    questions = questions_for_people()
    assert questions["plugin_polite"] == "Is the answer polite?" and "plugin_unasked" not in questions
    assert questions["faithfulness"] == Faithfulness.question_for_people
    [criterion] = criteria_from_tables({"tone": {"question": "Is the tone professional?", "reads": ["answer"]}},
                                       "criteria.toml")
    assert criterion_metric(criterion).question_for_people == "Is the tone professional?"


def test_a_torn_last_line_is_cut_before_the_next_label(tmp_path):
    """A power cut during an append leaves half a line; the next append must not be glued onto it."""
    folder = hostile_run(tmp_path)
    review = Review(folder, ["faithfulness"])
    first = review.queue[0].id
    review.record("alice", first, {"faithfulness": "yes"})
    with open(folder / LABELS_FILE, "a", encoding="utf-8") as handle:
        handle.write('{"id": "q02", "metric": "faithful')
    review = Review(folder, ["faithfulness"])  # a restart
    review.record("alice", review.queue[1].id, {"faithfulness": "no"})
    labels = read_labels(folder / LABELS_FILE)
    assert [(l.id, l.word) for l in labels] == [(first, "yes"), (review.queue[1].id, "no")]


def test_verdicts_are_sent_only_for_questions_already_answered(tmp_path):
    folder = hostile_run(tmp_path)
    review = Review(folder, BOTH)
    pos = next(i for i, e in enumerate(review.queue) if len(review.asked(e)) == 2)
    key = review.queue[pos].id
    assert review.sample(pos, "alice")["verdicts"] == {}
    review.record("alice", key, {"faithfulness": "no"})
    shown_to = review.sample(pos, "alice")
    assert list(shown_to["verdicts"]) == ["faithfulness"] and shown_to["labels"] == {"faithfulness": "no"}
    assert review.sample(pos, "bob")["verdicts"] == {}
    # A label from another run in the same file is not this run's.
    append_label(folder / LABELS_FILE, Label(key, "answer_correctness", True, annotator="alice", run="another"))
    assert review.state("alice")["progress"]["answer_correctness"]["labelled"] == 0


def test_cohen_kappa():
    # 50 samples: both yes 20, a yes b no 5, a no b yes 10, both no 15: p_o 0.7, p_e 0.5
    a = {f"s{i}": v for i, v in enumerate([True] * 25 + [False] * 25)}
    b = {f"s{i}": v for i, v in enumerate([True] * 20 + [False] * 5 + [True] * 10 + [False] * 15)}
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == 1.0
    assert cohen_kappa(a, {k: not v for k, v in a.items()}) == pytest.approx(-1.0)
    # Only the samples both labelled yes or no count: unsure and one-sided labels are left out.
    assert cohen_kappa({**a, "x": None, "y": True}, {**b, "x": True, "z": False}) == pytest.approx(0.4)
    assert cohen_kappa({"s": True}, {"t": True}) is None
    two = {"s": True, "t": False}
    assert cohen_kappa(two, two) is None and cohen_kappa(two, two, least=2) == 1.0  # too few, unless allowed
    every_yes = {f"s{i}": True for i in range(20)}
    assert cohen_kappa(every_yes, every_yes) is None  # p_e = 1: undefined


def test_kappa_on_too_few_shared_labels_is_none_and_says_why(tmp_path):
    """Two annotators who agree on 2 samples have kappa 1.0 by the formula, which says nothing about
    agreement: below MIN_SHARED_LABELS the review page's agreement holds no number, and a note saying how
    many shared labels there are and how many it needs."""
    folder = hostile_run(tmp_path)
    review = Review(folder, ["faithfulness"])
    keys = [e.id for e in review.queue if review.asked(e)]
    assert len(keys) >= MIN_SHARED_LABELS
    for who in ("ann", "bob"):
        for key, value in zip(keys[:2], ("yes", "no")):
            review.record(who, key, {"faithfulness": value})
    assert review.state("ann")["agreement"] == [
        {"metric": "faithfulness", "a": "ann", "b": "bob", "n": 2, "kappa": None,
         "note": "too few shared labels (n 2, needs 10)"}]
    for who in ("ann", "bob"):
        for i, key in enumerate(keys[2:MIN_SHARED_LABELS]):
            review.record(who, key, {"faithfulness": "yes" if i % 2 else "no"})
    [pair] = review.state("ann")["agreement"]
    assert pair["n"] == MIN_SHARED_LABELS and pair["kappa"] == 1.0 and pair["note"] is None
