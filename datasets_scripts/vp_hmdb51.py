"""Build VP-HMDB51 (STPrivacy video-level privacy labels) into a Hub-ready folder.

    python datasets_scripts/vp_hmdb51.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build vp-hmdb51 ...`;
`pabench datasets info vp-hmdb51` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "vp-hmdb51", *sys.argv[1:]]
    main()
