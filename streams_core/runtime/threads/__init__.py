"""Stream threads: the loop, its clients, polling, the rebalance listener, metrics, and how an instance drives one."""
