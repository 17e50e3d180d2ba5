"""``python3 -m sandbox``: run the tool daemon on stdin/stdout."""

import sys

from .server import main

if __name__ == "__main__":
    sys.exit(main())
