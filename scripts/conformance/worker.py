"""The child process of ``isolation.Worker``: ``python -m gathermultiaxis.conformance.worker TASK_FD ANSWER_FD
PARENT_PID``. A module of its own, so that the child never imports the caller's main module."""

import sys

from gathermultiaxis.conformance.isolation import serve

if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
