"""Learning agents: networks and losses (`dqn`: branching Rainbow / IQN)."""
