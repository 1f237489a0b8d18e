"""Prompts of the RAGEval family (SPEC §2, seed 003), English and Chinese.

Two groups:

* keypoint metrics: generating the key points of a reference answer (after RAGEval's
  ``keypoint_prompt.jsonl``) and labelling an answer against each key point Relevant / Wrong /
  Irrelevant (after RAGEval's ``KEY_PROMPT_EN/ZH``, with the same definitions). Unlike the
  reference, which searches the whole reply for ``[[[Relevant]]]``-style markers, our label has its
  own JSON slot (or is read from option probabilities), so an analysis that mentions "wrong" never
  changes the verdict.
* test-set generation (RAGEval's schema -> configuration -> document -> question/reference/answer
  -> key points pipeline): schema summary, configuration (facts) of a document, a synthetic
  configuration and document, questions of the seven types, verbatim reference extraction and
  answer refinement (after RAGEval's ``reference_refinement_prompt.jsonl``).
"""

from __future__ import annotations

from offline_eval.prompts.base import Prompt, register
from offline_eval.prompts.ragas import JSON_ONLY

LABELS = ("Relevant", "Wrong", "Irrelevant")
# Options mode asks for a letter: single-token in every tokenizer, so the options never share a
# first token (which "Relevant"/"Irrelevant" might for some vocabularies).
LABEL_LETTERS = {"A": "Relevant", "B": "Wrong", "C": "Irrelevant"}
UNABLE = "Unable to answer"
UNABLE_ANSWER = {"en": "Unable to answer", "zh": "无法回答"}

# --------------------------------------------------------------------------------- key points
KEYPOINTS = register(Prompt(
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
))

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

KEYPOINT_LABELS = register(Prompt(
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
))

KEYPOINT_OPTION = register(Prompt(
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
))

# ------------------------------------------------------------------------ test-set generation
TS_SCHEMA = register(Prompt(
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
))

TS_CONFIG = register(Prompt(
    name="rageval_ts_config",
    system=JSON_ONLY,
    template={
        "en": ("Fill in the configuration of the document below: for each schema field that the document "
               "covers, give the value exactly as the document states it (names, dates, numbers, "
               "events). Skip fields the document does not cover. At most 15 facts.\n"
               "Schema:\n{schema}\nDocument:\n{document}\n"
               'JSON: {{"facts": [{{"field": "...", "value": "..."}}]}}'),
        "zh": ("为下面的文档填写配置：对文档涉及的每个模式字段，按文档原样给出取值（名称、日期、数字、事件）。"
               "跳过文档没有涉及的字段。最多 15 条。\n模式：\n{schema}\n文档：\n{document}\n"
               'JSON：{{"facts": [{{"field": "...", "value": "..."}}]}}'),
    },
    schema={"type": "object", "required": ["facts"], "properties": {"facts": {
        "type": "array", "items": {"type": "object", "required": ["field", "value"], "properties": {
            "field": {"type": "string"}, "value": {"type": ["string", "number"]}}}}}},
))

TS_SYNTH_CONFIG = register(Prompt(
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
    schema=TS_CONFIG.schema,
))

TS_SYNTH_DOC = register(Prompt(
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
))

# One instruction per question type (RAGEval Table 6), used inside TS_QUESTIONS.
TYPE_INSTRUCTIONS: dict[str, dict[str, str]] = {
    "factual": {
        "en": "factual questions: each has a single precise answer (a name, number, date, place or entity) stated in the document",
        "zh": "事实类问题：每个问题有唯一、精确的答案（名称、数字、日期、地点或实体），答案在文档中明确写出",
    },
    "multi_hop": {
        "en": "multi-hop reasoning questions: answering needs two or more facts of the document combined by reasoning (e.g. an event, then its cause or consequence)",
        "zh": "多跳推理问题：需要把文档中两个或更多事实通过推理联系起来才能回答（例如某事件及其原因或后果）",
    },
    "summary": {
        "en": "summary questions: ask to summarise several related facts of the document (e.g. all major events or measures of one topic); the answer covers each of them",
        "zh": "总结类问题：要求总结文档中同一主题的多条相关事实（例如某方面的所有重大事件或措施），答案覆盖每一条",
    },
    "multi_doc": {
        "en": "multi-document information integration questions: one question whose answer needs information from BOTH documents (a common point, e.g. what each did on the same topic); no double questions",
        "zh": "多文档信息整合问题：一个问题，回答需要同时用到两篇文档的信息（共同点，例如两者在同一主题上各自做了什么）；不要把两个问题合成一个",
    },
    "numeric": {
        "en": "numerical comparison questions: compare two amounts or quantities stated in the documents (which is larger/smaller, by how much); the answer gives both numbers and the conclusion",
        "zh": "数值比较问题：比较文档中的两个金额或数量（哪个更大/更小、相差多少）；答案给出两个数值和结论",
    },
    "temporal": {
        "en": "time-sequence questions: ask which of two events happened earlier or later, or their order; the answer gives both dates and the conclusion",
        "zh": "时间序列问题：询问两个事件哪个更早或更晚、或它们的先后顺序；答案给出两个日期和结论",
    },
    "unanswerable": {
        "en": "unanswerable questions: plausible questions about the same subject whose answer the document does NOT contain (e.g. a year, figure or event it never mentions); the answer is \"Unable to answer\"",
        "zh": "无关无解问题：关于同一主题、看似合理但文档中没有答案的问题（例如文档从未提到的年份、数字或事件）；答案为“无法回答”",
    },
}

TS_QUESTIONS = register(Prompt(
    name="rageval_ts_questions",
    system=JSON_ONLY,
    template={
        "en": ("Write {count} {instruction}. Use the configuration (key facts) and the document text. "
               "Each question must be clear, specific and answerable on its own (name the company, "
               "court, patient ... it is about); the answer must come from the text. Write in English.\n"
               "Configuration:\n{facts}\nDocument text:\n{document}\n"
               'JSON: {{"questions": [{{"question": "...", "answer": "..."}}]}}'),
        "zh": ("写出 {count} 个{instruction}。根据配置（关键事实）和文档正文出题。每个问题必须清楚、具体，单独成立"
               "（写明所指的公司、法院、患者等）；答案必须来自正文。用中文写。\n"
               "配置：\n{facts}\n文档正文：\n{document}\n"
               'JSON：{{"questions": [{{"question": "...", "answer": "..."}}]}}'),
    },
    schema={"type": "object", "required": ["questions"], "properties": {"questions": {
        "type": "array", "items": {"type": "object", "required": ["question", "answer"], "properties": {
            "question": {"type": "string"}, "answer": {"type": "string"}}}}}},
))

TS_REFERENCES = register(Prompt(
    name="rageval_ts_references",
    system=JSON_ONLY,
    template={
        "en": ("Find the references of the question in the document: copy, character for character, "
               "every sentence of the document that the answer relies on. Do not paraphrase, shorten, "
               "translate or join sentences; copy whole sentences exactly as written. If no sentence "
               "supports the answer, return an empty list.\n"
               "Question: {question}\nAnswer: {answer}\nDocument:\n{document}\n"
               'JSON: {{"references": ["...", "..."]}}'),
        "zh": ("在文档中找出该问题的参考片段：逐字复制回答所依据的每一个句子。不要改写、缩短、翻译或拼接句子；"
               "按原文完整复制整句。如果没有句子支持该回答，返回空列表。\n"
               "问题：{question}\n答案：{answer}\n文档：\n{document}\n"
               'JSON：{{"references": ["...", "..."]}}'),
    },
    schema={"type": "object", "required": ["references"],
            "properties": {"references": {"type": "array", "items": {"type": "string"}}}},
))

TS_REFINE = register(Prompt(
    name="rageval_ts_refine",
    system=JSON_ONLY,
    template={
        "en": ("Refine the draft answer against the references: keep what they support, correct what "
               "they contradict, drop what they do not support, and add what the question needs from "
               "them. One to three sentences, in the question's language.\n"
               "Question: {question}\nDraft answer: {answer}\nReferences:\n{references}\n"
               'JSON: {{"answer": "..."}}'),
        "zh": ("根据参考片段修订草稿答案：保留有依据的内容，改正与参考矛盾的内容，删去没有依据的内容，并补充问题需要的信息。"
               "一到三句，使用问题的语言。\n"
               "问题：{question}\n草稿答案：{answer}\n参考片段：\n{references}\n"
               'JSON：{{"answer": "..."}}'),
    },
    schema={"type": "object", "required": ["answer"], "properties": {"answer": {"type": "string"}}},
))

__all__ = ["LABELS", "LABEL_LETTERS", "UNABLE", "UNABLE_ANSWER", "KEYPOINTS", "KEYPOINT_LABELS",
           "KEYPOINT_OPTION", "TS_SCHEMA", "TS_CONFIG", "TS_SYNTH_CONFIG", "TS_SYNTH_DOC",
           "TYPE_INSTRUCTIONS", "TS_QUESTIONS", "TS_REFERENCES", "TS_REFINE"]
