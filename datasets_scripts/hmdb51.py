"""Build HMDB51 split 1 into a Hub-ready folder.

    python datasets_scripts/hmdb51.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build hmdb51 ...`;
`pabench datasets info hmdb51` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "hmdb51", *sys.argv[1:]]
    main()
