import sys

from mpl.cli.main import main

sys.exit(main())
