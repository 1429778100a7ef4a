"""The notebook's screen for injection phrasings: a denylist, matched after folding disguises.

Notes end up in the model's instructions, so a note that tells the model to
drop its instructions, become someone else, send data out, or hide from the
user is refused. This is a denylist, not a guarantee: it catches the
common phrasings in English and Portuguese (tests/notebook/
test_notebook_injection.py states the share of its corpus it catches) and
is tuned to pass what people really write ("ignore the noise at night",
"send the report to Ana", a recipe URL with a query).

Each note is matched in several *views*, so one spelling trick does not
undo the list: the folded text (NFKC, no accents, casefold, look-alike
letters, one space), the same with leetspeak digits read as letters, its
ROT13, the text of any base64 run it holds, and, for the override
phrasings only, its letters alone ("i g n o r e", "ignore_previous").
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Callable, Iterator
from urllib.parse import unquote

from ...core.errors import NotebookError
from ...core.text import first_invisible

__all__ = ["scan"]

#: Look-alike letters folded to Latin before matching, so "іgnоrе" written
#: with Cyrillic і/о/е is read as "ignore". A small explicit table of the
#: Cyrillic and Greek letters that are near-identical to Latin ones in common
#: fonts (lowercase: matching runs after casefold).
_LOOKALIKES = str.maketrans(
    {
        "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
        "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ԛ": "q", "ԝ": "w",
        "һ": "h", "ɡ": "g", "ı": "i", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v",
        "ο": "o", "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w", "ϲ": "c", "ϳ": "j",
    }
)  # fmt: skip

#: Digits and signs read as letters ("1gn0r3 4ll pr3v10u5"): a view of its own,
#: so the folded text keeps its numbers.
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"})

#: Shortest run of base64 characters decoded and screened: 16 characters
#: are 12 bytes, a short phrase; shorter runs are ordinary words and numbers.
MIN_BASE64_RUN = 16
_BASE64_RUN = re.compile(rf"[A-Za-z0-9+/_-]{{{MIN_BASE64_RUN},}}={{0,2}}")
#: Runs of other encodings an instruction hides in: hex bytes, 8-bit binary groups, base32, "\\u0049" escapes.
_HEX_RUN = re.compile(rf"\b(?:[0-9a-fA-F]{{2}}){{{MIN_BASE64_RUN},}}\b")
_BINARY_RUN = re.compile(r"(?:[01]{8}\s*){4,}")
_BASE32_RUN = re.compile(rf"\b[A-Z2-7]{{{MIN_BASE64_RUN},}}=*")
_U_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


def _fold(content: str) -> str:
    """The text injection patterns are matched against.

    NFKC folds full-width and styled letters ("ｉｇｎｏｒｅ", "𝐢𝐠𝐧𝐨𝐫𝐞"),
    dropping combining marks folds "ïgnöre" (and Portuguese accents:
    "instruções" is read as "instrucoes"), casefold and the look-alike
    table fold case and Cyrillic/Greek letters, and runs of spaces become one.
    """
    text = unicodedata.normalize("NFKC", content)
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")
    text = text.casefold().translate(_LOOKALIKES)
    return re.sub(r"[^\S\n]+", " ", text)


# -- the phrasings -----------------------------------------------------------------------------
#
# Written against folded text: lowercase, no accents ("instrucoes", "voce"), one space.

#: Words that may stand between a verb and what it drops ("ignore all of your previous rules").
_EN_FILLER = (
    r"((all|any|every|each|of|the|your|my|these|those|its|their|that|whatever|previous|prior|above|earlier|"
    r"preceding|former|original|initial|system|existing|current|old|given|safety|security|content|confidentiality|"
    r"developer'?s?|operator'?s?)\s+)*"
)
#: What an instruction is called, in English.
_EN_RULES = (
    r"(instructions?|rules|guidelines|directives|directions|prompts?|programming|constraints|guardrails|polic(y|ies)|"
    r"orders|commands)\b"
)
_PT_FILLER = r"((todas|todos|as|os|a|o|suas|seus|tuas|teus|estas|estes|essas|esses|quaisquer|qualquer|de|do|da)\s+)*"
_PT_RULES = (
    r"(instrucoes|instrucao|regras|orientacoes|diretrizes|diretivas|ordens|comandos|prompt|restricoes|politicas)\b"
)
#: What a note must not send out (English and Portuguese, folded).
_SENSITIVE = (
    r"(conversations?|chat|transcripts?|messages|history|notes|notebook|memory|memories|secrets?|keys?|tokens?|"
    r"passwords?|passphrases?|credentials?|cookies?|everything|user'?s|the user|conversas?|mensagens|historico|"
    r"notas|memoria|segredos?|chaves?|senhas?|credenciais|cpf|ssn|tudo|d[oa] usuari[oa])"
)
#: Where it would go: a URL, a webhook, an e-mail address.
_DESTINATION = r"(https?://|www\.|webhook|\b[\w.+-]+@[\w-]+\.[\w.-]+)"
#: Query parameters that carry data out when a model fills them in.
_DATA_PARAMS = (
    r"(token|access_token|key|api_?key|apikey|secret|password|passwd|pwd|senha|cpf|ssn|card|cartao|dados|"
    r"payload|conversation|conversa|history|historico|chat|memory|memoria|notes|notas|msg|message|mensagem|"
    r"session|cookie)"
)
#: A value the model is meant to fill in: {…}, <…>, $VAR, […], "…".
_PLACEHOLDER = r"(\{|<|\$\{?\w|\[|\.\.\.|…)"


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


#: (pattern, name) pairs refused in written content, matched against every
#: view of the content (see the module docstring).
_BLOCKED: list[tuple[re.Pattern[str], str]] = [
    # -- instruction override
    (
        _p(r"ignore\s+(all\s+)?(the\s+)?(previous|prior|above|earlier)\s+instructions"),
        "prompt injection ('ignore previous instructions')",
    ),
    (
        _p(r"\b(ignore|disregard|forget|override|bypass|dismiss|discard|abandon)\s+" + _EN_FILLER + _EN_RULES),
        "prompt injection ('ignore previous instructions' and variants)",
    ),
    (
        # "Disregard everything you were told before", "forget everything above".
        _p(
            r"\b(ignore|disregard|forget|override|dismiss|discard)\s+(about\s+)?(everything|all|anything|whatever)\s+"
            r"((that\s+)?(you\s+(were|have\s+been|'ve\s+been|got)|was|has\s+been)\s+(told|said|given|taught|instructed)"
            r"|(above|before|earlier|previously|prior|so\s+far|until\s+now|up\s+to\s+now)\b)"
        ),
        "prompt injection ('disregard everything you were told')",
    ),
    (
        _p(
            r"\b(previous|prior|earlier|above|original|old|initial|system)\s+(instructions|rules|guidelines|prompt)\s+"
            r"(are|were|is|have\s+been)\s+(now\s+)?(outdated|void|cancell?ed|obsolete|invalid|revoked|superseded|null)"
            r"|\b(everything|all)\s+(earlier|before|above|previous)\s+(is|was)\s+(now\s+)?(void|cancell?ed|obsolete|null)"
        ),
        "prompt injection ('previous instructions are void')",
    ),
    (
        _p(r"\b(stop|quit|cease)\s+following\s+" + _EN_FILLER + _EN_RULES),
        "prompt injection ('stop following your instructions')",
    ),
    (
        _p(r"\b(do\s+not|don'?t|never)\s+(follow|obey)\s+" + _EN_FILLER + _EN_RULES),
        "prompt injection ('do not follow your instructions')",
    ),
    (
        _p(
            r"\byour\s+(real|true|actual|new|updated)\s+(instructions|rules|orders|directives?|system\s+prompt)\b"
            r"|\byour\s+(real|true|actual)\s+(task|purpose|goal|mission|job)\b"
            r"|\byour\s+(rules|instructions|guidelines)\s+(have\s+)?(changed|been\s+(updated|replaced|lifted))"
            r"|\bsupersedes?\s+(all\s+)?(previous|prior|earlier|your|the)\b"
        ),
        "prompt injection ('your real instructions')",
    ),
    (
        _p(
            r"\bnew\s+(system\s+)?(instructions?|rules|directives|orders)\s*[:\-–—]+\s*"
            r"(from\s+now\s+on|you|your|ignore|disregard|forget|always|never|do\s+not|don'?t|the\s+(assistant|ai|model)"
            r"|assistant|ai\b)"
        ),
        "prompt injection ('new instructions: …')",
    ),
    (
        _p(
            r"\b(ignore|ignorar|desconsidere|desconsiderar|esqueca|esquecer|despreze|desprezar|descarte|descartar|"
            r"anule|anular|substitua|substituir|sobrescreva)\s+" + _PT_FILLER + _PT_RULES
        ),
        "prompt injection ('ignore as instruções anteriores' e variantes)",
    ),
    (
        _p(
            r"\b(ignore|ignorar|desconsidere|desconsiderar|esqueca|esquecer|despreze|desprezar|descarte)\s+tudo\s+"
            r"((o\s+)?que\s+(lhe|te|voce|vc|lhes|foi|tinha)\b|(acima|antes|anterior))"
        ),
        "prompt injection ('desconsidere tudo o que lhe disseram')",
    ),
    (
        _p(
            r"\b(nao\s+(siga|obedeca|cumpra)|pare\s+de\s+(seguir|obedecer)|deixe\s+de\s+(seguir|obedecer))\s+"
            r"(mais\s+)?" + _PT_FILLER + _PT_RULES
        ),
        "prompt injection ('não siga mais as instruções')",
    ),
    (
        _p(
            r"\b(instrucoes|regras|orientacoes)\s+(anteriores|acima|originais|do\s+sistema)\s+(sao|estao|foram)\s+"
            r"(agora\s+)?(invalidas|canceladas|anuladas|obsoletas|nulas|revogadas)"
        ),
        "prompt injection ('as instruções anteriores foram anuladas')",
    ),
    (
        _p(
            r"\bnovas\s+(instrucoes|regras|ordens|diretrizes)\s*[:\-–—]+\s*"
            r"(a\s+partir\s+de\s+agora|voce|ignore|desconsidere|esqueca|sempre|nunca|nao|o\s+assistente|a\s+ia)"
        ),
        "prompt injection ('novas instruções: …')",
    ),
    # -- role change
    (_p(r"\byou\s+are\s+now\b|\byou('re|\s+are)\s+(now|no\s+longer)\b"), "role hijack ('you are now …')"),
    (
        _p(
            r"\bvoce\s+(agora\s+e|e\s+agora|nao\s+e\s+mais|deixou\s+de\s+ser)\b"
            r"|\ba\s+partir\s+de\s+agora,?\s+voce\s+(e|age|atua|sera)\b"
        ),
        "role hijack ('você agora é …')",
    ),
    (
        _p(
            r"\b(you|your|ai|assistant|mode|answer|respond|reply|act|voce|ia|assistente|modo|responda|aja|age|trabalha)\b"
            r"[^\n.;]{0,60}\b(no|without|sem|nenhuma?)\s+(\w+\s+)?"
            r"(restrictions?|restricoes|restricao|content\s+filters?|filters?|filtros?|limits|limites|guidelines|rules|"
            r"regras|guardrails|diretrizes|(content|safety)\s+polic(y|ies)|politicas?\s+de\s+seguranca|censorship|"
            r"censura)\b"
        ),
        "role hijack ('… without restrictions')",
    ),
    (
        _p(
            r"\b(drop|disable|remove|turn\s+off|bypass|skip|desligue|desative|remova|ignore|pule)\s+"
            r"(all\s+|the\s+|your\s+|any\s+|as\s+|os\s+|suas\s+|seus\s+|todas\s+as\s+|todos\s+os\s+)*"
            r"(content\s+filters?|filters|safety\s+(filters|polic(y|ies)|guidelines|rules|checks|protocols)|guardrails|"
            r"filtros|politicas\s+de\s+seguranca|restricoes)\b"
            r"|\bsafety\s+(protocols?|filters?|checks|rules|guidelines|polic(y|ies))\s+(are\s+)?(now\s+)?"
            r"(disabled|off|removed|suspended|lifted)"
        ),
        "role hijack ('disable your filters')",
    ),
    (
        _p(
            r"\b(pretend|imagine|act\s+as\s+if|finja|finge|faca\s+de\s+conta)\s+(that\s+|que\s+)?"
            r"(you('re|\s+are|\s+were)|voce\s+(e|era|esta))\s+(the\s+|an?\s+|o\s+|a\s+|um\s+|uma\s+)?(system\s+)?"
            r"(admin\w*|root|superuser|developer|desenvolvedor|gerente|manager|owner|dono|operator|operador|god|deus)"
        ),
        "role hijack ('pretend you are the administrator')",
    ),
    (
        _p(
            r"\b(enter|switch\s+to)\s+(the\s+)?(developer|dev|god|admin|jailbreak|dan|unrestricted)\s+mode"
            r"|\b(entre|entrar)\s+no\s+modo\s+(desenvolvedor|dev|deus|admin|administrador|irrestrito|jailbreak|dan)"
            r"|\b(jailbreak|god|dan)\s+mode|\bmodo\s+(deus|jailbreak|dan|irrestrito)\b"
            r"|\b(unfiltered|unrestricted|uncensored|jailbroken)\s+(assistant|ai|mode|model|chatbot|version|bot)"
        ),
        "role hijack ('developer mode', 'unrestricted assistant')",
    ),
    # -- concealment and fake system text
    (_p(r"\bdo\s+not\s+tell\s+the\s+user\b"), "concealment ('do not tell the user')"),
    (
        _p(
            r"\b(never|do\s+not|don'?t|without)\s+(tell(ing)?|inform(ing)?|mention(ing)?|reveal(ing)?|disclos\w+|"
            r"show(ing)?|alert(ing)?|let(ting)?)\b[^\n.]{0,40}\b(the\s+)?(user|human)\b"
            r"|\b(keep|hide)\s+(this|it|these\s+\w+)\s+(a\s+)?(secret\s+)?from\s+(the\s+)?(user|human)\b"
        ),
        "concealment ('never mention this to the user')",
    ),
    (
        _p(
            r"\b(nao|nunca|sem)\s+(conte|contar|diga|dizer|mencione|mencionar|revele|revelar|mostre|mostrar|avise|"
            r"avisar|informe|informar)\b[^\n.]{0,40}\b(ao|a|para\s+o|para\s+a)\s+(usuari[oa]|humano)\b"
            r"|\bsegredo\s+d[oa]\s+usuari[oa]|\besconda\s+(isto|isso)?\s*d[oa]\s+usuari[oa]"
        ),
        "concealment ('não conte ao usuário')",
    ),
    (_p(r"system\s+prompt\s+override"), "prompt injection ('system prompt override')"),
    (
        _p(
            r"\b((reveal|print|show|repeat|output|display|leak|dump|disclos|expos|shar)\w*|tell\s+me|give\s+me|"
            r"override|ignore|replace|new|mostre|mostrar|revele|revelar|imprima|repita|exiba|vaze|ignorar|substitua|"
            r"novo)\b[^\n.]{0,60}\b(system\s+(prompt|message|instructions?)|prompt\s+d[eo]\s+sistema|instrucoes\s+do\s+sistema|"
            r"mensagem\s+do\s+sistema)"
        ),
        "prompt injection ('reveal / replace the system prompt')",
    ),
    (
        _p(
            r"\b(reveal|print|show|repeat|output|display|leak|dump|disclose|share|expose|mostre|revele|imprima|repita|"
            r"exiba)\b[^\n.]{0,30}\b(your|the|its|suas?|seus?|as|os)\s+(hidden|secret|internal|original|initial|"
            r"ocult[oa]s?|secret[oa]s?|intern[oa]s?|originais)\s+(instructions|prompt|rules|instrucoes|regras)"
            r"|\b(repeat|print|output|repita|imprima)\s+(everything|all|the\s+(text|words|lines)|tudo|todo\s+o\s+texto)"
            r"\s+(above|before|acima|antes)"
            r"|\b((reveal|print|show|repeat|output|tell|summari[sz]|list)\w*|mostre|revele|repita)\b[^\n.]{0,40}"
            r"\binstructions\s+you\s+(were|have\s+been|'ve\s+been)\s+given"
            r"|\b(mostre|revele|repita|imprima|liste)\b[^\n.]{0,40}\binstrucoes\s+que\s+(voce\s+)?recebeu"
            r"|\b(mostre|revele|repita|imprima|exiba)\b[^\n.]{0,30}\b(instrucoes|regras|prompt)\s+"
            r"(ocult[oa]s?|secret[oa]s?|intern[oa]s?|originais|escondid[oa]s?)"
        ),
        "prompt leak ('reveal your hidden instructions')",
    ),
    (
        _p(r"<\s*/?\s*(system|sistema|im_start|im_end|assistant|developer|instructions?)\b[^>\n]*>|<!--"),
        "hidden instructions (system tags or an HTML comment)",
    ),
    (
        _p(r"\[\s*(system|sistema|admin|developer|desenvolvedor|operator)\s*(message|mensagem|prompt|note|nota)?\s*\]"),
        "hidden instructions ('[SYSTEM] …')",
    ),
    (
        _p(r"(^|\n)\s*#+\s*(new\s+)?system\s+(prompt|message|instructions)"),
        "hidden instructions ('### system prompt')",
    ),
    (
        _p(
            r"(#{2,}|-{3,}|={3,})\s*(end\s+of|fim\s+d[oa])\s+(the\s+)?(user\s+)?(input|prompt|message|entrada|mensagem)"
            r"|(#{2,}|-{3,}|={3,})\s*(system|sistema)\s*:"
            r"|\b(assistant|assistente)\s*:\s*(sure|ok|okay|certainly|of\s+course|claro|com\s+certeza)\b"
        ),
        "hidden instructions (a fake end of input or a fake turn)",
    ),
    (
        _p(
            r"\b(decode|decodifique|decodificar|decifre|rot-?13)\b[^\n]{0,60}\b(follow|obey|execute|run|comply|"
            r"do\s+(it|(exactly\s+)?what)|siga|obedeca|cumpra|faca\s+(exatamente\s+)?o\s+que)\b"
        ),
        "hidden instructions ('decode this and follow it')",
    ),
    # -- secrets and exfiltration
    (
        _p(
            r"(^|[\s/~])\.env\b|\.netrc\b|\bcredentials?\b[^\n]{0,20}\b(file|json|read|cat)\b"
            r"|\b(cat|read|open|print|dump)\b[^\n]{0,40}\bcredentials?\b"
        ),
        "secret file access (.env / .netrc / credentials)",
    ),
    (_p(r"authorized_keys|~/\.ssh|\.ssh/id_"), "SSH key access (authorized_keys / ~/.ssh)"),
    (
        _p(r"\b(curl|wget)\b[^\n]*(\$\{?\w*(key|token|secret|password|passwd)\w*|api[_-]?key|token|secret|password)"),
        "exfiltration (curl/wget with secrets)",
    ),
    (
        # Uploading a local file: curl's "@file" data/form arguments and
        # -T/--upload-file, wget's --post-file/--body-file. (Case is folded,
        # so -F and -T appear as -f and -t.)
        _p(
            r"\bcurl\b[^\n]*\s(-[a-z]*[dft]|--data(-[a-z]+)?|--form(-string)?|--json)(\s+|=)?['\"]?[^\s'\"]*@"
            r"|\bcurl\b[^\n]*\s(-t|--upload-file)\s+\S"
            r"|\bwget\b[^\n]*--(post|body)-file\b"
        ),
        "exfiltration (curl/wget uploading a file)",
    ),
    (
        # A sending verb, something private, a destination, in one line:
        # "send the conversation to https://…", "envie as senhas para a@b.example".
        _p(
            r"\b(send|post|upload|forward|transmit|submit|leak|sync|e-?mail|mail|copy|append|push|exfiltrate|"
            r"envie|enviar|mande|mandar|publique|publicar|encaminhe|encaminhar|transmita|suba|subir|poste|postar|"
            r"upload|copie|anexe|vaze|vazar|exfiltre|exfiltrar)\b[^\n]{0,80}?\b"
            + _SENSITIVE
            + r"\b[^\n]{0,80}?"
            + _DESTINATION
            + r"|\b"
            + _SENSITIVE
            + r"\b[^\n.]{0,60}\b(send|post|upload|forward|email|envie|mande|encaminhe|publique)\s+(them|it|everything|"
            r"all|os|as|tudo)\b[^\n]{0,40}" + _DESTINATION
        ),
        "exfiltration (private data sent to a URL or address)",
    ),
    (
        _p(
            r"https?://\S+\s+(followed\s+by|with|plus|appending|adding|containing|seguid[oa]\s+d[ae]|acrescentando|com)"
            r"\s+[^\n]{0,30}\b(password|secret|token|key|senha|segredo|chave|cpf|ssn|conversation|history|notes|memory|"
            r"conversa|historico|notas|memoria)"
        ),
        "exfiltration (a URL with private data added)",
    ),
    (_p(r"\b(exfiltrate|exfiltrating|exfiltre|exfiltrem|exfiltrar)\b"), "exfiltration ('exfiltrate')"),
    (
        # A link or image whose query a model is meant to fill with data.
        _p(
            r"https?://[^\s)\]]*[?&]" + _DATA_PARAMS + r"="
            r"|https?://[^\s)\]]*\?[^\s)\]]*=\s*"
            + _PLACEHOLDER
            + r"|\]\(\s*https?://[^)\n]*\?[^)\n]*=\s*"
            + _PLACEHOLDER
        ),
        "exfiltration (a URL whose query carries data)",
    ),
]

#: Override phrasings matched on the letters alone, for "i g n o r e",
#: "ignore_previous_instructions" and "ig-nore prev-ious": an adjective
#: (previous, above…) is required, since joined words cross word boundaries.
_BLOCKED_LETTERS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(
            r"(ignore|disregard|forget|override|bypass)(all|the|your|of)*(previous|prior|above|earlier|original)"
            r"(instructions?|rules|guidelines|prompts?)"
        ),
        "prompt injection ('ignore previous instructions', letters spaced or joined)",
    ),
    (
        re.compile(
            r"(ignore|desconsidere|esqueca|despreze)(todas|todos|as|os|suas|seus)*(instrucoes|regras|orientacoes)"
            r"(anteriores|acima|originais)"
        ),
        "prompt injection ('ignore as instruções anteriores', letters spaced or joined)",
    ),
]


def _views(content: str) -> Iterator[tuple[str, str]]:
    """``(how, text)``: each reading of the note the patterns are matched against."""
    folded = _fold(content)
    yield "", folded
    leet = folded.translate(_LEET)
    if leet != folded:
        yield " (read as leetspeak)", leet
    yield " (in ROT13)", codecs.encode(folded, "rot13")
    yield " (written backwards)", folded[::-1]
    if "%" in content:
        yield " (URL-encoded)", _fold(unquote(content))
    if _U_ESCAPE.search(content):
        yield " (in \\u escapes)", _fold(_U_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), content))
    for how, decode, runs in (
        (" (in base64)", _from_base64, _BASE64_RUN.findall(content)),
        (" (in base32)", lambda run: base64.b32decode(run + "=" * (-len(run) % 8)), _BASE32_RUN.findall(content)),
        (" (in hex)", bytes.fromhex, _HEX_RUN.findall(content)),
        (" (in binary)", lambda run: bytes(int(b, 2) for b in run.split()), _BINARY_RUN.findall(content)),
    ):
        for run in runs:
            text = _text_of(decode, run.strip())
            if text:
                yield how, _fold(text)


def _from_base64(run: str) -> bytes:
    padded = run.rstrip("=") + "=" * (-len(run.rstrip("=")) % 4)
    return base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)


def _text_of(decode: Callable[[str], bytes], run: str) -> str | None:
    """The UTF-8 text a run encodes, or ``None`` when it does not decode to readable text."""
    try:
        text = decode(run).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if all(ch.isprintable() or ch in "\n\t" for ch in text) else None


def scan(content: str) -> None:
    """Refuse content with hidden characters or injection patterns.

    Raises:
        NotebookError: naming the character (``U+XXXX`` and its Unicode
            name) or the pattern found (and the view it was found in).
    """
    found = first_invisible(content)
    if found:
        index, kind = found
        ch = content[index]
        name = unicodedata.name(ch, "") or ("control character" if ord(ch) < 0xA0 else "unnamed")
        raise NotebookError(f"Blocked: {kind} U+{ord(ch):04X} ({name}) at position {index} in content.")
    for how, text in _views(content):
        for pattern, name in _BLOCKED:
            if pattern.search(text):
                raise NotebookError(
                    f"Blocked: content matches {name}{how}; notes must not carry instructions or secrets."
                )
    folded = _fold(content)
    for text in (folded, folded.translate(_LEET)):
        letters = re.sub(r"[^a-z]+", "", text)
        for pattern, name in _BLOCKED_LETTERS:
            if pattern.search(letters):
                raise NotebookError(f"Blocked: content matches {name}; notes must not carry instructions or secrets.")
