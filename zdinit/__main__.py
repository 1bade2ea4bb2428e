import sys

from zdinit import interpreter

interpreter.ensure(sys.argv[1:])

from zdinit.cli import main  # noqa: E402: only under the right interpreter

sys.exit(main())
