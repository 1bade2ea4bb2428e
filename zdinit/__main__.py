import sys

from zdinit.cli import main

sys.exit(main())
