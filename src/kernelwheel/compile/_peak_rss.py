"""Run one compiler command INSIDE the build environment and append its peak memory to LOG for the
next build's memory plan (compile/memory): ``python -S _peak_rss.py LOG COMMAND...``. No more of
the standard library than ``os`` and ``sys``: it starts once per unit."""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    log, command = argv[0], argv[1:]
    pid = os.posix_spawnp(command[0], command, os.environ)
    # its peak resident set, in KiB (Linux: of the child and every descendant it waited for)
    _, status, usage = os.wait4(pid, 0)
    outputs = [command[i + 1] for i, arg in enumerate(command[:-1]) if arg == "-o"]
    if outputs:  # the object: the argument after the last -o
        line = f"{outputs[-1]}\t{usage.ru_maxrss}\n".encode()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one short O_APPEND write: parallel units never interleave
        finally:
            os.close(fd)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
