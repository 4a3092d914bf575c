"""The `strandline` command line."""

import os
import sys

# Piped output is read by scripts: rich would wrap it and cut table cells with "…" at
# 80 columns when stdout is not a terminal. The consoles read COLUMNS when created.
if "COLUMNS" not in os.environ and not sys.stdout.isatty():
    os.environ["COLUMNS"] = "4096"
