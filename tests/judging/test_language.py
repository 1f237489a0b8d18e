"""A row's language is read one way: the judge's prompts (EvalSettings.language_for) and the sentence
rules of the metrics that read text (text.normalize_language) give every tag the reader accepts the
same language."""

from __future__ import annotations

import json
from pathlib import Path

from offline_eval.data.readers import read_dataset
from offline_eval.data.schema import Sample
from offline_eval.judging.settings import EvalSettings
from offline_eval.text import normalize_language

CHINESE_ROW = {"question": "法国的首都是哪里？", "answer": "法国的首都是巴黎。", "contexts": ["巴黎是法国的首都。"]}
TAGS = {"zh": "zh", " zh": "zh", "ZH": "zh", "zh-CN": "zh", "zh_cn": "zh", "Chinese": "zh", "中文": "zh",
        "en": "en", "en-US": "en", "en_GB": "en", "English": "en", None: "zh"}


def test_the_prompts_and_the_sentence_rules_read_a_row_s_language_alike(tmp_path: Path) -> None:
    """"中文" gave English prompts and Chinese sentence rules; "zh", "en" and no language read as before."""
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({**CHINESE_ROW, **({"language": tag} if tag is not None else {})},
                                       ensure_ascii=False) + "\n" for tag in TAGS), encoding="utf-8")
    samples = read_dataset(path)
    read = {tag: (EvalSettings().language_for(s), normalize_language(s.language, s.question))
            for tag, s in zip(TAGS, samples)}
    assert read == {tag: (code, code) for tag, code in TAGS.items()}
    assert all(EvalSettings(language="en").language_for(s) == "en" for s in samples)  # --language still wins
    # a sample made in Python, past the reader, is read the same way
    spaced = Sample(id="1", question=CHINESE_ROW["question"], language=" zh")
    assert EvalSettings().language_for(spaced) == normalize_language(spaced.language) == "zh"
