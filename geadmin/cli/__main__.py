"""`python -m geadmin.cli` runs the `geadmin` command (as the tests and `geadmin up` do)."""

import sys

from geadmin.cli.entry import main

sys.exit(main())
