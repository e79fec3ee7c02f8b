"""Build PA-HMDB51 (test only, per-frame privacy labels) into a Hub-ready folder.

    python datasets_scripts/pa_hmdb51.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build pa-hmdb51 ...`;
`pabench datasets info pa-hmdb51` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "pa-hmdb51", *sys.argv[1:]]
    main()
