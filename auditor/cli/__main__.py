"""`python -m auditor.cli`: the command line as a module (how the daemon starts its repair workers,
auditor.daemon.repair_workers)."""

import sys

from auditor.cli import app

if __name__ == "__main__":  # pragma: no cover (not when merely imported, e.g. by a walk of the package)
    app()
    sys.exit(0)
