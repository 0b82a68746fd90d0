"""Makes the shared ``protocol_samples`` helper importable by the protocol tests."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
