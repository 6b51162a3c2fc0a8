"""Typed errors of the graph layer; each carries TuringDB's code and message."""

from __future__ import annotations


class GraphError(Exception):
    """A query failed; `code` is TuringDB's (PARSE_ERROR, EXEC_ERROR ...) or ours."""

    code: str = "GRAPH_ERROR"

    def __init__(self, code: str | None, message: str) -> None:
        self.code = code or type(self).code
        self.message = message
        super().__init__(f"{self.code}: {message}")


class ParseError(GraphError):
    code = "PARSE_ERROR"


class AnalyzeError(GraphError):
    code = "ANALYZE_ERROR"


class PlanError(GraphError):
    code = "PLAN_ERROR"


class ExecError(GraphError):
    code = "EXEC_ERROR"


class GraphNotFound(GraphError):
    code = "GRAPH_NOT_FOUND"


class RequestTooBig(GraphError):
    code = "REQUEST_TOO_BIG"


class GraphTimeout(GraphError):
    code = "TIMEOUT"


class GraphUnavailable(GraphError):
    """No TuringDB server answers at the configured address."""

    code = "UNAVAILABLE"


class WriteQueryRefused(GraphError):
    """The read-only gate refused a query before it reached the server."""

    code = "WRITE_REFUSED"


class LoadError(GraphError):
    """Building the graph or its vector index failed; nothing half-built was kept."""

    code = "LOAD_ERROR"


_BY_CODE: dict[str, type[GraphError]] = {
    cls.code: cls for cls in (ParseError, AnalyzeError, PlanError, ExecError, GraphNotFound, RequestTooBig)
}


def error_for(code: str, message: str) -> GraphError:
    """The GraphError subclass for a TuringDB error code (GraphError if unknown)."""
    return _BY_CODE.get(code, GraphError)(code, message)
