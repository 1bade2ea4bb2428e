import sys

from zdinit import interpreter

interpreter.ensure(sys.argv[1:])

# Imported only once the interpreter is the one that will run it.
from zdinit.cli import main

sys.exit(main())
