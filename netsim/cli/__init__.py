"""The command line, a layer above the library: the library never imports it.

:mod:`~netsim.cli.app` parses and runs (``netsim topo`` is there), :mod:`~netsim.cli.options` holds the
flags several commands share, and each other command has its module: :mod:`~netsim.cli.bench`
(with :mod:`~netsim.cli.moe`), :mod:`~netsim.cli.workload`, :mod:`~netsim.cli.analyze`,
:mod:`~netsim.cli.sweep`, :mod:`~netsim.cli.astra`.
"""

from netsim.cli.app import build_parser, entry, main, one_line

__all__ = ["build_parser", "entry", "main", "one_line"]
