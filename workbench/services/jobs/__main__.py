"""``python -m workbench.services.jobs --db DB --job ID`` (:mod:`workbench.services.jobs.process`)."""

import sys

from workbench.services.jobs.process import main

sys.exit(main())
