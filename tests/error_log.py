"""A logging handler that keeps a server's ERROR records: the protocol hosts log their
internal errors (never raise them to a client), so a test that fuzzes or abuses a host
reads them here to prove there were none."""

from __future__ import annotations

import logging

__all__ = ["ErrorLog"]


class ErrorLog(logging.Handler):
    """Every record of ERROR or above its logger passes it."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
