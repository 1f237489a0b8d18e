"""Prompts of the RAGEval family, English and Chinese.

Two groups:

* keypoint metrics: generating the key points of a reference answer (after RAGEval's
  ``keypoint_prompt.jsonl``) and labelling an answer against each key point Relevant / Wrong /
  Irrelevant (after RAGEval's ``KEY_PROMPT_EN/ZH``, with the same definitions). Unlike the
  reference, which searches the whole reply for ``[[[Relevant]]]``-style markers, our label has its
  own JSON slot (or is read from option probabilities), so an analysis that mentions "wrong" never
  changes the verdict.
* test-set generation (RAGEval's schema -> configuration -> document -> question/reference/answer
  -> key points pipeline): schema summary, a synthetic configuration and document, and one
  question prompt per type that turns evidence sentences picked by the code into one question and
  its answer (the references are those sentences, see :mod:`offline_eval.testset.pipeline`).
"""

from __future__ import annotations

from offline_eval.prompts.base import Prompt
from offline_eval.prompts.ragas import JSON_ONLY

LABELS = ("Relevant", "Wrong", "Irrelevant")
# Options mode asks for a letter: single-token in every tokenizer, so the options never share a
# first token (which "Relevant"/"Irrelevant" might for some vocabularies).
LABEL_LETTERS = {"A": "Relevant", "B": "Wrong", "C": "Irrelevant"}
UNABLE = "Unable to answer"
UNABLE_ANSWER = {"en": "Unable to answer", "zh": "无法回答"}

# --------------------------------------------------------------------------------- key points
KEYPOINTS = Prompt(
    name="rageval_keypoints",
    system={"en": "You are an expert at extracting the key points of an answer. Reply with JSON only.",
            "zh": "你是一位擅长提炼回答要点的专家。只用 JSON 回答。"},
    template={
        "en": ("Given a question and its standard answer, list the key points a complete answer must "
               "contain: the necessary facts, the relevant inferences and the final conclusion. "
               "Usually 3-5 points, at most {max_points}; each point is one short self-contained "
               "sentence in the answer's language. If the standard answer says the question cannot "
               'be answered, return the single key point "Unable to answer".\n'
               "Question: {question}\nStandard answer: {ground_truth}\n"
               'JSON: {{"keypoints": ["...", "..."]}}'),
        "zh": ("给定问题和标准回答，列出一个完整回答必须包含的要点：必要的事实、相关推论和最终结论。"
               "通常 3-5 条，最多 {max_points} 条；每条是一句简短、独立完整的话，使用回答的语言。"
               '如果标准回答表示无法回答该问题，只返回一条要点 "Unable to answer"。\n'
               "问题：{question}\n标准回答：{ground_truth}\n"
               'JSON：{{"keypoints": ["...", "..."]}}'),
    },
    schema={"type": "object", "required": ["keypoints"],
            "properties": {"keypoints": {"type": "array", "items": {"type": "string"}}}},
    examples={
        "en": [({"max_points": 5,
                 "question": "Comparing the asset acquisitions of Huaxia Entertainment in 2017 and Top "
                             "Shopping Mall in 2018, which amount was larger?",
                 "ground_truth": "Huaxia Entertainment's 2017 acquisition was larger, at 120 million yuan, "
                                 "whereas Top Shopping Mall's 2018 acquisition was 50 million yuan."},
                {"keypoints": ["Huaxia Entertainment's 2017 acquisition amount was larger.",
                               "Huaxia Entertainment's acquisition in 2017 was 120 million yuan.",
                               "Top Shopping Mall's acquisition in 2018 was 50 million yuan."]}),
               ({"max_points": 5, "question": "What was Huaxia Entertainment's revenue in 1990?",
                 "ground_truth": "Unable to answer."},
                {"keypoints": ["Unable to answer"]})],
        "zh": [({"max_points": 5,
                 "question": "比较2017年华夏娱乐有限公司和2018年顶级购物中心的重大资产收购，哪家公司的收购金额更大？",
                 "ground_truth": "2017年华夏娱乐有限公司的资产收购金额更大，为1.2亿元，而2018年顶级购物中心的资产收购金额为5000万元。"},
                {"keypoints": ["2017年华夏娱乐有限公司的资产收购金额更大。",
                               "2017年华夏娱乐有限公司的资产收购金额为1.2亿元。",
                               "2018年顶级购物中心的资产收购金额为5000万元。"]}),
               ({"max_points": 5, "question": "华夏娱乐有限公司1990年的收入是多少？", "ground_truth": "无法回答。"},
                {"keypoints": ["Unable to answer"]})],
    },
)

_DEFINITIONS = {
    "en": ("Relevant: the answer contains the key point's essential information and agrees with it "
           "(missing minor details that do not affect the answer still count as Relevant).\n"
           "Wrong: the answer gives a specific statement about the key point that contradicts it on "
           "an essential matter.\n"
           "Irrelevant: the answer does not address the key point, says it lacks the information, or "
           "is only loosely related. Saying there is not enough information is Irrelevant, not Wrong; "
           "shortcomings in details that do not affect the answer are Irrelevant, not Wrong. If the "
           'key point is "Unable to answer", an answer that declines to answer is Relevant.'),
    "zh": ("Relevant（相关且一致）：回答包含该要点的必要信息且与之一致（缺少不影响回答问题的细节仍算 Relevant）。\n"
           "Wrong（错误）：回答就该要点给出了具体陈述，但在重要问题上与要点矛盾。\n"
           "Irrelevant（不相关）：回答没有涉及该要点、表示信息不足，或只是泛泛相关。表示信息不足属于 Irrelevant 而不是 Wrong；"
           "不影响回答问题的细节缺失属于 Irrelevant 而不是 Wrong。如果要点是 \"Unable to answer\"，拒绝回答的回答算 Relevant。"),
}

KEYPOINT_LABELS = Prompt(
    name="rageval_keypoint_labels",
    system=JSON_ONLY,
    template={
        "en": ("Compare a generated answer with each key point of the standard answer. For every key "
               "point, find the part of the answer that corresponds to it, write a one-sentence "
               "analysis, then give exactly one label:\n" + _DEFINITIONS["en"].replace("{", "{{").replace("}", "}}")
               + "\nGive one item per key point, in the same order.\n"
               "Question: {question}\nGenerated answer: {answer}\nKey points:\n{keypoints}\n"
               'JSON: {{"keypoints": [{{"keypoint": "...", "analysis": "...", "label": "Relevant|Wrong|Irrelevant"}}]}}'),
        "zh": ("将生成回答与标准回答的每条要点进行比较。对每条要点，找到回答中与之对应的片段，写一句分析，然后给出唯一的标签：\n"
               + _DEFINITIONS["zh"].replace("{", "{{").replace("}", "}}")
               + "\n每条要点给出一项，顺序与要点相同。label 只能是英文单词 Relevant、Wrong 或 Irrelevant。\n"
               "问题：{question}\n生成回答：{answer}\n要点：\n{keypoints}\n"
               'JSON：{{"keypoints": [{{"keypoint": "...", "analysis": "...", "label": "Relevant|Wrong|Irrelevant"}}]}}'),
    },
    schema={"type": "object", "required": ["keypoints"], "properties": {"keypoints": {
        "type": "array", "items": {"type": "object", "required": ["label"], "properties": {
            "keypoint": {"type": "string"}, "analysis": {"type": "string"},
            "label": {"type": "string", "enum": list(LABELS)}}}}}},
    examples={
        "en": [({"question": "What is the current situation of wealth management fee income?",
                 "answer": "In the first three quarters the bank earned 5.105 billion yuan in wealth "
                           "management fees, down 20.7% year-on-year.",
                 "keypoints": "1. Income in the first three quarters was 5.105 billion yuan.\n"
                              "2. Income decreased by 21.6% year-on-year.\n"
                              "3. The decline was caused by lower fund sales."},
                {"keypoints": [
                    {"keypoint": "Income in the first three quarters was 5.105 billion yuan.",
                     "analysis": "The answer states 5.105 billion yuan, as the key point does.", "label": "Relevant"},
                    {"keypoint": "Income decreased by 21.6% year-on-year.",
                     "analysis": "The answer says 20.7%, contradicting 21.6%.", "label": "Wrong"},
                    {"keypoint": "The decline was caused by lower fund sales.",
                     "analysis": "The answer gives no cause for the decline.", "label": "Irrelevant"}]})],
        "zh": [({"question": "财富管理手续费收入的现状如何？",
                 "answer": "前三季度，该行实现财富管理手续费收入51.05亿元，同比下降20.7%。",
                 "keypoints": "1. 前三季度收入为51.05亿元。\n2. 收入同比下降21.6%。\n3. 下降原因是基金销量下滑。"},
                {"keypoints": [
                    {"keypoint": "前三季度收入为51.05亿元。", "analysis": "回答提到51.05亿元，与要点一致。", "label": "Relevant"},
                    {"keypoint": "收入同比下降21.6%。", "analysis": "回答说下降20.7%，与21.6%矛盾。", "label": "Wrong"},
                    {"keypoint": "下降原因是基金销量下滑。", "analysis": "回答没有提到下降原因。", "label": "Irrelevant"}]})],
    },
)

KEYPOINT_OPTION = Prompt(
    name="rageval_keypoint_option",
    system={"en": "You are a meticulous evaluator. Answer with a single letter: A, B or C.",
            "zh": "你是一名严谨的评估员。只用一个字母回答：A、B 或 C。"},
    template={
        "en": ("Compare the generated answer with one key point of the standard answer.\n"
               + _DEFINITIONS["en"].replace("{", "{{").replace("}", "}}") + "\n\n"
               "Question: {question}\nGenerated answer: {answer}\nKey point: {keypoint}\n\n"
               "Is the answer, with respect to this key point, A = Relevant, B = Wrong or C = Irrelevant? "
               "Answer A, B or C."),
        "zh": ("将生成回答与标准回答的一条要点进行比较。\n"
               + _DEFINITIONS["zh"].replace("{", "{{").replace("}", "}}") + "\n\n"
               "问题：{question}\n生成回答：{answer}\n要点：{keypoint}\n\n"
               "就这条要点而言，回答是 A = Relevant（相关且一致）、B = Wrong（错误）还是 C = Irrelevant（不相关）？"
               "回答 A、B 或 C。"),
    },
)

# ------------------------------------------------------------------------ test-set generation
TS_SCHEMA = Prompt(
    name="rageval_ts_schema",
    system=JSON_ONLY,
    template={
        "en": ("Here are a few documents of one kind. Summarise their common schema: the types of "
               "factual information such documents contain (organisations, people, events, dates, "
               "places, amounts, outcomes ...). Give 5-12 fields, each with a name and a short "
               "description.\nDocuments:\n{documents}\n"
               'JSON: {{"fields": [{{"name": "...", "description": "..."}}]}}'),
        "zh": ("下面是同一类型的几篇文档。总结它们共同的模式（schema）：这类文档包含哪些类型的事实信息（机构、人物、事件、日期、"
               "地点、金额、结果……）。给出 5-12 个字段，每个字段有名称和简短说明。\n文档：\n{documents}\n"
               'JSON：{{"fields": [{{"name": "...", "description": "..."}}]}}'),
    },
    schema={"type": "object", "required": ["fields"], "properties": {"fields": {
        "type": "array", "minItems": 1, "items": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}}}}}},
)

_FACTS_SCHEMA = {"type": "object", "required": ["facts"], "properties": {"facts": {
    "type": "array", "items": {"type": "object", "required": ["field", "value"], "properties": {
        "field": {"type": "string"}, "value": {"type": ["string", "number"]}}}}}}

TS_SYNTH_CONFIG = Prompt(
    name="rageval_ts_synth_config",
    system=JSON_ONLY,
    template={
        "en": ("Invent the configuration of a new, fictional document of the kind described by the "
               "schema: a value for each field, specific and internally consistent (names, events, "
               "amounts). Use these fixed values: {fixed}.\nSchema:\n{schema}\n"
               'JSON: {{"facts": [{{"field": "...", "value": "..."}}]}}'),
        "zh": ("为一篇新的、虚构的、符合该模式的文档编写配置：为每个字段给出具体且前后一致的取值（名称、事件、金额）。"
               "使用这些固定取值：{fixed}。\n模式：\n{schema}\n"
               'JSON：{{"facts": [{{"field": "...", "value": "..."}}]}}'),
    },
    schema=_FACTS_SCHEMA,
)

TS_SYNTH_DOC = Prompt(
    name="rageval_ts_synth_doc",
    system={"en": "You are a professional writer of domain documents.",
            "zh": "你是一名专业的领域文档撰写者。"},
    template={
        "en": ("Write a realistic document of this kind ({kind}) that states every fact of the "
               "configuration below, in full sentences, without adding contradicting facts. Plain text, "
               "no headings in Markdown, about 250 words.\nConfiguration:\n{facts}\nDocument:"),
        "zh": ("写一篇这种类型（{kind}）的真实风格文档，用完整的句子写出下面配置中的每一条事实，不要加入矛盾的事实。"
               "纯文本，不用 Markdown 标题，约 400 字。\n配置：\n{facts}\n文档："),
    },
)

# One question per judge call, written from evidence sentences the code picked out of the
# document(s) for the type (offline_eval/testset/evidence.py): the references are those sentences,
# verbatim by construction, and the judge only turns two or three sentences into a question and its
# answer, in flat JSON, which even a 0.5B model does reliably. One prompt per type (RAGEval Table 6),
# each with one worked example.
_QUESTION_SYSTEM = {
    "en": "You write questions that test a document search system. Reply with JSON only, exactly in the format asked for.",
    "zh": "你负责为文档检索系统编写测试问题。只用 JSON 回答，严格按照要求的格式。",
}
_QUESTION_SCHEMA = {"type": "object", "required": ["question", "answer"], "properties": {
    "question": {"type": "string"}, "answer": {"type": "string"}}}
_UNANSWERABLE_SCHEMA = {"type": "object", "required": ["question"], "properties": {
    "question": {"type": "string"}, "answer": {"type": "string"}}}

_TASKS: dict[str, dict[str, str]] = {
    "factual": {
        "en": ("Write one factual question whose answer is a specific fact (a name, number, date or place) "
               "stated in the sentence, and its short answer taken from the sentence."),
        "zh": "根据句子写一个事实类问题，答案是句子中明确写出的具体事实（名称、数字、日期或地点），并给出取自句子的简短答案。",
    },
    "multi_hop": {
        "en": ("Write one multi-hop question that can only be answered by combining BOTH sentences (for "
               "example an event in one and its date, cause or result in the other), and its answer."),
        "zh": "写一个多跳推理问题，必须把两个句子的信息结合起来才能回答（例如一句中的事件和另一句中的日期、原因或结果），并给出答案。",
    },
    "summary": {
        "en": ("Write one question that asks to summarise what the sentences say about their common topic, "
               "and an answer that summarises every sentence in one or two sentences."),
        "zh": "写一个总结类问题，要求总结这些句子关于同一主题的内容，并给出用一两句话概括每个句子的答案。",
    },
    "multi_doc": {
        "en": ("The two sentences come from two different documents. Write one question that needs "
               "information from both documents (for example what each of them did or reported), and an "
               "answer that uses both sentences."),
        "zh": "两个句子来自两篇不同的文档。写一个需要同时用到两篇文档信息的问题（例如两者各自做了什么或报告了什么），并给出用到两个句子的答案。",
    },
    "numeric": {
        "en": ("Write one question that compares two numbers or amounts stated in the sentences (which one "
               "is larger or smaller, or by how much), and an answer that gives both numbers and the "
               "conclusion."),
        "zh": "写一个数值比较问题，比较句子中的两个数字或金额（哪个更大或更小、相差多少），答案给出两个数值和结论。",
    },
    "temporal": {
        "en": ("Write one question about the order in time of two events in the sentences (which one "
               "happened first or later), and an answer that gives both dates and the conclusion."),
        "zh": "写一个时间序列问题，询问句子中两个事件的先后顺序（哪个更早或更晚），答案给出两个日期和结论。",
    },
    "unanswerable": {
        "en": ("Write one question about the same subject that sounds reasonable but that the document does "
               "NOT answer: ask for a detail it never gives (for example a person's age, a figure of another "
               "year, or a reason it does not state)."),
        "zh": "写一个关于同一主题、看似合理但文档没有给出答案的问题：询问文档从未提到的细节（例如某人的年龄、另一年份的数字或文档没有说明的原因）。",
    },
}

_RULES = {
    "en": "The question must name who or what it is about and must not copy a sentence. Write in English.",
    "zh": "问题必须写明所指的对象（公司、法院、人物等），不要照抄句子。用中文写。",
}

# type -> language -> (subject, sentences, output)
_EXAMPLES: dict[str, dict[str, tuple[str, str, dict[str, str]]]] = {
    "factual": {
        "en": ("Acme Corp", "[1] In March 2019 Acme Corp acquired Beta Ltd for 120 million euros.",
               {"question": "How much did Acme Corp pay for Beta Ltd in March 2019?",
                "answer": "120 million euros."}),
        "zh": ("华夏娱乐有限公司", "[1] 2017年2月，华夏娱乐有限公司以1.2亿元收购了草莓文化传媒有限公司。",
               {"question": "华夏娱乐有限公司在2017年2月以多少钱收购了草莓文化传媒有限公司？", "answer": "1.2亿元。"}),
    },
    "multi_hop": {
        "en": ("Acme Corp", "[1] In March 2019 Acme Corp acquired Beta Ltd.\n"
                            "[2] The acquisition doubled Acme's production capacity.",
               {"question": "What did the company Acme Corp acquired in March 2019 do to Acme's production capacity?",
                "answer": "Acme Corp acquired Beta Ltd in March 2019, and the acquisition doubled its production capacity."}),
        "zh": ("华夏娱乐有限公司", "[1] 2017年2月，华夏娱乐有限公司收购了草莓文化传媒有限公司。\n[2] 这次收购使公司的市场份额提高了一倍。",
               {"question": "华夏娱乐有限公司在2017年2月进行的收购对其市场份额有什么影响？",
                "answer": "华夏娱乐有限公司于2017年2月收购了草莓文化传媒有限公司，这次收购使其市场份额提高了一倍。"}),
    },
    "summary": {
        "en": ("Acme Corp", "[1] In 2019 Acme Corp acquired Beta Ltd.\n[2] In 2020 Acme opened a factory in Lyon.\n"
                            "[3] In 2021 Acme issued 50 million euros of bonds.",
               {"question": "Summarise the major events of Acme Corp from 2019 to 2021.",
                "answer": "Acme Corp acquired Beta Ltd in 2019, opened a factory in Lyon in 2020 and issued "
                          "50 million euros of bonds in 2021."}),
        "zh": ("华夏娱乐有限公司", "[1] 2017年，华夏娱乐有限公司收购了草莓文化传媒。\n[2] 2018年，公司在上海开设了新工厂。\n"
                               "[3] 2019年，公司发行了5000万元债券。",
               {"question": "请总结华夏娱乐有限公司2017年至2019年的重大事件。",
                "answer": "华夏娱乐有限公司2017年收购了草莓文化传媒，2018年在上海开设新工厂，2019年发行了5000万元债券。"}),
    },
    "multi_doc": {
        "en": ("Acme Corp; Zeta Inc", "[1] (Acme Corp) In 2020 Acme Corp opened a factory in Lyon.\n"
                                      "[2] (Zeta Inc) In 2021 Zeta Inc opened an office in Oslo.",
               {"question": "Which new sites did Acme Corp and Zeta Inc open?",
                "answer": "Acme Corp opened a factory in Lyon in 2020, and Zeta Inc opened an office in Oslo in 2021."}),
        "zh": ("华夏娱乐有限公司；顶级购物中心", "[1] （华夏娱乐有限公司）2017年，华夏娱乐有限公司在上海开设了新工厂。\n"
                                         "[2] （顶级购物中心）2018年，顶级购物中心在北京开设了分店。",
               {"question": "华夏娱乐有限公司和顶级购物中心分别开设了什么新场所？",
                "answer": "华夏娱乐有限公司2017年在上海开设了新工厂，顶级购物中心2018年在北京开设了分店。"}),
    },
    "numeric": {
        "en": ("Acme Corp", "[1] Acme's revenue in 2020 was 500 million euros.\n"
                            "[2] Acme's revenue in 2021 was 650 million euros.",
               {"question": "Was Acme Corp's revenue larger in 2020 or in 2021, and by how much?",
                "answer": "In 2021: 650 million euros against 500 million euros in 2020, 150 million euros more."}),
        "zh": ("华夏娱乐有限公司", "[1] 2020年，华夏娱乐有限公司的营业收入为5亿元。\n[2] 2021年，公司的营业收入为6.5亿元。",
               {"question": "华夏娱乐有限公司2020年和2021年哪一年的营业收入更高？高出多少？",
                "answer": "2021年更高：6.5亿元，比2020年的5亿元高出1.5亿元。"}),
    },
    "temporal": {
        "en": ("Acme Corp", "[1] In March 2019 Acme Corp acquired Beta Ltd.\n[2] In June 2020 Acme opened a factory in Lyon.",
               {"question": "Which happened first: Acme Corp's acquisition of Beta Ltd or the opening of its Lyon factory?",
                "answer": "The acquisition of Beta Ltd, in March 2019; the Lyon factory opened in June 2020."}),
        "zh": ("华夏娱乐有限公司", "[1] 2017年2月，华夏娱乐有限公司收购了草莓文化传媒。\n[2] 2018年6月，公司在上海开设了新工厂。",
               {"question": "华夏娱乐有限公司收购草莓文化传媒和在上海开设新工厂，哪件事更早？",
                "answer": "收购草莓文化传媒更早，发生在2017年2月；上海新工厂于2018年6月开设。"}),
    },
    "unanswerable": {
        "en": ("Acme Corp", "[1] In March 2019 Acme Corp acquired Beta Ltd for 120 million euros.",
               {"question": "How many employees did Beta Ltd have when Acme Corp acquired it?"}),
        "zh": ("华夏娱乐有限公司", "[1] 2017年2月，华夏娱乐有限公司以1.2亿元收购了草莓文化传媒有限公司。",
               {"question": "草莓文化传媒有限公司被收购时有多少名员工？"}),
    },
}


def _question_prompt(qtype: str) -> Prompt:
    # The answer comes first: a small model that starts with the question tends to copy a sentence
    # into it; started with the answer, it copies the sentence there and then asks for it.
    fields = '"question": "..."' if qtype == "unanswerable" else '"answer": "...", "question": "..."'
    templates = {
        "en": (_TASKS[qtype]["en"] + " " + _RULES["en"] + "\nDocument: {subject}\nSentences:\n{sentences}\n"
               "JSON: {{" + fields + "}}"),
        "zh": (_TASKS[qtype]["zh"] + _RULES["zh"] + "\n文档：{subject}\n句子：\n{sentences}\n"
               "JSON：{{" + fields + "}}"),
    }
    examples = {}
    for lang in ("en", "zh"):
        subject, shown, output = _EXAMPLES[qtype][lang]
        ordered = {k: output[k] for k in ("answer", "question") if k in output}
        examples[lang] = [({"subject": subject, "sentences": shown}, ordered)]
    return Prompt(
        name=f"rageval_ts_question_{qtype}",
        system=_QUESTION_SYSTEM,
        template=templates,
        schema=_UNANSWERABLE_SCHEMA if qtype == "unanswerable" else _QUESTION_SCHEMA,
        examples=examples,
        examples_as_turns=True,
    )


TS_QUESTION: dict[str, Prompt] = {qtype: _question_prompt(qtype) for qtype in _TASKS}

__all__ = ["LABELS", "LABEL_LETTERS", "UNABLE", "UNABLE_ANSWER", "KEYPOINTS", "KEYPOINT_LABELS",
           "KEYPOINT_OPTION", "TS_SCHEMA", "TS_SYNTH_CONFIG", "TS_SYNTH_DOC", "TS_QUESTION"]
