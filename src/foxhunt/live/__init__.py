"""Live trading: the paper engine with a venue and a feed outside this process.

`feed` is where prices come from (a venue's market data, a replay of stored bars, a vendor's
live feed), `fix` and `ib` are venues (a FIX 4.4 session and Interactive Brokers), and the live
loop runs the same per-bar steps as paper trading. The top layer: imports execution and below.
"""
