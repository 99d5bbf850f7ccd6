"""``python -m bench``: run the benchmark suite (see ``bench/run_all.py``)."""

import sys

from bench.run_all import main

sys.exit(main())
