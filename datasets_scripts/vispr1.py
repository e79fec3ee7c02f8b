"""Build VISPR1 (7 privacy attributes) into a Hub-ready folder.

    python datasets_scripts/vispr1.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build vispr1 ...`;
`pabench datasets info vispr1` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "vispr1", *sys.argv[1:]]
    main()
