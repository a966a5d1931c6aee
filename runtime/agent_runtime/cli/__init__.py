"""`agentengine`: the command line for agent teams and reviewers (issue 29). Imports no server code."""
