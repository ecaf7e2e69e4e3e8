#!/usr/bin/env python3
"""Deploy check of template.yaml, offline: the SAM transform, then a CloudFormation create in
moto, then assertions on what was created, for each parameter set (deploycheck/settings.py).

Two steps, because the SAM translator lives in .venv-tools and moto in .venv-moto
(infra/deploy-check.sh runs both):

  .venv-tools/bin/python infra/deploy_check.py transform DIR   template.yaml -> DIR/<set>.json
  .venv-moto/bin/python  infra/deploy_check.py deploy DIR      DIR/<set>.json -> moto, asserts

Expectations are derived from the transformed template wherever possible (which role a function
has, which statements that role's policies hold for the parameter set, which log group it logs
to); only behavioural facts are written here (INSERT-only stream filter, redrive to the DLQ, no
managed logs policy, ...). A failed assertion is printed and the rest still run; the deploy
step exits 1 if any failed.

The checks live in the package beside this script, one module per concern (infra/deploycheck/):
settings (parameter sets, what moto cannot create), transform (step 1), deploy (step 2),
template (intrinsics resolved), policy (IAM statements), resources, roles, dashboard,
not_in_moto, report.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from deploycheck.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv, __doc__))
