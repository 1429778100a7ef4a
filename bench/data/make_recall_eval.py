"""Lay the authored facts out as multi-session conversations with ids.

Run: python bench/data/make_recall_eval.py bench/data/recall_eval.json (deterministic).
"""

import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from recall_eval_source import FILLER, PERSONAS

ACKS_EN = ["Got it.", "Noted.", "Okay, I'll keep that in mind.", "Thanks for telling me.", "Understood."]
ACKS_PT = ["Anotado.", "Entendi.", "Combinado, vou lembrar.", "Certo!", "Ok, obrigado por avisar."]
rng = random.Random(2026)
out = {
    "description": "caderno recall evaluation set: authored multi-session conversations. Each question names "
    "the message ids that hold its answer. Questions are asked in the conversation's last session.",
    "conversations": [],
    "questions": [],
}
qn = 0
for ci, (name, facts) in enumerate(PERSONAS.items()):
    pt = name.endswith("-pt")
    acks = ACKS_PT if pt else ACKS_EN
    sessions = [[], [], []]
    for fi, fact in enumerate(facts):
        sessions[fi % 3].append(("fact", fi, fact))
    fillers = rng.sample(FILLER, 9)
    for k, f in enumerate(fillers):
        sessions[k % 3].append(("filler", None, f))
    convo = {"id": name, "sessions": []}
    for si, items in enumerate(sessions):
        rng.shuffle(items)
        msgs = []
        for kind, _fi, payload in items:
            if kind == "fact":
                statement, questions = payload
                mid = f"{name}-s{si + 1}-m{len(msgs) + 1}"
                msgs.append({"id": mid, "role": "user", "content": statement})
                msgs.append(
                    {"id": f"{name}-s{si + 1}-m{len(msgs) + 1}", "role": "assistant", "content": rng.choice(acks)}
                )
                for q in questions:
                    qn += 1
                    out["questions"].append(
                        {"id": f"q{qn:03d}", "conversation": name, "question": q, "answer_ids": [mid]}
                    )
            else:
                user, bot = payload
                msgs.append({"id": f"{name}-s{si + 1}-m{len(msgs) + 1}", "role": "user", "content": user})
                msgs.append({"id": f"{name}-s{si + 1}-m{len(msgs) + 1}", "role": "assistant", "content": bot})
        convo["sessions"].append(
            {"thread_id": f"session-{si + 1}", "date": f"2026-0{ci % 9 + 1}-{10 + si * 7:02d}", "messages": msgs}
        )
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
