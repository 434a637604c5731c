import sys

from wrtfd.cli.main import main

sys.exit(main())
