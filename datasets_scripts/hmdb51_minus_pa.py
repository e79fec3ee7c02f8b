"""Build HMDB51 split 1 without the PA-HMDB51 videos in train into a Hub-ready folder.

    python datasets_scripts/hmdb51_minus_pa.py --source DIR --out DIR [--embed-media]
        [--option KEY=VALUE]

Same as `pabench datasets build hmdb51-minus-pa ...`;
`pabench datasets info hmdb51-minus-pa` describes DIR.
"""

import sys

from pabench.cli import main

if __name__ == "__main__":
    sys.argv = ["pabench", "datasets", "build", "hmdb51-minus-pa", *sys.argv[1:]]
    main()
