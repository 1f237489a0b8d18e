"""Prompts of the Ragas metric family, English and Chinese."""

from __future__ import annotations

from offline_eval.prompts.base import Prompt

JSON_ONLY = {
    "en": "You are a meticulous evaluator. Reply with JSON only, exactly in the format asked for.",
    "zh": "你是一名严谨的评估员。只用 JSON 回答，严格按照要求的格式。",
}
YES_NO = {
    "en": "You are a meticulous evaluator. Answer with a single word: Yes or No.",
    "zh": "你是一名严谨的评估员。只用一个英文单词回答：Yes 或 No。",
}

CLAIMS = Prompt(
    name="claims",
    system=JSON_ONLY,
    template={
        "en": ("Break the answer into short, self-contained factual claims. Replace pronouns with what "
               "they refer to (use the question to resolve them). Keep the answer's language. Do not add "
               "facts. An answer that states nothing factual has no claims.\n"
               "Question: {question}\nAnswer: {answer}\n"
               'JSON: {{"claims": ["...", "..."]}}'),
        "zh": ("把回答拆分成简短、独立完整的事实陈述。用问题消解代词，写出所指对象。保持回答的语言，不要添加事实。"
               "没有事实内容的回答没有陈述。\n"
               "问题：{question}\n回答：{answer}\n"
               'JSON：{{"claims": ["...", "..."]}}'),
    },
    schema={"type": "object", "required": ["claims"],
            "properties": {"claims": {"type": "array", "items": {"type": "string"}}}},
    examples={
        "en": [({"question": "Who was Albert Einstein and what is he best known for?",
                 "answer": "He was a German-born theoretical physicist, best known for the theory of relativity."},
                {"claims": ["Albert Einstein was a German-born theoretical physicist.",
                            "Albert Einstein is best known for the theory of relativity."]})],
        "zh": [({"question": "爱因斯坦是谁？他以什么闻名？",
                 "answer": "他是出生于德国的理论物理学家，以相对论闻名。"},
                {"claims": ["爱因斯坦是出生于德国的理论物理学家。", "爱因斯坦以相对论闻名。"]})],
    },
)

SUPPORT_OPTION = Prompt(
    name="support_option",
    system=YES_NO,
    template={
        "en": ("Context:\n{premise}\n\nStatement: {hypothesis}\n\n"
               "Is the statement fully supported by the context? Answer Yes or No."),
        "zh": ("上下文：\n{premise}\n\n陈述：{hypothesis}\n\n"
               "该陈述是否完全得到上下文的支持？回答 Yes 或 No。"),
    },
)

SUPPORT_VERDICTS = Prompt(
    name="support_verdicts",
    system=JSON_ONLY,
    template={
        "en": ("Context chunks:\n{premise}\n\nFor each statement decide whether the context chunks "
               "support it. Give a one-sentence reason, supported true/false, and the number of the "
               "chunk that supports it (null when none).\nStatements:\n{statements}\n"
               'JSON: {{"verdicts": [{{"statement": "...", "reason": "...", "supported": true, "chunk": 1}}]}}'),
        "zh": ("上下文片段：\n{premise}\n\n逐条判断下列陈述是否得到上下文片段的支持。给出一句理由、supported 为 true/false，"
               "以及支持它的片段编号（没有则为 null）。\n陈述：\n{statements}\n"
               'JSON：{{"verdicts": [{{"statement": "...", "reason": "...", "supported": true, "chunk": 1}}]}}'),
    },
    schema={"type": "object", "required": ["verdicts"], "properties": {"verdicts": {
        "type": "array", "items": {"type": "object", "required": ["supported"], "properties": {
            "statement": {"type": "string"}, "reason": {"type": "string"},
            "supported": {"type": "boolean"}, "chunk": {"type": ["integer", "null"]}}}}}},
)

# A short answer checked whole is judged as an answer to its question: "Tampa, Florida" or "yes, in
# 1998" state nothing on their own.
ANSWER_SUPPORT_OPTION = Prompt(
    name="answer_support_option",
    system=YES_NO,
    template={
        "en": ("Context:\n{premise}\n\nQuestion: {question}\nAnswer: {hypothesis}\n\n"
               "Is the answer fully supported by the context? Answer Yes or No."),
        "zh": ("上下文：\n{premise}\n\n问题：{question}\n回答：{hypothesis}\n\n"
               "该回答是否完全得到上下文的支持？回答 Yes 或 No。"),
    },
)

# context_recall: a sentence of the reference is judged as an answer to the question (Ragas' context
# recall prompt has the question too): a reference like "January 2021" is no statement on its own.
ATTRIBUTION_OPTION = Prompt(
    name="attribution_option",
    system=YES_NO,
    template={
        "en": ("Context:\n{premise}\n\nQuestion: {question}\nSentence of the reference answer: {hypothesis}\n\n"
               "As an answer to the question, can this sentence be attributed to the context? Answer Yes or No."),
        "zh": ("上下文：\n{premise}\n\n问题：{question}\n参考答案中的句子：{hypothesis}\n\n"
               "作为该问题的回答，这句话能否归因于上下文？回答 Yes 或 No。"),
    },
)

ATTRIBUTION_VERDICTS = Prompt(
    name="attribution_verdicts",
    system=JSON_ONLY,
    template={
        "en": ("Context chunks:\n{premise}\n\nQuestion: {question}\nFor each sentence of the reference answer "
               "decide whether, as an answer to the question, it can be attributed to the context chunks. Give a "
               "one-sentence reason, supported true/false, and the number of the chunk it comes from (null when "
               "none).\nSentences:\n{statements}\n"
               'JSON: {{"verdicts": [{{"statement": "...", "reason": "...", "supported": true, "chunk": 1}}]}}'),
        "zh": ("上下文片段：\n{premise}\n\n问题：{question}\n逐句判断参考答案中的句子作为该问题的回答能否归因于上下文片段。"
               "给出一句理由、supported 为 true/false，以及它出自的片段编号（没有则为 null）。\n句子：\n{statements}\n"
               'JSON：{{"verdicts": [{{"statement": "...", "reason": "...", "supported": true, "chunk": 1}}]}}'),
    },
    schema=SUPPORT_VERDICTS.schema,
)

QUESTIONS = Prompt(
    name="questions",
    system=JSON_ONLY,
    template={
        "en": ("Write {n} different questions that the answer below would answer, in the answer's "
               "language. Also say whether the answer is noncommittal (evasive, vague, "
               '"I don\'t know").\nAnswer: {answer}\n'
               'JSON: {{"noncommittal": false, "questions": ["...", "..."]}}'),
        "zh": ("写出 {n} 个不同的问题，使下面的回答恰好回答这些问题，问题使用回答的语言。同时判断该回答是否含糊其辞"
               "（回避、模糊、“我不知道”）。\n回答：{answer}\n"
               'JSON：{{"noncommittal": false, "questions": ["...", "..."]}}'),
    },
    schema={"type": "object", "required": ["noncommittal", "questions"], "properties": {
        "noncommittal": {"type": "boolean"},
        "questions": {"type": "array", "items": {"type": "string"}}}},
    examples={
        "en": [({"n": 2, "answer": "Albert Einstein was born in Germany."},
                {"noncommittal": False, "questions": ["Where was Albert Einstein born?",
                                                      "In which country was Einstein born?"]}),
               ({"n": 2, "answer": "I don't know about the groundbreaking feature of the smartphone invented in 2023."},
                {"noncommittal": True, "questions": ["What was the groundbreaking feature of the smartphone invented in 2023?",
                                                     "Which feature of the 2023 smartphone was groundbreaking?"]})],
        "zh": [({"n": 2, "answer": "爱因斯坦出生于德国。"},
                {"noncommittal": False, "questions": ["爱因斯坦出生在哪里？", "爱因斯坦出生于哪个国家？"]})],
    },
)

RELEVANT_SENTENCES = Prompt(
    name="relevant_sentences",
    system=JSON_ONLY,
    template={
        "en": ("Copy, unchanged, the sentences of the context that are needed to answer the question. "
               "If none is needed, return an empty list.\n"
               "Question: {question}\nContext:\n{context}\n"
               'JSON: {{"sentences": ["..."]}}'),
        "zh": ("原样摘抄上下文中回答问题所需的句子。如果没有需要的句子，返回空列表。\n"
               "问题：{question}\n上下文：\n{context}\n"
               'JSON：{{"sentences": ["..."]}}'),
    },
    schema={"type": "object", "required": ["sentences"],
            "properties": {"sentences": {"type": "array", "items": {"type": "string"}}}},
)

CHUNK_USEFUL_OPTION = Prompt(
    name="chunk_useful_option",
    system=YES_NO,
    template={
        "en": ("Question: {question}\nAnswer: {answer}\nContext: {context}\n\n"
               "Was this context useful in arriving at the given answer? Answer Yes or No."),
        "zh": ("问题：{question}\n答案：{answer}\n上下文：{context}\n\n"
               "这段上下文对得出给定答案是否有用？回答 Yes 或 No。"),
    },
)

CHUNK_USEFUL = Prompt(
    name="chunk_useful",
    system=JSON_ONLY,
    template={
        "en": ("Question: {question}\nAnswer: {answer}\nContext: {context}\n\n"
               "Was this context useful in arriving at the given answer? Give a one-sentence reason.\n"
               'JSON: {{"reason": "...", "useful": true}}'),
        "zh": ("问题：{question}\n答案：{answer}\n上下文：{context}\n\n"
               "这段上下文对得出给定答案是否有用？给出一句理由。\n"
               'JSON：{{"reason": "...", "useful": true}}'),
    },
    schema={"type": "object", "required": ["useful"],
            "properties": {"reason": {"type": "string"}, "useful": {"type": "boolean"}}},
)

ENTITIES = Prompt(
    name="entities",
    system=JSON_ONLY,
    template={
        "en": ("List the named entities (people, organisations, places, dates, numbers with units, "
               "products, laws) in the text, each once, as written.\nText: {text}\n"
               'JSON: {{"entities": ["..."]}}'),
        "zh": ("列出文本中的命名实体（人物、机构、地点、日期、带单位的数字、产品、法律），每个只列一次，按原文书写。\n"
               "文本：{text}\n"
               'JSON：{{"entities": ["..."]}}'),
    },
    schema={"type": "object", "required": ["entities"],
            "properties": {"entities": {"type": "array", "items": {"type": "string"}}}},
    examples={
        "en": [({"text": "The Eiffel Tower, in Paris, France, was completed in 1889 for the World's Fair."},
                {"entities": ["Eiffel Tower", "Paris", "France", "1889", "World's Fair"]})],
        "zh": [({"text": "埃菲尔铁塔位于法国巴黎，于1889年为世界博览会建成。"},
                {"entities": ["埃菲尔铁塔", "法国", "巴黎", "1889年", "世界博览会"]})],
    },
)

RUBRIC_OPTION = Prompt(
    name="rubric_option",
    system={"en": "You are a meticulous evaluator. Answer with a single digit from 1 to 5.",
            "zh": "你是一名严谨的评估员。只用 1 到 5 之间的一个数字回答。"},
    template={
        "en": ("Score the response against the rubric.\nRubric:\n{rubric}\n\nQuestion: {question}\n"
               "Response: {answer}\n{reference_block}Score (1-5):"),
        "zh": ("按照评分标准给回答打分。\n评分标准：\n{rubric}\n\n问题：{question}\n回答：{answer}\n"
               "{reference_block}分数（1-5）："),
    },
)

RUBRIC = Prompt(
    name="rubric",
    system=JSON_ONLY,
    template={
        "en": ("Score the response against the rubric and explain briefly.\nRubric:\n{rubric}\n\n"
               "Question: {question}\nResponse: {answer}\n{reference_block}"
               'JSON: {{"feedback": "...", "score": 3}}'),
        "zh": ("按照评分标准给回答打分，并简要说明。\n评分标准：\n{rubric}\n\n问题：{question}\n回答：{answer}\n"
               "{reference_block}"
               'JSON：{{"feedback": "...", "score": 3}}'),
    },
    schema={"type": "object", "required": ["score"], "properties": {
        "feedback": {"type": "string"}, "score": {"type": "integer", "enum": [1, 2, 3, 4, 5]}}},
)

REPAIR = {
    "en": "Your reply could not be used: {problem}. Reply again with only the corrected JSON.",
    "zh": "你的回复无法使用：{problem}。请只回复修正后的 JSON。",
}

DEFAULT_RUBRICS = {
    "reference_free": {
        1: "The response is incorrect, irrelevant, or does not answer the question.",
        2: "The response addresses the question but contains major errors or omissions.",
        3: "The response is partly correct and relevant, with noticeable gaps or minor errors.",
        4: "The response is correct and relevant, with small omissions.",
        5: "The response is fully correct, relevant, complete and clearly stated.",
    },
    "with_reference": {
        1: "The response contradicts the reference or is entirely wrong.",
        2: "The response agrees with the reference on little; major facts are missing or wrong.",
        3: "The response agrees with the reference on the main point but misses or garbles details.",
        4: "The response agrees with the reference with minor omissions.",
        5: "The response is fully consistent with the reference and complete.",
    },
}


# A follow-up question rewritten to stand alone ("when was he born?" -> "when was Shakespeare born?"), once
# per sample, for every metric that reads the question (EvalSettings.history "rewrite" / "both"). The
# conversation is shown before the question by Prompt.render.
STANDALONE_QUESTION = Prompt(
    name="standalone_question",
    system=JSON_ONLY,
    template={
        "en": ("Rewrite the user's last question so that it can be understood without the conversation: replace "
               "pronouns and references with what they refer to, keep its meaning and its language, and add "
               "nothing else. A question that already stands alone is copied unchanged.\n"
               "Question: {question}\n"
               'JSON: {{"question": "..."}}'),
        "zh": ("改写用户的最后一个问题，使其脱离对话也能看懂：把代词和指代换成所指的内容，保持原意和语言，不添加任何其他内容。"
               "本身已经完整的问题原样照抄。\n"
               "问题：{question}\n"
               'JSON：{{"question": "..."}}'),
    },
    schema={"type": "object", "required": ["question"], "properties": {"question": {"type": "string"}}},
)

# --- answer relevance and context relevance as option verdicts (their "verdict" mode) --------------
# Each is one Yes/No question read from the option probabilities: no reply to parse. The answer's is the
# plain question; what the metric adds is the correction for the judge's lean, the parts of a question
# and the reading of an answer that declines (docs/measurements.md has the wordings measured).
ANSWER_GIVES_OPTION = Prompt(
    name="answer_gives_option",
    system=YES_NO,
    template={
        "en": "Question: {question}\nAnswer: {answer}\n\nDoes the answer address the question? Answer Yes or No.",
        "zh": "问题：{question}\n回答：{answer}\n\n该回答是否回应了这个问题？回答 Yes 或 No。",
    },
)

# An answer that says it cannot answer is relevant only when the passages indeed do not hold the answer.
ANSWER_DECLINES_OPTION = Prompt(
    name="answer_declines_option",
    system=YES_NO,
    template={
        "en": ("Question: {question}\nAnswer: {answer}\n\n"
               "Does the answer say that the information asked for is not available or cannot be given? "
               "Answer Yes or No."),
        "zh": ("问题：{question}\n回答：{answer}\n\n"
               "该回答是否表示所问的信息无法获得或无法给出？回答 Yes 或 No。"),
    },
)

# What an answer opening "I cannot answer" says, in words, per language. A small judge seldom reads such an
# answer as declining when asked ANSWER_DECLINES_OPTION, so where nothing was retrieved, and so no passage
# can hold the answer, the metric also reads the answer's first sentence for these phrasings. Each alternative names the missing information, its source or the asking, so that a
# sentence merely holding a negation ("there is no cure") does not count.
_INFORMATION = (r"(?:(?:specific|relevant|further|additional|enough|sufficient|any|detailed|exact|precise|more)\s+)*"
                r"(?:information|details?|data|answer|mention)")
_SOURCE = (r"(?:documents?|contexts?|passages?|texts?|sources?|articles?|materials?|excerpts?|search results|"
           r"(?:provided|given|available) information|knowledge base)")
_NOT = r"(?:do(?:es)?n't|do(?:es)? not|did(?:n't| not)|cannot|can't|could not|couldn't|fails? to)"
_GIVE = (r"(?:provide|mention|include|contain|specify|say|state|give|offer|discuss|address|cover|describe|"
         r"indicate|reveal|disclose|explain|answer|tell)")
_GIVEN = r"(?:provided|mentioned|specified|disclosed|given|stated|announced|reported|publicly (?:available|known))"
_SEEK = rf"(?:have\s+(?:the\s+|an?\s+)?{_INFORMATION}|know|find|see|locate|answer|provide|say|tell|determine|confirm)"
# Where one question asks two, joined by "and" before the second's question word ("When did A appoint a
# new CEO, and when did B occur?"): metrics.relevance.joined_questions cuts there. English only: no shared
# labelled set asks such a question in another language, so no other list could be checked.
QUESTION_JOINS = {
    "en": r",?\s+and\s+(?=(?:what|when|where|who|whom|whose|which|why|how|did|does|do|is|are|was|were|can|could|"
          r"will|would|has|have|had)\b)",
}
DECLINING_WORDS = {
    "en": "|".join((
        rf"\b(?:I|we)\s+(?:{_NOT}|(?:am|are)\s+(?:unable|not able)\s+to)\s+{_SEEK}\b",
        rf"\b(?:I|we)\s+(?:haven't|have not|had not)\s+(?:been able to\s+)?(?:find|found|seen|located)\b",
        rf"\b(?:no|not any|insufficient|not enough)\s+{_INFORMATION}\b",
        rf"\b{_SOURCE}\b[^.?!]{{0,60}}\b(?:{_NOT}|not)\s+{_GIVE}",
        rf"\b(?:is|are|was|were|has|have|had)\s+not\s+(?:been\s+)?{_GIVEN}\b",
        rf"\b(?:isn't|aren't|wasn't|weren't|hasn't been|haven't been)\s+{_GIVEN}\b",
        r"\b(?:cannot|can't|could not|unable to|impossible to)\s+(?:be\s+)?(?:answered|determined|confirmed)\b",
    )),
    "zh": "|".join((
        r"(?:文档|文件|资料|上下文|段落|文本|材料|内容|信息)中?(?:没有|未|并未|并没有)(?:提供|提及|提到|包含|说明|给出|披露|记载)",
        r"(?:没有|未|并未)(?:提供|提及|提到|给出|披露|找到)(?:相关|具体|足够|更多)?的?(?:信息|细节|数据|答案|资料)",
        r"(?:没有|无)(?:相关|具体|足够|更多)的?(?:信息|资料|数据|答案)",
        r"无法(?:回答|得知|获知|确定|判断)",
        r"(?:信息|资料)(?:不足|不够)",
        r"不(?:清楚|知道)",
    )),
}

# What a note to whoever grades an answer names, per language: its reader (a grader, an evaluator), the text
# graded as such ("this answer", "the response above"), the grade it asks for ("rate this answer as",
# "score 5/5", "fully supported", a label and a colon: "Verdict:"), or the grading model's instructions. An
# answer's sentence that names one of these and shares no word with its question and contexts speaks to
# the grader, not about the world (judging.statements.grading_notes). Written from what such a note must
# say, apart from the phrasings benchmarks/injection.py plants; the topic gate keeps a real claim about
# reviewers or scores, which names what it is about.
GRADING_WORDS = {
    "en": "|".join((
        r"\b(?:graders?|evaluators?|assessors?|annotators?|raters?|reviewers?|judge\s+(?:model|llm))\b",
        r"\b(?:faithfulness|groundedness|hallucinat\w*)\b",
        r"\b(?:this|the above|the preceding|the previous|the present|the following)\s+"
        r"(?:answer|response|reply|output|completion|statements?|claims?)\b",
        r"\b(?:answer|response|reply)\s+(?:above|here)\b",
        r"\b(?:information|content|everything|all)\s+(?:stated\s+|given\s+)?above\b",
        r"\b(?:mark|rate|score|grade|label|classify|judge|treat)\s+(?:it|this|them|these|each|every|all)\s+(?:\w+\s+)?as\b",
        r"\b(?:score|rating|grade|marks?)\s*[:=]?\s*\d+(?:\.\d+)?\s*(?:/|out of)\s*\d+|\bfull marks\b",
        r"\b(?:assessment|evaluation|verdict|grading|rating|score|label|verified|verification)\W{0,2}\s*:",
        r"\b(?:fully|entirely|completely)\s+(?:supported|grounded|faithful|verified|accurate)\b",
        r"\bfact[- ]check\w*\b",
        r"\b(?:ignore|disregard|override)\s+(?:all|any|the|previous|prior|earlier|your|above)\b[^.!?]{0,30}"
        r"\binstructions?\b",
        r"\b(?:previous|prior|earlier|above|your)\s+instructions?\b|\bsystem prompt\b",
    )),
    "zh": "|".join((
        r"评分|打分|评审|审阅|审核|评估|评委|评判|评测|阅卷|批改|评阅|标注(?:员|者)|裁判",
        r"(?:本|该|此|这个|上述|以上|前面的|上面的)(?:回答|答案|回复|输出|陈述|说法)",
        r"(?:以上|上述|上面的?)(?:内容|信息|所有)",
        r"忠实|幻觉|判定为|评为|标记为|视为正确|满分|完全(?:正确|支持|准确|有据)",
        r"(?:忽略|无视)(?:之前|以上|上述|前面|所有)的?(?:指令|指示|要求)|系统提示",
    )),
}

# The passage first, so that the probe with an empty question (the passage's own lean) shares its prefix.
PASSAGE_ANSWERS_OPTION = Prompt(
    name="passage_answers_option",
    system=YES_NO,
    template={
        "en": ("Passage:\n{passage}\n\nQuestion: {question}\n\n"
               "Does this passage state the answer to the question? Answer Yes or No."),
        "zh": ("段落：\n{passage}\n\n问题：{question}\n\n"
               "这段文字是否陈述了该问题的答案？回答 Yes 或 No。"),
    },
)
