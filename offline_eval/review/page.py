"""The review page: one static HTML document with its stylesheet and script inline.

The document holds no data. The script fetches it as JSON from the server (``api/state``,
``api/sample``) and puts every value into the page with ``textContent``, never as markup, so nothing
from a run (a sample, an id, an annotator's name) can add an element or run a script. The
Content-Security-Policy allows this one script and this one stylesheet (by their sha256), requests to
the page's own origin, and nothing else.
"""

from __future__ import annotations

import base64
import hashlib

CSS = r"""
[hidden] { display: none !important; }
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { display: flex; gap: 1.5em; align-items: baseline; padding: .6em 1.2em; background: #fff;
         border-bottom: 1px solid #d9dee5; flex-wrap: wrap; }
header h1 { font-size: 1.1em; margin: 0; }
#progress { flex: 1 1 30em; }
#progress span { margin-right: 1.2em; white-space: nowrap; display: inline-block; }
main, #done, #ask-name, #agreement-box { max-width: 80em; margin: 1em auto; padding: 0 1.2em; }
#card { display: grid; grid-template-columns: minmax(0, 3fr) minmax(16em, 2fr); gap: 1.5em; }
h2 { font-size: .85em; text-transform: uppercase; letter-spacing: .04em; color: #5b6575; margin: 1.2em 0 .3em; }
.data, li { white-space: pre-wrap; overflow-wrap: anywhere; unicode-bidi: isolate; }
.data { background: #fff; border: 1px solid #e3e7ec; border-radius: 4px; padding: .5em .7em; margin: 0; }
ol { margin: 0; padding-left: 1.6em; }
ol li { background: #fff; border: 1px solid #e3e7ec; border-radius: 4px; padding: .4em .6em; margin: .3em 0; }
.role { font-weight: 600; margin-right: .5em; }
.meta { color: #5b6575; margin: .2em 0; }
aside { position: sticky; top: 1em; align-self: start; }
.ask { background: #fff; border: 2px solid #e3e7ec; border-radius: 6px; padding: .6em .8em; margin: .5em 0; }
.ask.current { border-color: #0b5cad; }
.ask .answer { font-weight: 600; }
.ask button { margin: .4em .4em 0 0; font: inherit; padding: .2em .8em; cursor: pointer; }
.ask.yes .answer { color: #17692f; } .ask.no .answer { color: #a3231f; } .ask.unsure .answer { color: #7a5d00; }
.verdict { margin-top: .5em; padding-top: .4em; border-top: 1px dashed #c9d0d8; color: #39414f; }
.verdict li { padding: .2em .5em; }
.ok { border-left: 4px solid #2f8f4e !important; } .bad { border-left: 4px solid #c0392b !important; }
.keys { color: #5b6575; font-size: .9em; } kbd { border: 1px solid #b8c0cc; border-radius: 3px; padding: 0 .3em; }
.banner { max-width: 80em; margin: 1em auto; padding: .6em 1em; background: #fde8e7; color: #7d1c17; }
table { border-collapse: collapse; background: #fff; } td, th { border: 1px solid #e3e7ec; padding: .3em .7em; }
td { unicode-bidi: isolate; }
"""

SCRIPT = r"""
'use strict';
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
let annotator = params.get('annotator') || '';
let state = null;   // progress, the next unanswered step, agreement (api/state)
let sample = null;  // the sample shown (api/sample)
let step = 0;       // which of its questions is asked
let shownCount = 0; // pages shown so far (data-shown: a test waits for the next one)

// Bidirectional overrides and isolates are shown as what they are: hidden, they could make a text
// display in another order than it reads.
const BIDI = /[\u202a-\u202e\u2066-\u2069]/g;
const shown = (text) => String(text).replace(BIDI, (c) => '[U+' + c.charCodeAt(0).toString(16).toUpperCase() + ']');
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = shown(text);
  if (cls) node.className = cls;
  return node;
}
function fill(id, items, make) { $(id).replaceChildren(...items.map(make)); }
function fail(error) { $('error').hidden = false; $('error').textContent = shown(error.message || error); }

async function api(path, body) {
  const options = body === undefined ? {cache: 'no-store'}
    : {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)};
  const reply = await fetch(path, options);
  const data = await reply.json();
  if (!reply.ok) throw new Error(data.error || reply.status);
  $('error').hidden = true;
  return data;
}
const who = () => 'annotator=' + encodeURIComponent(annotator);

function showState() {
  $('who').textContent = shown(annotator);
  fill('progress', state.metrics, (m) => {
    const p = state.progress[m.metric];
    return el('span', m.metric + ': ' + p.labelled + ' of ' + p.n + ' labelled' + (p.unsure ? ' (' + p.unsure + ' unsure)' : ''));
  });
  $('agreement-box').hidden = state.agreement.length === 0;
  fill('agreement', state.agreement, (a) => {
    const row = document.createElement('tr');
    row.append(el('td', a.metric), el('td', a.a), el('td', a.b), el('td', a.n),
               el('td', a.kappa === null ? (a.note || '—') : a.kappa.toFixed(2)));
    return row;
  });
}

function showSample() {
  const s = sample;
  $('card').hidden = false; $('done').hidden = true;
  $('pos').textContent = s.pos + 1; $('size').textContent = state.size;
  $('sid').textContent = shown(s.id);
  $('conversation-box').hidden = s.conversation.length === 0;
  fill('conversation', s.conversation, (t) => { const li = el('li'); li.append(el('span', t.role, 'role'), el('span', t.text)); return li; });
  $('question').textContent = shown(s.question);
  $('answer').textContent = shown(s.answer);
  $('statements-box').hidden = s.statements.length === 0;
  fill('statements', s.statements, (t) => el('li', t));
  fill('contexts', s.contexts, (t) => el('li', t));
  $('reference').textContent = shown(s.reference);
  $('keypoints-box').hidden = s.keypoints.length === 0;
  fill('keypoints', s.keypoints, (t) => el('li', t));
  fill('asks', s.asked, (a, i) => {
    const word = s.labels[a.metric];
    const box = el('div', undefined, 'ask' + (i === step ? ' current' : '') + (word ? ' ' + word : ''));
    box.append(el('div', a.metric, 'meta'), el('div', a.question),
               el('div', word ? 'your answer: ' + word : 'not answered yet', 'answer'));
    for (const w of ['yes', 'no', 'unsure']) {
      const button = el('button', w);
      button.addEventListener('click', () => { step = i; answer(w); });
      box.append(button);
    }
    const v = s.verdicts[a.metric];
    if (v && $('show-verdicts').checked) box.append(verdict(v));
    return box;
  });
  document.body.dataset.pos = s.pos;
  document.body.dataset.step = step;
  document.body.dataset.shown = ++shownCount;
}

function verdict(v) {
  const box = el('div', undefined, 'verdict');
  box.append(el('div', 'judge: ' + (v.value === null ? 'unscored' : v.value.toFixed(3)) + (v.explanation ? ' — ' + v.explanation : '')));
  const list = el('ol');
  list.append(...v.checks.map((c) => el('li', c.note + ': ' + c.text, c.ok ? 'ok' : 'bad')));
  box.append(list);
  return box;
}

async function visit(pos, last) {
  sample = await api('api/sample?pos=' + pos + '&' + who());
  const first = sample.asked.findIndex((a) => !(a.metric in sample.labels));
  step = last ? sample.asked.length - 1 : Math.max(first, 0);
  showSample();
}
async function frontier() {
  if (state.next) return visit(state.next.pos);
  sample = null;
  $('card').hidden = true; $('done').hidden = false;
  document.body.dataset.pos = 'done';
  document.body.dataset.shown = ++shownCount;
}
async function record(labels) {
  state = await api('api/label', {annotator, id: sample.id, labels});
  showState();
  await frontier();
}
const answer = (word) => record({[sample.asked[step].metric]: word}).catch(fail);
function skip() {  // "unsure" for each question of this sample not answered yet
  const rest = sample.asked.filter((a) => !(a.metric in sample.labels));
  return (rest.length ? record(Object.fromEntries(rest.map((a) => [a.metric, 'unsure']))) : frontier()).catch(fail);
}
function back() {
  if (sample && step > 0) { step -= 1; showSample(); return; }
  const pos = sample ? sample.pos - 1 : state.size - 1;
  if (pos >= 0) visit(pos, true).catch(fail);
}
function forward() {  // through answered questions only, up to the first one not answered
  if (!sample || !(sample.asked[step].metric in sample.labels)) return;
  if (step < sample.asked.length - 1) { step += 1; showSample(); } else visit(sample.pos + 1).catch(fail);
}

const KEYS = {y: () => answer('yes'), n: () => answer('no'), u: () => answer('unsure'), s: skip, b: back,
              ArrowLeft: back, f: forward, ArrowRight: forward,
              v: () => { $('show-verdicts').checked = !$('show-verdicts').checked; showSample(); }};
document.addEventListener('keydown', (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey || event.target.tagName === 'INPUT' || !state) return;
  const act = KEYS[event.key];
  if (!act || (!sample && event.key !== 'b' && event.key !== 'ArrowLeft')) return;
  event.preventDefault();
  act();
});
$('show-verdicts').addEventListener('change', () => sample && showSample());

async function start() {
  state = await api('api/state?' + who());
  showState();
  await frontier();
  document.body.dataset.ready = '1';
}
function named() {
  annotator = $('name').value.trim();
  if (!annotator) return;
  params.set('annotator', annotator);
  history.replaceState(null, '', '?' + params);
  $('ask-name').hidden = true;
  start().catch(fail);
}
$('start').addEventListener('click', named);
$('name').addEventListener('keydown', (event) => { if (event.key === 'Enter') named(); });
window.addEventListener('error', (event) => fail(event.error || event.message));

api('api/state').then((first) => {
  annotator = annotator || first.annotator || '';
  if (annotator) return start();
  $('ask-name').hidden = false;
  $('name').focus();
  document.body.dataset.ready = '1';
}).catch(fail);
"""

BODY = """
<header><h1>offline-eval review</h1><span>annotator: <strong id="who"></strong></span><div id="progress"></div></header>
<div id="error" class="banner" hidden></div>
<section id="ask-name" hidden><h2>Who is labelling?</h2>
  <input id="name" autocomplete="off" maxlength="80" aria-label="your name"> <button id="start">Start</button></section>
<main id="card" hidden>
  <div>
    <p class="meta">Sample <span id="pos"></span> of <span id="size"></span> in the review's random order
      · id <code id="sid" class="data"></code></p>
    <section id="conversation-box" hidden><h2>Conversation so far</h2><ol id="conversation"></ol></section>
    <h2>Question</h2><p id="question" class="data" dir="auto"></p>
    <h2>Answer</h2><p id="answer" class="data" dir="auto"></p>
    <section id="statements-box" hidden><h2>Statements of the answer that were checked</h2><ol id="statements"></ol></section>
    <h2>Retrieved contexts</h2><ol id="contexts"></ol>
    <h2>Reference answer</h2><p id="reference" class="data" dir="auto"></p>
    <section id="keypoints-box" hidden><h2>Key points of the reference</h2><ol id="keypoints"></ol></section>
  </div>
  <aside>
    <h2>Your questions</h2><div id="asks"></div>
    <p class="keys"><kbd>y</kbd> yes · <kbd>n</kbd> no · <kbd>u</kbd> unsure · <kbd>s</kbd> skip the sample
      (unsure to the rest) · <kbd>b</kbd> back · <kbd>f</kbd> forward · <kbd>v</kbd> verdicts</p>
    <label><input type="checkbox" id="show-verdicts"> show the judge's verdicts on what I have answered</label>
  </aside>
</main>
<section id="done" hidden><h2>Done</h2><p>Every sample of the review is labelled by you. <kbd>b</kbd> goes back.</p></section>
<section id="agreement-box" hidden><h2>Agreement between annotators (Cohen's κ on the samples both labelled yes or no)</h2>
  <table><thead><tr><th>metric</th><th>annotator</th><th>annotator</th><th>samples</th><th>κ</th></tr></thead>
  <tbody id="agreement"></tbody></table></section>
"""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


# Only this page's own script and stylesheet run, requests go to its own origin only, and it cannot be
# framed, submit a form or load anything (the empty icon is a data: URL, so the browser asks for none).
CSP = (f"default-src 'none'; script-src {_sha256(SCRIPT)}; style-src {_sha256(CSS)}; connect-src 'self'; "
       "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

HTML = ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        "<meta name='referrer' content='no-referrer'><link rel='icon' href='data:,'>"
        f"<title>offline-eval review</title><style>{CSS}</style></head>"
        f"<body>{BODY}<script>{SCRIPT}</script></body></html>\n")
