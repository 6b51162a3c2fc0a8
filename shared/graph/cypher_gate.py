"""The read-only gate for model-written Cypher, and the bounded `graph_query`.

A small lexer drops comments, string literals and backtick identifiers before
looking at keywords, so `CREATE` inside a string is fine and `cReAtE` or
`CREATE/* */` is not. Reading procedures are allowed by name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shared.graph.client import GraphClient
from shared.graph.errors import GraphError, ParseError, WriteQueryRefused

WRITE_KEYWORDS = frozenset(
    {
        "CREATE", "MERGE", "SET", "DELETE", "DETACH", "REMOVE", "DROP", "LOAD", "CHANGE",
        "COMMIT", "FOREACH", "INSTALL", "IMPORT", "SUBMIT", "CHECKOUT", "RENAME", "GRANT",
        "REVOKE", "ALTER", "TRUNCATE", "USE",
    }
)  # fmt: skip
READ_PROCEDURES = frozenset(
    {
        "db.labels", "db.edgetypes", "db.propertytypes", "db.procedures", "db.showindexes",
        "db.history", "db.describecommit", "db.hierarchicallabelcounts", "db.listnodes",
        "db.getnodes", "db.getedges", "db.getnodeedges",
    }
)  # fmt: skip
MAX_QUERY_CHARS = 20_000


@dataclass(frozen=True)
class Token:
    kind: str  # "word", "number", "string", "name" (backticked), "punct"
    text: str
    pos: int


def _refuse(reason: str) -> WriteQueryRefused:
    return WriteQueryRefused(
        None, f"{reason}. Only read queries run here (MATCH / OPTIONAL MATCH / WITH / UNWIND / RETURN, VECTOR SEARCH, CALL of a reading procedure)."
    )


def tokenize(cypher: str) -> list[Token]:
    """Tokens of a Cypher text without comments; raises WriteQueryRefused if unreadable."""
    tokens: list[Token] = []
    i, n = 0, len(cypher)
    while i < n:
        ch = cypher[i]
        if ch.isspace():
            i += 1
        elif cypher.startswith("//", i):
            end = cypher.find("\n", i)
            i = n if end < 0 else end + 1
        elif cypher.startswith("/*", i):
            end = cypher.find("*/", i + 2)
            if end < 0:
                raise _refuse(f"unterminated /* comment at character {i}")
            i = end + 2
        elif ch in "'\"":
            j = i + 1
            while j < n and cypher[j] != ch:
                j += 2 if cypher[j] == "\\" else 1
            if j >= n:
                raise _refuse(f"unterminated string starting at character {i}")
            tokens.append(Token("string", cypher[i : j + 1], i))
            i = j + 1
        elif ch == "`":
            j = i + 1
            while True:
                j = cypher.find("`", j)
                if j < 0:
                    raise _refuse(f"unterminated `identifier` at character {i}")
                if cypher.startswith("``", j):
                    j += 2
                    continue
                break
            tokens.append(Token("name", cypher[i : j + 1], i))
            i = j + 1
        elif ch.isalpha() or ch == "_" or ch == "$":
            j = i + 1
            while j < n and (cypher[j].isalnum() or cypher[j] == "_"):
                j += 1
            tokens.append(Token("word", cypher[i:j], i))
            i = j
        elif ch.isdigit():
            j = i + 1
            while j < n and (cypher[j].isalnum() or cypher[j] in "._"):
                if cypher[j] == "." and cypher.startswith("..", j):
                    break
                j += 1
            tokens.append(Token("number", cypher[i:j], i))
            i = j
        else:
            tokens.append(Token("punct", ch, i))
            i += 1
    return tokens


def _procedure_name(tokens: list[Token], start: int) -> str:
    parts: list[str] = []
    i = start
    while i < len(tokens) and tokens[i].kind in ("word", "name"):
        parts.append(tokens[i].text.strip("`"))
        if i + 1 < len(tokens) and tokens[i + 1].text == ".":
            i += 2
            continue
        break
    return ".".join(parts)


def check_read_only(cypher: str) -> None:
    """Raise WriteQueryRefused unless `cypher` is one read-only statement."""
    if len(cypher) > MAX_QUERY_CHARS:
        raise _refuse(f"the query is {len(cypher)} characters long, over the {MAX_QUERY_CHARS} limit")
    tokens = tokenize(cypher)
    if not tokens:
        raise _refuse("the query is empty")
    for index, token in enumerate(tokens):
        if token.text == ";":
            if any(t.text != ";" for t in tokens[index + 1 :]):
                raise _refuse("several statements separated by ';' are not allowed; send one query")
            continue
        if token.kind != "word":
            continue
        previous = tokens[index - 1].text if index else ""
        if previous in (".", ":") or (previous == "$"):
            continue  # a property key or a label, not a keyword
        following = tokens[index + 1].text if index + 1 < len(tokens) else ""
        if following == ":" and previous in ("{", ","):
            continue  # a key in a map literal
        word = token.text.upper()
        if word in WRITE_KEYWORDS:
            raise _refuse(f"'{token.text}' (character {token.pos}) writes or changes the database")
        if word == "CALL":
            if following == "{":
                continue  # a subquery: its clauses are checked like the rest
            name = _procedure_name(tokens, index + 1)
            if name.lower() not in READ_PROCEDURES:
                allowed = ", ".join(sorted(READ_PROCEDURES))
                raise _refuse(f"CALL {name or '?'} is not an allowed reading procedure (allowed: {allowed})")


def strip_statement(cypher: str) -> str:
    """The query without trailing semicolons and whitespace."""
    return cypher.strip().rstrip(";").rstrip()


@dataclass
class QueryResult:
    """Rows of a gated query; `truncated` with a `note` when rows were cut."""

    rows: list[dict[str, Any]]
    truncated: bool = False
    note: str = ""
    columns: list[str] = field(default_factory=list)


_TRAILING_LIMIT = re.compile(r"\bLIMIT\s+(\d+)\s*$", re.IGNORECASE)


def bounded(cypher: str, max_rows: int) -> tuple[str, bool]:
    """The query asking for at most max_rows + 1 rows, and whether it was rewritten.

    A final `LIMIT n` above the cap is lowered; a query whose last clause is a
    RETURN (no LIMIT) gets one appended. Other queries are cut after the reply.
    """
    text = strip_statement(cypher)
    tokens = tokenize(text)
    words = [t.text.upper() for t in tokens if t.kind == "word"]
    if len(tokens) >= 2 and tokens[-2].text.upper() == "LIMIT" and tokens[-1].kind == "number":
        limit = int(tokens[-1].text) if tokens[-1].text.isdigit() else None
        if limit is not None and limit > max_rows:
            return text[: tokens[-1].pos] + str(max_rows + 1), True
        return text, False
    if "RETURN" in words and "UNION" not in words:
        last_return = max(i for i, w in enumerate(words) if w == "RETURN")
        later = set(words[last_return + 1 :])
        if not later & {"MATCH", "WITH", "UNWIND", "CALL", "LIMIT"}:
            return f"{text} LIMIT {max_rows + 1}", True
    return text, False


async def graph_query(
    client: GraphClient,
    cypher: str,
    max_rows: int = 200,
    timeout: float = 10.0,
    graph: str | None = None,
) -> QueryResult:
    """Gate, cap rows and time, run; GraphError subclasses carry TuringDB's message."""
    check_read_only(cypher)
    text, rewritten = bounded(cypher, max_rows)
    try:
        columns, rows = await client.query_columns(text, graph=graph, timeout=timeout)
    except ParseError:
        if not rewritten:
            raise
        columns, rows = await client.query_columns(strip_statement(cypher), graph=graph, timeout=timeout)
    if len(rows) > max_rows:
        shown = rows[:max_rows]
        return QueryResult(
            shown,
            True,
            f"Only the first {max_rows} rows are shown; the query returned more. "
            "Add a LIMIT, filter with WHERE, or aggregate (count, collect) to see the rest.",
            columns,
        )
    return QueryResult(rows, False, "", columns)


__all__ = ["GraphError", "QueryResult", "WriteQueryRefused", "check_read_only", "graph_query", "bounded", "tokenize"]
