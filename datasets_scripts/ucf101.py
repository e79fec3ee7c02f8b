"""Build UCF101 split 1 into a Hub-ready folder.

    python datasets_scripts/ucf101.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build ucf101 ...`;
`pabench datasets info ucf101` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "ucf101", *sys.argv[1:]]
    main()
