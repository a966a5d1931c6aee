"""`python -m agent_runtime.cli`."""

from agent_runtime.cli.app import main

if __name__ == "__main__":
    main()
