"""Learning agents: networks and their updates (`dqn`: branching Rainbow / IQN; `pqn`: parallel
Q(lambda) without replay or target network)."""
