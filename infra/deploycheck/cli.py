"""`deploy_check.py transform DIR` / `deploy_check.py deploy DIR`."""

import sys
from pathlib import Path

from .deploy import cmd_deploy
from .transform import cmd_transform


def main(argv, usage):
    if len(argv) != 3 or argv[1] not in ("transform", "deploy"):
        print(usage, file=sys.stderr)
        return 2
    step, d = argv[1], Path(argv[2])
    return cmd_transform(d) if step == "transform" else cmd_deploy(d)
