"""``python -m netsim`` runs the command line."""

from netsim.cli import entry

entry()
