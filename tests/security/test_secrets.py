"""Passwords never reach what caderno shows: redacted URLs, scrubbed driver errors."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from caderno.core.redact import one_line, redact_query, redact_text, redact_url, scrub, secrets_of, split_url

PASSWORDS = st.text(alphabet="abcXYZ0189@:/?#%& _-!$", min_size=6, max_size=24).filter(lambda s: s.strip() == s)


@pytest.mark.parametrize(
    "url,shown",
    [
        ("postgresql://bob:hunter22@db.example:5432/app", "postgresql://bob:***@db.example:5432/app"),
        ("postgresql://bob:hun@ter:22@db.example/app", "postgresql://bob:***@db.example/app"),
        ("postgresql://bob:p%40ss%3Aword@h/app", "postgresql://bob:***@h/app"),
        ("postgresql://bob:pa/ss?x#y@h/app", "postgresql://bob:***@h/app"),
        (
            "postgresql://bob@h/app?password=hunter22&sslmode=require",
            "postgresql://bob@h/app?password=***&sslmode=require",
        ),
        (
            "postgresql://h/app?sslpassword=k3y&passfile=/home/b/.pgpass",
            "postgresql://h/app?sslpassword=***&passfile=***",
        ),
        ("postgresql://h/app?PassWord=a&b=c", "postgresql://h/app?PassWord=***&b=c"),
        ("postgresql://bob@h/app", "postgresql://bob@h/app"),
        ("postgresql://h/app?application_name=me@x", "postgresql://h/app?application_name=me@x"),
        ("host=h password='a b c' dbname=x", "host=h password=*** dbname=x"),
        ("host=h password=plain dbname=x", "host=h password=*** dbname=x"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_query_password_survives_an_at_sign_elsewhere() -> None:
    """An '@' in the query must not make the query password look like user-info."""
    shown = redact_url("postgresql://h/db?password=hunter22&application_name=a@b")
    assert "hunter22" not in shown


def test_secrets_cover_the_fragments_a_driver_prints() -> None:
    secrets = secrets_of("postgresql://bob:first@second:third@db.example/app")
    # libpq splits at the first '@': it tries host "second:third@db.example".
    error = 'could not translate host name "second:third@db.example" to address:\nName or service not known'
    cleaned = scrub(error, secrets)
    assert "second" not in cleaned and "third" not in cleaned and "first" not in cleaned
    assert "\n" not in cleaned and cleaned.startswith("could not translate host name")


def test_secrets_forms() -> None:
    secrets = secrets_of("postgresql://bob:p%40ss%20word@h/app")
    assert {"p%40ss%20word", "p@ss word", "p%2540ss%2520word"} <= set(secrets)
    assert "ss word" in secrets  # the piece after the '@'
    assert secrets == sorted(secrets, key=lambda s: (-len(s), s))
    assert secrets_of("postgresql://bob@h/app") == []


def test_pgpassword_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "from-env-secret")
    assert "from-env-secret" in secrets_of("postgresql://bob@h/app")
    monkeypatch.delenv("PGPASSWORD")
    assert secrets_of("postgresql://bob@h/app") == []


def test_scrub_folds_to_one_line_and_never_loops() -> None:
    assert scrub("a\n  b\r\n\tc", []) == "a b c"
    assert scrub("x * ** *** y", ["*", "**"]) == "x * ** *** y"
    # Replacing can form a new occurrence ("***" + "*x" ...); it is removed too.
    assert "**x" not in scrub("***xx", ["**x"])
    assert one_line(" one\ntwo ") == "one two"


def test_split_url_keeps_other_parameters_verbatim() -> None:
    url = "postgresql://u:pw@h:5432/db?schema=s1&options=-c statement_timeout=1234&pool_size=3&sslmode=require"
    conninfo, ours = split_url(url, {"schema", "pool_size"})
    assert conninfo == "postgresql://u:pw@h:5432/db?options=-c statement_timeout=1234&sslmode=require"
    assert ours == {"schema": "s1", "pool_size": "3"}
    assert split_url("postgresql://h/db?schema=a%5Fb", {"schema"}) == ("postgresql://h/db", {"schema": "a_b"})
    assert split_url("postgresql://h/db", {"schema"}) == ("postgresql://h/db", {})
    # A '?' inside the password is not the query (libpq reads user-info up to the first '@').
    assert split_url("postgresql://u:p?schema=x@h/db", {"schema"}) == ("postgresql://u:p?schema=x@h/db", {})
    assert split_url("postgresql://u@h/db?schema=s&application_name=a@b", {"schema"}) == (
        "postgresql://u@h/db?application_name=a@b",
        {"schema": "s"},
    )


def _urls(password: str) -> list[str]:
    return [
        f"postgresql://bob:{password}@db.example:5432/app",
        f"postgresql://bob:{quote(password, safe='')}@db.example/app?schema=s",
        f"postgresql://bob@db.example/app?password={quote(password, safe='')}&sslmode=require",
        f"postgresql://bob@db.example/app?sslmode=require&password={password}",
    ]


@settings(max_examples=300, deadline=None)
@given(PASSWORDS)
def test_redact_and_scrub_never_show_the_password(password: str) -> None:
    for url in _urls(password):
        skeleton = url.replace(password, "").replace(quote(password, safe=""), "")
        assume(password not in skeleton and quote(password, safe="") not in skeleton)
        shown = redact_url(url)
        assert password not in shown
        assert quote(password, safe="") not in shown
        secrets = secrets_of(url)
        error = f'connection to server at "{url}" failed:\n  password "{password}" / {quote(password, safe="")}'
        cleaned = scrub(error, secrets)
        assert password not in cleaned and quote(password, safe="") not in cleaned
        assert "\n" not in cleaned


@pytest.mark.parametrize(
    "text,secret",
    [
        ("Incorrect API key provided: sk-proj-AbCdEf0123456789.", "AbCdEf0123456789"),
        ("request to http://bob:Hunter22pw@10.1.2.3:8080/v1 failed", "Hunter22pw"),
        ("GET https://api.example/v1?key=SecretQueryValue1 -> 403", "SecretQueryValue1"),
        ("header was Authorization: Bearer opaque.token-xyz", "opaque.token-xyz"),
        ("the key cad_AbCdEf0123456789xyz is revoked", "AbCdEf0123456789xyz"),
        ("upstream said: my-configured-secret is wrong", "my-configured-secret"),
    ],
)
def test_redact_text_hides_upstream_secrets(text: str, secret: str) -> None:
    shown = redact_text(text, ["my-configured-secret"])
    assert secret not in shown and "***" in shown
    assert "\n" not in redact_text(text + "\nsecond line")


def test_redact_text_keeps_what_an_operator_needs() -> None:
    shown = redact_text("HTTP 401 from http://bob:pw1234@10.1.2.3:8080/v1: invalid_api_key")
    assert shown == "HTTP 401 from http://bob:***@10.1.2.3:8080/v1: invalid_api_key"


@pytest.mark.parametrize(
    "query,shown",
    [
        ("token=cad_abc&limit=5", "token=***&limit=5"),
        ("api_key=x&before=9", "api_key=***&before=9"),
        ("key=abc", "key=***"),
        ("access_token=abc&q=hello", "access_token=***&q=hello"),
        ("x=sk-abcdefghijkl", "x=***"),
        ("x=Zm9vYmFyYmF6cXV4cXV1eHh4eHh4eA", "x=***"),
        ("limit=5&before=12", "limit=5&before=12"),
        ("", ""),
    ],
)
def test_redact_query_masks_credential_values(query: str, shown: str) -> None:
    assert redact_query(query) == shown


def test_library_log_records_are_masked_message_traceback_and_coloured_copy() -> None:
    """httpx's request line, an exception's traceback and uvicorn's ``color_message`` lose the password."""
    import logging
    import sys

    from caderno.core.redact import RedactRecords

    guard = RedactRecords()
    guard.add(["Odd Pass/word 9"])
    record = logging.LogRecord(
        "httpx", logging.INFO, __file__, 1, 'HTTP Request: %s %s "%s"', ("POST", "http://u:pw1234@h/v1", "200"), None
    )
    record.color_message = "HTTP Request: %s %s"
    assert guard.filter(record)
    assert record.getMessage() == 'HTTP Request: POST http://u:***@h/v1 "200"'
    assert "color_message" not in record.__dict__  # would format the original arguments again
    try:
        raise ConnectionError("cannot reach http://u:Odd Pass/word 9@h/v1\nsecond line")
    except ConnectionError:
        failed = logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "boom", (), sys.exc_info())
    guard.filter(failed)
    shown = logging.Formatter().format(failed)
    assert "Odd Pass/word 9" not in shown and "Traceback" in shown and shown.count("\n") > 3
