"""caisson's in-container tool daemon (standard library only, Python >= 3.8).

Run it with ``python3 -m sandbox``; it speaks the frames of ``sandbox.protocol``
on stdin/stdout. The host imports ``sandbox.protocol`` too, so this package
import stays free of side effects.
"""

__version__ = "0.1.0"
