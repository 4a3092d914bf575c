"""`python -m strandline.server --config server.properties`: one broker in the
foreground, what `strandline broker` runs, without importing the other tools (the
launcher starts brokers this way: a third less CPU per start)."""

from strandline.startup import skip_test_only_imports

skip_test_only_imports()

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

from strandline.server.broker import run  # noqa: E402

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m strandline.server")
    parser.add_argument("--config", type=Path, required=True, help="server.properties file")
    sys.exit(run(parser.parse_args().config))
