"""``python -m libmla info``: what ``mla info`` prints; ``python -m libmla
where``: the path of the libmla.so in use."""

import sys

from . import _lib
from .info import info


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "info"
    if cmd == "info" and len(argv) <= 2:
        sys.stdout.write(info())
        return 0
    if cmd == "where" and len(argv) <= 2:
        print(_lib.load())
        return 0
    sys.stderr.write("usage: python -m libmla [info | where]\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
