# This distribution is an example and is not installed by scripts/install.sh; its tests import
# it from this directory.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
