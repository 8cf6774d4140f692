# A contrib distribution is not installed by scripts/install.sh: its tests import it (and the
# fake Anthropic server in tests/) from this directory.
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))
