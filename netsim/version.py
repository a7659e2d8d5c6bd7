"""netsim's version, in a leaf module so that any layer may record it without importing the package API.

>>> isinstance(__version__, str)
True
"""

__version__ = "0.1.0"
