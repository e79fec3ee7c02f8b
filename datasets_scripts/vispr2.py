"""Build VISPR2 (7 novel privacy attributes) into a Hub-ready folder.

    python datasets_scripts/vispr2.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build vispr2 ...`;
`pabench datasets info vispr2` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "vispr2", *sys.argv[1:]]
    main()
