"""python -m kernelwheel"""

from .cli import entry

entry()
