"""``python -m agentledger``: the ``agentledger`` command, for an environment whose scripts
directory is not on ``PATH``."""

from agentledger.cli import main

if __name__ == "__main__":
    main()
