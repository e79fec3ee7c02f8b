"""Build VP-UCF101 (STPrivacy video-level privacy labels) into a Hub-ready folder.

    python datasets_scripts/vp_ucf101.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build vp-ucf101 ...`;
`pabench datasets info vp-ucf101` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "vp-ucf101", *sys.argv[1:]]
    main()
