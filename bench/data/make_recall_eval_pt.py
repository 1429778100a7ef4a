"""Lay the Portuguese facts out as multi-session conversations with ids.

Same layout as make_recall_eval.py (three sessions a week apart, the facts
dealt across them, chit-chat filler between), plus each question's ``kind``
(words / paraphrase / when). ``when`` questions name the day the answer was
said, relative to the last session, where every question is asked.

Run: python bench/data/make_recall_eval_pt.py bench/data/recall_eval_pt.json (deterministic).
"""

import json
import random
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from recall_eval_pt_source import FILLER, PERSONAS

ACKS = ["Anotado.", "Entendi.", "Combinado, vou lembrar.", "Certo!", "Ok, obrigado por avisar.", "Registrado."]
MONTHS = [
    "janeiro",
    "fevereiro",
    "março",
    "abril",
    "maio",
    "junho",
    "julho",
    "agosto",
    "setembro",
    "outubro",
    "novembro",
    "dezembro",
]
#: How a question asked in session 3 names the day of session 1, 2 or 3.
RELATIVE = ["há duas semanas", "na semana passada", "hoje mais cedo"]
FILLERS_PER_CONVERSATION = 12

rng = random.Random(2027)
out = {
    "description": "caderno recall evaluation set in Portuguese: authored multi-session conversations about "
    "household finance, trips, health and work. Each question names the message ids that hold its answer and "
    "its kind (words: reuses the answer's words; paraphrase; when: asks what was said on a day). Questions are "
    "asked in the conversation's last session.",
    "conversations": [],
    "questions": [],
}
qn = 0
for ci, (name, facts) in enumerate(PERSONAS.items()):
    days = [date(2026, ci % 12 + 1, 10 + si * 7) for si in range(3)]
    sessions = [[], [], []]
    for fi, fact in enumerate(facts):
        sessions[fi % 3].append(("fact", fact))
    for k, f in enumerate(rng.sample(FILLER, FILLERS_PER_CONVERSATION)):
        sessions[k % 3].append(("filler", f))
    convo = {"id": name, "sessions": []}
    for si, items in enumerate(sessions):
        rng.shuffle(items)
        msgs = []

        def add(role, content, msgs=msgs, si=si, name=name):
            mid = f"{name}-s{si + 1}-m{len(msgs) + 1}"
            msgs.append({"id": mid, "role": role, "content": content})
            return mid

        for kind, payload in items:
            if kind == "fact":
                statement, questions = payload
                mid = add("user", statement)
                add("assistant", rng.choice(ACKS))
                for qkind, q in questions:
                    if qkind == "when":
                        d = days[si]
                        said = RELATIVE[si] if rng.random() < 0.5 else f"no dia {d.day} de {MONTHS[d.month - 1]}"
                        q = q.replace("{quando}", said)
                    qn += 1
                    out["questions"].append(
                        {"id": f"pt-q{qn:03d}", "conversation": name, "kind": qkind, "question": q, "answer_ids": [mid]}
                    )
            else:
                add("user", payload[0])
                add("assistant", payload[1])
        convo["sessions"].append({"thread_id": f"session-{si + 1}", "date": days[si].isoformat(), "messages": msgs})
    out["conversations"].append(convo)
with open(sys.argv[1], "w") as fh:
    json.dump(out, fh, ensure_ascii=False, indent=1)
print(
    len(out["conversations"]),
    "conversations,",
    len(out["questions"]),
    "questions,",
    sum(len(s["messages"]) for c in out["conversations"] for s in c["sessions"]),
    "messages",
)
