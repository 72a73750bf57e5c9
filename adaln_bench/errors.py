"""Errors that are the user's to fix: the CLI prints them as one line and exits with their code."""
from __future__ import annotations


class UserError(Exception):
    """Bad input: an unknown name, an impossible size, an unreadable file. Exit code 2."""

    exit_code = 2


class NotAReportError(UserError):
    """A file that exists but is not a report this tool can read."""
