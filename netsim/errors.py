"""Errors that netsim reports to users as one clear line.

Every problem with user input (a file, a flag, a config field) raises
:class:`InputError`.  The CLI prints ``str(err)`` on one line and exits with
status 2; with ``--debug`` it shows the traceback instead.

Examples
--------
>>> err = InputError("expected a positive bandwidth, got -1", source="topo.yaml", field="tiers[0].bw")
>>> str(err)
'topo.yaml: tiers[0].bw: expected a positive bandwidth, got -1'
"""

from __future__ import annotations


class NetsimError(Exception):
    """Base class of every error netsim raises on purpose."""


class InputError(NetsimError, ValueError):
    """Bad user input: names the file (``source``), the field and the expectation.

    Parameters
    ----------
    message
        What was expected and what was found.
    source
        The file (or ``"--flag"`` / ``"argument"``) the bad value came from.
    field
        The field inside ``source``, as a dotted path (``tiers[1].radix``).
    """

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [p for p in (self.source, self.field) if p]
        prefix = ": ".join(str(p) for p in parts)
        return f"{prefix}: {self.message}" if prefix else self.message

    def at(self, *, source: str | None = None, field: str | None = None) -> "InputError":
        """Return a copy that also names ``source``/``field`` (outer context wins only if unset)."""
        return type(self)(
            self.message,
            source=self.source or source,
            field=self.field or field,
        )


class ResultsError(InputError):
    """A results dataset or file that cannot be read, naming the file (``source``) and the problem.

    Raised by :func:`netsim.open_results` and the :class:`~netsim.results.reader.Results` it
    returns (its tables, :meth:`~netsim.results.reader.Results.dataset`,
    :meth:`~netsim.results.reader.Results.config`) for a part file that is truncated, empty,
    not Parquet, unreadable inside, or of the wrong schema (a fixed table's column missing or of
    another type), and for a folder that is not a results dataset.  A subclass of
    :class:`InputError`, so the CLI prints it as one line (exit status 2), and a ``ValueError``.

    >>> err = ResultsError("cannot read Parquet (file size is 0 bytes)", source="res/ops/run_id=ab/part-0.parquet")
    >>> str(err), isinstance(err, InputError)
    ('res/ops/run_id=ab/part-0.parquet: cannot read Parquet (file size is 0 bytes)', True)
    """


class DeadlockError(NetsimError):
    """A simulation ended with ranks that could not finish; carries the report text."""
