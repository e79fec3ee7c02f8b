"""Build P-HVU (HVU action, object and scene tags) into a Hub-ready folder.

    python datasets_scripts/p_hvu.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build p-hvu ...`;
`pabench datasets info p-hvu` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "p-hvu", *sys.argv[1:]]
    main()
